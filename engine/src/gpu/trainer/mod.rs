//! The whole training step on the GPU: forward, backward, gradient clip and AdamW, SGD or CG-FAC, mirroring
//! `crate::train::Trainer` with the model of `crate::model` (same data, same initialisation, same
//! flat parameter layout). Parameters, activations, gradients and optimizer state stay on the GPU,
//! and a step reads nothing back: it appends its loss, squared gradient norm (and CG-FAC's
//! scalars) to a ring of [`READ_EVERY`] records on the GPU, which [`GpuTrainer::flush`] reads in one
//! go. A non-finite gradient skips the update on the device (every update kernel checks), so the
//! host learns of it at the next read without having waited for each step. An evaluation reads
//! only its loss.
//! [`GpuTrainer::snapshot`] and [`GpuTrainer::restore`] move the whole state (weights, optimizer
//! state, step) to and from the CPU's `Snapshot`, so either backend can continue the other's run.
//!
//! The step is a fixed list of ops built once; only the token batch and the step values
//! (learning rate, bias corrections) are written before each submission.

use std::collections::HashMap;

use super::activation::Act;
use super::adamw::{self, decay_mask, step_values, AdamW, Hyper};
use super::cgfac::CgFac;
use super::cross_entropy::{Buffers, CrossEntropy};
use super::elementwise::{Elementwise, REDUCE_GROUPS};
use super::embedding::{Embedding, Table};
use super::layer_norm::{Affine, LayerNorm};
use super::matmul::{Dims, Matmul, View, Zeros};
use super::muon::GpuMuon;
use super::sgd::{self, Sgd};
use super::softmax::Softmax;
use super::{GpuContext, GpuError, Op, Result, Tensor};
use crate::checkpoint::Snapshot;
use crate::config::{Fisher, ModelConfig, OptimizerConfig, TrainConfig};
use crate::data::{Dataset, Split};
use crate::error::Error;
use crate::model::architecture::{Layer, LinearId, LinearSpec, Norm, Slot, BLOCK};
use crate::model::{check_batch, Model};
use crate::nn::loss;
use crate::optim::second_order::Diagnostics;
use crate::train::{Reported, StepReport};

/// Steps whose records wait on the GPU before [`GpuTrainer::step`] reads them in one readback.
pub const READ_EVERY: usize = 10;

/// A submitted step whose record is still on the GPU.
struct Pending {
    /// Steps completed before it.
    step: usize,
    lr: f32,
    /// The optimizer's update counters before it (see `Update::counters`).
    counters: [u64; 2],
}

/// The kernel families, each with its pipelines built once.
struct Kernels {
    mm: Matmul,
    ew: Elementwise,
    ln: LayerNorm,
    act: Act,
    sm: Softmax,
    ce: CrossEntropy,
    emb: Embedding,
    adam: AdamW,
    sgd: Sgd,
}

/// What one block keeps from its forward pass (the CPU's `BlockCache`): the rows of each of
/// `Slot::KEPT`, both LayerNorms' centred rows and 1/std, and the attention matrices.
struct Block {
    kept: Vec<Tensor>,
    norms: [(Tensor, Tensor); 2],
    att: Tensor,
}

impl Block {
    /// Slot `s` of block `i`, whose input and output are `resid[i]` and `resid[i + 1]`.
    fn slot<'a>(&'a self, resid: &'a [Tensor], i: usize, s: Slot) -> &'a Tensor {
        match s {
            Slot::X => &resid[i],
            Slot::Next => &resid[i + 1],
            _ => &self.kept[Slot::KEPT.iter().position(|&k| k == s).expect("a kept slot")],
        }
    }
    fn norm(&self, n: Norm) -> (&Tensor, &Tensor) {
        let (u, rstd) = &self.norms[n as usize];
        (u, rstd)
    }
}

/// Backward scratch shared by all blocks (the CPU's `Grads` work buffers).
struct Scratch {
    dlogits: Tensor,
    dresid: Tensor,
    dln: Tensor,
    dattn_y: Tensor,
    dfc_act: Tensor,
    d_fc: Tensor,
    datt: Tensor,
    dq: Tensor,
    dk: Tensor,
    dv: Tensor,
}

