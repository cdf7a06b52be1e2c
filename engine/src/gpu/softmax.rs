//! Attention's masked row softmax, forward and backward, in place on (B, NH, T, T) buffers.

use super::{with_reductions, Access, GpuContext, Kernel, Op, Tensor};

pub struct Softmax {
    kernel: Kernel,
    /// Fills the forward pass's unused P slot: a binding cannot alias the read-write scores.
    unused: Tensor,
}

/// One workgroup per row, spilling into y past WebGPU's 65535 workgroups per dimension; the
/// kernels skip the workgroups of the last line of y that are past the rows.
pub(crate) fn grid_rows(rows: usize) -> [u32; 3] {
    let x = rows.clamp(1, 65535) as u32;
    [x, (rows as u32).div_ceil(x), 1]
}

impl Softmax {
    pub fn new(ctx: &GpuContext) -> Self {
        let src = &with_reductions(include_str!("kernels/softmax.wgsl"));
        let kernel = Kernel::new(ctx, "softmax", src, &[Access::Read, Access::ReadWrite], &["forward", "backward"]);
        Softmax { kernel, unused: ctx.tensor("unused", 1).expect("one float fits") }
    }

    /// Scores -> row-stochastic P over `rows` rows of `t` (masked entries exactly 0 when causal).
    pub fn forward(&self, ctx: &GpuContext, s: &Tensor, rows: usize, t: usize, causal: bool) -> Op {
        assert!(rows * t <= s.len);
        assert!(rows.is_multiple_of(t) || !causal, "causal rows come in blocks of t");
        self.kernel.op(ctx, 0, &[&self.unused, s], &[t as u32, causal as u32, rows as u32], grid_rows(rows))
    }

    /// dP -> dS = P * (dP - rowsum(P * dP)) in place.
    pub fn backward(&self, ctx: &GpuContext, dp: &Tensor, p: &Tensor, rows: usize, t: usize) -> Op {
        assert!(rows * t <= dp.len && rows * t <= p.len);
        self.kernel.op(ctx, 1, &[p, dp], &[t as u32, 0, rows as u32], grid_rows(rows))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::loss::softmax_in_place;

    #[test]
    fn masked_softmax_matches_cpu_forward_and_backward() {
        let ctx = ctx();
        let k = Softmax::new(&ctx);
        // t = 300 spans more than one pass of the 256-wide workgroup.
        for (t, bh, causal) in [(300, 2, true), (7, 5, false), (33, 3, true)] {
            let rows = bh * t;
            let s: Vec<f32> = random(rows * t, t as u64).iter().map(|v| v * 5.0).collect();
            let dp = random(rows * t, 1);
            let mut want = s.clone();
            for (r, row) in want.chunks_exact_mut(t).enumerate() {
                let visible = if causal { r % t + 1 } else { t };
                softmax_in_place(&mut row[..visible]);
                row[visible..].fill(0.0);
            }
            let mut want_ds = dp.clone();
            for (d, p) in want_ds.chunks_exact_mut(t).zip(want.chunks_exact(t)) {
                let dot: f32 = d.iter().zip(p).map(|(a, b)| a * b).sum();
                d.iter_mut().zip(p).for_each(|(x, &pp)| *x = pp * (*x - dot));
            }
            let (gs, gdp) = (ctx.tensor_from("s", &s).unwrap(), ctx.tensor_from("dp", &dp).unwrap());
            ctx.run(&[&k.forward(&ctx, &gs, rows, t, causal)]);
            let ef = max_err(&read(&ctx, &gs), &want);
            ctx.run(&[&k.backward(&ctx, &gdp, &gs, rows, t)]);
            let eb = max_err(&read(&ctx, &gdp), &want_ds);
            eprintln!("softmax t={t} causal={causal}: forward {ef:e}, backward {eb:e}");
            assert!(ef < 1e-5 && eb < 1e-5, "t={t}: {ef} {eb}");
        }
    }
}
