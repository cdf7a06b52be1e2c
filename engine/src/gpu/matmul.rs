//! Tiled, batched, strided GEMM in workgroup memory: the GPU twin of `crate::nn::matmul::gemm`.
//!
//! Two tilings of the same product (`kernels/matmul.wgsl`, `kernels/matmul_wide.wgsl`): 64 x 64
//! tiles with 4 x 4 outputs per invocation and scalar loads, for any layout; and 128 x 128 tiles
//! with 8 x 8 outputs per invocation and vec4 loads, for operands laid out in fours. Both use 256
//! invocations and 8 KiB of workgroup memory, inside WebGPU's default limits, so every adapter runs
//! both. A launch takes the wide tiles when its operands allow, when their padding at the edges
//! costs at most a quarter more work than the square tiles', and, on a hardware adapter, when
//! their grid still has [`WIDE_MIN_GROUPS`] workgroups to spread over a large GPU's compute units
//! (a software adapter has a few CPU cores to fill).

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
    /// Whether a `rows x cols` matrix seen through this view is made of whole, aligned vec4s, and
    /// along which dimension they run: `Some(true)` along the columns, `Some(false)` along the rows.
    fn fours(&self, rows: usize, cols: usize) -> Option<bool> {
        let aligned = |xs: &[usize]| xs.iter().all(|x| x % 4 == 0);
        let batch = [self.offset, self.batch_outer, self.batch_inner];
        if self.cs == 1 && aligned(&[cols, self.rs]) && aligned(&batch) {
            Some(true)
        } else if self.rs == 1 && aligned(&[rows, self.cs]) && aligned(&batch) {
            Some(false)
        } else {
            None
        }
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
    pub zeros: Zeros,
}

/// Causal attention's triangles, which a product may skip tile by tile as the CPU's attention
/// does. Skipping exact zeros changes no bit: `fma(0, x, acc)` is `acc`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Zeros {
    #[default]
    None,
    /// Only C's lower triangle (`j <= i`, C square) is wanted: tiles wholly above the diagonal
    /// skip the product and write `beta * C` (the scores, and their gradient).
    AboveDiagonalOfC,
    /// A (square) is zero above its diagonal: each row tile stops at its last row (`P V`, `dS K`).
    AboveDiagonalOfA,
    /// A (square) is zero below its diagonal: each row tile starts at its first row (`P^T dY`, `dS^T Q`).
    BelowDiagonalOfA,
}

impl Dims {
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Dims { m, n, k, outer: 1, inner: 1, zeros: Zeros::None }
    }
    pub fn batched(self, outer: usize, inner: usize) -> Self {
        Dims { outer, inner, ..self }
    }
    pub fn skipping(self, zeros: Zeros) -> Self {
        Dims { zeros, ..self }
    }
    pub fn flops(&self) -> f64 {
        2.0 * (self.m * self.n * self.k * self.outer * self.inner) as f64
    }
}

/// Workgroups per grid dimension that WebGPU guarantees.
const MAX_GROUPS: usize = 65535;
/// The fewest 128 x 128 tiles a launch takes the wide kernel for: about one per compute unit of
/// a data-centre GPU (132 on an H100). A guess until a real GPU measures it: no session has had one.
pub const WIDE_MIN_GROUPS: usize = 128;

/// The two tilings; [`Matmul::op`] chooses, [`Matmul::op_tiled`] is told (the bench compares them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    /// 64 x 64 tiles, scalar loads: any layout.
    Square64,
    /// 128 x 128 tiles, vec4 loads: operands in aligned fours.
    Wide128,
}

impl Tiling {
    fn tile(self) -> usize {
        match self {
            Tiling::Square64 => 64,
            Tiling::Wide128 => 128,
        }
    }
}

pub struct Matmul {
    square: Kernel,
    wide: Kernel,
    /// The fewest wide tiles a launch takes them for on this adapter.
    min_groups: usize,
}

impl Matmul {
    pub fn new(ctx: &GpuContext) -> Self {
        let access = [Access::Read, Access::Read, Access::ReadWrite];
        // Both kernels after the uniform and tile addressing they share.
        let kernel = |name, src| {
            let source = [include_str!("kernels/matmul_tile.wgsl"), src].concat();
            Kernel::new(ctx, name, &source, &access, &["main"])
        };
        Matmul {
            square: kernel("matmul", include_str!("kernels/matmul.wgsl")),
            wide: kernel("matmul wide", include_str!("kernels/matmul_wide.wgsl")),
            min_groups: if ctx.is_software() { 1 } else { WIDE_MIN_GROUPS },
        }
    }

