//! CG-FAC on the GPU: the GPU twin of `optim::second_order` (method CG-FAC), `optim::cg::solve` and
//! `optim::kronecker::apply` with any of its three products. `Factors` keeps A and G; the
//! matrix-free products keep each layer's batch instead (a~ = [a, 1] and g = N dy, stored after the
//! layer's backward) and run as thin matmuls.
//!
//! Every linear layer's state lives in three packed tensors: `factors` (A and G), `vecs` (the
//! gradient `[dW | db]`, CG's x, r, p, Ap and the momentum) and `sc` (CG's scalars per layer, the
//! KL-clip globals and the reduction partials). The scalars never leave the GPU: each CG kernel
//! reads its layer's status first, so running `max_iters` fixed iterations reproduces the CPU
//! loop's early exit. One small readback per iteration only stops the loop once every layer is
//! done, and the last one fills the diagnostics.

use super::adamw::{step_values, AdamW, Hyper, State as AdamState};
use super::matmul::{Dims, Matmul, View};
use super::{f, grid_1d, Access, GpuContext, Kernel, Op, Result, Tensor};
use crate::model::Model;
use crate::optim::cg::CgOutcome;
use crate::optim::curvature;
use crate::optim::kronecker::Product;
use crate::optim::second_order::{Diagnostics, LayerDiagnostics, SecondOrderConfig};

/// Scalars per layer in `sc`, and the globals before the first layer (slots as in cgfac.wgsl).
const STRIDE: usize = 16;
const GLOBALS: usize = 16;
const NU: usize = 2;
const BAD: usize = 4;
const FALLBACKS: usize = 5;
const RR: usize = 0;
const R0: usize = 1;
const DOT: usize = 2;
const ITERS: usize = 5;
const REL: usize = 6;
const STATUS: usize = 7;
const FELL: usize = 8;
const XDOTG: usize = 9;
const ACTIVE: f32 = 0.0;
const DIVERGED: f32 = 2.0;
/// Most workgroups of a dot product's first pass (the partials' room in `sc`).
const PARTIALS: usize = 256;

