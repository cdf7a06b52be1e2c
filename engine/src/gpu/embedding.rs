//! Token and position embeddings: gather forward, scatter-add backward (as a gather per gradient
//! entry, WGSL having no float atomics). The GPU twin of `crate::nn::embedding`.

use super::{grid_1d, Access, GpuContext, Kernel, Op, Tensor};

pub struct Embedding {
    kernel: Kernel,
}

/// Sizes and where wte (V, C) and wpe (T, C) sit in the flat parameter layout.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    pub v: usize,
    pub t: usize,
    pub c: usize,
    pub wte_off: usize,
    pub wpe_off: usize,
}

impl Embedding {
    pub fn new(ctx: &GpuContext) -> Self {
        let access = [Access::Read, Access::Read, Access::ReadWrite];
        let src = include_str!("kernels/embedding.wgsl");
        Embedding { kernel: Kernel::new(ctx, "embedding", src, &access, &["forward", "backward"]) }
    }

    fn params(tab: Table, n: usize) -> [u32; 6] {
        [n, tab.t, tab.c, tab.v, tab.wte_off, tab.wpe_off].map(|x| x as u32)
    }

    /// tokens (N) -> out (N, C) = wte[token] + wpe[position].
    pub fn forward(
        &self,
        ctx: &GpuContext,
        out: &Tensor,
        tokens: &Tensor,
        params: &Tensor,
        tab: Table,
        n: usize,
    ) -> Op {
        assert!(out.len >= n * tab.c && tokens.len >= n && n.is_multiple_of(tab.t));
        self.kernel.op(ctx, 0, &[tokens, params, out], &Self::params(tab, n), grid_1d(n * tab.c))
    }

    /// Accumulates `dout` (N, C) into the wte and wpe gradients inside `grads`.
    pub fn backward(
        &self,
        ctx: &GpuContext,
        grads: &Tensor,
        dout: &Tensor,
        tokens: &Tensor,
        tab: Table,
        n: usize,
    ) -> Op {
        assert!(dout.len >= n * tab.c && tokens.len >= n && n.is_multiple_of(tab.t));
        let grid = grid_1d((tab.v + tab.t) * tab.c);
        self.kernel.op(ctx, 1, &[tokens, dout, grads], &Self::params(tab, n), grid)
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::nn::embedding;

    #[test]
    fn embedding_matches_cpu_gather_and_scatter_add() {
        let ctx = ctx();
        let k = Embedding::new(&ctx);
        let (v, t, c, b) = (13, 9, 70, 5);
        let n = b * t;
        let tab = Table { v, t, c, wte_off: 3, wpe_off: 3 + v * c };
        let prm = random(3 + (v + t) * c + 4, 1);
        let tokens: Vec<u32> = (0..n).map(|i| ((i * i + 3) % v) as u32).collect();
        let dout = random(n * c, 2);
        let g0 = random(prm.len(), 3);
        let mut out = vec![0.0; n * c];
        let (wte, wpe) = prm[3..3 + (v + t) * c].split_at(v * c);
        embedding::forward(&mut out, &tokens, wte, wpe, t, c);
        let mut g = g0.clone();
        let (dwte, dwpe) = g[3..3 + (v + t) * c].split_at_mut(v * c);
        embedding::backward(dwte, dwpe, &dout, &tokens, t, c);

        let (gp, gt, gd, gg) = (
            ctx.tensor_from("p", &prm).unwrap(),
            ctx.tensor_from("tok", &tokens).unwrap(),
            ctx.tensor_from("dout", &dout).unwrap(),
            ctx.tensor_from("g", &g0).unwrap(),
        );
        let gout = ctx.tensor("out", n * c).unwrap();
        ctx.run(&[&k.forward(&ctx, &gout, &gt, &gp, tab, n), &k.backward(&ctx, &gg, &gd, &gt, tab, n)]);
        assert_eq!(read(&ctx, &gout), out, "the gather is exact");
        let err = max_err(&read(&ctx, &gg), &g);
        eprintln!("embedding scatter-add error {err:e}");
        assert!(err < 1e-5, "{err}");
    }
}