impl Scratch {
    /// Where the gradient with respect to slot `s` is kept. The residual stream's is one buffer
    /// (`dresid`) that the LayerNorms' backward passes add into: that is the residual's backward.
    fn grad(&self, s: Slot) -> &Tensor {
        match s {
            Slot::X | Slot::H | Slot::Next => &self.dresid,
            Slot::Ln1Out | Slot::Ln2Out => &self.dln,
            Slot::Q => &self.dq,
            Slot::K => &self.dk,
            Slot::V => &self.dv,
            Slot::AttnY => &self.dattn_y,
            Slot::FcPre => &self.d_fc,
            Slot::FcAct => &self.dfc_act,
        }
    }
}

/// The optimizer's state on the GPU, named as the CPU's `Optimizer::state` names it.
enum Update {
    Adam {
        beta1: f32,
        beta2: f32,
        m: Tensor,
        v: Tensor,
        /// Updates taken so far (for bias correction), as `optim::adam::Adam::t`.
        t: u64,
    },
    Sgd {
        velocity: Tensor,
    },
    CgFac(Box<CgFac>),
    Muon(Box<GpuMuon>),
}

pub struct GpuTrainer {
    ctx: GpuContext,
    cfg: TrainConfig,
    data: Dataset,
    update: Update,
    tokens: Vec<u32>,
    targets: Vec<u32>,
    step: usize,
    g_tokens: Tensor,
    g_targets: Tensor,
    params: Tensor,
    grads: Tensor,
    scratch_resid: Tensor,
    step_values: Tensor,
    ops: Vec<Op>,
    /// `ops[..forward]` is the forward pass up to the mean loss in `stats[0]`.
    forward: usize,
    /// Adds `stats[0]` into `eval_sum[0]`, after each validation batch's forward pass.
    eval_add: Op,
    eval_sum: Tensor,
    /// `READ_EVERY` step records of `record_len` values: loss, squared gradient norm, CG-FAC's
    /// scalars. Cleared before the first step of each round; `record_ops[i]` adds step `i`'s.
    ring: Tensor,
    record_len: usize,
    record_ops: Vec<Vec<Op>>,
    pending: Vec<Pending>,
}

impl Update {
    /// The update counters the host keeps (bias corrections, refresh schedule): AdamW's t, Muon's
    /// AdamW t, CG-FAC's second-order t and AdamW t.
    fn counters(&self) -> [u64; 2] {
        match self {
            Update::Adam { t, .. } => [*t, 0],
            Update::Muon(mu) => [mu.adam_t, 0],
            Update::CgFac(cg) => cg.counters(),
            Update::Sgd { .. } => [0, 0],
        }
    }
    fn set_counters(&mut self, c: [u64; 2]) {
        match self {
            Update::Adam { t, .. } => *t = c[0],
            Update::Muon(mu) => mu.adam_t = c[0],
            Update::CgFac(cg) => cg.set_counters(c),
            Update::Sgd { .. } => {}
        }
    }
}

/// `y = x W^T + b` (W stored (out, in) at `w` in the parameters, b at `b`), as `crate::nn::linear`.
struct Linear {
    w: usize,
    b: usize,
    din: usize,
    dout: usize,
}

