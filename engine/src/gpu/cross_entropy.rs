//! Softmax cross-entropy, forward (probabilities, per-row losses, mean) and backward: the GPU twin
//! of `crate::nn::loss`. The mean and the count stay on the GPU in `stats` = [mean loss, count].

use super::softmax::grid_rows;
use super::{grid_1d, with_reductions, Access, GpuContext, Kernel, Op, Tensor};

pub struct CrossEntropy {
    kernel: Kernel,
}

/// The tensors one cross-entropy works on.
pub struct Buffers<'a> {
    /// (N, V) logits, turned into probabilities in place.
    pub probs: &'a Tensor,
    /// (N) u32 targets; `crate::nn::loss::IGNORE` rows do not count.
    pub targets: &'a Tensor,
    /// (N, 2) scratch: per-row loss and whether it counted.
    pub rows: &'a Tensor,
    /// [mean loss, count].
    pub stats: &'a Tensor,
    /// (N, V) gradient of the mean loss with respect to the logits.
    pub dlogits: &'a Tensor,
}

impl CrossEntropy {
    pub fn new(ctx: &GpuContext) -> Self {
        use Access::*;
        let src = &with_reductions(include_str!("kernels/cross_entropy.wgsl"));
        let access = [ReadWrite, Read, ReadWrite, ReadWrite, ReadWrite];
        CrossEntropy { kernel: Kernel::new(ctx, "cross_entropy", src, &access, &["forward", "finish", "backward"]) }
    }

    fn check<'a>(b: &Buffers<'a>, n: usize, v: usize) -> [&'a Tensor; 5] {
        assert!(b.probs.len >= n * v && b.dlogits.len >= n * v && b.targets.len >= n && b.rows.len >= 2 * n);
        assert!(b.stats.len >= 2);
        [b.probs, b.targets, b.rows, b.stats, b.dlogits]
    }

    /// Softmax in place, per-row losses, then the mean over counted rows into `stats`.
    pub fn forward(&self, ctx: &GpuContext, b: &Buffers, n: usize, v: usize) -> [Op; 2] {
        let bind = Self::check(b, n, v);
        let p = [n as u32, v as u32];
        [self.kernel.op(ctx, 0, &bind, &p, grid_rows(n)), self.kernel.op(ctx, 1, &bind, &p, [1, 1, 1])]
    }

    /// `dlogits = (p - onehot) / count` on counted rows, 0 on ignored ones.
    pub fn backward(&self, ctx: &GpuContext, b: &Buffers, n: usize, v: usize) -> Op {
        let bind = Self::check(b, n, v);
        self.kernel.op(ctx, 2, &bind, &[n as u32, v as u32], grid_1d(n * v))
    }
}
