//! Where CG-FAC's state lives on the GPU: the slots of the scalar blocks (written into cgfac.wgsl
//! from here) and the kernels' entry points, one kernel's uniform, a linear layer's offsets into the packed
//! tensors, and the matrix-free products' batch.

use super::super::Tensor;

/// Scalars per layer in `sc`, and the globals before the first layer.
pub(super) const STRIDE: usize = 16;
pub(super) const GLOBALS: usize = 16;
// Globals in `sc`.
const LR: usize = 0;
const XG: usize = 1;
pub(super) const NU: usize = 2;
const SCALE: usize = 3;
pub(super) const BAD: usize = 4;
pub(super) const FALLBACKS: usize = 5;
// A layer's slots, after its block's start (`Layer::slot`).
pub(super) const RR: usize = 0;
pub(super) const R0: usize = 1;
pub(super) const DOT: usize = 2;
const ALPHA: usize = 3;
const BETA: usize = 4;
pub(super) const ITERS: usize = 5;
pub(super) const REL: usize = 6;
pub(super) const STATUS: usize = 7;
pub(super) const FELL: usize = 8;
pub(super) const XDOTG: usize = 9;
// Values of a layer's STATUS.
pub(super) const ACTIVE: f32 = 0.0;
const DONE: f32 = 1.0;
pub(super) const DIVERGED: f32 = 2.0;
/// Most workgroups of a dot product's first pass (the partials' room in `sc`).
pub(super) const PARTIALS: usize = 256;
/// Most workgroups of `fisher_rows` (each strides over the rows).
pub(super) const ROW_GROUPS: usize = 4096;

/// The constants above as WGSL, put in front of cgfac.wgsl: the kernels and this file read one
/// definition, so a slot moved here moves there too.
pub(super) fn wgsl_constants() -> String {
    let slots = [("LR", LR), ("XG", XG), ("NU", NU), ("SCALE", SCALE), ("BAD", BAD), ("FALLBACKS", FALLBACKS)]
        .into_iter()
        .chain([("RR", RR), ("R0", R0), ("DOT", DOT), ("ALPHA", ALPHA), ("BETA", BETA), ("ITERS", ITERS)])
        .chain([("REL", REL), ("STATUS", STATUS), ("FELL", FELL), ("XDOTG", XDOTG)]);
    let status = [("ACTIVE", ACTIVE), ("DONE", DONE), ("DIVERGED", DIVERGED)];
    let mut out: String = slots.map(|(name, v)| format!("const {name}: u32 = {v}u;\n")).collect();
    out.extend(status.map(|(name, v)| format!("const {name}: f32 = {v:?};\n")));
    out
}

/// Declares `Entry`, the kernels' entry points, with `Entry::ALL` in declaration order (so
/// `Entry as usize` indexes the pipelines built from it) and `name`, the WGSL function's name.
macro_rules! entries {
    ($($variant:ident => $name:literal),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(super) enum Entry {
            $($variant),*
        }

        impl Entry {
            pub(super) const ALL: &[Entry] = &[$(Entry::$variant),*];

            pub(super) fn name(self) -> &'static str {
                match self {
                    $(Entry::$variant => $name),*
                }
            }
        }
    };
}

entries! {
    FillZero => "fill_zero",
    Copy => "copy",
    Residual => "residual",
    DotPartial => "dot_partial",
    DotFinal => "dot_final",
    Start => "start",
    Alpha => "alpha",
    UpdateXr => "update_xr",
    Beta => "beta",
    UpdateP => "update_p",
    FallbackFlag => "fallback_flag",
    Fallback => "fallback",
    Kl => "kl",
    Gather => "gather",
    Update => "update",
    AEdge => "a_edge",
    Fold => "fold",
    ScaleCopy => "scale_copy",
    FisherRows => "fisher_rows",
}

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
    /// Positions N and scored tokens M of a training batch.
    pub n: usize,
    pub m: usize,
    pub a: Vec<Tensor>,
    pub g: Vec<Tensor>,
    pub(super) nd: Tensor,
    pub(super) on: Tensor,
}
