//! GELU (tanh form) / ReLU / identity, forward and backward: the GPU twin of `crate::nn::activation`.

use super::{grid_1d, Access, GpuContext, Kernel, Op, Tensor};
use crate::config::Activation;

pub struct Act {
    kernel: Kernel,
}

fn kind(a: Activation) -> u32 {
    match a {
        Activation::Gelu => 0,
        Activation::Relu => 1,
        Activation::Identity => 2,
    }
}

impl Act {
    pub fn new(ctx: &GpuContext) -> Self {
        let access = [Access::Read, Access::Read, Access::ReadWrite];
        let src = include_str!("kernels/activation.wgsl");
        Act { kernel: Kernel::new(ctx, "activation", src, &access, &["forward", "backward"]) }
    }

    /// `out = act(inp)` over `inp.len` values.
    pub fn forward(&self, ctx: &GpuContext, a: Activation, out: &Tensor, inp: &Tensor) -> Op {
        assert!(out.len >= inp.len);
        self.kernel.op(ctx, 0, &[inp, inp, out], &[inp.len as u32, kind(a)], grid_1d(inp.len))
    }

    /// `dinp = dout * act'(inp)` from the cached pre-activation `inp`.
    pub fn backward(&self, ctx: &GpuContext, a: Activation, dinp: &Tensor, dout: &Tensor, inp: &Tensor) -> Op {
        assert!(dinp.len >= inp.len && dout.len >= inp.len);
        self.kernel.op(ctx, 1, &[inp, dout, dinp], &[inp.len as u32, kind(a)], grid_1d(inp.len))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::activation;

    #[test]
    fn activations_match_cpu_forward_and_backward() {
        let ctx = ctx();
        let k = Act::new(&ctx);
        let n = 70_001;
        // Wide inputs reach GELU's saturated tails.
        let x: Vec<f32> = random(n, 1).iter().map(|v| v * 8.0).collect();
        let g = random(n, 2);
        let (gx, gg) = (ctx.tensor_from("x", &x).unwrap(), ctx.tensor_from("g", &g).unwrap());
        let out = ctx.tensor("out", n).unwrap();
        for a in [Activation::Gelu, Activation::Relu, Activation::Identity] {
            let mut want = vec![0.0; n];
            activation::forward(a, &mut want, &x);
            ctx.run(&[&k.forward(&ctx, a, &out, &gx)]);
            let ef = max_err(&read(&ctx, &out), &want);
            activation::backward(a, &mut want, &g, &x);
            ctx.run(&[&k.backward(&ctx, a, &out, &gg, &gx)]);
            let eb = max_err(&read(&ctx, &out), &want);
            eprintln!("{a:?}: forward error {ef:e}, backward error {eb:e}");
            assert!(ef < 1e-5 && eb < 1e-5, "{a:?}: {ef} {eb}");
        }
    }
}
