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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::loss;

    #[test]
    fn cross_entropy_matches_cpu_forward_and_backward() {
        let ctx = ctx();
        let k = CrossEntropy::new(&ctx);
        // v = 300 spans two passes of a workgroup; every 4th target is ignored.
        for (n, v) in [(50, 300), (129, 11)] {
            let logits: Vec<f32> = random(n * v, 1).iter().map(|x| 4.0 * x).collect();
            let targets: Vec<u32> =
                (0..n).map(|i| if i % 4 == 3 { loss::IGNORE } else { ((i * 7) % v) as u32 }).collect();
            let mut probs = logits.clone();
            let (mean, count) = loss::forward(&mut probs, &targets, v);
            let mut dl = vec![0.0; n * v];
            loss::backward(&mut dl, &probs, &targets, count, v);

            let gp = ctx.tensor_from("logits", &logits).unwrap();
            let gt = ctx.tensor_from("targets", &targets).unwrap();
            let (rows, stats, gd) =
                (ctx.tensor("rows", 2 * n).unwrap(), ctx.tensor("stats", 2).unwrap(), ctx.tensor("d", n * v).unwrap());
            let b = Buffers { probs: &gp, targets: &gt, rows: &rows, stats: &stats, dlogits: &gd };
            let [f1, f2] = k.forward(&ctx, &b, n, v);
            let bw = k.backward(&ctx, &b, n, v);
            ctx.run(&[&f1, &f2, &bw]);
            let s = read(&ctx, &stats);
            let errs = [max_err(&read(&ctx, &gp), &probs), max_err(&read(&ctx, &gd), &dl), (s[0] - mean).abs() / mean];
            eprintln!("cross-entropy n={n} v={v}: probs, dlogits, relative loss errors {errs:?}");
            assert_eq!(s[1], count as f32);
            assert!(errs.iter().all(|&e| e < 1e-5), "{errs:?}");
        }
    }
}
