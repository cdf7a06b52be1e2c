//! The forward pass as a list of GPU ops, recorded from `architecture::BLOCK` as the CPU's
//! `Model::trunk` walks it: the embedding, every block, the final LayerNorm and the head. A real
//! model's block varies the walk as `cfg.arch` says, as the CPU's does: RMSNorm, rotary positions
//! before the attention, a gated MLP, the MLP's norm reading the block's input (parallel), the
//! residual carrying the normalised stream (Post-LN) and a masked-LM head's transform. The
//! trainer records it once for its batch and appends the loss and the backward pass; the reader
//! records it for one text and reads every buffer back. Shapes: B rows of T positions, N = B*T,
//! C = d_model, F = d_ff, V vocab, NH heads of hs = C / NH.

use super::activation::Act;
use super::elementwise::Elementwise;
use super::embedding::{Embedding, Table};
use super::layer_norm::{Affine, LayerNorm};
use super::matmul::{Dims, Matmul, View, Zeros};
use super::rotary::Rotary;
use super::softmax::Softmax;
use super::{GpuContext, GpuError, Op, Result, Tensor};
use crate::config::{ModelConfig, NormKind, Positions};
use crate::model::architecture::{Layer, Norm, Slot, BLOCK};
use crate::model::linears::{LinearId, LinearSpec};
use crate::model::params::Layout;

/// The kernel families a forward pass uses, each with its pipelines built once.
pub struct Kernels {
    pub mm: Matmul,
    pub ew: Elementwise,
    pub ln: LayerNorm,
    pub act: Act,
    pub sm: Softmax,
    pub emb: Embedding,
    pub rot: Rotary,
}

impl Kernels {
    pub fn new(ctx: &GpuContext) -> Self {
        Kernels {
            mm: Matmul::new(ctx),
            ew: Elementwise::new(ctx),
            ln: LayerNorm::new(ctx),
            act: Act::new(ctx),
            sm: Softmax::new(ctx),
            emb: Embedding::new(ctx),
            rot: Rotary::new(ctx),
        }
    }
}

/// What one block keeps from its forward pass (the CPU's `BlockCache`): the rows of each of
/// `Slot::KEPT`, both LayerNorms' centred rows and 1/std, and the attention matrices.
pub struct Block {
    pub kept: Vec<Tensor>,
    pub norms: [(Tensor, Tensor); 2],
    pub att: Tensor,
    /// A gated MLP's gate before its activation (N, F).
    pub gate: Option<Tensor>,
}

impl Block {
    /// Slot `s` of block `i`, whose input and output are `resid[i]` and `resid[i + 1]`.
    pub fn slot<'a>(&'a self, resid: &'a [Tensor], i: usize, s: Slot) -> &'a Tensor {
        match s {
            Slot::X => &resid[i],
            Slot::Next => &resid[i + 1],
            _ => &self.kept[Slot::KEPT.iter().position(|&k| k == s).expect("a kept slot")],
        }
    }
    pub fn norm(&self, n: Norm) -> (&Tensor, &Tensor) {
        let (u, rstd) = &self.norms[n as usize];
        (u, rstd)
    }
}

/// Everything a forward pass writes: the residual stream entering each block (and the last
/// block's output), each block's kept buffers, the final LayerNorm's and the logits.
pub struct Activations {
    pub resid: Vec<Tensor>,
    pub blocks: Vec<Block>,
    /// The final LayerNorm's centred rows, 1/std and output.
    pub lnf: [Tensor; 3],
    /// (N, V) logits; the trainer's loss turns them into probabilities in place.
    pub logits: Tensor,
    /// Rotary positions' cosines and sines for the T positions (`rotary::table`).
    pub rotary: Option<Tensor>,
    /// A masked-LM head's transform (BERT): its linear's output, the activation's, the norm's
    /// centred rows, 1/std and output (what the head reads).
    pub transform: Option<[Tensor; 5]>,
}

