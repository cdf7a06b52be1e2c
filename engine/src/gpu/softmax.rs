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