// Entry points, in the order given to the kernel.
const FILL_ZERO: usize = 0;
const COPY: usize = 1;
const RESIDUAL: usize = 2;
const DOT_PARTIAL: usize = 3;
const DOT_FINAL: usize = 4;
const START: usize = 5;
const ALPHA: usize = 6;
const UPDATE_XR: usize = 7;
const BETA: usize = 8;
const UPDATE_P: usize = 9;
const FALLBACK_FLAG: usize = 10;
const FALLBACK: usize = 11;
const KL: usize = 12;
const GATHER: usize = 13;
const UPDATE: usize = 14;
const A_EDGE: usize = 15;
const FOLD: usize = 16;
const SCALE_COPY: usize = 17;
const FISHER_ROWS: usize = 18;
const ENTRIES: [&str; 19] = [
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
const ROW_GROUPS: usize = 4096;

/// One kernel's uniform (the `Params` of cgfac.wgsl).
#[derive(Clone, Copy, Default)]
struct Words {
    n: usize,
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    slot: usize,
    cols: usize,
    rows: usize,
    f: [f32; 4],
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
    nd: Tensor,
    on: Tensor,
}

/// The packed CG-FAC tensors of a list of layers and the kernels over them.
pub struct Solver {
    kernel: Kernel,
    pub product: Product,
    pub layers: Vec<Layer>,
    /// Present for the matrix-free products.
    pub batch: Option<Batch>,
    pub factors: Tensor,
    pub vecs: Tensor,
    pub sc: Tensor,
    /// G X (factors) or g^T g X (matrix-free), for the largest layer.
    scratch: Tensor,
    /// The squared gradient norm (for the clip in `gather`).
    norm: Tensor,
    /// Bound as `ext` by the kernels that use no outside tensor.
    idle: Tensor,
}

impl Solver {
    /// `shapes`: (name, din, dout, W offset, bias offset) per layer; `tokens`: the batch's N (the
    /// matrix-free products store that many rows per layer).
    pub fn new(
        ctx: &GpuContext,
        shapes: &[(String, usize, usize, usize, usize)],
        norm: &Tensor,
        product: Product,
        tokens: usize,
    ) -> Result<Self> {
        use Access::*;
        let src = include_str!("kernels/cgfac.wgsl");
        let kernel = Kernel::new(ctx, "cgfac", src, &[ReadWrite, ReadWrite, ReadWrite, Read], &ENTRIES);
        let (mut fl, mut vl) = (0, 0);
        let layers: Vec<Layer> = shapes
            .iter()
            .enumerate()
            .map(|(i, (name, din, dout, w, b))| {
                let (d1, o) = (din + 1, *dout);
                let len = o * d1;
                let l = Layer {
                    name: name.clone(),
                    index: i,
                    din: *din,
                    dout: o,
                    w: *w,
                    b: *b,
                    a: fl,
                    g: fl + d1 * d1,
                    grad: vl,
                    x: vl + len,
                    r: vl + 2 * len,
                    p: vl + 3 * len,
                    ap: vl + 4 * len,
                    vel: vl + 5 * len,
                    slot: GLOBALS + i * STRIDE,
                };
                fl += d1 * d1 + o * o;
                vl += 6 * len;
                l
            })
            .collect();
        let max_len = layers.iter().map(Layer::size).max().unwrap_or(1);
        let batch = if product == Product::Factors {
            None
        } else {
            let n = tokens;
            let max_d1 = layers.iter().map(Layer::din1).max().unwrap_or(1);
            let max_o = layers.iter().map(|l| l.dout).max().unwrap_or(1);
            Some(Batch {
                n,
                a: layers
                    .iter()
                    .map(|l| ctx.tensor(&format!("cg_a_{}", l.name), n * l.din1()))
                    .collect::<Result<_>>()?,
                g: layers.iter().map(|l| ctx.tensor(&format!("cg_g_{}", l.name), n * l.dout)).collect::<Result<_>>()?,
                nd: ctx.tensor("cg_scratch_nd", n * max_d1)?,
                on: ctx.tensor("cg_scratch_on", max_o * n)?,
            })
        };
        Ok(Solver {
            kernel,
            product,
            batch,
            factors: ctx.tensor("cg_factors", fl)?,
            vecs: ctx.tensor("cg_vecs", vl)?,
            sc: ctx.tensor("cg_scalars", GLOBALS + STRIDE * layers.len() + PARTIALS)?,
            scratch: ctx.tensor("cg_scratch", max_len)?,
            norm: norm.clone(),
            idle: ctx.tensor("cg_idle", 1)?,
            layers,
        })
    }

    fn partials(&self) -> usize {
        GLOBALS + STRIDE * self.layers.len()
    }

    /// An op on `vecs` (or `target` in its place) with `ext` bound to `ext`.
    fn op(&self, ctx: &GpuContext, entry: usize, target: &Tensor, ext: &Tensor, w: Words, grid: [u32; 3]) -> Op {
        let u = |x: usize| x as u32;
        let words = [
            u(w.n),
            u(w.a),
            u(w.b),
            u(w.c),
            u(w.d),
            u(w.slot),
            u(w.cols),
            u(w.rows),
            f(w.f[0]),
            f(w.f[1]),
            f(w.f[2]),
            f(w.f[3]),
        ];
        self.kernel.op(ctx, entry, &[target, &self.sc, ext, &self.norm], &words, grid)
    }

    fn vector(&self, ctx: &GpuContext, entry: usize, w: Words) -> Op {
        self.op(ctx, entry, &self.vecs, &self.idle, w, grid_1d(w.n))
    }

    fn scalar(&self, ctx: &GpuContext, entry: usize, w: Words) -> Op {
        self.op(ctx, entry, &self.vecs, &self.idle, w, [1, 1, 1])
    }

    /// `sc[slot] = <vecs[x..x+n], vecs[y..y+n]>` in two passes.
    fn dot(&self, ctx: &GpuContext, x: usize, y: usize, n: usize, slot: usize) -> [Op; 2] {
        let groups = n.div_ceil(256).clamp(1, PARTIALS);
        let c = self.partials();
        let first = Words { n, a: x, b: y, c, rows: groups, ..Words::default() };
        [
            self.op(ctx, DOT_PARTIAL, &self.vecs, &self.idle, first, [groups as u32, 1, 1]),
            self.op(
                ctx,
                DOT_FINAL,
                &self.vecs,
                &self.idle,
                Words { n: groups, c, slot, ..Words::default() },
                [1, 1, 1],
            ),
        ]
    }

    /// `vecs[to] = F X + lambda X` with `X = vecs[from]`, as `kronecker::apply` with the solver's
    /// product: every product first copies X to `to`, and its last matmul adds onto `lambda X`.
    pub fn product(&self, ctx: &GpuContext, mm: &Matmul, l: &Layer, from: usize, to: usize, lambda: f32) -> Vec<Op> {
        let (o, d) = (l.dout, l.din1());
        let mut ops = vec![self.vector(ctx, COPY, Words { n: l.size(), a: from, b: to, ..Words::default() })];
        let x = (&self.vecs, View::rows(from, d));
        let out = (&self.vecs, View::rows(to, d));
        let Some(b) = &self.batch else {
            // G X into scratch, then (G X) A onto lambda X.
            ops.push(mm.op(
                ctx,
                Dims::new(o, d, o),
                1.0,
                (&self.factors, View::rows(l.g, o)),
                x,
                0.0,
                (&self.scratch, View::rows(0, d)),
            ));
            ops.push(mm.op(
                ctx,
                Dims::new(o, d, d),
                1.0,
                (&self.scratch, View::rows(0, d)),
                (&self.factors, View::rows(l.a, d)),
                lambda,
                out,
            ));
            return ops;
        };
        let (n, i) = (b.n, l.index);
        let (a, g) = ((&b.a[i], View::rows(0, d)), (&b.g[i], View::rows(0, o)));
        let gt = (&b.g[i], View::rows(0, o).t());
        let nd = (&b.nd, View::rows(0, d));
        // P = g X (n, din1), the first of the thin products (each n * dout * din1).
        ops.push(mm.op(ctx, Dims::new(n, d, o), 1.0, g, x, 0.0, nd));
        match self.product {
            Product::MatrixFree => {
                // g^T P (dout, din1), then (.) a~^T (dout, n), then (1/n^2) (.) a~ onto lambda X.
                let od = (&self.scratch, View::rows(0, d));
                let on = (&b.on, View::rows(0, n));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0, gt, nd, 0.0, od));
                ops.push(mm.op(ctx, Dims::new(o, n, d), 1.0, od, (&b.a[i], View::rows(0, d).t()), 0.0, on));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0 / (n * n) as f32, on, a, lambda, out));
            }
            Product::ExactFisher => {
                // s_n = <P_n, a~_n> / n and P_n = s_n a~_n in place, then g^T P onto lambda X.
                let w = Words { rows: n, cols: d, f: [1.0 / n as f32, 0.0, 0.0, 0.0], ..Words::default() };
                ops.push(self.op(ctx, FISHER_ROWS, &b.nd, &b.a[i], w, [n.clamp(1, ROW_GROUPS) as u32, 1, 1]));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0, gt, nd, lambda, out));
            }
            Product::Factors => unreachable!("the factors product keeps no batch"),
        }
        ops
    }

    /// Stores layer `l`'s batch for the matrix-free products from its input rows `inp` (n, din)
    /// and the mean loss's gradient at its output `dy` (n, dout): a~ = [a, 1] and g = n dy, as
    /// `curvature::fold_bias` and `curvature::per_token`. Empty for `Factors`.
    pub fn batch_ops(&self, ctx: &GpuContext, l: &Layer, inp: &Tensor, dy: &Tensor) -> Vec<Op> {
        let Some(b) = &self.batch else { return Vec::new() };
        let (n, i) = (b.n, l.index);
        let fold = Words { n: n * l.din1(), cols: l.din1(), ..Words::default() };
        let scale = Words { n: n * l.dout, f: [n as f32, 0.0, 0.0, 0.0], ..Words::default() };
        vec![
            self.op(ctx, FOLD, &b.a[i], inp, fold, grid_1d(fold.n)),
            self.op(ctx, SCALE_COPY, &b.g[i], dy, scale, grid_1d(scale.n)),
        ]
    }

    /// The factor updates of layer `l` from its input rows `inp` (n, din) and the mean loss's
    /// gradient at its output `dy` (n, dout), blending with weight `keep` as `second_order`:
    /// `A <- keep A + (1 - keep) a~^T a~ / n`, `G <- keep G + (1 - keep) n dy^T dy` (= g^T g / n with
    /// the per-token g = n dy).
    #[allow(clippy::too_many_arguments)]
    pub fn factor_ops(
        &self,
        ctx: &GpuContext,
        mm: &Matmul,
        l: &Layer,
        inp: &Tensor,
        dy: &Tensor,
        n: usize,
        keep: f32,
    ) -> Vec<Op> {
        let (din, dout, nf) = (l.din, l.dout, n as f32);
        let edge = Words { n: din, a: l.a, cols: l.din1(), rows: n, f: [keep, 0.0, 0.0, 0.0], ..Words::default() };
        vec![
            mm.op(
                ctx,
                Dims::new(din, din, n),
                (1.0 - keep) / nf,
                (inp, View::rows(0, din).t()),
                (inp, View::rows(0, din)),
                keep,
                (&self.factors, View::rows(l.a, l.din1())),
            ),
            self.op(ctx, A_EDGE, &self.factors, inp, edge, grid_1d(din + 1)),
            mm.op(
                ctx,
                Dims::new(dout, dout, n),
                (1.0 - keep) * nf,
                (dy, View::rows(0, dout).t()),
                (dy, View::rows(0, dout)),
                keep,
                (&self.factors, View::rows(l.g, dout)),
            ),
        ]
    }

    /// `vecs[grad] = [dW | db]` from the flat gradients, clipped to global norm `clip` as the CPU
    /// trainer clips before its optimizer step.
    pub fn gather(&self, ctx: &GpuContext, l: &Layer, grads: &Tensor, clip: f32) -> Op {
        let w = Words {
            n: l.size(),
            a: l.grad,
            b: l.w,
            c: l.b,
            cols: l.din1(),
            f: [clip, 0.0, 0.0, 0.0],
            ..Words::default()
        };
        self.op(ctx, GATHER, &self.vecs, grads, w, grid_1d(l.size()))
    }

    /// CG's start on `(A ⊗ G + lambda I) x = grad`: x zeroed unless warm, r = p = grad - A x, and
    /// the first stopping test.
    pub fn solve_init(&self, ctx: &GpuContext, mm: &Matmul, l: &Layer, cfg: &SecondOrderConfig) -> Vec<Op> {
        let n = l.size();
        let mut ops = Vec::new();
        if !cfg.warm_start {
            ops.push(self.vector(ctx, FILL_ZERO, Words { n, a: l.x, ..Words::default() }));
        }
        ops.extend(self.product(ctx, mm, l, l.x, l.ap, cfg.damping));
        ops.push(self.vector(ctx, RESIDUAL, Words { n, a: l.grad, b: l.ap, c: l.r, d: l.p, ..Words::default() }));
        ops.extend(self.dot(ctx, l.grad, l.grad, n, l.slot + R0));
        ops.extend(self.dot(ctx, l.r, l.r, n, l.slot + RR));
        ops.push(self.scalar(ctx, START, Words { slot: l.slot, f: [cfg.tol, 0.0, 0.0, 0.0], ..Words::default() }));
        ops
    }

    /// One CG iteration, a no-op for a layer that has converged or diverged.
    pub fn solve_iteration(&self, ctx: &GpuContext, mm: &Matmul, l: &Layer, cfg: &SecondOrderConfig) -> Vec<Op> {
        let (n, slot) = (l.size(), l.slot);
        let stop = [cfg.tol, cfg.max_iters as f32, 0.0, 0.0];
        let mut ops = Vec::new();
        ops.extend(self.product(ctx, mm, l, l.p, l.ap, cfg.damping));
        ops.extend(self.dot(ctx, l.p, l.ap, n, slot + DOT));
        ops.push(self.scalar(ctx, ALPHA, Words { slot, ..Words::default() }));
        ops.push(self.vector(ctx, UPDATE_XR, Words { n, a: l.x, b: l.p, c: l.r, d: l.ap, slot, ..Words::default() }));
        ops.extend(self.dot(ctx, l.r, l.r, n, slot + DOT));
        ops.push(self.scalar(ctx, BETA, Words { slot, f: stop, ..Words::default() }));
        ops.push(self.vector(ctx, UPDATE_P, Words { n, a: l.p, b: l.r, slot, ..Words::default() }));
        ops
    }

    /// A diverged solve or a non-finite x falls back to the gradient; then `<x, grad>`.
    pub fn fallback(&self, ctx: &GpuContext, l: &Layer) -> Vec<Op> {
        let (n, slot) = (l.size(), l.slot);
        let mut ops = Vec::new();
        ops.extend(self.dot(ctx, l.x, l.x, n, slot + DOT));
        ops.push(self.scalar(ctx, FALLBACK_FLAG, Words { slot, ..Words::default() }));
        ops.push(self.vector(ctx, FALLBACK, Words { n, a: l.x, b: l.grad, slot, ..Words::default() }));
        ops.extend(self.dot(ctx, l.x, l.grad, n, slot + XDOTG));
        ops
    }

    /// The KL-clip scale over all layers (kappa 0: off).
    fn kl(&self, ctx: &GpuContext, kappa: f32) -> Op {
        let w =
            Words { n: self.layers.len(), slot: GLOBALS, cols: STRIDE, f: [kappa, 0.0, 0.0, 0.0], ..Words::default() };
        self.scalar(ctx, KL, w)
    }

    /// Momentum and the KL-clipped step of layer `l`'s W and bias.
    fn update(&self, ctx: &GpuContext, l: &Layer, params: &Tensor, momentum: f32, weight_decay: f32) -> Op {
        let w = Words {
            n: l.size(),
            a: l.x,
            b: l.vel,
            c: l.w,
            d: l.b,
            cols: l.din1(),
            f: [momentum, weight_decay, 0.0, 0.0],
            ..Words::default()
        };
        self.op(ctx, UPDATE, &self.vecs, params, w, grid_1d(l.size()))
    }

    /// The scalar blocks of every layer (and the globals), read back.
    async fn scalars(&self, ctx: &GpuContext) -> Result<Vec<f32>> {
        ctx.read(&self.sc, 0, self.partials()).await
    }
}

