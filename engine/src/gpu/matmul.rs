//! Tiled, batched, strided GEMM in workgroup memory: the GPU twin of `crate::nn::matmul::gemm`.

use super::{f, Access, GpuContext, Kernel, Op, Tensor};

/// A matrix inside a flat tensor: element (i, j) of batch (zo, zi) is at
/// `offset + zo * batch_outer + zi * batch_inner + i * rs + j * cs`.
#[derive(Clone, Copy, Debug)]
pub struct View {
    pub offset: usize,
    pub rs: usize,
    pub cs: usize,
    pub batch_outer: usize,
    pub batch_inner: usize,
}

impl View {
    /// A row-major matrix with `cols` columns starting at `offset`.
    pub fn rows(offset: usize, cols: usize) -> Self {
        View { offset, rs: cols, cs: 1, batch_outer: 0, batch_inner: 0 }
    }
    /// A row-major matrix with row stride `rs` (a head's columns inside a (T, C) buffer).
    pub fn strided(offset: usize, rs: usize) -> Self {
        View { offset, rs, cs: 1, batch_outer: 0, batch_inner: 0 }
    }
    pub fn t(self) -> Self {
        View { rs: self.cs, cs: self.rs, ..self }
    }
    pub fn batched(self, batch_outer: usize, batch_inner: usize) -> Self {
        View { batch_outer, batch_inner, ..self }
    }
    fn last(&self, rows: usize, cols: usize, outer: usize, inner: usize) -> usize {
        self.offset
            + (outer - 1) * self.batch_outer
            + (inner - 1) * self.batch_inner
            + (rows - 1) * self.rs
            + (cols - 1) * self.cs
    }
    fn words(&self) -> [u32; 5] {
        [self.offset, self.rs, self.cs, self.batch_outer, self.batch_inner].map(|x| x as u32)
    }
}

/// `outer * inner` products of an `m x k` by a `k x n` matrix.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub outer: usize,
    pub inner: usize,
}

impl Dims {
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Dims { m, n, k, outer: 1, inner: 1 }
    }
    pub fn batched(self, outer: usize, inner: usize) -> Self {
        Dims { outer, inner, ..self }
    }
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.n * self.k * self.outer * self.inner) as f64
    }
}

const TILE: usize = 64;
/// Workgroups per grid dimension that WebGPU guarantees.
const MAX_GROUPS: usize = 65535;

pub struct Matmul {
    kernel: Kernel,
}

impl Matmul {
    pub fn new(ctx: &GpuContext) -> Self {
        let access = [Access::Read, Access::Read, Access::ReadWrite];
        Matmul { kernel: Kernel::new(ctx, "matmul", include_str!("kernels/matmul.wgsl"), &access, &["main"]) }
    }

