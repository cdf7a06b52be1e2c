//! Where CG-FAC's state lives on the GPU: the slots of the scalar blocks and the kernels' entry
//! points (both as in cgfac.wgsl), one kernel's uniform, a linear layer's offsets into the packed
//! tensors, and the matrix-free products' batch.

use super::super::Tensor;

/// Scalars per layer in `sc`, and the globals before the first layer (slots as in cgfac.wgsl).
pub(super) const STRIDE: usize = 16;
pub(super) const GLOBALS: usize = 16;
pub(super) const NU: usize = 2;
pub(super) const BAD: usize = 4;
pub(super) const FALLBACKS: usize = 5;
pub(super) const RR: usize = 0;
pub(super) const R0: usize = 1;
pub(super) const DOT: usize = 2;
pub(super) const ITERS: usize = 5;
pub(super) const REL: usize = 6;
pub(super) const STATUS: usize = 7;
pub(super) const FELL: usize = 8;
pub(super) const XDOTG: usize = 9;
pub(super) const ACTIVE: f32 = 0.0;
pub(super) const DIVERGED: f32 = 2.0;
/// Most workgroups of a dot product's first pass (the partials' room in `sc`).
pub(super) const PARTIALS: usize = 256;

// Entry points, in the order given to the kernel.
pub(super) const FILL_ZERO: usize = 0;
pub(super) const COPY: usize = 1;
pub(super) const RESIDUAL: usize = 2;
pub(super) const DOT_PARTIAL: usize = 3;
pub(super) const DOT_FINAL: usize = 4;
pub(super) const START: usize = 5;
pub(super) const ALPHA: usize = 6;
pub(super) const UPDATE_XR: usize = 7;
pub(super) const BETA: usize = 8;
pub(super) const UPDATE_P: usize = 9;
pub(super) const FALLBACK_FLAG: usize = 10;
pub(super) const FALLBACK: usize = 11;
pub(super) const KL: usize = 12;
pub(super) const GATHER: usize = 13;
pub(super) const UPDATE: usize = 14;
pub(super) const A_EDGE: usize = 15;
pub(super) const FOLD: usize = 16;
pub(super) const SCALE_COPY: usize = 17;
pub(super) const FISHER_ROWS: usize = 18;
pub(super) const ENTRIES: [&str; 19] = [
    "fill_zero",
    "copy",
    "residual",
    "dot_partial",
    "dot_final",
    "start",
    "alpha",
    "update_xr",
    "beta",
    "update_p",
    "fallback_flag",
    "fallback",
    "kl",
    "gather",
    "update",
    "a_edge",
    "fold",
    "scale_copy",
    "fisher_rows",
];
/// Most workgroups of `fisher_rows` (each strides over the rows).
pub(super) const ROW_GROUPS: usize = 4096;

/// One kernel's uniform (the `Params` of cgfac.wgsl).
#[derive(Clone, Copy, Default)]
pub(super) struct Words {
    pub(super) n: usize,
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) c: usize,
    pub(super) d: usize,
    pub(super) slot: usize,
    pub(super) cols: usize,
    pub(super) rows: usize,
    pub(super) f: [f32; 4],
}

/// Where one linear layer's state lives: W (dout, din) and its bias in the flat parameters, A
/// (din1, din1) and G (dout, dout) in `factors`, six (dout, din1) vectors in `vecs`, its scalar
/// block in `sc`.
#[derive(Clone, Debug)]
pub struct Layer {
    pub name: String,
    /// Its position in the solver's list (and in `Batch`'s).
    pub index: usize,
    pub din: usize,
    pub dout: usize,
    pub w: usize,
    pub b: usize,
    pub a: usize,
    pub g: usize,
    pub grad: usize,
    pub x: usize,
    pub r: usize,
    pub p: usize,
    pub ap: usize,
    pub vel: usize,
    pub slot: usize,
}

impl Layer {
    pub fn din1(&self) -> usize {
        self.din + 1
    }
    /// Elements of each of its (dout, din1) vectors.
    pub fn size(&self) -> usize {
        self.dout * self.din1()
    }
}

/// The matrix-free products' operands: per layer a~ (n, din1) and g (n, dout), and scratch for
/// g X (n, din1) and (g^T g X) a~^T (dout, n).
pub struct Batch {
    pub n: usize,
    pub a: Vec<Tensor>,
    pub g: Vec<Tensor>,
    pub(super) nd: Tensor,
    pub(super) on: Tensor,
}