/// Factor updates to record before op `at` of the trainer's step (where the layer's output
/// gradient is still in its scratch buffer): on the first update and later ones.
struct FactorOps {
    at: usize,
    first: Vec<Op>,
    later: Vec<Op>,
}

/// The CG-FAC optimizer's state and ops on the GPU, named as `SecondOrder::state` names them.
pub struct CgFac {
    pub cfg: SecondOrderConfig,
    solver: Solver,
    factor_ops: Vec<FactorOps>,
    /// The matrix-free products' batch stores, each run every step before op `.0`.
    batch_ops: Vec<(usize, Vec<Op>)>,
    /// Gradient gathers and CG starts, the CG iterations, and fallback, KL-clip and updates.
    init: Vec<Op>,
    iteration: Vec<Op>,
    finish: Vec<Op>,
    adam_m: Tensor,
    adam_v: Tensor,
    /// [adam lr, 1 - beta1^t, 1 - beta2^t] for the tensors outside the linear layers.
    adam_step: Tensor,
    adam_t: u64,
    /// Second-order steps taken (decides the factor refreshes), as `SecondOrder::t`.
    t: u64,
    fallbacks_total: u64,
    tokens: usize,
    pub diag: Diagnostics,
}

/// AdamW's constants for the other tensors, as `SecondOrder::new` sets them.
const ADAM_BETAS: (f32, f32, f32) = (0.9, 0.99, 1e-8);