    /// `c = alpha * a b + beta * c` for every batch; `a` and `b` may share a tensor, `c` must not.
    #[allow(clippy::too_many_arguments)]
    pub fn op(
        &self,
        ctx: &GpuContext,
        d: Dims,
        alpha: f32,
        a: (&Tensor, View),
        b: (&Tensor, View),
        beta: f32,
        c: (&Tensor, View),
    ) -> Op {
        assert!(d.m > 0 && d.n > 0 && d.k > 0 && d.outer > 0 && d.inner > 0, "empty matmul {d:?}");
        for (name, (t, v), rows, cols) in [("a", a, d.m, d.k), ("b", b, d.k, d.n), ("c", c, d.m, d.n)] {
            assert!(v.last(rows, cols, d.outer, d.inner) < t.len, "matmul operand {name} out of bounds");
        }
        let mut params = vec![d.m as u32, d.n as u32, d.k as u32, d.inner as u32];
        params.extend(a.1.words());
        params.extend(b.1.words());
        params.extend(c.1.words());
        let batches = d.outer * d.inner;
        params.extend([f(alpha), f(beta), batches as u32]);
        // Batches past one dimension's limit continue in y, one line of row tiles per 65535.
        let (cols, rows, z) = (d.n.div_ceil(TILE), d.m.div_ceil(TILE), batches.min(MAX_GROUPS));
        let lines = batches.div_ceil(z);
        assert!(cols <= MAX_GROUPS && rows * lines <= MAX_GROUPS, "matmul {d:?} is past one launch's grid");
        let grid = [cols as u32, (rows * lines) as u32, z as u32];
        self.kernel.op(ctx, 0, &[a.0, b.0, c.0], &params, grid)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::matmul::{gemm, MatMut, MatRef};

    /// Each case: (m, k, n, transpose a, transpose b); sizes straddle the 64-wide tile and the 16-deep panel.
    #[test]
    fn matmul_matches_cpu_gemm_with_transposes() {
        let ctx = ctx();
        let mm = Matmul::new(&ctx);
        let cases = [
            (37, 53, 29, false, false),
            (1, 70, 65, false, true),
            (130, 17, 66, true, false),
            (64, 64, 64, true, true),
            (100, 3, 129, false, true),
        ];
        let mut worst = 0.0f32;
        for (i, &(m, k, n, ta, tb)) in cases.iter().enumerate() {
            let a = random(m * k, 10 + i as u64);
            let b = random(k * n, 20 + i as u64);
            let c0 = random(m * n, 30 + i as u64);
            // Stored transposed when the product reads them transposed, as the model's weights are.
            let (va, ma) = if ta {
                (View::rows(0, m).t(), MatRef::new(&a, k, m).t())
            } else {
                (View::rows(0, k), MatRef::new(&a, m, k))
            };
            let (vb, mb) = if tb {
                (View::rows(0, k).t(), MatRef::new(&b, n, k).t())
            } else {
                (View::rows(0, n), MatRef::new(&b, k, n))
            };
            let mut want = c0.clone();
            gemm(0.7, ma, mb, 0.5, MatMut::new(&mut want, m, n));
            let (ga, gb, gc) = (
                ctx.tensor_from("a", &a).unwrap(),
                ctx.tensor_from("b", &b).unwrap(),
                ctx.tensor_from("c", &c0).unwrap(),
            );
            let op = mm.op(&ctx, Dims::new(m, n, k), 0.7, (&ga, va), (&gb, vb), 0.5, (&gc, View::rows(0, n)));
            ctx.run(&[&op]);
            let err = max_err(&read(&ctx, &gc), &want);
            assert!(err < 1e-5, "case {m}x{k}x{n} ta={ta} tb={tb}: error {err}");
            worst = worst.max(err);
        }
        eprintln!("matmul max error {worst:e}");
    }

    /// Attention's shape: per (batch, head), S = Q K^T over head columns of (B, T, C) buffers.
    #[test]
    fn batched_head_matmul_matches_cpu() {
        let ctx = ctx();
        let mm = Matmul::new(&ctx);
        let (b, t, nh, hs) = (3, 19, 4, 5);
        let c = nh * hs;
        let q = random(b * t * c, 1);
        let k = random(b * t * c, 2);
        let mut want = vec![0.0; b * nh * t * t];
        for bi in 0..b {
            for h in 0..nh {
                let off = bi * t * c + h * hs;
                let out = &mut want[(bi * nh + h) * t * t..][..t * t];
                gemm(
                    0.3,
                    MatRef::strided(&q, off, t, hs, c, 1),
                    MatRef::strided(&k, off, t, hs, c, 1).t(),
                    0.0,
                    MatMut::new(out, t, t),
                );
            }
        }
        let (gq, gk) = (ctx.tensor_from("q", &q).unwrap(), ctx.tensor_from("k", &k).unwrap());
        // NaN in C checks that beta = 0 ignores the old contents, as the CPU gemm does.
        let gs = ctx.tensor_from("s", &vec![f32::NAN; want.len()]).unwrap();
        let head = View::strided(0, c).batched(t * c, hs);
        let op = mm.op(
            &ctx,
            Dims::new(t, t, hs).batched(b, nh),
            0.3,
            (&gq, head),
            (&gk, head.t()),
            0.0,
            (&gs, View::rows(0, t).batched(nh * t * t, t * t)),
        );
        ctx.run(&[&op]);
        let err = max_err(&read(&ctx, &gs), &want);
        eprintln!("batched matmul max error {err:e}");
        assert!(err < 1e-5, "error {err}");
    }
}
