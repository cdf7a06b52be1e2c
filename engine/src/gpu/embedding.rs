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
    /// Learned positions to add (the lab, GPT-2); false for a model with rotary positions.
    pub learned: bool,
}

impl Embedding {
    pub fn new(ctx: &GpuContext) -> Self {
        let access = [Access::Read, Access::Read, Access::ReadWrite];
        let src = include_str!("kernels/embedding.wgsl");
        Embedding { kernel: Kernel::new(ctx, "embedding", src, &access, &["forward", "backward"]) }
    }

    fn params(tab: Table, n: usize) -> [u32; 7] {
        [n, tab.t, tab.c, tab.v, tab.wte_off, tab.wpe_off, tab.learned as usize].map(|x| x as u32)
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