impl CgFac {
    /// Any of the three products; the matrix-free ones store each layer's batch (see [`Batch`]).
    pub fn new(
        ctx: &GpuContext,
        cfg: SecondOrderConfig,
        model: &Model<f32>,
        tokens: usize,
        sum_sq: &Tensor,
    ) -> Result<Self> {
        let l = &model.layout;
        let shapes: Vec<_> = curvature::sites(model)
            .into_iter()
            .map(|s| (s.name.clone(), s.din, s.dout, l.tensors[s.w].offset, l.tensors[s.b].offset))
            .collect();
        let total = l.total;
        let solver = Solver::new(ctx, &shapes, sum_sq, cfg.product, tokens)?;
        Ok(CgFac {
            solver,
            diag: Diagnostics { damping: cfg.damping, ..Diagnostics::default() },
            cfg,
            factor_ops: Vec::new(),
            batch_ops: Vec::new(),
            init: Vec::new(),
            iteration: Vec::new(),
            finish: Vec::new(),
            adam_m: ctx.tensor("cg_adam_m", total)?,
            adam_v: ctx.tensor("cg_adam_v", total)?,
            adam_step: ctx.tensor("cg_adam_step", 3)?,
            adam_t: 0,
            t: 0,
            fallbacks_total: 0,
            tokens,
        })
    }