impl GpuTrainer {
    /// The GPU twin of `Trainer::new`: same data set, vocabulary and initial weights. AdamW, SGD
    /// and CG-FAC (any of its three curvature products) run on the GPU; K-FAC is a configuration
    /// error.
    pub fn new(ctx: GpuContext, mut cfg: TrainConfig) -> Result<Self> {
        let data = Dataset::new(&cfg.data, cfg.model.context, cfg.seed)?;
        cfg.model.vocab = data.vocab_size();
        cfg.validate()?;
        let weight_decay = match cfg.optimizer {
            OptimizerConfig::Adam { weight_decay, .. } | OptimizerConfig::Sgd { weight_decay, .. } => weight_decay,
            OptimizerConfig::CgFac(ref c) => c.weight_decay,
            OptimizerConfig::Muon(ref c) => c.weight_decay,
            _ => {
                let msg = format!(
                    "the GPU trainer runs AdamW, SGD, Muon and CG-FAC, not {} (K-FAC and SOAP run on the CPU); use \
                     --optimizer adam, sgd, muon or cgfac, or --backend cpu",
                    cfg.optimizer.name()
                );
                return Err(Error::Config(msg).into());
            }
        };
        if cfg.optimizer.second_order().is_some_and(|so| so.fisher == Fisher::Sampled) {
            let msg = "the sampled Fisher (labels drawn from the model) runs on the CPU; use --fisher empirical or \
                       --backend cpu";
            return Err(Error::Config(msg.into()).into());
        }
        let model = Model::<f32>::new(cfg.model.clone())?;
        let k = Kernels {
            mm: Matmul::new(&ctx),
            ew: Elementwise::new(&ctx),
            ln: LayerNorm::new(&ctx),
            act: Act::new(&ctx),
            sm: Softmax::new(&ctx),
            ce: CrossEntropy::new(&ctx),
            emb: Embedding::new(&ctx),
            adam: AdamW::new(&ctx),
            sgd: Sgd::new(&ctx),
        };
        let m = &cfg.model;
        let (b, t, c, f, v, nh) = (cfg.batch, m.context, m.d_model, m.d_ff, m.vocab, m.heads);
        let n = b * t;
        let z = |name: &str, len: usize| ctx.tensor(name, len);
        let params = ctx.tensor_from("params", &model.params)?;
        let grads = z("grads", model.layout.total)?;
        let resid = (0..=m.layers).map(|_| z("resid", n * c)).collect::<Result<Vec<_>>>()?;
        let blocks = (0..m.layers)
            .map(|_| {
                let kept = Slot::KEPT.iter().map(|&k| z("block_slot", n * k.width(m))).collect::<Result<Vec<_>>>()?;
                let norm = || Ok::<_, GpuError>((z("ln_u", n * c)?, z("ln_rstd", n)?));
                Ok(Block { kept, norms: [norm()?, norm()?], att: z("att", b * nh * t * t)? })
            })
            .collect::<Result<Vec<_>>>()?;
        let s = Scratch {
            dlogits: z("dlogits", n * v)?,
            dresid: z("dresid", n * c)?,
            dln: z("dln", n * c)?,
            dattn_y: z("dattn_y", n * c)?,
            dfc_act: z("dfc_act", n * f)?,
            d_fc: z("d_fc", n * f)?,
            datt: z("datt", b * nh * t * t)?,
            dq: z("dq", n * c)?,
            dk: z("dk", n * c)?,
            dv: z("dv", n * c)?,
        };
        let g_tokens = z("tokens", n)?;
        let g_targets = z("targets", n)?;
        let (lnf_u, lnf_rstd, lnf_out) = (z("lnf_u", n * c)?, z("lnf_rstd", n)?, z("lnf_out", n * c)?);
        let (probs, ce_rows, stats) = (z("probs", n * v)?, z("ce_rows", 2 * n)?, z("stats", 2)?);
        let eval_sum = z("eval_sum", 1)?;
        let decay = ctx.tensor_from("decay", &decay_mask(&model.layout, weight_decay))?;
        let (partials, sum_sq, step_vals) = (z("partials", REDUCE_GROUPS)?, z("sum_sq", 1)?, z("step", 3)?);
        // CG-FAC's factors are normalised by the scored tokens, a constant of the recorded ops:
        // counted on the first batch, and every later batch is checked to have as many.
        let (mut tok, mut tgt) = (vec![0; n], vec![0; n]);
        data.batch(Split::Train, 0, &mut tok, &mut tgt);
        let scored = loss::scored(&tgt);
        let mut cg = match &cfg.optimizer {
            OptimizerConfig::CgFac(c) => Some(CgFac::new(&ctx, c.clone(), &model, n, scored, &sum_sq)?),
            _ => None,
        };

        let l = &model.layout;
        let off = |id: usize| l.tensors[id].offset;
        let lin = |id: LinearId| {
            let spec = LinearSpec::of(l, id);
            Linear { w: off(spec.w), b: off(spec.b), din: spec.din, dout: spec.dout }
        };
        let ctx_ref = &ctx;
        let mut ops = Vec::new();
        let linear_fwd = |ops: &mut Vec<Op>, out: &Tensor, inp: &Tensor, p: &Linear| {
            ops.push(k.ew.broadcast_rows(ctx_ref, (&params, p.b), out, n, p.dout));
            let d = Dims::new(n, p.dout, p.din);
            let w_t = View::rows(p.w, p.din).t();
            ops.push(k.mm.op(
                ctx_ref,
                d,
                1.0,
                (inp, View::rows(0, p.din)),
                (&params, w_t),
                1.0,
                (out, View::rows(0, p.dout)),
            ));
        };
        // dinp = dy W (set, or added to when `accumulate`), dW += dy^T inp, db += column sums of dy.
        let linear_bwd = |ops: &mut Vec<Op>, dinp: &Tensor, accumulate: bool, dy: &Tensor, inp: &Tensor, p: &Linear| {
            let (dy_v, in_v) = (View::rows(0, p.dout), View::rows(0, p.din));
            let beta = if accumulate { 1.0 } else { 0.0 };
            let d = Dims::new(n, p.din, p.dout);
            ops.push(k.mm.op(ctx_ref, d, 1.0, (dy, dy_v), (&params, View::rows(p.w, p.din)), beta, (dinp, in_v)));
            let d = Dims::new(p.dout, p.din, n);
            ops.push(k.mm.op(ctx_ref, d, 1.0, (dy, dy_v.t()), (inp, in_v), 1.0, (&grads, View::rows(p.w, p.din))));
            ops.push(k.ew.col_sum(ctx_ref, dy, (&grads, p.b), n, p.dout));
        };
        let affine = |w: usize, bias: usize| Affine { w_off: off(w), b_off: off(bias) };
        let tab = Table { v, t, c, wte_off: off(l.wte), wpe_off: off(l.wpe) };
        // Attention views: head h of batch row b in a (B, T, C) buffer, and its (T, T) matrix.
        let hs = m.head_size();
        let head = View::strided(0, c).batched(t * c, hs);
        let attv = View::rows(0, t).batched(nh * t * t, t * t);
        let scale = 1.0 / (hs as f32).sqrt();
        let d_scores = Dims::new(t, t, hs).batched(b, nh);
        let d_heads = Dims::new(t, hs, t).batched(b, nh);
        // Causal attention skips the tiles of the masked triangle, as the CPU does.
        let skip = |d: Dims, zeros| if m.causal { d.skipping(zeros) } else { d };
        let (scores, p_times, pt_times) = (
            skip(d_scores, Zeros::AboveDiagonalOfC),
            skip(d_heads, Zeros::AboveDiagonalOfA),
            skip(d_heads, Zeros::BelowDiagonalOfA),
        );

        // Forward: each block walks `architecture::BLOCK` top to bottom.
        ops.push(k.emb.forward(&ctx, &resid[0], &g_tokens, &params, tab, n));
        for (i, (ids, bk)) in l.blocks.iter().zip(&blocks).enumerate() {
            let slot = |s: Slot| bk.slot(&resid, i, s);
            for layer in BLOCK {
                match layer {
                    Layer::Norm(nm) => {
                        let ((u, rstd), (w, bias)) = (bk.norm(nm), ids.norm(nm));
                        let (out, inp) = (slot(nm.output()), slot(nm.input()));
                        ops.push(k.ln.forward(&ctx, out, u, rstd, inp, &params, &grads, affine(w, bias), n, c));
                    }
                    Layer::Linear(r) => {
                        linear_fwd(&mut ops, slot(r.output()), slot(r.input()), &lin(LinearId::Block(i, r)))
                    }
                    Layer::Attention => {
                        let (q, kk, vv, y) = (slot(Slot::Q), slot(Slot::K), slot(Slot::V), slot(Slot::AttnY));
                        ops.push(k.mm.op(&ctx, scores, scale, (q, head), (kk, head.t()), 0.0, (&bk.att, attv)));
                        ops.push(k.sm.forward(&ctx, &bk.att, b * nh * t, t, m.causal));
                        ops.push(k.mm.op(&ctx, p_times, 1.0, (&bk.att, attv), (vv, head), 0.0, (y, head)));
                    }
                    Layer::Residual { into, from } => {
                        ops.push(k.ew.add(&ctx, (slot(from), 0), (slot(into), 0), n * into.width(m)))
                    }
                    Layer::Activation => {
                        ops.push(k.act.forward(&ctx, m.activation, slot(Slot::FcAct), slot(Slot::FcPre)))
                    }
                }
            }
        }
        let af = affine(l.lnf_w, l.lnf_b);
        ops.push(k.ln.forward(&ctx, &lnf_out, &lnf_u, &lnf_rstd, &resid[m.layers], &params, &grads, af, n, c));
        let head_lin = lin(LinearId::Head);
        linear_fwd(&mut ops, &probs, &lnf_out, &head_lin);
        let ce = Buffers { probs: &probs, targets: &g_targets, rows: &ce_rows, stats: &stats, dlogits: &s.dlogits };
        ops.extend(k.ce.forward(&ctx, &ce, n, v));
        let forward = ops.len();
        let eval_add = k.ew.add(&ctx, (&stats, 0), (&eval_sum, 0), 1);

        // CG-FAC's factor updates of a linear layer go right after its backward, while its output
        // gradient is still in the scratch buffer that the next block reuses.
        let mut track = |at: usize, id: LinearId, inp: &Tensor, dy: &Tensor| {
            if let Some(cg) = cg.as_mut() {
                cg.track(ctx_ref, &k.mm, at, id, inp, dy);
            }
        };

        // Backward, each block walking `BLOCK` bottom to top; `grads` and `dresid` are zeroed at the
        // start of every submission.
        ops.push(k.ce.backward(&ctx, &ce, n, v));
        linear_bwd(&mut ops, &s.dln, false, &s.dlogits, &lnf_out, &head_lin);
        track(ops.len(), LinearId::Head, &lnf_out, &s.dlogits);
        ops.extend(k.ln.backward(&ctx, &s.dresid, &grads, &s.dln, &lnf_u, &lnf_rstd, &params, af, n, c));
        for (i, (ids, bk)) in l.blocks.iter().zip(&blocks).enumerate().rev() {
            let slot = |x: Slot| bk.slot(&resid, i, x);
            // Slots whose gradient this block has set: a second consumer (K and Q after V) adds.
            let mut set: Vec<Slot> = Vec::new();
            for layer in BLOCK.into_iter().rev() {
                match layer {
                    Layer::Residual { .. } => {}
                    Layer::Linear(r) => {
                        let (id, inp, dy) = (LinearId::Block(i, r), r.input(), s.grad(r.output()));
                        linear_bwd(&mut ops, s.grad(inp), set.contains(&inp), dy, slot(inp), &lin(id));
                        set.push(inp);
                        track(ops.len(), id, slot(inp), dy);
                    }
                    Layer::Attention => {
                        let (q, kk, vv, dy) = (slot(Slot::Q), slot(Slot::K), slot(Slot::V), s.grad(Slot::AttnY));
                        let (dq, dk, dv) = (s.grad(Slot::Q), s.grad(Slot::K), s.grad(Slot::V));
                        ops.push(k.mm.op(&ctx, pt_times, 1.0, (&bk.att, attv.t()), (dy, head), 0.0, (dv, head)));
                        ops.push(k.mm.op(&ctx, scores, 1.0, (dy, head), (vv, head.t()), 0.0, (&s.datt, attv)));
                        ops.push(k.sm.backward(&ctx, &s.datt, &bk.att, b * nh * t, t));
                        ops.push(k.mm.op(&ctx, p_times, scale, (&s.datt, attv), (kk, head), 0.0, (dq, head)));
                        ops.push(k.mm.op(&ctx, pt_times, scale, (&s.datt, attv.t()), (q, head), 0.0, (dk, head)));
                    }
                    Layer::Activation => {
                        let (d_pre, d_act) = (s.grad(Slot::FcPre), s.grad(Slot::FcAct));
                        ops.push(k.act.backward(&ctx, m.activation, d_pre, d_act, slot(Slot::FcPre)));
                    }
                    Layer::Norm(nm) => {
                        let ((u, rstd), (w, bias)) = (bk.norm(nm), ids.norm(nm));
                        let (dx, dy) = (s.grad(nm.input()), s.grad(nm.output()));
                        ops.extend(k.ln.backward(&ctx, dx, &grads, dy, u, rstd, &params, affine(w, bias), n, c));
                    }
                }
            }
        }
        ops.push(k.emb.backward(&ctx, &grads, &s.dresid, &g_tokens, tab, n));

        // Clip and update.
        ops.extend(k.ew.sum(&ctx, &grads, l.total, true, &partials, &sum_sq));
        let update = match cfg.optimizer {
            OptimizerConfig::Adam { beta1, beta2, eps, .. } => {
                let (m, v) = (z("adam_m", l.total)?, z("adam_v", l.total)?);
                let state = adamw::State {
                    params: &params,
                    grads: &grads,
                    m: &m,
                    v: &v,
                    decay: &decay,
                    sum_sq: &sum_sq,
                    step: &step_vals,
                };
                ops.push(k.adam.op(&ctx, &state, Hyper { beta1, beta2, eps, max_norm: cfg.clip }));
                Update::Adam { beta1, beta2, m, v, t: 0 }
            }
            OptimizerConfig::Sgd { momentum, .. } => {
                let velocity = z("sgd_velocity", l.total)?;
                let state = sgd::State {
                    params: &params,
                    grads: &grads,
                    velocity: &velocity,
                    decay: &decay,
                    sum_sq: &sum_sq,
                    step: &step_vals,
                };
                ops.push(k.sgd.op(&ctx, &state, momentum, cfg.clip));
                Update::Sgd { velocity }
            }
            OptimizerConfig::CgFac(_) => {
                let mut cg = cg.expect("built for CG-FAC above");
                cg.build(&ctx, &k.mm, &k.adam, &model, &params, &grads, &decay, &sum_sq, cfg.clip);
                Update::CgFac(Box::new(cg))
            }
            OptimizerConfig::Muon(ref c) => {
                let kernels = (&k.mm, &k.ew, &k.adam);
                let (mu, update) =
                    GpuMuon::new(&ctx, c.clone(), &model, kernels, &params, &grads, &decay, &sum_sq, cfg.clip)?;
                ops.extend(update);
                Update::Muon(Box::new(mu))
            }
            OptimizerConfig::Kfac(_) | OptimizerConfig::Soap(_) => unreachable!("rejected above"),
        };
        let scalars = match &update {
            Update::CgFac(cg) => Some(cg.scalars()),
            _ => None,
        };
        let record_len = 2 + scalars.map_or(0, |(_, len)| len);
        let ring = z("step_records", READ_EVERY * record_len)?;
        let record_ops = (0..READ_EVERY)
            .map(|i| {
                let at = i * record_len;
                // Added into the cleared ring: a copy that keeps NaN and infinity as they are.
                let mut rec =
                    vec![k.ew.add(&ctx, (&stats, 0), (&ring, at), 1), k.ew.add(&ctx, (&sum_sq, 0), (&ring, at + 1), 1)];
                if let Some((sc, len)) = scalars {
                    rec.push(k.ew.add(&ctx, (sc, 0), (&ring, at + 2), len));
                }
                rec
            })
            .collect();

        Ok(GpuTrainer {
            ctx,
            data,
            update,
            tokens: vec![0; n],
            targets: vec![0; n],
            step: 0,
            g_tokens,
            g_targets,
            params,
            grads,
            scratch_resid: s.dresid,
            step_values: step_vals,
            ops,
            forward,
            eval_add,
            eval_sum,
            ring,
            record_len,
            record_ops,
            pending: Vec::new(),
            cfg,
        })
    }

