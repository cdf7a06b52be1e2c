//! What a forward pass keeps for the backward pass, K-FAC and the lab (`Cache`), and the
//! gradients with their scratch (`Grads`). Shapes: B batch rows, T positions, C = d_model,
//! F = d_ff, V vocab, NH heads, N = B*T tokens.

use super::architecture::{BlockLinear, Slot};
use super::Model;
use crate::config::ModelConfig;
use crate::scalar::Scalar;

fn zeros<S: Scalar>(n: usize) -> Vec<S> {
    vec![S::zero(); n]
}

/// What one block's forward pass keeps: the backward pass needs it, K-FAC reads the linear layers'
/// inputs from it, and the lab reads the sphere points `u` and the attention matrices.
#[derive(Clone, Debug)]
pub struct BlockCache<S> {
    pub ln1_u: Vec<S>,
    pub ln1_rstd: Vec<S>,
    pub ln1_out: Vec<S>,
    pub q: Vec<S>,
    pub k: Vec<S>,
    pub v: Vec<S>,
    /// (B, NH, T, T) row-stochastic attention matrices.
    pub att: Vec<S>,
    pub attn_y: Vec<S>,
    pub h: Vec<S>,
    pub ln2_u: Vec<S>,
    pub ln2_rstd: Vec<S>,
    pub ln2_out: Vec<S>,
    pub fc_pre: Vec<S>,
    pub fc_act: Vec<S>,
    /// The gated MLP's gate before its activation (N, F), `fc_act = act(gate) * fc_pre`; empty
    /// for a plain MLP.
    pub gate: Vec<S>,
}

#[derive(Clone, Debug)]
pub struct Cache<S> {
    pub b: usize,
    pub t: usize,
    pub tokens: Vec<u32>,
    pub targets: Vec<u32>,
    /// Residual stream entering each block; the last entry is the final residual.
    pub resid: Vec<Vec<S>>,
    pub blocks: Vec<BlockCache<S>>,
    pub lnf_u: Vec<S>,
    pub lnf_rstd: Vec<S>,
    pub lnf_out: Vec<S>,
    /// (N, V) probabilities after the forward pass that scores a loss; empty in a read's cache.
    pub probs: Vec<S>,
    pub loss: S,
    pub count: usize,
}

/// Gradients of one block's linear-layer outputs, kept for K-FAC's G factors.
#[derive(Clone, Debug)]
pub struct BlockGrads<S> {
    pub dq: Vec<S>,
    pub dk: Vec<S>,
    pub dv: Vec<S>,
    pub d_o: Vec<S>,
    pub d_fc: Vec<S>,
    pub d_proj: Vec<S>,
}

/// What the linear layers' weight gradients read of one forward and backward pass
/// (`Model::weight_grads`): its cache (each layer's input rows) and the gradients at the layers'
/// outputs.
#[derive(Clone, Copy)]
pub struct PassRows<'a, S> {
    pub cache: &'a Cache<S>,
    pub blocks: &'a [BlockGrads<S>],
    pub dlogits: &'a [S],
}

impl<S> PassRows<'_, S> {
    /// The buffers a pass's rows live in, in a fixed order (each block's layer inputs and output
    /// gradients, then the head's): what a shard computed in another worker sends
    /// (`train::remote`).
    pub fn buffers<'a>(cache: &'a mut Cache<S>, grads: &'a mut Grads<S>) -> Vec<&'a mut Vec<S>> {
        let mut out = Vec::with_capacity(10 * cache.blocks.len() + 2);
        for (k, g) in cache.blocks.iter_mut().zip(&mut grads.blocks) {
            out.extend([&mut k.ln1_out, &mut k.attn_y, &mut k.ln2_out, &mut k.fc_act]);
            out.extend([&mut g.dq, &mut g.dk, &mut g.dv, &mut g.d_o, &mut g.d_fc, &mut g.d_proj]);
        }
        out.extend([&mut cache.lnf_out, &mut grads.dlogits]);
        out
    }
}

#[derive(Clone, Debug)]
pub struct Grads<S> {
    /// Parameter gradients, laid out like `Model::params`.
    pub data: Vec<S>,
    pub blocks: Vec<BlockGrads<S>>,
    pub dlogits: Vec<S>,
    pub(super) dresid: Vec<S>,
    pub(super) dln: Vec<S>,
    pub(super) dattn_y: Vec<S>,
    pub(super) dfc_act: Vec<S>,
    pub(super) datt: Vec<S>,
}

impl<S: Scalar> Cache<S> {
    /// For B rows of the full context (training, evaluation, probes).
    pub fn new(cfg: &ModelConfig, b: usize) -> Self {
        let mut cache = Cache::window(cfg, b, cfg.context);
        cache.probs = zeros(b * cfg.context * cfg.vocab);
        cache
    }

