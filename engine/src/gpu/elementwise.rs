//! Flat vector kernels: residual add, bias broadcast, bias gradient (column sums) and reductions.

use super::{grid_1d, with_reductions, Access, GpuContext, Kernel, Op, Tensor};

const ADD: usize = 0;
const BROADCAST_ROWS: usize = 1;
const COL_SUM: usize = 2;
const REDUCE: usize = 3;

/// Workgroups of a reduction's first pass: enough to fill a GPU, few enough for one second pass.
pub const REDUCE_GROUPS: usize = 256;

pub struct Elementwise {
    kernel: Kernel,
}

impl Elementwise {
    pub fn new(ctx: &GpuContext) -> Self {
        let src = &with_reductions(include_str!("kernels/elementwise.wgsl"));
        let entries = ["add", "broadcast_rows", "col_sum", "reduce"];
        Elementwise { kernel: Kernel::new(ctx, "elementwise", src, &[Access::Read, Access::ReadWrite], &entries) }
    }

    #[allow(clippy::too_many_arguments)]
    fn op(
        &self,
        ctx: &GpuContext,
        entry: usize,
        x: (&Tensor, usize),
        y: (&Tensor, usize),
        n: usize,
        cols: usize,
        rows: usize,
        extra: [u32; 2],
        grid: [u32; 3],
    ) -> Op {
        let params = [n as u32, cols as u32, rows as u32, x.1 as u32, y.1 as u32, extra[0], extra[1]];
        self.kernel.op(ctx, entry, &[x.0, y.0], &params, grid)
    }

    /// `y[yo..yo+n] += x[xo..xo+n]`.
    pub fn add(&self, ctx: &GpuContext, x: (&Tensor, usize), y: (&Tensor, usize), n: usize) -> Op {
        assert!(x.1 + n <= x.0.len && y.1 + n <= y.0.len, "add out of bounds");
        self.op(ctx, ADD, x, y, n, 0, 0, [0, 0], grid_1d(n))
    }

    /// Every row of the `rows x cols` matrix `y` (from offset 0) = `x[xo..xo+cols]`.
    pub fn broadcast_rows(&self, ctx: &GpuContext, x: (&Tensor, usize), y: &Tensor, rows: usize, cols: usize) -> Op {
        assert!(x.1 + cols <= x.0.len && rows * cols <= y.len, "broadcast out of bounds");
        self.op(ctx, BROADCAST_ROWS, x, (y, 0), rows * cols, cols, rows, [0, 0], grid_1d(rows * cols))
    }

    /// `y[yo + j] += sum_r x[r, j]` over the `rows x cols` matrix `x` (from offset 0).
    pub fn col_sum(&self, ctx: &GpuContext, x: &Tensor, y: (&Tensor, usize), rows: usize, cols: usize) -> Op {
        assert!(rows * cols <= x.len && y.1 + cols <= y.0.len, "column sum out of bounds");
        self.op(ctx, COL_SUM, (x, 0), y, cols, cols, rows, [0, 0], grid_1d(cols))
    }

    /// The two passes of a sum (or sum of squares) of `x[..n]` into `out[0]`; `partials` holds
    /// [`REDUCE_GROUPS`] values.
    pub fn sum(
        &self,
        ctx: &GpuContext,
        x: &Tensor,
        n: usize,
        square: bool,
        partials: &Tensor,
        out: &Tensor,
    ) -> [Op; 2] {
        assert!(n <= x.len && partials.len >= REDUCE_GROUPS && out.len >= 1, "reduction sizes");
        let g = REDUCE_GROUPS as u32;
        [
            self.op(ctx, REDUCE, (x, 0), (partials, 0), n, 0, 0, [square as u32, g], [g, 1, 1]),
            self.op(ctx, REDUCE, (partials, 0), (out, 0), REDUCE_GROUPS, 0, 0, [0, 1], [1, 1, 1]),
        ]
    }
}