    /// The tiling [`Matmul::op`] takes for these operands on this adapter.
    pub fn tiling(&self, d: Dims, a: View, b: View) -> Tiling {
        choose(d, a, b, self.min_groups)
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
        self.op_tiled(ctx, self.tiling(d, a.1, b.1), d, alpha, a, b, beta, c)
    }

    /// [`Matmul::op`] with the tiling given; `Wide128` needs operands in aligned fours.
    #[allow(clippy::too_many_arguments)]
    pub fn op_tiled(
        &self,
        ctx: &GpuContext,
        tiling: Tiling,
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
        let square = match d.zeros {
            Zeros::None => true,
            Zeros::AboveDiagonalOfC => d.m == d.n,
            Zeros::AboveDiagonalOfA | Zeros::BelowDiagonalOfA => d.m == d.k,
        };
        assert!(square, "matmul {d:?}: a triangle of a matrix that is not square");
        params.extend([f(alpha), f(beta), batches as u32, d.zeros as u32]);
        // Whether A's and B's vec4s run along k: the wide kernel's loads (the square one ignores them).
        let (a_k, b_k) = match tiling {
            Tiling::Square64 => (false, false),
            Tiling::Wide128 => match (a.1.fours(d.m, d.k), b.1.fours(d.k, d.n)) {
                (Some(a_cols), Some(b_cols)) => (a_cols, !b_cols),
                _ => panic!("wide matmul {d:?} on operands not in fours"),
            },
        };
        params.extend([a_k as u32, b_k as u32]);
        // Batches past one dimension's limit continue in y, one line of row tiles per 65535.
        let tile = tiling.tile();
        let (cols, rows, z) = (d.n.div_ceil(tile), d.m.div_ceil(tile), batches.min(MAX_GROUPS));
        let lines = batches.div_ceil(z);
        assert!(cols <= MAX_GROUPS && rows * lines <= MAX_GROUPS, "matmul {d:?} is past one launch's grid");
        let grid = [cols as u32, (rows * lines) as u32, z as u32];
        let kernel = if tiling == Tiling::Wide128 { &self.wide } else { &self.square };
        kernel.op(ctx, 0, &[a.0, b.0, c.0], &params, grid)
    }
}