    /// A GPU trainer that continues exactly where `snap` stopped (a CPU checkpoint, or a GPU
    /// [`snapshot`](Self::snapshot)): weights, optimizer state and step are uploaded.
    pub fn restore(ctx: GpuContext, snap: Snapshot) -> Result<Self> {
        let mut t = GpuTrainer::new(ctx, snap.config)?;
        if snap.params.len() != t.params.len {
            return Err(Error::Checkpoint(format!(
                "checkpoint has {} parameters, its config needs {}",
                snap.params.len(),
                t.params.len
            ))
            .into());
        }
        let n = t.params.len;
        let mut state: HashMap<String, Vec<f32>> = snap.optimizer.into_iter().collect();
        let mut take = |name: &str, len: usize| -> Result<Vec<f32>> {
            let x =
                state.remove(name).ok_or_else(|| Error::Checkpoint(format!("optimizer state {name:?} is missing")))?;
            if x.len() != len {
                let msg = format!("optimizer state {name:?} has {} values, expected {len}", x.len());
                return Err(Error::Checkpoint(msg).into());
            }
            Ok(x)
        };
        match &mut t.update {
            Update::Adam { m, v, t: count, .. } => {
                t.ctx.write(m, &take("adam.m", n)?);
                t.ctx.write(v, &take("adam.v", n)?);
                *count = take("adam.t", 1)?[0] as u64;
            }
            Update::Sgd { velocity } => t.ctx.write(velocity, &take("sgd.momentum", n)?),
            Update::CgFac(cg) => cg.load_state(&t.ctx, &mut take)?,
            Update::Muon(mu) => mu.load_state(&t.ctx, &mut take)?,
        }
        t.ctx.write(&t.params, &snap.params);
        t.step = snap.step;
        Ok(t)
    }