    /// Records what layer `site` (in `curvature::sites` order) needs from the step before op `at`:
    /// its factor updates (`Factors`, as on the CPU only then) or its batch (the others).
    pub fn track(&mut self, ctx: &GpuContext, mm: &Matmul, at: usize, site: usize, inp: &Tensor, dy: &Tensor) {
        let (s, l, n) = (&self.solver, &self.solver.layers[site], self.tokens);
        if s.batch.is_some() {
            self.batch_ops.push((at, s.batch_ops(ctx, l, inp, dy)));
            return;
        }
        let first = s.factor_ops(ctx, mm, l, inp, dy, n, 0.0);
        let later = s.factor_ops(ctx, mm, l, inp, dy, n, self.cfg.decay);
        self.factor_ops.push(FactorOps { at, first, later });
    }

    /// Builds the ops after the backward pass and the gradient-norm reduction into `sum_sq`.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &mut self,
        ctx: &GpuContext,
        mm: &Matmul,
        adam: &AdamW,
        model: &Model<f32>,
        params: &Tensor,
        grads: &Tensor,
        decay: &Tensor,
        sum_sq: &Tensor,
        clip: f32,
    ) {
        let (s, cfg) = (&self.solver, &self.cfg);
        for l in &s.layers {
            self.init.push(s.gather(ctx, l, grads, clip));
            self.init.extend(s.solve_init(ctx, mm, l, cfg));
            self.iteration.extend(s.solve_iteration(ctx, mm, l, cfg));
            self.finish.extend(s.fallback(ctx, l));
        }
        self.finish.push(s.kl(ctx, cfg.kl_clip));
        for l in &s.layers {
            self.finish.push(s.update(ctx, l, params, cfg.momentum, cfg.weight_decay));
        }
        let covered: Vec<usize> = curvature::sites(model).iter().flat_map(|s| [s.w, s.b]).collect();
        let state = AdamState { params, grads, m: &self.adam_m, v: &self.adam_v, decay, sum_sq, step: &self.adam_step };
        let (beta1, beta2, eps) = ADAM_BETAS;
        let h = Hyper { beta1, beta2, eps, max_norm: clip };
        for (_, info) in model.layout.tensors.iter().enumerate().filter(|(id, _)| !covered.contains(id)) {
            self.finish.push(adam.op_range(ctx, &state, h, info.range()));
        }
    }

    /// One step after `base` (forward, backward and gradient-norm reduction) with the factor
    /// updates spliced in, CG until every layer is done, then fallback, KL-clip, the momentum
    /// updates and AdamW. `lr` is the scheduled rate, `factor` its ratio to the base rate. False
    /// when the step was not finite: the linear layers then kept their weights (the update
    /// kernel checks), as on the CPU, and the step is not counted.
    pub async fn step(
        &mut self,
        ctx: &GpuContext,
        base: &[Op],
        clear: &[&Tensor],
        lr: f32,
        factor: f32,
    ) -> Result<bool> {
        let refresh = self.t.is_multiple_of(self.cfg.update_interval as u64);
        let first = self.t == 0;
        // The learning rate is the first global (LR in cgfac.wgsl).
        ctx.write(&self.solver.sc, &[lr]);
        let (beta1, beta2, _) = ADAM_BETAS;
        ctx.write(&self.adam_step, &step_values(self.cfg.adam_lr * factor, beta1, beta2, self.adam_t + 1));
        let mut ops: Vec<&Op> = Vec::new();
        for (i, op) in base.iter().enumerate() {
            for (_, bo) in self.batch_ops.iter().filter(|(at, _)| *at == i) {
                ops.extend(bo);
            }
            if refresh {
                for fo in self.factor_ops.iter().filter(|fo| fo.at == i) {
                    ops.extend(if first { &fo.first } else { &fo.later });
                }
            }
            ops.push(op);
        }
        ops.extend(&self.init);
        ctx.run_cleared(clear, &ops);
        let iteration: Vec<&Op> = self.iteration.iter().collect();
        for _ in 0..self.cfg.max_iters {
            let sc = self.solver.scalars(ctx).await?;
            if !self.solver.layers.iter().any(|l| sc[l.slot + STATUS] == ACTIVE) {
                break;
            }
            ctx.run(&iteration);
        }
        let finish: Vec<&Op> = self.finish.iter().collect();
        ctx.run(&finish);
        let sc = self.solver.scalars(ctx).await?;
        self.diag.layers = (self.solver.layers.iter())
            .map(|l| LayerDiagnostics {
                name: l.name.clone(),
                cg: CgOutcome {
                    iterations: sc[l.slot + ITERS] as usize,
                    rel_residual: sc[l.slot + REL] as f64,
                    diverged: sc[l.slot + STATUS] == DIVERGED,
                },
                fell_back: sc[l.slot + FELL] != 0.0,
            })
            .collect();
        self.diag.fallbacks_this_step = sc[FALLBACKS] as usize;
        self.diag.kl_scale = sc[NU];
        if sc[BAD] != 0.0 {
            return Ok(false);
        }
        self.t += 1;
        self.adam_t += 1;
        self.fallbacks_total += self.diag.fallbacks_this_step as u64;
        self.diag.fallbacks_total = self.fallbacks_total;
        Ok(true)
    }

    /// Named state tensors, as `SecondOrder::state` (CG-FAC keeps no inverses: they are zero).
    pub async fn state(&self, ctx: &GpuContext) -> Result<Vec<(String, Vec<f32>)>> {
        let (factors, vecs) = (ctx.read_all(&self.solver.factors).await?, ctx.read_all(&self.solver.vecs).await?);
        let mut out = vec![
            ("so.t".to_string(), vec![self.t as f32]),
            ("so.fallbacks".to_string(), vec![self.fallbacks_total as f32]),
            ("adam.m".to_string(), ctx.read_all(&self.adam_m).await?),
            ("adam.v".to_string(), ctx.read_all(&self.adam_v).await?),
            ("adam.t".to_string(), vec![self.adam_t as f32]),
        ];
        for l in &self.solver.layers {
            let (d1, o, n) = (l.din1(), l.dout, l.size());
            let parts: [(&str, Vec<f32>); 6] = [
                ("A", factors[l.a..l.a + d1 * d1].to_vec()),
                ("G", factors[l.g..l.g + o * o].to_vec()),
                ("A_inv", vec![0.0; d1 * d1]),
                ("G_inv", vec![0.0; o * o]),
                ("x", vecs[l.x..l.x + n].to_vec()),
                ("velocity", vecs[l.vel..l.vel + n].to_vec()),
            ];
            out.extend(parts.into_iter().map(|(what, v)| (format!("so.{}.{what}", l.name), v)));
        }
        Ok(out)
    }

    /// Uploads the state `take` yields by name and length (see [`Self::state`]).
    pub fn load_state(
        &mut self,
        ctx: &GpuContext,
        take: &mut dyn FnMut(&str, usize) -> Result<Vec<f32>>,
    ) -> Result<()> {
        let total = self.adam_m.len;
        self.t = take("so.t", 1)?[0] as u64;
        self.fallbacks_total = take("so.fallbacks", 1)?[0] as u64;
        self.diag.fallbacks_total = self.fallbacks_total;
        ctx.write(&self.adam_m, &take("adam.m", total)?);
        ctx.write(&self.adam_v, &take("adam.v", total)?);
        self.adam_t = take("adam.t", 1)?[0] as u64;
        let mut factors = vec![0.0; self.solver.factors.len];
        let mut vecs = vec![0.0; self.solver.vecs.len];
        for l in &self.solver.layers {
            let (d1, o, n) = (l.din1(), l.dout, l.size());
            let name = |what: &str| format!("so.{}.{what}", l.name);
            let mut put = |dst: &mut [f32], at: usize, what: &str, len: usize| -> Result<()> {
                dst[at..at + len].copy_from_slice(&take(&name(what), len)?);
                Ok(())
            };
            put(&mut factors, l.a, "A", d1 * d1)?;
            put(&mut factors, l.g, "G", o * o)?;
            put(&mut vecs, l.x, "x", n)?;
            put(&mut vecs, l.vel, "velocity", n)?;
            // CG-FAC never fills the inverses; they are checked for size, not kept.
            take(&name("A_inv"), d1 * d1)?;
            take(&name("G_inv"), o * o)?;
        }
        ctx.write(&self.solver.factors, &factors);
        ctx.write(&self.solver.vecs, &vecs);
        Ok(())
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::matmul::{gemm, MatMut, MatRef};
    use crate::optim::cg::{self, CgWork};
    use crate::optim::kronecker::{self, Operands, Product, Scratch};
    use crate::optim::second_order::{update_a_factor, Method};

    const TOKENS: usize = 37;

    /// One layer inside the 64-wide matmul tile and one straddling it.
    fn solver(ctx: &GpuContext) -> Solver {
        solver_for(ctx, Product::Factors)
    }

    fn solver_for(ctx: &GpuContext, product: Product) -> Solver {
        let shapes = [("small".to_string(), 6, 5, 0, 0), ("wide".to_string(), 70, 67, 0, 0)];
        Solver::new(ctx, &shapes, &ctx.tensor("norm", 1).unwrap(), product, TOKENS).unwrap()
    }

    /// Replaces `len` values of `t` from `at`.
    fn put(ctx: &GpuContext, t: &Tensor, at: usize, v: &[f32]) {
        let mut all = read(ctx, t);
        all[at..at + v.len()].copy_from_slice(v);
        ctx.write(t, &all);
    }

    /// A batch's inputs (n, din) and mean-loss output gradients (n, dout), and the CPU factors
    /// `second_order` builds from them, blended into `a`, `g` with weight `keep`.
    fn cpu_factors(l: &Layer, seed: u64, keep: f32, a: &mut [f32], g: &mut [f32]) -> (Vec<f32>, Vec<f32>) {
        let inp = random(TOKENS * l.din, seed);
        let dy: Vec<f32> = random(TOKENS * l.dout, seed + 1).iter().map(|x| x / TOKENS as f32).collect();
        let mut aa = vec![0.0; l.din1() * l.din1()];
        update_a_factor(a, &mut aa, &inp, TOKENS, l.din, keep);
        let g1: Vec<f32> = dy.iter().map(|x| x * TOKENS as f32).collect();
        let m = MatRef::new(&g1, TOKENS, l.dout);
        gemm((1.0 - keep) / TOKENS as f32, m.t(), m, keep, MatMut::new(g, l.dout, l.dout));
        (inp, dy)
    }

    /// Uploads fresh factors for every layer; returns them as the CPU holds them.
    fn load_factors(ctx: &GpuContext, s: &Solver) -> Vec<(Vec<f32>, Vec<f32>)> {
        let mut all = vec![0.0; s.factors.len];
        let out = (s.layers.iter().enumerate())
            .map(|(i, l)| {
                let (mut a, mut g) = (vec![0.0; l.din1() * l.din1()], vec![0.0; l.dout * l.dout]);
                cpu_factors(l, 100 + i as u64, 0.0, &mut a, &mut g);
                all[l.a..l.a + a.len()].copy_from_slice(&a);
                all[l.g..l.g + g.len()].copy_from_slice(&g);
                (a, g)
            })
            .collect();
        ctx.write(&s.factors, &all);
        out
    }

    #[test]
    fn factor_updates_match_cpu() {
        let ctx = ctx();
        let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
        let mut worst = 0.0f32;
        for l in &s.layers {
            let (mut a, mut g) = (vec![0.0; l.din1() * l.din1()], vec![0.0; l.dout * l.dout]);
            // The first update replaces, the next ones blend with the factor decay.
            for (k, keep) in [0.0, 0.95, 0.95].into_iter().enumerate() {
                let (inp, dy) = cpu_factors(l, 10 * k as u64, keep, &mut a, &mut g);
                let (gi, gd) = (ctx.tensor_from("inp", &inp).unwrap(), ctx.tensor_from("dy", &dy).unwrap());
                let ops = s.factor_ops(&ctx, &mm, l, &gi, &gd, TOKENS, keep);
                ctx.run(&ops.iter().collect::<Vec<_>>());
                let f = read(&ctx, &s.factors);
                let ea = max_err(&f[l.a..l.a + a.len()], &a);
                let eg = max_err(&f[l.g..l.g + g.len()], &g);
                assert!(ea < 1e-5 && eg < 1e-5, "{} update {k}: A {ea}, G {eg}", l.name);
                worst = worst.max(ea).max(eg);
            }
        }
        eprintln!("factor updates: max error {worst:e}");
    }

    #[test]
    fn factors_product_matches_kronecker_apply() {
        let ctx = ctx();
        let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
        let factors = load_factors(&ctx, &s);
        let lambda = 0.01;
        let mut worst = 0.0f32;
        for (i, (l, (a, g))) in s.layers.iter().zip(&factors).enumerate() {
            let x = random(l.size(), 7 + i as u64);
            put(&ctx, &s.vecs, l.p, &x);
            ctx.run(&s.product(&ctx, &mm, l, l.p, l.ap, lambda).iter().collect::<Vec<_>>());
            let ops =
                Operands { dout: l.dout, din1: l.din1(), n: 0, a_factor: a, g_factor: g, a_batch: &[], g_batch: &[] };
            let mut want = vec![0.0; l.size()];
            kronecker::apply(Product::Factors, &mut want, &x, &ops, lambda, &mut Scratch::new(0, l.dout, l.din1()));
            let err = max_err(&read(&ctx, &s.vecs)[l.ap..l.ap + l.size()], &want);
            assert!(err < 1e-5, "{}: {err}", l.name);
            worst = worst.max(err);
        }
        eprintln!("factors product: max error {worst:e}");
    }

    /// The matrix-free products against `kronecker::apply` on random layers (one inside the 64-wide
    /// matmul tile, one straddling it; 37 tokens), the batch stored by `batch_ops` from random inputs
    /// and output gradients. The error is relative to the largest output value.
    fn batch_product_error(product: Product) -> f32 {
        let ctx = ctx();
        let (mm, s) = (Matmul::new(&ctx), solver_for(&ctx, product));
        let lambda = 0.01;
        let mut worst = 0.0f32;
        for (i, l) in s.layers.iter().enumerate() {
            let inp = random(TOKENS * l.din, 20 + i as u64);
            let dy: Vec<f32> = random(TOKENS * l.dout, 30 + i as u64).iter().map(|x| x / TOKENS as f32).collect();
            let (gi, gd) = (ctx.tensor_from("inp", &inp).unwrap(), ctx.tensor_from("dy", &dy).unwrap());
            let x = random(l.size(), 7 + i as u64);
            put(&ctx, &s.vecs, l.p, &x);
            let mut ops = s.batch_ops(&ctx, l, &gi, &gd);
            ops.extend(s.product(&ctx, &mm, l, l.p, l.ap, lambda));
            ctx.run(&ops.iter().collect::<Vec<_>>());
            let (mut a1, mut g1) = (vec![0.0; TOKENS * l.din1()], vec![0.0; TOKENS * l.dout]);
            curvature::fold_bias(&mut a1, &inp, l.din);
            curvature::per_token(&mut g1, &dy, TOKENS);
            let ops = Operands {
                dout: l.dout,
                din1: l.din1(),
                n: TOKENS,
                a_factor: &[],
                g_factor: &[],
                a_batch: &a1,
                g_batch: &g1,
            };
            let mut want = vec![0.0; l.size()];
            kronecker::apply(product, &mut want, &x, &ops, lambda, &mut Scratch::new(TOKENS, l.dout, l.din1()));
            let got = &read(&ctx, &s.vecs)[l.ap..l.ap + l.size()];
            let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max) / scale;
            eprintln!("{product:?} {}: max |F x| {scale:e}, relative error {err:e}", l.name);
            worst = worst.max(err);
        }
        worst
    }

    #[test]
    fn matrix_free_product_matches_kronecker_apply() {
        let err = batch_product_error(Product::MatrixFree);
        assert!(err < 1e-5, "matrix-free product: {err}");
    }

    #[test]
    fn exact_fisher_product_matches_kronecker_apply() {
        let err = batch_product_error(Product::ExactFisher);
        assert!(err < 1e-5, "exact-Fisher product: {err}");
    }

    /// `fisher_rows` with fewer workgroups than rows (each strides over several, as past
    /// `ROW_GROUPS` rows) and a row longer than a workgroup.
    #[test]
    fn fisher_rows_strides_over_the_rows() {
        let ctx = ctx();
        let s = solver_for(&ctx, Product::ExactFisher);
        let (n, d) = (TOKENS, 300);
        let (pm, am) = (random(n * d, 1), random(n * d, 2));
        let (tp, ta) = (ctx.tensor_from("p", &pm).unwrap(), ctx.tensor_from("a", &am).unwrap());
        let w = Words { rows: n, cols: d, f: [0.5, 0.0, 0.0, 0.0], ..Words::default() };
        ctx.run(&[&s.op(&ctx, FISHER_ROWS, &tp, &ta, w, [5, 1, 1])]);
        let want: Vec<f32> = (pm.chunks_exact(d).zip(am.chunks_exact(d)))
            .flat_map(|(pr, ar)| {
                let sn = 0.5 * pr.iter().zip(ar).map(|(x, y)| x * y).sum::<f32>();
                ar.iter().map(move |y| sn * y)
            })
            .collect();
        let err = max_err(&read(&ctx, &tp), &want);
        assert!(err < 1e-5, "fisher rows: {err}");
    }

    /// Runs the GPU solve (all `max_iters` iterations recorded, the status flags freezing each layer
    /// when it stops) and the fallback, against `cg::solve` with `kronecker::apply` on the CPU.
    /// Returns the worst error in x and the worst relative difference of the final residuals.
    fn solve_against_cpu(cfg: &SecondOrderConfig) -> (f32, f64, Vec<CgOutcome>) {
        let ctx = ctx();
        let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
        let factors = load_factors(&ctx, &s);
        let grads: Vec<Vec<f32>> = (s.layers.iter().enumerate())
            .map(|(i, l)| random(l.size(), 50 + i as u64).iter().map(|x| x * 1e-2).collect())
            .collect();
        let mut vecs = vec![0.0; s.vecs.len];
        for (l, g) in s.layers.iter().zip(&grads) {
            vecs[l.grad..l.grad + l.size()].copy_from_slice(g);
        }
        ctx.write(&s.vecs, &vecs);
        let mut ops = Vec::new();
        for l in &s.layers {
            ops.extend(s.solve_init(&ctx, &mm, l, cfg));
        }
        for _ in 0..cfg.max_iters {
            for l in &s.layers {
                ops.extend(s.solve_iteration(&ctx, &mm, l, cfg));
            }
        }
        for l in &s.layers {
            ops.extend(s.fallback(&ctx, l));
        }
        ctx.run(&ops.iter().collect::<Vec<_>>());
        let (got, sc) = (read(&ctx, &s.vecs), read(&ctx, &s.sc));
        let (mut ex, mut er, mut outcomes) = (0.0f32, 0.0f64, Vec::new());
        for ((l, (a, g)), grad) in s.layers.iter().zip(&factors).zip(&grads) {
            let ops =
                Operands { dout: l.dout, din1: l.din1(), n: 0, a_factor: a, g_factor: g, a_batch: &[], g_batch: &[] };
            let mut scratch = Scratch::new(0, l.dout, l.din1());
            let mut x = vec![0.0; l.size()];
            let lambda = cfg.damping;
            let out = cg::solve(
                |v, o| kronecker::apply(Product::Factors, o, v, &ops, lambda, &mut scratch),
                grad,
                &mut x,
                cfg.max_iters,
                cfg.tol as f64,
                &mut CgWork::new(l.size()),
            );
            if out.diverged {
                x.copy_from_slice(grad);
            }
            eprintln!("{}: cpu {out:?}, gpu iterations {} rel {}", l.name, sc[l.slot + ITERS], sc[l.slot + REL]);
            assert_eq!(sc[l.slot + ITERS] as usize, out.iterations, "{}: iterations", l.name);
            assert_eq!(sc[l.slot + STATUS] == DIVERGED, out.diverged, "{}: divergence", l.name);
            assert_eq!(sc[l.slot + FELL] != 0.0, out.diverged, "{}: fallback", l.name);
            ex = ex.max(max_err(&got[l.x..l.x + l.size()], &x));
            if !out.diverged {
                er = er.max((sc[l.slot + REL] as f64 - out.rel_residual).abs() / out.rel_residual);
            }
            outcomes.push(out);
        }
        (ex, er, outcomes)
    }

    #[test]
    fn gpu_cg_matches_cpu_solve() {
        let mut cfg = SecondOrderConfig::new(Method::CgFac);
        // The defaults (tolerance 1e-2, up to 10 iterations) and a tight tolerance that runs to the cap.
        for (tol, iters) in [(cfg.tol, cfg.max_iters), (1e-8, 6)] {
            (cfg.tol, cfg.max_iters) = (tol, iters);
            let (ex, er, outcomes) = solve_against_cpu(&cfg);
            eprintln!("cg tol {tol} max {iters}: x error {ex:e}, residual rel {er:e}");
            assert!(outcomes.iter().all(|o| !o.diverged && o.iterations > 0));
            assert!(ex < 1e-4 && er < 1e-3, "x {ex}, residual {er}");
        }
    }

    #[test]
    fn negative_curvature_falls_back_to_the_gradient() {
        let mut cfg = SecondOrderConfig::new(Method::CgFac);
        // A damping far below the factors' scale makes p^T (A ⊗ G + lambda I) p negative.
        cfg.damping = -10.0;
        let (ex, _, outcomes) = solve_against_cpu(&cfg);
        assert!(outcomes.iter().all(|o| o.diverged), "{outcomes:?}");
        assert_eq!(ex, 0.0, "x is the gradient, exactly");
    }
}
