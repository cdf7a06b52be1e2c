//! AdamW with the global-norm clip folded in: the GPU twin of `optim::clip` + `optim::adam`.

use super::{f, grid_1d, Access, GpuContext, Kernel, Op, Tensor};
use crate::model::params::Layout;

pub struct AdamW {
    kernel: Kernel,
}

/// The optimizer's state and inputs on the GPU.
pub struct State<'a> {
    pub params: &'a Tensor,
    pub grads: &'a Tensor,
    pub m: &'a Tensor,
    pub v: &'a Tensor,
    /// Per-parameter weight decay, from [`decay_mask`].
    pub decay: &'a Tensor,
    /// [sum of squared gradients], from a reduction run before the update.
    pub sum_sq: &'a Tensor,
    /// [lr, 1 - beta1^t, 1 - beta2^t], from [`step_values`], written before each step.
    pub step: &'a Tensor,
}

/// Hyperparameters fixed for the run.
#[derive(Clone, Copy, Debug)]
pub struct Hyper {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// Global gradient-norm clip; 0 turns it off.
    pub max_norm: f32,
}

/// Weight decay per parameter: `weight_decay` on matrices, 0 on gains, biases and vectors.
pub fn decay_mask(layout: &Layout, weight_decay: f32) -> Vec<f32> {
    let mut out = vec![0.0; layout.total];
    for info in layout.tensors.iter().filter(|t| t.is_matrix()) {
        out[info.range()].fill(weight_decay);
    }
    out
}

/// The step tensor's values for update number `t` (1-based), computed as the CPU optimizer does.
pub fn step_values(lr: f32, beta1: f32, beta2: f32, t: u64) -> [f32; 3] {
    [lr, 1.0 - beta1.powi(t as i32), 1.0 - beta2.powi(t as i32)]
}

impl AdamW {
    pub fn new(ctx: &GpuContext) -> Self {
        use Access::*;
        let access = [ReadWrite, Read, ReadWrite, ReadWrite, Read, Read, Read];
        AdamW {
            kernel: Kernel::new(
                ctx,
                "adamw",
                concat!(include_str!("kernels/clip.wgsl"), include_str!("kernels/adamw.wgsl")),
                &access,
                &["main"],
            ),
        }
    }

    /// The update of every parameter.
    pub fn op(&self, ctx: &GpuContext, s: &State, h: Hyper) -> Op {
        self.op_range(ctx, s, h, 0..s.params.len)
    }

    /// The update of the parameters in `range` only (CG-FAC's tensors outside the linear layers).
    pub fn op_range(&self, ctx: &GpuContext, s: &State, h: Hyper, range: std::ops::Range<usize>) -> Op {
        let (n, end) = (range.len(), range.end);
        assert!(end <= s.params.len && s.grads.len >= end && s.m.len >= end && s.v.len >= end && s.decay.len >= end);
        assert!(s.sum_sq.len >= 1 && s.step.len >= 3);
        let bind = [s.params, s.grads, s.m, s.v, s.decay, s.sum_sq, s.step];
        let p = [n as u32, f(h.beta1), f(h.beta2), f(h.eps), f(h.max_norm), range.start as u32];
        self.kernel.op(ctx, 0, &bind, &p, grid_1d(n))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::elementwise::{Elementwise, REDUCE_GROUPS};
    use super::super::testing::*;
    use super::*;
    use crate::config::ModelConfig;
    use crate::optim::{adam::Adam, clip};

    #[test]
    fn adamw_with_clipping_matches_cpu_over_steps() {
        let ctx = ctx();
        let (adam, ew) = (AdamW::new(&ctx), Elementwise::new(&ctx));
        let cfg =
            ModelConfig { vocab: 11, d_model: 16, heads: 2, layers: 1, d_ff: 40, context: 8, ..Default::default() };
        let layout = Layout::new(&cfg);
        let n = layout.total;
        let h = Hyper { beta1: 0.9, beta2: 0.99, eps: 1e-8, max_norm: 1.0 };
        let mut cpu = Adam::new(h.beta1, h.beta2, h.eps, 0.1, n);
        let mut params = random(n, 1);

        let t = |d: &[f32]| ctx.tensor_from("t", d).unwrap();
        let (gp, gg, gm, gv) =
            (t(&params), ctx.tensor("g", n).unwrap(), ctx.tensor("m", n).unwrap(), ctx.tensor("v", n).unwrap());
        let (decay, partials, sum_sq, step) = (
            t(&decay_mask(&layout, 0.1)),
            ctx.tensor("p", REDUCE_GROUPS).unwrap(),
            ctx.tensor("s", 1).unwrap(),
            ctx.tensor("st", 3).unwrap(),
        );
        let state = State { params: &gp, grads: &gg, m: &gm, v: &gv, decay: &decay, sum_sq: &sum_sq, step: &step };
        let [r1, r2] = ew.sum(&ctx, &gg, n, true, &partials, &sum_sq);
        let update = adam.op(&ctx, &state, h);
        let mut worst = 0.0f32;
        for k in 0..4u64 {
            // Step 0's gradients are large enough to be clipped, later ones are not.
            let scale = if k == 0 { 1.0 } else { 0.001 };
            let mut g: Vec<f32> = random(n, 10 + k).iter().map(|x| x * scale).collect();
            ctx.write(&gg, &g);
            let lr = 0.01 / (k + 1) as f32;
            ctx.write(&step, &step_values(lr, h.beta1, h.beta2, k + 1));
            ctx.run(&[&r1, &r2, &update]);
            clip::clip(&mut g, h.max_norm);
            cpu.step(&mut params, &g, 1.0, &layout, lr, 1);
            let err = max_err(&read(&ctx, &gp), &params);
            worst = worst.max(err);
            assert!(err < 1e-5, "step {k}: {err}");
        }
        let (em, ev) = (max_err(&read(&ctx, &gm), &cpu.m), max_err(&read(&ctx, &gv), &cpu.v));
        eprintln!("adamw: params {worst:e}, m {em:e}, v {ev:e}");
        assert!(em < 1e-5 && ev < 1e-5);
        // A NaN or infinite gradient skips the update on the device: nothing changes.
        let before = (read(&ctx, &gp), read(&ctx, &gm), read(&ctx, &gv));
        for bad in [f32::NAN, f32::INFINITY] {
            let mut g = random(n, 99);
            g[n / 2] = bad;
            ctx.write(&gg, &g);
            ctx.write(&step, &step_values(0.01, h.beta1, h.beta2, 5));
            ctx.run(&[&r1, &r2, &update]);
            assert_eq!(
                (read(&ctx, &gp), read(&ctx, &gm), read(&ctx, &gv)),
                before,
                "a {bad} gradient changed the state"
            );
        }
    }
}
