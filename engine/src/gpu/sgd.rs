//! SGD with momentum and the global-norm clip folded in: the GPU twin of `optim::clip` +
//! `optim::sgd`. It shares AdamW's decay mask, norm reduction and step tensor (only `step[0]`, the
//! learning rate, is read).

use super::{f, grid_1d, Access, GpuContext, Kernel, Op, Tensor};

pub struct Sgd {
    kernel: Kernel,
}

/// The optimizer's state and inputs on the GPU.
pub struct State<'a> {
    pub params: &'a Tensor,
    pub grads: &'a Tensor,
    pub velocity: &'a Tensor,
    /// Per-parameter weight decay, from [`super::adamw::decay_mask`].
    pub decay: &'a Tensor,
    /// [sum of squared gradients], from a reduction run before the update.
    pub sum_sq: &'a Tensor,
    /// [lr, ..], written before each step.
    pub step: &'a Tensor,
}

impl Sgd {
    pub fn new(ctx: &GpuContext) -> Self {
        use Access::*;
        let access = [ReadWrite, Read, ReadWrite, Read, Read, Read];
        Sgd {
            kernel: Kernel::new(
                ctx,
                "sgd",
                concat!(include_str!("kernels/clip.wgsl"), include_str!("kernels/sgd.wgsl")),
                &access,
                &["main"],
            ),
        }
    }

    /// `max_norm` is the global gradient-norm clip; 0 turns it off.
    pub fn op(&self, ctx: &GpuContext, s: &State, momentum: f32, max_norm: f32) -> Op {
        let n = s.params.len;
        assert!(s.grads.len >= n && s.velocity.len >= n && s.decay.len >= n);
        assert!(s.sum_sq.len >= 1 && s.step.len >= 1);
        let bind = [s.params, s.grads, s.velocity, s.decay, s.sum_sq, s.step];
        self.kernel.op(ctx, 0, &bind, &[n as u32, f(momentum), f(max_norm)], grid_1d(n))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::adamw::decay_mask;
    use super::super::elementwise::{Elementwise, REDUCE_GROUPS};
    use super::super::testing::*;
    use super::*;
    use crate::config::ModelConfig;
    use crate::model::params::Layout;
    use crate::optim::{clip, sgd};

    #[test]
    fn sgd_momentum_with_clipping_matches_cpu_over_steps() {
        let ctx = ctx();
        let (sgd_k, ew) = (Sgd::new(&ctx), Elementwise::new(&ctx));
        let cfg =
            ModelConfig { vocab: 11, d_model: 16, heads: 2, layers: 1, d_ff: 40, context: 8, ..Default::default() };
        let layout = Layout::new(&cfg);
        let n = layout.total;
        let (momentum, max_norm, wd) = (0.9, 1.0, 0.1);
        let mut cpu = sgd::Sgd::new(momentum, wd, n);
        let mut params = random(n, 1);

        let t = |d: &[f32]| ctx.tensor_from("t", d).unwrap();
        let (gp, gg, gvel) = (t(&params), ctx.tensor("g", n).unwrap(), ctx.tensor("vel", n).unwrap());
        let (decay, partials, sum_sq, step) = (
            t(&decay_mask(&layout, wd)),
            ctx.tensor("p", REDUCE_GROUPS).unwrap(),
            ctx.tensor("s", 1).unwrap(),
            ctx.tensor("st", 1).unwrap(),
        );
        let state = State { params: &gp, grads: &gg, velocity: &gvel, decay: &decay, sum_sq: &sum_sq, step: &step };
        let [r1, r2] = ew.sum(&ctx, &gg, n, true, &partials, &sum_sq);
        let update = sgd_k.op(&ctx, &state, momentum, max_norm);
        let mut worst = 0.0f32;
        for k in 0..5u64 {
            // Step 0's gradients are large enough to be clipped, later ones are not.
            let scale = if k == 0 { 1.0 } else { 0.001 };
            let mut g: Vec<f32> = random(n, 10 + k).iter().map(|x| x * scale).collect();
            ctx.write(&gg, &g);
            let lr = 0.1 / (k + 1) as f32;
            ctx.write(&step, &[lr]);
            ctx.run(&[&r1, &r2, &update]);
            clip::clip(&mut g, max_norm);
            cpu.step(&mut params, &g, 1.0, &layout, lr, 1);
            let err = max_err(&read(&ctx, &gp), &params);
            worst = worst.max(err);
            assert!(err < 1e-6, "step {k}: {err}");
        }
        let ev = max_err(&read(&ctx, &gvel), &cpu.velocity);
        eprintln!("sgd: params {worst:e}, velocity {ev:e}");
        assert!(ev < 1e-6, "velocity differs by {ev}");
        // A NaN gradient skips the update on the device.
        let before = (read(&ctx, &gp), read(&ctx, &gvel));
        let mut g = random(n, 98);
        g[1] = f32::NAN;
        ctx.write(&gg, &g);
        ctx.run(&[&r1, &r2, &update]);
        assert_eq!((read(&ctx, &gp), read(&ctx, &gvel)), before, "a NaN gradient changed the state");
    }
}