/// See the module's introduction.
fn choose(d: Dims, a: View, b: View, min_groups: usize) -> Tiling {
    let padded = |tile: usize| d.m.next_multiple_of(tile) * d.n.next_multiple_of(tile);
    let groups = d.m.div_ceil(128) * d.n.div_ceil(128) * d.outer * d.inner;
    let fours = a.fours(d.m, d.k).is_some() && b.fours(d.k, d.n).is_some();
    if fours && 4 * padded(128) <= 5 * padded(64) && groups >= min_groups {
        Tiling::Wide128
    } else {
        Tiling::Square64
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::matmul::{gemm, MatMut, MatRef};

    /// `c = 0.7 a b + 0.5 c` on the GPU with `tiling` and on the CPU; the largest difference.
    /// `a` and `b` are stored transposed when the product reads them transposed, as the model's
    /// weights are.
    fn against_cpu(
        ctx: &GpuContext,
        mm: &Matmul,
        tiling: Option<Tiling>,
        case: (usize, usize, usize, bool, bool),
    ) -> f32 {
        let (m, k, n, ta, tb) = case;
        let seed = (m * 7 + k * 5 + n * 3) as u64;
        let (a, b, c0) = (random(m * k, seed), random(k * n, seed + 1), random(m * n, seed + 2));
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
        let (ga, gb, gc) =
            (ctx.tensor_from("a", &a).unwrap(), ctx.tensor_from("b", &b).unwrap(), ctx.tensor_from("c", &c0).unwrap());
        let d = Dims::new(m, n, k);
        let tiling = tiling.unwrap_or(mm.tiling(d, va, vb));
        ctx.run(&[&mm.op_tiled(ctx, tiling, d, 0.7, (&ga, va), (&gb, vb), 0.5, (&gc, View::rows(0, n)))]);
        max_err(&read(ctx, &gc), &want)
    }

    /// Sizes straddle the 64-wide tile and the 16-deep panel.
    #[test]
    fn matmul_matches_cpu_gemm_with_transposes() {
        let (ctx, mut worst) = (ctx(), 0.0f32);
        let mm = Matmul::new(&ctx);
        for case in [
            (37, 53, 29, false, false),
            (1, 70, 65, false, true),
            (130, 17, 66, true, false),
            (64, 64, 64, true, true),
            (100, 3, 129, false, true),
        ] {
            let err = against_cpu(&ctx, &mm, None, case);
            assert!(err < 1e-5, "case {case:?}: error {err}");
            worst = worst.max(err);
        }
        eprintln!("matmul max error {worst:e}");
    }

    /// The wide tiles in all four layouts of A and B (their vec4s along k or along m and n), on
    /// sizes that straddle the 128-wide tile and the 8-deep panel, against the CPU and against the
    /// square tiles, which run the same fma chain.
    #[test]
    fn wide_tiles_match_cpu_gemm_in_every_layout() {
        let (ctx, mut worst) = (ctx(), 0.0f32);
        let mm = Matmul::new(&ctx);
        for (m, k, n) in [(132, 36, 260), (4, 8, 128), (256, 132, 12)] {
            for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
                let case = (m, k, n, ta, tb);
                let wide = against_cpu(&ctx, &mm, Some(Tiling::Wide128), case);
                let square = against_cpu(&ctx, &mm, Some(Tiling::Square64), case);
                assert!(wide < 1e-5, "case {case:?}: wide error {wide}");
                assert!((wide - square).abs() < 1e-6, "case {case:?}: wide {wide}, square {square}");
                worst = worst.max(wide);
            }
        }
        eprintln!("wide matmul max error {worst:e}");
    }

    #[test]
    fn wide_tiles_only_for_operands_in_fours_little_padding_and_grids_that_fill_a_gpu() {
        let rows = |cols| View::rows(0, cols);
        let hardware = |d: Dims, a, b| choose(d, a, b, WIDE_MIN_GROUPS);
        let big = Dims::new(2048, 2048, 2048);
        assert_eq!(hardware(big, rows(2048), rows(2048).t()), Tiling::Wide128);
        // 8 x 8 wide tiles are 64 groups: the square tiles spread wider on hardware, not in software.
        let (d, v) = (Dims::new(1024, 1024, 1024), rows(1024));
        assert_eq!(hardware(d, v, v), Tiling::Square64);
        assert_eq!(choose(d, v, v, 1), Tiling::Wide128);
        // A row stride, a dimension or an offset off the fours.
        assert_eq!(hardware(Dims::new(2048, 2048, 2046), rows(2046), rows(2048)), Tiling::Square64);
        assert_eq!(hardware(big, View::strided(2, 2048), rows(2048)), Tiling::Square64);
        assert_eq!(hardware(Dims::new(2048, 2047, 2048), rows(2048), rows(2047)), Tiling::Square64);
        // 32 of 128 columns, or 192 of 256, would be wasted work.
        assert_eq!(choose(Dims::new(256, 32, 32), rows(32), rows(32), 1), Tiling::Square64);
        assert_eq!(choose(Dims::new(8192, 192, 64), rows(64), rows(192), 1), Tiling::Square64);
        assert_eq!(choose(Dims::new(8192, 128, 64), rows(64), rows(128), 1), Tiling::Wide128);
        // Batches count: 64 heads of 256 x 256 scores are 256 wide tiles.
        let head = View::strided(0, 512).batched(256 * 512, 8);
        assert_eq!(hardware(Dims::new(256, 256, 8).batched(1, 64), head, head.t()), Tiling::Wide128);
    }

    /// Each triangle skipped in both tilings, on two batches of square products that straddle
    /// the tiles: the same bits as the full product (the skipped terms are exact zeros) and the
    /// CPU's values; C's skipped tiles hold `beta * C`, here 0.
    #[test]
    fn skipped_triangles_give_the_full_products_bits() {
        let ctx = ctx();
        let mm = Matmul::new(&ctx);
        for (tiling, t) in [(Tiling::Square64, 150), (Tiling::Wide128, 260)] {
            let lower = |x: &mut Vec<f32>, keep: fn(usize, usize) -> bool| {
                for (e, v) in x.iter_mut().enumerate() {
                    if !keep(e / t % t, e % t) {
                        *v = 0.0;
                    }
                }
            };
            let (mut a_low, mut a_up, b) = (random(2 * t * t, 1), random(2 * t * t, 2), random(2 * t * t, 3));
            lower(&mut a_low, |i, j| j <= i);
            lower(&mut a_up, |i, j| j >= i);
            let v = View::rows(0, t).batched(t * t, 0);
            let d = Dims::new(t, t, t).batched(2, 1);
            for (zeros, a) in
                [(Zeros::AboveDiagonalOfC, &b), (Zeros::AboveDiagonalOfA, &a_low), (Zeros::BelowDiagonalOfA, &a_up)]
            {
                let (ga, gb) = (ctx.tensor_from("a", a).unwrap(), ctx.tensor_from("b", &b).unwrap());
                let run = |d: Dims| {
                    let gc = ctx.tensor_from("c", &vec![f32::NAN; 2 * t * t]).unwrap();
                    ctx.run(&[&mm.op_tiled(&ctx, tiling, d, 1.0, (&ga, v), (&gb, v), 0.0, (&gc, v))]);
                    read(&ctx, &gc)
                };
                let (full, skipped) = (run(d), run(d.skipping(zeros)));
                let mut want = vec![0.0; 2 * t * t];
                for z in 0..2 {
                    let (az, bz) =
                        (MatRef::new(&a[z * t * t..][..t * t], t, t), MatRef::new(&b[z * t * t..][..t * t], t, t));
                    gemm(1.0, az, bz, 0.0, MatMut::new(&mut want[z * t * t..][..t * t], t, t));
                }
                let (mut same, mut err) = (true, 0.0f32);
                for e in 0..2 * t * t {
                    let (i, j) = (e / t % t, e % t);
                    let (wanted, got) = if zeros == Zeros::AboveDiagonalOfC && j > i {
                        // Only tiles wholly above the diagonal are skipped; the rest match.
                        let tile = if tiling == Tiling::Wide128 { 128 } else { 64 };
                        (if j / tile > i / tile { 0.0 } else { full[e] }, skipped[e])
                    } else {
                        same &= full[e].to_bits() == skipped[e].to_bits();
                        (want[e], skipped[e])
                    };
                    err = err.max((wanted - got).abs());
                }
                eprintln!("{tiling:?} {zeros:?} at {t}: max error {err:e}, same bits as the full product: {same}");
                assert!(same, "{tiling:?} {zeros:?}: bits differ from the full product");
                assert!(err < 1e-4, "{tiling:?} {zeros:?}: error {err}");
            }
        }
    }

    /// Attention's shape: per (batch, head), S = Q K^T over head columns of (B, T, C) buffers; with
    /// head size 5 in the square tiles only, with 8 (the heads' columns in fours) in both.
    #[test]
    fn batched_head_matmul_matches_cpu() {
        let ctx = ctx();
        let mm = Matmul::new(&ctx);
        for (t, hs, tilings) in [(19, 5, &[Tiling::Square64][..]), (20, 8, &[Tiling::Square64, Tiling::Wide128])] {
            let (b, nh) = (3, 4);
            let c = nh * hs;
            let q = random(b * t * c, 1);
            let k = random(b * t * c, 2);
            let mut want = vec![0.0; b * nh * t * t];
            for bi in 0..b {
                for h in 0..nh {
                    let off = bi * t * c + h * hs;
                    let out = &mut want[(bi * nh + h) * t * t..][..t * t];
                    let head = |x| MatRef::strided(x, off, t, hs, c, 1);
                    gemm(0.3, head(&q), head(&k).t(), 0.0, MatMut::new(out, t, t));
                }
            }
            let (gq, gk) = (ctx.tensor_from("q", &q).unwrap(), ctx.tensor_from("k", &k).unwrap());
            let head = View::strided(0, c).batched(t * c, hs);
            let d = Dims::new(t, t, hs).batched(b, nh);
            for &tiling in tilings {
                // NaN in C checks that beta = 0 ignores the old contents, as the CPU gemm does.
                let gs = ctx.tensor_from("s", &vec![f32::NAN; want.len()]).unwrap();
                let sv = View::rows(0, t).batched(nh * t * t, t * t);
                ctx.run(&[&mm.op_tiled(&ctx, tiling, d, 0.3, (&gq, head), (&gk, head.t()), 0.0, (&gs, sv))]);
                let err = max_err(&read(&ctx, &gs), &want);
                eprintln!("batched matmul, head size {hs}, {tiling:?}: max error {err:e}");
                assert!(err < 1e-5, "{tiling:?}: error {err}");
            }
        }
    }
}
