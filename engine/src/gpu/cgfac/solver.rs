//! The packed CG-FAC tensors of a list of layers and the kernels over them: the Kronecker products
//! (with factors or matrix-free), the batch and factor updates, and CG's start, iteration,
//! fallback, KL clip and update, each recorded as ops that never read a scalar back.

use super::super::matmul::{Dims, Matmul, View};
use super::super::{f, grid_1d, Access, GpuContext, Kernel, Op, Result, Tensor};
use super::layout::*;
use crate::optim::kronecker::Product;
use crate::optim::second_order::SecondOrderConfig;

pub struct Solver {
    pub(super) kernel: Kernel,
    pub product: Product,
    pub layers: Vec<Layer>,
    /// Present for the matrix-free products.
    pub batch: Option<Batch>,
    pub factors: Tensor,
    pub vecs: Tensor,
    pub sc: Tensor,
    /// G X (factors) or g^T g X (matrix-free), for the largest layer.
    pub(super) scratch: Tensor,
    /// The squared gradient norm (for the clip in `gather`).
    pub(super) norm: Tensor,
    /// Bound as `ext` by the kernels that use no outside tensor.
    pub(super) idle: Tensor,
}

impl Solver {
    /// `shapes`: (name, din, dout, W offset, bias offset) per layer; `tokens`: the batch's N (the
    /// matrix-free products store that many rows per layer), `scored`: its M scored tokens.
    pub fn new(
        ctx: &GpuContext,
        shapes: &[(String, usize, usize, usize, usize)],
        norm: &Tensor,
        product: Product,
        tokens: usize,
        scored: usize,
    ) -> Result<Self> {
        use Access::*;
        let src = super::super::with_reductions(&(wgsl_constants() + include_str!("../kernels/cgfac.wgsl")));
        let entries: Vec<&str> = Entry::ALL.iter().map(|e| e.name()).collect();
        let kernel = Kernel::new(ctx, "cgfac", &src, &[ReadWrite, ReadWrite, ReadWrite, Read], &entries);
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
                m: scored,
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

    pub(super) fn partials(&self) -> usize {
        GLOBALS + STRIDE * self.layers.len()
    }

    /// An op on `vecs` (or `target` in its place) with `ext` bound to `ext`.
    pub(super) fn op(
        &self,
        ctx: &GpuContext,
        entry: Entry,
        target: &Tensor,
        ext: &Tensor,
        w: Words,
        grid: [u32; 3],
    ) -> Op {
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
        self.kernel.op(ctx, entry as usize, &[target, &self.sc, ext, &self.norm], &words, grid)
    }

    pub(super) fn vector(&self, ctx: &GpuContext, entry: Entry, w: Words) -> Op {
        self.op(ctx, entry, &self.vecs, &self.idle, w, grid_1d(w.n))
    }

    pub(super) fn scalar(&self, ctx: &GpuContext, entry: Entry, w: Words) -> Op {
        self.op(ctx, entry, &self.vecs, &self.idle, w, [1, 1, 1])
    }

    /// `sc[slot] = <vecs[x..x+n], vecs[y..y+n]>` in two passes.
    pub(super) fn dot(&self, ctx: &GpuContext, x: usize, y: usize, n: usize, slot: usize) -> [Op; 2] {
        let groups = n.div_ceil(256).clamp(1, PARTIALS);
        let c = self.partials();
        let first = Words { n, a: x, b: y, c, rows: groups, ..Words::default() };
        [
            self.op(ctx, Entry::DotPartial, &self.vecs, &self.idle, first, [groups as u32, 1, 1]),
            self.op(
                ctx,
                Entry::DotFinal,
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
        let mut ops = vec![self.vector(ctx, Entry::Copy, Words { n: l.size(), a: from, b: to, ..Words::default() })];
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
        let (n, m, i) = (b.n, b.m, l.index);
        let (a, g) = ((&b.a[i], View::rows(0, d)), (&b.g[i], View::rows(0, o)));
        let gt = (&b.g[i], View::rows(0, o).t());
        let nd = (&b.nd, View::rows(0, d));
        // P = g X (n, din1), the first of the thin products (each n * dout * din1).
        ops.push(mm.op(ctx, Dims::new(n, d, o), 1.0, g, x, 0.0, nd));
        match self.product {
            Product::MatrixFree => {
                // g^T P (dout, din1), then (.) a~^T (dout, n), then (1/(m n)) (.) a~ onto lambda X.
                let od = (&self.scratch, View::rows(0, d));
                let on = (&b.on, View::rows(0, n));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0, gt, nd, 0.0, od));
                ops.push(mm.op(ctx, Dims::new(o, n, d), 1.0, od, (&b.a[i], View::rows(0, d).t()), 0.0, on));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0 / (m * n) as f32, on, a, lambda, out));
            }
            Product::ExactFisher => {
                // s_n = <P_n, a~_n> / m and P_n = s_n a~_n in place, then g^T P onto lambda X.
                let w = Words { rows: n, cols: d, f: [1.0 / m as f32, 0.0, 0.0, 0.0], ..Words::default() };
                ops.push(self.op(ctx, Entry::FisherRows, &b.nd, &b.a[i], w, [n.clamp(1, ROW_GROUPS) as u32, 1, 1]));
                ops.push(mm.op(ctx, Dims::new(o, d, n), 1.0, gt, nd, lambda, out));
            }
            Product::Factors => unreachable!("the factors product keeps no batch"),
        }
        ops
    }

    /// Stores layer `l`'s batch for the matrix-free products from its input rows `inp` (n, din)
    /// and the mean loss's gradient at its output `dy` (n, dout): a~ = [a, 1] and g = m dy (m scored
    /// tokens), as `curvature::fold_bias` and `curvature::per_token`. Empty for `Factors`.
    pub fn batch_ops(&self, ctx: &GpuContext, l: &Layer, inp: &Tensor, dy: &Tensor) -> Vec<Op> {
        let Some(b) = &self.batch else { return Vec::new() };
        let (n, i) = (b.n, l.index);
        let fold = Words { n: n * l.din1(), cols: l.din1(), ..Words::default() };
        let scale = Words { n: n * l.dout, f: [b.m as f32, 0.0, 0.0, 0.0], ..Words::default() };
        vec![
            self.op(ctx, Entry::Fold, &b.a[i], inp, fold, grid_1d(fold.n)),
            self.op(ctx, Entry::ScaleCopy, &b.g[i], dy, scale, grid_1d(scale.n)),
        ]
    }

    /// The factor updates of layer `l` from its input rows `inp` (n, din) and the mean loss's
    /// gradient at its output `dy` (n, dout), blending with weight `keep` as `second_order`:
    /// `A <- keep A + (1 - keep) a~^T a~ / n`, `G <- keep G + (1 - keep) m dy^T dy` (= g^T g / m with
    /// the per-token g = m dy, m scored tokens).
    #[allow(clippy::too_many_arguments)]
    pub fn factor_ops(
        &self,
        ctx: &GpuContext,
        mm: &Matmul,
        l: &Layer,
        inp: &Tensor,
        dy: &Tensor,
        (n, m): (usize, usize),
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
            self.op(ctx, Entry::AEdge, &self.factors, inp, edge, grid_1d(din + 1)),
            mm.op(
                ctx,
                Dims::new(dout, dout, n),
                (1.0 - keep) * m as f32,
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
        self.op(ctx, Entry::Gather, &self.vecs, grads, w, grid_1d(l.size()))
    }

    /// CG's start on `(A ⊗ G + lambda I) x = grad`: x zeroed unless warm, r = p = grad - A x, and
    /// the first stopping test.
    pub fn solve_init(&self, ctx: &GpuContext, mm: &Matmul, l: &Layer, cfg: &SecondOrderConfig) -> Vec<Op> {
        let n = l.size();
        let mut ops = Vec::new();
        if !cfg.warm_start {
            ops.push(self.vector(ctx, Entry::FillZero, Words { n, a: l.x, ..Words::default() }));
        }
        ops.extend(self.product(ctx, mm, l, l.x, l.ap, cfg.damping));
        ops.push(self.vector(
            ctx,
            Entry::Residual,
            Words { n, a: l.grad, b: l.ap, c: l.r, d: l.p, ..Words::default() },
        ));
        ops.extend(self.dot(ctx, l.grad, l.grad, n, l.slot + R0));
        ops.extend(self.dot(ctx, l.r, l.r, n, l.slot + RR));
        ops.push(self.scalar(
            ctx,
            Entry::Start,
            Words { slot: l.slot, f: [cfg.tol, 0.0, 0.0, 0.0], ..Words::default() },
        ));
        ops
    }

    /// One CG iteration, a no-op for a layer that has converged or diverged.
    pub fn solve_iteration(&self, ctx: &GpuContext, mm: &Matmul, l: &Layer, cfg: &SecondOrderConfig) -> Vec<Op> {
        let (n, slot) = (l.size(), l.slot);
        let stop = [cfg.tol, cfg.max_iters as f32, 0.0, 0.0];
        let mut ops = Vec::new();
        ops.extend(self.product(ctx, mm, l, l.p, l.ap, cfg.damping));
        ops.extend(self.dot(ctx, l.p, l.ap, n, slot + DOT));
        ops.push(self.scalar(ctx, Entry::Alpha, Words { slot, ..Words::default() }));
        ops.push(self.vector(
            ctx,
            Entry::UpdateXr,
            Words { n, a: l.x, b: l.p, c: l.r, d: l.ap, slot, ..Words::default() },
        ));
        ops.extend(self.dot(ctx, l.r, l.r, n, slot + DOT));
        ops.push(self.scalar(ctx, Entry::Beta, Words { slot, f: stop, ..Words::default() }));
        ops.push(self.vector(ctx, Entry::UpdateP, Words { n, a: l.p, b: l.r, slot, ..Words::default() }));
        ops
    }

    /// A diverged solve or a non-finite x falls back to the gradient; then `<x, grad>`.
    pub fn fallback(&self, ctx: &GpuContext, l: &Layer) -> Vec<Op> {
        let (n, slot) = (l.size(), l.slot);
        let mut ops = Vec::new();
        ops.extend(self.dot(ctx, l.x, l.x, n, slot + DOT));
        ops.push(self.scalar(ctx, Entry::FallbackFlag, Words { slot, ..Words::default() }));
        ops.push(self.vector(ctx, Entry::Fallback, Words { n, a: l.x, b: l.grad, slot, ..Words::default() }));
        ops.extend(self.dot(ctx, l.x, l.grad, n, slot + XDOTG));
        ops
    }

    /// The KL-clip scale over all layers (kappa 0: off).
    pub(super) fn kl(&self, ctx: &GpuContext, kappa: f32) -> Op {
        let w =
            Words { n: self.layers.len(), slot: GLOBALS, cols: STRIDE, f: [kappa, 0.0, 0.0, 0.0], ..Words::default() };
        self.scalar(ctx, Entry::Kl, w)
    }

    /// Momentum and the KL-clipped step of layer `l`'s W and bias.
    pub(super) fn update(&self, ctx: &GpuContext, l: &Layer, params: &Tensor, momentum: f32, weight_decay: f32) -> Op {
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
        self.op(ctx, Entry::Update, &self.vecs, params, w, grid_1d(l.size()))
    }
}
