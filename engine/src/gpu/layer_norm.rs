//! LayerNorm forward and backward (and RMSNorm's forward): the GPU twin of `crate::nn::layer_norm`. Gains and biases are read
//! from the flat parameter tensor, their gradients accumulated into the flat gradient tensor.

use super::softmax::grid_rows;
use super::{grid_1d, with_reductions, Access, GpuContext, Kernel, Op, Tensor};

pub struct LayerNorm {
    kernel: Kernel,
}

/// Where one norm's gain and bias sit in the flat parameter (and gradient) layout, and how it
/// normalises: its epsilon, and whether it centres the row (LayerNorm) or not (RMSNorm).
#[derive(Clone, Copy, Debug)]
pub struct Affine {
    pub w_off: usize,
    pub b_off: usize,
    pub eps: f32,
    pub centre: bool,
}

impl Affine {
    /// The lab's LayerNorm at these offsets.
    pub fn layer_norm(w_off: usize, b_off: usize) -> Self {
        Affine { w_off, b_off, eps: crate::config::LAYER_NORM_EPS as f32, centre: true }
    }
}

impl LayerNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        use Access::*;
        let src = &with_reductions(include_str!("kernels/layer_norm.wgsl"));
        let access = [Read, Read, ReadWrite, ReadWrite, ReadWrite, ReadWrite];
        let entries = ["forward", "backward_rows", "backward_params"];
        LayerNorm { kernel: Kernel::new(ctx, "layer_norm", src, &access, &entries) }
    }

    fn params(n: usize, c: usize, a: Affine) -> [u32; 6] {
        [n as u32, c as u32, a.w_off as u32, a.b_off as u32, a.eps.to_bits(), a.centre as u32]
    }

    /// inp (N, C) -> out (N, C), caching `u` (N, C) and `rstd` (N). `grads` is bound, not touched.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        ctx: &GpuContext,
        out: &Tensor,
        u: &Tensor,
        rstd: &Tensor,
        inp: &Tensor,
        params: &Tensor,
        grads: &Tensor,
        a: Affine,
        n: usize,
        c: usize,
    ) -> Op {
        assert!(inp.len >= n * c && out.len >= n * c && u.len >= n * c && rstd.len >= n);
        self.kernel.op(ctx, 0, &[inp, params, out, u, rstd, grads], &Self::params(n, c, a), grid_rows(n))
    }

    /// Accumulates into `dinp` (N, C) and the gain and bias gradients inside `grads`.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        ctx: &GpuContext,
        dinp: &Tensor,
        grads: &Tensor,
        dout: &Tensor,
        u: &Tensor,
        rstd: &Tensor,
        params: &Tensor,
        a: Affine,
        n: usize,
        c: usize,
    ) -> [Op; 2] {
        assert!(dout.len >= n * c && dinp.len >= n * c && u.len >= n * c && rstd.len >= n);
        let bind = [dout, params, dinp, u, rstd, grads];
        let p = Self::params(n, c, a);
        [self.kernel.op(ctx, 1, &bind, &p, grid_rows(n)), self.kernel.op(ctx, 2, &bind, &p, grid_1d(c))]
    }
}