    /// Everything a checkpoint holds, read back from the GPU: `Trainer::restore` continues from it
    /// on the CPU, `GpuTrainer::restore` on a GPU.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let optimizer = match &self.update {
            Update::Adam { m, v, t, .. } => vec![
                ("adam.m".into(), self.ctx.read_all(m).await?),
                ("adam.v".into(), self.ctx.read_all(v).await?),
                ("adam.t".into(), vec![*t as f32]),
            ],
            Update::Sgd { velocity } => vec![("sgd.momentum".into(), self.ctx.read_all(velocity).await?)],
            Update::CgFac(cg) => cg.state(&self.ctx).await?,
            Update::Muon(mu) => mu.state(&self.ctx).await?,
        };
        Ok(Snapshot { config: self.cfg.clone(), step: self.step, params: self.params().await?, optimizer })
    }

    /// One optimizer step on training batch number `step`, as `Trainer::step`, submitted without
    /// waiting for it. Every [`READ_EVERY`] steps the records are read back (see [`Self::flush`])
    /// and their reports pushed onto `out`.
    pub async fn step(&mut self, out: &mut Vec<Reported>) -> Result<()> {
        self.submit()?;
        if self.pending.len() == READ_EVERY {
            self.flush(out).await?;
        }
        Ok(())
    }

    /// One step whose report is read back at once: for callers that compare every step.
    pub async fn step_read(&mut self) -> Result<Reported> {
        self.submit()?;
        let mut out = Vec::new();
        self.flush(&mut out).await?;
        Ok(out.pop().expect("one step was pending"))
    }

    /// Steps submitted whose records have not been read.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn submit(&mut self) -> Result<()> {
        let step = self.step;
        self.data.batch(Split::Train, step as u64, &mut self.tokens, &mut self.targets);
        check_batch(self.tokens.len(), self.cfg.model.vocab, &self.tokens, &self.targets)?;
        if let Update::CgFac(cg) = &self.update {
            let scored = loss::scored(&self.targets);
            if scored != cg.scored {
                let msg = format!(
                    "CG-FAC on the GPU needs the same number of scored tokens in every batch: batch {step} has \
                     {scored}, the first had {}; use --backend cpu",
                    cg.scored
                );
                return Err(Error::Data(msg).into());
            }
        }
        let lr = self.cfg.schedule.lr(self.cfg.lr, step, self.cfg.steps);
        self.ctx.write(&self.g_tokens, &self.tokens);
        self.ctx.write(&self.g_targets, &self.targets);
        let (slot, counters) = (self.pending.len(), self.update.counters());
        let mut clear = vec![&self.grads, &self.scratch_resid];
        if slot == 0 {
            clear.push(&self.ring);
        }
        let record = &self.record_ops[slot];
        match &mut self.update {
            Update::CgFac(cg) => cg.submit(&self.ctx, &self.ops, &clear, lr, lr / self.cfg.lr, record),
            update => {
                let values = match update {
                    Update::Adam { beta1, beta2, t, .. } => {
                        *t += 1;
                        step_values(lr, *beta1, *beta2, *t)
                    }
                    Update::Muon(mu) => {
                        mu.write_step(&self.ctx, lr, lr / self.cfg.lr);
                        mu.adam_t += 1;
                        [lr, 0.0, 0.0]
                    }
                    _ => [lr, 0.0, 0.0],
                };
                self.ctx.write(&self.step_values, &values);
                let ops: Vec<&Op> = self.ops.iter().chain(record).collect();
                self.ctx.run_cleared(&clear, &ops);
            }
        }
        // Counted now; a step found non-finite when its record is read ends the run there.
        self.step += 1;
        self.pending.push(Pending { step, lr, counters });
        Ok(())
    }

    /// Reads the records of the steps submitted since the last read, in one readback, and pushes
    /// their reports onto `out`. The first non-finite one (loss, gradient, or a CG-FAC update) is
    /// `Error::NonFinite` with its step, and the step count goes back to it. The device skipped
    /// its update, so when it was the last step submitted (as with [`Self::step_read`]) the state
    /// is that of the last good step; steps submitted after it ran on, so then go on from a
    /// snapshot taken before it (as the session's runner does).
    pub async fn flush(&mut self, out: &mut Vec<Reported>) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let w = self.record_len;
        let records = self.ctx.read::<f32>(&self.ring, 0, self.pending.len() * w).await?;
        for (p, rec) in std::mem::take(&mut self.pending).into_iter().zip(records.chunks(w)) {
            let (loss, grad_norm) = (rec[0], rec[1].sqrt());
            let (diag, applied) = match &mut self.update {
                Update::CgFac(cg) => {
                    let ok = cg.read_record(&rec[2..]);
                    (Some(cg.diag.clone()), ok)
                }
                _ => (None, true),
            };
            let bad = [("loss", loss), ("gradient", grad_norm)].into_iter().find(|(_, x)| !x.is_finite());
            let what = bad.map(|(what, _)| what).or((!applied).then_some("CgFac update"));
            if let Some(what) = what {
                // The device skipped this update: the counts go back to before it.
                self.step = p.step;
                self.update.set_counters(p.counters);
                return Err(GpuError::Engine(Error::NonFinite { what: what.into(), step: p.step }));
            }
            out.push((StepReport { step: p.step + 1, loss, lr: p.lr, grad_norm }, diag));
        }
        Ok(())
    }

    /// Mean loss over the fixed validation batches, as `Trainer::evaluate`: the losses are summed
    /// on the GPU and read back once.
    pub async fn evaluate(&mut self) -> Result<f32> {
        let batches = self.cfg.eval_batches;
        let mut ops: Vec<&Op> = self.ops[..self.forward].iter().collect();
        ops.push(&self.eval_add);
        for i in 0..batches {
            self.data.batch(Split::Val, i as u64, &mut self.tokens, &mut self.targets);
            self.ctx.write(&self.g_tokens, &self.tokens);
            self.ctx.write(&self.g_targets, &self.targets);
            // Each batch is its own submission, so the token writes land between them.
            let clear: &[&Tensor] = if i == 0 { &[&self.eval_sum] } else { &[] };
            self.ctx.run_cleared(clear, &ops);
        }
        let loss = self.ctx.read::<f32>(&self.eval_sum, 0, 1).await?[0] / batches as f32;
        if !loss.is_finite() {
            return Err(Error::NonFinite { what: "validation loss".into(), step: self.step }.into());
        }
        Ok(loss)
    }

    /// The current weights, laid out as `Model::params`.
    pub async fn params(&self) -> Result<Vec<f32>> {
        self.ctx.read_all(&self.params).await
    }

    pub fn model_config(&self) -> &ModelConfig {
        &self.cfg.model
    }
    pub fn step_count(&self) -> usize {
        self.step
    }
    /// CG-FAC's diagnostics of the last step read back (iterations, residuals, fallbacks, KL-clip
    /// scale).
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        match &self.update {
            Update::CgFac(cg) => Some(&cg.diag),
            _ => None,
        }
    }
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