impl Activations {
    pub fn new(ctx: &GpuContext, m: &ModelConfig, b: usize, t: usize) -> Result<Self> {
        let (n, c, nh) = (b * t, m.d_model, m.heads);
        let z = |name: &str, len: usize| ctx.tensor(name, len);
        let gated = m.arch.mlp == crate::config::Mlp::Gated;
        let resid = (0..=m.layers).map(|_| z("resid", n * c)).collect::<Result<Vec<_>>>()?;
        let blocks = (0..m.layers)
            .map(|_| {
                let kept = Slot::KEPT.iter().map(|&k| z("block_slot", n * k.width(m))).collect::<Result<Vec<_>>>()?;
                let norm = || Ok::<_, GpuError>((z("ln_u", n * c)?, z("ln_rstd", n)?));
                let gate = if gated { Some(z("gate", n * m.d_ff)?) } else { None };
                Ok(Block { kept, norms: [norm()?, norm()?], att: z("att", b * nh * t * t)?, gate })
            })
            .collect::<Result<Vec<_>>>()?;
        let lnf = [z("lnf_u", n * c)?, z("lnf_rstd", n)?, z("lnf_out", n * c)?];
        let rotary = match m.arch.positions {
            Positions::Rotary { dims, base, scaling } => {
                Some(Rotary::upload(ctx, t, &crate::nn::rotary::frequencies(dims, base, scaling))?)
            }
            Positions::Learned => None,
        };
        let transform = match m.arch.head_transform {
            true => Some([
                z("tr_pre", n * c)?,
                z("tr_act", n * c)?,
                z("tr_u", n * c)?,
                z("tr_rstd", n)?,
                z("tr_out", n * c)?,
            ]),
            false => None,
        };
        Ok(Activations { resid, blocks, lnf, logits: z("logits", n * m.vocab)?, rotary, transform })
    }
}

/// `y = x W^T + b` (W stored (out, in) at `w` in the parameters, b at `b`), as `crate::nn::linear`.
pub struct Linear {
    pub w: usize,
    pub b: usize,
    pub din: usize,
    pub dout: usize,
}

/// One forward pass's setting: the model, its weights on the GPU and the batch's shape.
pub struct Pass<'a> {
    pub ctx: &'a GpuContext,
    pub k: &'a Kernels,
    pub cfg: &'a ModelConfig,
    pub layout: &'a Layout,
    pub params: &'a Tensor,
    /// Bound by the LayerNorm kernel, whose forward entry leaves it alone.
    pub grads: &'a Tensor,
    pub b: usize,
    pub t: usize,
}

/// The attention's views and sizes: head h of batch row b in a (B, T, C) buffer, and its (T, T)
/// matrix; causal attention skips the tiles of the masked triangle, as the CPU does.
pub struct Heads {
    pub head: View,
    pub att: View,
    pub scale: f32,
    /// S = Q K^T, (P or dS) times (V or K), and P^T (or dS^T) times dY (or Q).
    pub scores: Dims,
    pub p_times: Dims,
    pub pt_times: Dims,
}

