//! Rotary positions on the GPU: the twin of `crate::nn::rotary`, turning a (N, NH * hs) buffer of
//! queries or keys in place from a table of cosines and sines made on the CPU in f64.

use super::{grid_1d, Access, GpuContext, Kernel, Op, Result, Tensor};

pub struct Rotary {
    kernel: Kernel,
}

/// The angles' cosines then sines for positions 0..t and the pairs of frequencies `inv`
/// (`nn::rotary::frequencies`), as `nn::rotary` turns them.
pub fn table(t: usize, inv: &[f64]) -> Vec<f32> {
    let half = inv.len();
    let angle = |pos: usize, i: usize| pos as f64 * inv[i];
    let cos = (0..t).flat_map(|pos| (0..half).map(move |i| angle(pos, i).cos() as f32));
    let sin = (0..t).flat_map(|pos| (0..half).map(move |i| angle(pos, i).sin() as f32));
    cos.chain(sin).collect()
}

impl Rotary {
    pub fn new(ctx: &GpuContext) -> Self {
        let src = include_str!("kernels/rotary.wgsl");
        Rotary { kernel: Kernel::new(ctx, "rotary", src, &[Access::Read, Access::ReadWrite], &["forward"]) }
    }

    /// The table of `table(t, inv)` on the GPU.
    pub fn upload(ctx: &GpuContext, t: usize, inv: &[f64]) -> Result<Tensor> {
        ctx.tensor_from("rotary", &table(t, inv))
    }

    /// Turns `x` (n rows of `nh` heads of `hs`, row r at position r % t) by `table` over the
    /// first `dims` of each head.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        ctx: &GpuContext,
        x: &Tensor,
        table: &Tensor,
        n: usize,
        t: usize,
        nh: usize,
        hs: usize,
        dims: usize,
    ) -> Op {
        let half = dims / 2;
        assert!(x.len >= n * nh * hs && table.len >= 2 * t * half && n.is_multiple_of(t));
        let params = [n, t, nh, hs, half].map(|v| v as u32);
        self.kernel.op(ctx, 0, &[table, x], &params, grid_1d(n * nh * half))
    }
}
