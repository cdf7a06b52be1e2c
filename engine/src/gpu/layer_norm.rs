//! LayerNorm forward and backward: the GPU twin of `crate::nn::layer_norm`. Gains and biases are read
//! from the flat parameter tensor, their gradients accumulated into the flat gradient tensor.

use super::softmax::grid_rows;
use super::{grid_1d, with_reductions, Access, GpuContext, Kernel, Op, Tensor};

pub struct LayerNorm {
    kernel: Kernel,
}

/// Where one LayerNorm's gain and bias sit in the flat parameter (and gradient) layout.
#[derive(Clone, Copy, Debug)]
pub struct Affine {
    pub w_off: usize,
    pub b_off: usize,
}

impl LayerNorm {
    pub fn new(ctx: &GpuContext) -> Self {
        use Access::*;
        let src = &with_reductions(include_str!("kernels/layer_norm.wgsl"));
        let access = [Read, Read, ReadWrite, ReadWrite, ReadWrite, ReadWrite];
        let entries = ["forward", "backward_rows", "backward_params"];
        LayerNorm { kernel: Kernel::new(ctx, "layer_norm", src, &access, &entries) }
    }

    fn params(n: usize, c: usize, a: Affine) -> [u32; 4] {
        [n as u32, c as u32, a.w_off as u32, a.b_off as u32]
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

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::layer_norm;

    #[test]
    fn layer_norm_matches_cpu_forward_and_backward() {
        let ctx = ctx();
        let k = LayerNorm::new(&ctx);
        // c = 300 is wider than a workgroup; c = 24 narrower.
        for (n, c) in [(45, 300), (130, 24)] {
            // Parameters sit at odd offsets inside a bigger flat buffer, as in the model.
            let (w_off, b_off) = (7, 7 + c);
            let mut prm = random(2 * c + 20, 1);
            prm[w_off..w_off + c].iter_mut().for_each(|w| *w += 1.0);
            let x: Vec<f32> = random(n * c, 2).iter().map(|v| 3.0 * v + 0.5).collect();
            let dy = random(n * c, 3);
            let dx0 = random(n * c, 4);
            let g0 = random(prm.len(), 5);
            let (w, b) = (&prm[w_off..w_off + c], &prm[b_off..b_off + c]);
            let (mut out, mut u, mut rstd) = (vec![0.0; n * c], vec![0.0; n * c], vec![0.0; n]);
            layer_norm::forward(&mut out, &mut u, &mut rstd, &x, w, b, c);
            let (mut dx, mut g) = (dx0.clone(), g0.clone());
            let (gw, gb) = g[w_off..b_off + c].split_at_mut(c);
            layer_norm::backward(&mut dx, gw, gb, &dy, &u, &rstd, w, c);

            let t = |d: &[f32]| ctx.tensor_from("t", d).unwrap();
            let (gx, gp, gdy, gdx, gg) = (t(&x), t(&prm), t(&dy), t(&dx0), t(&g0));
            let (gout, gu, grstd) =
                (ctx.tensor("out", n * c).unwrap(), ctx.tensor("u", n * c).unwrap(), ctx.tensor("rstd", n).unwrap());
            let a = Affine { w_off, b_off };
            let fwd = k.forward(&ctx, &gout, &gu, &grstd, &gx, &gp, &gg, a, n, c);
            let [rows, cols] = k.backward(&ctx, &gdx, &gg, &gdy, &gu, &grstd, &gp, a, n, c);
            ctx.run(&[&fwd, &rows, &cols]);
            let errs = [
                max_err(&read(&ctx, &gout), &out),
                max_err(&read(&ctx, &gu), &u),
                max_err(&read(&ctx, &grstd), &rstd),
                max_err(&read(&ctx, &gdx), &dx),
                max_err(&read(&ctx, &gg), &g),
            ];
            eprintln!("layer norm n={n} c={c}: out, u, rstd, dx, dparams errors {errs:?}");
            assert!(errs.iter().all(|&e| e < 1e-4), "{errs:?}");
        }
    }
}