impl Pass<'_> {
    pub fn n(&self) -> usize {
        self.b * self.t
    }

    pub fn linear(&self, id: LinearId) -> Linear {
        let spec = LinearSpec::of(self.layout, id);
        let off = |i: usize| self.layout.tensors[i].offset;
        Linear { w: off(spec.w), b: off(spec.b), din: spec.din, dout: spec.dout }
    }

    pub fn affine(&self, w: usize, b: usize) -> Affine {
        let arch = &self.cfg.arch;
        Affine {
            w_off: self.layout.tensors[w].offset,
            b_off: self.layout.tensors[b].offset,
            eps: arch.norm_eps as f32,
            centre: arch.norm == NormKind::LayerNorm,
        }
    }

    pub fn table(&self) -> Table {
        let (l, m) = (self.layout, self.cfg);
        let off = |i: usize| l.tensors[i].offset;
        let learned = m.arch.positions == Positions::Learned;
        Table { v: m.vocab, t: self.t, c: m.d_model, wte_off: off(l.wte), wpe_off: off(l.wpe), learned }
    }

    pub fn heads(&self) -> Heads {
        let (b, t, c, nh) = (self.b, self.t, self.cfg.d_model, self.cfg.heads);
        let hs = self.cfg.head_size();
        let d_scores = Dims::new(t, t, hs).batched(b, nh);
        let d_heads = Dims::new(t, hs, t).batched(b, nh);
        let skip = |d: Dims, zeros| if self.cfg.causal { d.skipping(zeros) } else { d };
        Heads {
            head: View::strided(0, c).batched(t * c, hs),
            att: View::rows(0, t).batched(nh * t * t, t * t),
            scale: 1.0 / (hs as f32).sqrt(),
            scores: skip(d_scores, Zeros::AboveDiagonalOfC),
            p_times: skip(d_heads, Zeros::AboveDiagonalOfA),
            pt_times: skip(d_heads, Zeros::BelowDiagonalOfA),
        }
    }

    /// `out = inp W^T + b`: the bias broadcast, then the product added.
    pub fn linear_forward(&self, ops: &mut Vec<Op>, out: &Tensor, inp: &Tensor, p: &Linear) {
        let (ctx, k, n) = (self.ctx, self.k, self.n());
        ops.push(k.ew.broadcast_rows(ctx, (self.params, p.b), out, n, p.dout));
        let w_t = View::rows(p.w, p.din).t();
        let d = Dims::new(n, p.dout, p.din);
        ops.push(k.mm.op(
            ctx,
            d,
            1.0,
            (inp, View::rows(0, p.din)),
            (self.params, w_t),
            1.0,
            (out, View::rows(0, p.dout)),
        ));
    }

    /// The forward pass from the token ids in `tokens` to the logits in `a.logits`: each block
    /// walks `architecture::BLOCK` top to bottom.
    pub fn ops(&self, tokens: &Tensor, a: &Activations) -> Vec<Op> {
        let (ctx, k, m, n) = (self.ctx, self.k, self.cfg, self.n());
        let (c, h) = (m.d_model, self.heads());
        let mut ops = vec![k.emb.forward(ctx, &a.resid[0], tokens, self.params, self.table(), n)];
        for (i, (ids, bk)) in self.layout.blocks.iter().zip(&a.blocks).enumerate() {
            let slot = |s: Slot| bk.slot(&a.resid, i, s);
            for layer in BLOCK {
                match layer {
                    Layer::Norm(nm) => {
                        let ((u, rstd), (w, bias)) = (bk.norm(nm), ids.norm(nm));
                        // In parallel (GPT-NeoX) the MLP's norm reads the block's input, not h.
                        let input = if nm == Norm::Two && m.arch.parallel_residual { Slot::X } else { nm.input() };
                        let (out, inp, af) = (slot(nm.output()), slot(input), self.affine(w, bias));
                        ops.push(k.ln.forward(ctx, out, u, rstd, inp, self.params, self.grads, af, n, c));
                    }
                    Layer::Linear(r) => self.linear_forward(
                        &mut ops,
                        slot(r.output()),
                        slot(r.input()),
                        &self.linear(LinearId::Block(i, r)),
                    ),
                    Layer::Attention => {
                        let (q, kk, vv, y) = (slot(Slot::Q), slot(Slot::K), slot(Slot::V), slot(Slot::AttnY));
                        if let (Positions::Rotary { dims, .. }, Some(table)) = (m.arch.positions, &a.rotary) {
                            let hs = m.head_size();
                            for x in [q, kk] {
                                ops.push(k.rot.forward(ctx, x, table, n, self.t, m.heads, hs, dims));
                            }
                        }
                        ops.push(k.mm.op(ctx, h.scores, h.scale, (q, h.head), (kk, h.head.t()), 0.0, (&bk.att, h.att)));
                        ops.push(k.sm.forward(ctx, &bk.att, self.b * m.heads * self.t, self.t, m.causal));
                        ops.push(k.mm.op(ctx, h.p_times, 1.0, (&bk.att, h.att), (vv, h.head), 0.0, (y, h.head)));
                    }
                    Layer::Residual { into, from } => {
                        let from = m.arch.residual_from(from);
                        ops.push(k.ew.add(ctx, (slot(from), 0), (slot(into), 0), n * into.width(m)))
                    }
                    Layer::Activation => match (ids.gate, &bk.gate) {
                        (Some((gw, gb)), Some(gate)) => {
                            let off = |i: usize| self.layout.tensors[i].offset;
                            let lin = Linear { w: off(gw), b: off(gb), din: c, dout: m.d_ff };
                            self.linear_forward(&mut ops, gate, slot(Slot::Ln2Out), &lin);
                            ops.push(k.act.gated(ctx, m.activation, slot(Slot::FcAct), gate, slot(Slot::FcPre)));
                        }
                        _ => ops.push(k.act.forward(ctx, m.activation, slot(Slot::FcAct), slot(Slot::FcPre))),
                    },
                }
            }
        }
        let [u, rstd, out] = &a.lnf;
        let af = self.affine(self.layout.lnf_w, self.layout.lnf_b);
        ops.push(k.ln.forward(ctx, out, u, rstd, &a.resid[m.layers], self.params, self.grads, af, n, c));
        let head_in = match (self.layout.transform, &a.transform) {
            (Some(tr), Some([pre, act, tu, trstd, tout])) => {
                let off = |i: usize| self.layout.tensors[i].offset;
                self.linear_forward(&mut ops, pre, out, &Linear { w: off(tr.w), b: off(tr.b), din: c, dout: c });
                ops.push(k.act.forward(ctx, m.activation, act, pre));
                let af = self.affine(tr.ln_w, tr.ln_b);
                ops.push(k.ln.forward(ctx, tout, tu, trstd, act, self.params, self.grads, af, n, c));
                tout
            }
            _ => out,
        };
        self.linear_forward(&mut ops, &a.logits, head_in, &self.linear(LinearId::Head));
        ops
    }
}
