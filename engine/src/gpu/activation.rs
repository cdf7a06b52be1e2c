//! GELU (tanh form) / ReLU / identity, and for real models exact GELU / SiLU, forward and backward:
//! the GPU twin of `crate::nn::activation`; gated, the forward of a Llama's MLP.

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
        Activation::GeluExact => 3,
        Activation::Silu => 4,
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
        self.kernel.op(ctx, 0, &[inp, inp, out], &[inp.len as u32, kind(a), 0], grid_1d(inp.len))
    }

    /// `out = act(gate) * up` over `gate.len` values (a gated MLP).
    pub fn gated(&self, ctx: &GpuContext, a: Activation, out: &Tensor, gate: &Tensor, up: &Tensor) -> Op {
        assert!(out.len >= gate.len && up.len >= gate.len);
        self.kernel.op(ctx, 0, &[gate, up, out], &[gate.len as u32, kind(a), 1], grid_1d(gate.len))
    }

    /// `dinp = dout * act'(inp)` from the cached pre-activation `inp`.
    pub fn backward(&self, ctx: &GpuContext, a: Activation, dinp: &Tensor, dout: &Tensor, inp: &Tensor) -> Op {
        assert!(dinp.len >= inp.len && dout.len >= inp.len);
        self.kernel.op(ctx, 1, &[inp, dout, dinp], &[inp.len as u32, kind(a), 0], grid_1d(inp.len))
    }
}