    /// For B rows of `t` positions (at most the context) read without a loss: a text read once
    /// needs no padding, and a long context (GPT-2's 1024) is not paid for a short text. Without
    /// the probabilities (N, V), which a read never computes: `Model::logits` takes the head.
    pub fn window(cfg: &ModelConfig, b: usize, t: usize) -> Self {
        let (c, f, nh) = (cfg.d_model, cfg.d_ff, cfg.heads);
        let n = b * t;
        // Each buffer its own zeroed allocation, not a clone of one: a clone copies its zeros
        // through every page of a few hundred MB (SmolLM2 reading 256 tokens: 350 MB).
        let block = || BlockCache {
            ln1_u: zeros(n * c),
            ln1_rstd: zeros(n),
            ln1_out: zeros(n * c),
            q: zeros(n * c),
            k: zeros(n * c),
            v: zeros(n * c),
            att: zeros(b * nh * t * t),
            attn_y: zeros(n * c),
            h: zeros(n * c),
            ln2_u: zeros(n * c),
            ln2_rstd: zeros(n),
            ln2_out: zeros(n * c),
            fc_pre: zeros(n * f),
            fc_act: zeros(n * f),
            gate: if cfg.arch.mlp == crate::config::Mlp::Gated { zeros(n * f) } else { Vec::new() },
        };
        Cache {
            b,
            t,
            tokens: vec![0; n],
            targets: vec![0; n],
            resid: (0..=cfg.layers).map(|_| zeros(n * c)).collect(),
            blocks: (0..cfg.layers).map(|_| block()).collect(),
            lnf_u: zeros(n * c),
            lnf_rstd: zeros(n),
            lnf_out: zeros(n * c),
            probs: Vec::new(),
            loss: S::zero(),
            count: 0,
        }
    }
}

impl<S: Scalar> Cache<S> {
    /// Numbers this cache holds (token ids included), for the memory estimate's test.
    pub fn floats(&self) -> usize {
        let blocks: usize = self
            .blocks
            .iter()
            .map(|k| {
                [&k.ln1_u, &k.ln1_rstd, &k.ln1_out, &k.q, &k.k, &k.v, &k.att, &k.attn_y, &k.h]
                    .into_iter()
                    .chain([&k.ln2_u, &k.ln2_rstd, &k.ln2_out, &k.fc_pre, &k.fc_act])
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .sum();
        let rows = [&self.lnf_u, &self.lnf_rstd, &self.lnf_out, &self.probs].into_iter().map(Vec::len).sum::<usize>();
        blocks + self.resid.iter().map(Vec::len).sum::<usize>() + rows + self.tokens.len() + self.targets.len()
    }
}

impl<S: Scalar> Grads<S> {
    /// What `Model::weight_grads` reads of the pass that left `cache` and these gradients.
    pub fn rows<'a>(&'a self, cache: &'a Cache<S>) -> PassRows<'a, S> {
        PassRows { cache, blocks: &self.blocks, dlogits: &self.dlogits }
    }

    /// Numbers the gradients and their scratch hold.
    pub fn floats(&self) -> usize {
        let blocks: usize = self
            .blocks
            .iter()
            .map(|g| [&g.dq, &g.dk, &g.dv, &g.d_o, &g.d_fc, &g.d_proj].into_iter().map(Vec::len).sum::<usize>())
            .sum();
        let rest = [&self.data, &self.dlogits, &self.dresid, &self.dln, &self.dattn_y, &self.dfc_act, &self.datt];
        blocks + rest.into_iter().map(Vec::len).sum::<usize>()
    }

    pub fn new(model: &Model<S>, b: usize) -> Self {
        let cfg = &model.cfg;
        let (t, c, f, v) = (cfg.context, cfg.d_model, cfg.d_ff, cfg.vocab);
        let n = b * t;
        let block = BlockGrads {
            dq: zeros(n * c),
            dk: zeros(n * c),
            dv: zeros(n * c),
            d_o: zeros(n * c),
            d_fc: zeros(n * f),
            d_proj: zeros(n * c),
        };
        Grads {
            data: zeros(model.layout.total),
            blocks: vec![block; cfg.layers],
            dlogits: zeros(n * v),
            dresid: zeros(n * c),
            dln: zeros(n * c),
            dattn_y: zeros(n * c),
            dfc_act: zeros(n * f),
            datt: zeros(t * t),
        }
    }
}

impl<S> Cache<S> {
    /// The rows (N, `s.width()`) of slot `s` of block `i`; `X` and `Next` are the residual stream
    /// entering and leaving it.
    pub fn slot(&self, i: usize, s: Slot) -> &[S] {
        let k = &self.blocks[i];
        match s {
            Slot::X => &self.resid[i],
            Slot::Ln1Out => &k.ln1_out,
            Slot::Q => &k.q,
            Slot::K => &k.k,
            Slot::V => &k.v,
            Slot::AttnY => &k.attn_y,
            Slot::H => &k.h,
            Slot::Ln2Out => &k.ln2_out,
            Slot::FcPre => &k.fc_pre,
            Slot::FcAct => &k.fc_act,
            Slot::Next => &self.resid[i + 1],
        }
    }
}

impl<S> BlockGrads<S> {
    /// The gradient of the mean loss with respect to linear layer `r`'s output rows (N, dout).
    pub fn of(&self, r: BlockLinear) -> &[S] {
        match r {
            BlockLinear::Q => &self.dq,
            BlockLinear::K => &self.dk,
            BlockLinear::V => &self.dv,
            BlockLinear::O => &self.d_o,
            BlockLinear::Fc => &self.d_fc,
            BlockLinear::Proj => &self.d_proj,
        }
    }
}
