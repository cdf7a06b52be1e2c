//! Building the GPU trainer: the data and the initial weights as `Trainer::new` makes them, the
//! buffers, and the step's fixed list of ops (forward, backward, clip, the optimizer's update),
//! recorded once.

use super::{GpuTrainer, Scratch, Update, READ_EVERY};
use crate::config::{Fisher, OptimizerConfig, TrainConfig};
use crate::data::{Dataset, Split};
use crate::error::Error;
use crate::gpu::adamw::{self, decay_mask, AdamW, Hyper};
use crate::gpu::cgfac::CgFac;
use crate::gpu::cross_entropy::{Buffers, CrossEntropy};
use crate::gpu::elementwise::REDUCE_GROUPS;
use crate::gpu::forward::{self, Activations, Linear, Pass};
use crate::gpu::matmul::{Dims, View};
use crate::gpu::muon::GpuMuon;
use crate::gpu::sgd::{self, Sgd};
use crate::gpu::{GpuContext, Op, Result, Tensor};
use crate::model::architecture::{Layer, Slot, BLOCK};
use crate::model::linears::LinearId;
use crate::model::Model;
use crate::nn::loss;

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
        let k = forward::Kernels::new(&ctx);
        let (kce, kadam, ksgd) = (CrossEntropy::new(&ctx), AdamW::new(&ctx), Sgd::new(&ctx));
        let m = &cfg.model;
        let (b, t, c, f, v, nh) = (cfg.batch, m.context, m.d_model, m.d_ff, m.vocab, m.heads);
        let n = b * t;
        let z = |name: &str, len: usize| ctx.tensor(name, len);
        let params = ctx.tensor_from("params", &model.params)?;
        let grads = z("grads", model.layout.total)?;
        let acts = Activations::new(&ctx, m, b, t)?;
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
        let (ce_rows, stats) = (z("ce_rows", 2 * n)?, z("stats", 2)?);
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
        let pass = Pass { ctx: &ctx, k: &k, cfg: m, layout: l, params: &params, grads: &grads, b, t };
        let ctx_ref = &ctx;
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
        let h = pass.heads();

        // Forward, then the mean loss in `stats[0]`.
        let mut ops = pass.ops(&g_tokens, &acts);
        let [lnf_u, lnf_rstd, lnf_out] = &acts.lnf;
        let ce =
            Buffers { probs: &acts.logits, targets: &g_targets, rows: &ce_rows, stats: &stats, dlogits: &s.dlogits };
        ops.extend(kce.forward(&ctx, &ce, n, v));
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
        ops.push(kce.backward(&ctx, &ce, n, v));
        linear_bwd(&mut ops, &s.dln, false, &s.dlogits, lnf_out, &pass.linear(LinearId::Head));
        track(ops.len(), LinearId::Head, lnf_out, &s.dlogits);
        let af = pass.affine(l.lnf_w, l.lnf_b);
        ops.extend(k.ln.backward(&ctx, &s.dresid, &grads, &s.dln, lnf_u, lnf_rstd, &params, af, n, c));
        for (i, (ids, bk)) in l.blocks.iter().zip(&acts.blocks).enumerate().rev() {
            let slot = |x: Slot| bk.slot(&acts.resid, i, x);
            // Slots whose gradient this block has set: a second consumer (K and Q after V) adds.
            let mut set: Vec<Slot> = Vec::new();
            for layer in BLOCK.into_iter().rev() {
                match layer {
                    Layer::Residual { .. } => {}
                    Layer::Linear(r) => {
                        let (id, inp, dy) = (LinearId::Block(i, r), r.input(), s.grad(r.output()));
                        linear_bwd(&mut ops, s.grad(inp), set.contains(&inp), dy, slot(inp), &pass.linear(id));
                        set.push(inp);
                        track(ops.len(), id, slot(inp), dy);
                    }
                    Layer::Attention => {
                        let (q, kk, vv, dy) = (slot(Slot::Q), slot(Slot::K), slot(Slot::V), s.grad(Slot::AttnY));
                        let (dq, dk, dv) = (s.grad(Slot::Q), s.grad(Slot::K), s.grad(Slot::V));
                        let (hd, att) = (h.head, h.att);
                        ops.push(k.mm.op(&ctx, h.pt_times, 1.0, (&bk.att, att.t()), (dy, hd), 0.0, (dv, hd)));
                        ops.push(k.mm.op(&ctx, h.scores, 1.0, (dy, hd), (vv, hd.t()), 0.0, (&s.datt, att)));
                        ops.push(k.sm.backward(&ctx, &s.datt, &bk.att, b * nh * t, t));
                        ops.push(k.mm.op(&ctx, h.p_times, h.scale, (&s.datt, att), (kk, hd), 0.0, (dq, hd)));
                        ops.push(k.mm.op(&ctx, h.pt_times, h.scale, (&s.datt, att.t()), (q, hd), 0.0, (dk, hd)));
                    }
                    Layer::Activation => {
                        let (d_pre, d_act) = (s.grad(Slot::FcPre), s.grad(Slot::FcAct));
                        ops.push(k.act.backward(&ctx, m.activation, d_pre, d_act, slot(Slot::FcPre)));
                    }
                    Layer::Norm(nm) => {
                        let ((u, rstd), (w, bias)) = (bk.norm(nm), ids.norm(nm));
                        let (dx, dy) = (s.grad(nm.input()), s.grad(nm.output()));
                        ops.extend(k.ln.backward(&ctx, dx, &grads, dy, u, rstd, &params, pass.affine(w, bias), n, c));
                    }
                }
            }
        }
        ops.push(k.emb.backward(&ctx, &grads, &s.dresid, &g_tokens, pass.table(), n));

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
                ops.push(kadam.op(&ctx, &state, Hyper { beta1, beta2, eps, max_norm: cfg.clip }));
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
                ops.push(ksgd.op(&ctx, &state, momentum, cfg.clip));
                Update::Sgd { velocity }
            }
            OptimizerConfig::CgFac(_) => {
                let mut cg = cg.expect("built for CG-FAC above");
                cg.build(&ctx, &k.mm, &kadam, &model, &params, &grads, &decay, &sum_sq, cfg.clip);
                Update::CgFac(Box::new(cg))
            }
            OptimizerConfig::Muon(ref c) => {
                let kernels = (&k.mm, &k.ew, &kadam);
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
}
