//! Writing one token at a time: the keys and values of the positions already seen are kept, so a
//! new token costs one token's work (its own rows through every layer, and one attention row per
//! head) instead of the whole context again. `Model::forward` stays the reference: the tests check
//! that this path gives its logits at every position.
//!
//! Shapes: C = d_model, F = d_ff, V vocab, T context, NH heads of hs = C / NH.

use crate::config::{Mlp, ModelConfig, Positions};
use crate::error::{Error, Result};
use crate::nn::{activation, attention, bf16, layer_norm, linear, rotary};
use crate::scalar::Scalar;

use super::Model;

/// The positions written so far: per block their keys and values (T, C), and one token's scratch.
#[derive(Clone, Debug)]
pub struct KvCache<S> {
    len: usize,
    context: usize,
    k: Vec<Vec<S>>,
    v: Vec<Vec<S>>,
    x: Vec<S>,
    ln: Vec<S>,
    u: Vec<S>,
    rstd: [S; 1],
    q: Vec<S>,
    y: Vec<S>,
    h: Vec<S>,
    fc: Vec<S>,
    act: Vec<S>,
    /// The gated MLP's gate (F; empty for a plain MLP).
    gate: Vec<S>,
    /// One attention row (T).
    scores: Vec<S>,
    /// The logits (V) after the last token.
    logits: Vec<S>,
    /// The full forward's cache (one row of T), for windows run at once (`prefill`).
    full: Option<Box<super::Cache<S>>>,
}

impl<S: Scalar> KvCache<S> {
    /// Room for `positions` tokens (at most the context): a real model's context of thousands of
    /// positions is not paid for a short writing.
    pub fn new(cfg: &ModelConfig, positions: usize) -> Self {
        let (t, c, f) = (positions.clamp(1, cfg.context.max(1)), cfg.d_model, cfg.d_ff);
        let z = |n: usize| vec![S::zero(); n];
        KvCache {
            len: 0,
            context: t,
            k: vec![z(t * c); cfg.layers],
            v: vec![z(t * c); cfg.layers],
            x: z(c),
            ln: z(c),
            u: z(c),
            rstd: [S::zero()],
            q: z(c),
            y: z(c),
            h: z(c),
            fc: z(f),
            act: z(f),
            gate: if cfg.arch.mlp == Mlp::Gated { z(f) } else { Vec::new() },
            scores: z(t),
            logits: z(cfg.vocab),
            full: None,
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every position of the context is taken: the next token needs a new window.
    pub fn is_full(&self) -> bool {
        self.len == self.context
    }

    /// Forgets every position (the buffers are kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<S: Scalar> Model<S> {
    /// Runs `token` at the next position of `kv` and returns the logits (V) of the token after it.
    /// Only a causal model writes this way: with attention both ways every earlier position would
    /// change with each new token.
    pub fn forward_next<'a>(&self, kv: &'a mut KvCache<S>, token: u32) -> Result<&'a [S]> {
        let (cfg, v) = (&self.cfg, self.cfg.vocab);
        if !cfg.causal {
            return Err(Error::Config(
                "this model attends both ways (causal off): it saw the next token while training, so it cannot \
                 write one token at a time"
                    .into(),
            ));
        }
        if kv.is_full() {
            return Err(Error::Config(format!("the key/value cache holds all {} positions", kv.context)));
        }
        if token as usize >= v {
            return Err(Error::Data(format!("token id {token} is outside the vocabulary of {v}")));
        }
        super::on_pool(|| self.next_row(kv, token));
        Ok(&kv.logits)
    }

    /// `forward_next` once its input is checked.
    fn next_row(&self, kv: &mut KvCache<S>, token: u32) {
        let cfg = &self.cfg;
        let (c, nh) = (cfg.d_model, cfg.heads);
        let (pos, l, arch) = (kv.len, &self.layout, &cfg.arch);
        let tok = token as usize * c;
        kv.x.copy_from_slice(&self.p(l.wte)[tok..tok + c]);
        if arch.positions == Positions::Learned {
            let at = pos * c;
            kv.x.iter_mut().zip(&self.p(l.wpe)[at..at + c]).for_each(|(x, &p)| *x += p);
        }
        let (hs, seen) = (c / nh, pos + 1);
        let norm = |out: &mut [S], u: &mut [S], rstd: &mut [S], x: &[S], w: usize, b: usize| {
            layer_norm::forward_as(arch.norm, arch.norm_eps, out, u, rstd, x, self.p(w), self.p(b), c)
        };
        for (i, ids) in l.blocks.iter().enumerate() {
            norm(&mut kv.ln, &mut kv.u, &mut kv.rstd, &kv.x, ids.ln1_w, ids.ln1_b);
            self.row(&mut kv.q, &kv.ln, ids.q_w, ids.q_b, hs, 1);
            let row = pos * c..seen * c;
            let g = self.kv_group;
            self.row(&mut kv.k[i][row.clone()], &kv.ln, ids.k_w, ids.k_b, hs, g);
            self.row(&mut kv.v[i][row.clone()], &kv.ln, ids.v_w, ids.v_b, hs, g);
            if let Positions::Rotary { dims, base, scaling } = arch.positions {
                let inv = rotary::frequencies(dims, base, scaling);
                rotary::forward(&mut kv.q, 1, pos, nh, hs, &inv);
                rotary::forward(&mut kv.k[i][row], 1, pos, nh, hs, &inv);
            }
            let seen_kv = (&kv.k[i][..seen * c], &kv.v[i][..seen * c]);
            attention::forward_row(&mut kv.y, &mut kv.scores[..seen], &kv.q, seen_kv.0, seen_kv.1, nh);
            self.row(&mut kv.h, &kv.y, ids.o_w, ids.o_b, hs, 1);
            kv.h.iter_mut().zip(&kv.x).for_each(|(h, &x)| *h += x);
            let mlp_in = if arch.parallel_residual { &kv.x } else { &kv.h };
            norm(&mut kv.ln, &mut kv.u, &mut kv.rstd, mlp_in, ids.ln2_w, ids.ln2_b);
            self.row(&mut kv.fc, &kv.ln, ids.fc_w, ids.fc_b, hs, 1);
            match ids.gate {
                None => activation::forward(cfg.activation, &mut kv.act, &kv.fc),
                Some((gw, gb)) => {
                    self.row(&mut kv.gate, &kv.ln, gw, gb, hs, 1);
                    activation::forward(cfg.activation, &mut kv.act, &kv.gate);
                    kv.act.iter_mut().zip(&kv.fc).for_each(|(a, &up)| *a *= up);
                }
            }
            self.row(&mut kv.x, &kv.act, ids.proj_w, ids.proj_b, hs, 1);
            kv.x.iter_mut().zip(&kv.h).for_each(|(x, &h)| *x += h);
        }
        norm(&mut kv.ln, &mut kv.u, &mut kv.rstd, &kv.x, l.lnf_w, l.lnf_b);
        self.row(&mut kv.logits, &kv.ln, l.head_w, l.head_b, hs, 1);
        kv.len += 1;
    }

    /// One row `x` through the linear layer of weight `w` and bias `b` (its output in heads of `hs`
    /// repeating in groups of `group`, as `linear::forward_grouped` takes them), from the weight's
    /// bfloat16 copy where the model keeps one (`Model::keep_bf16`).
    fn row(&self, out: &mut [S], x: &[S], w: usize, b: usize, hs: usize, group: usize) {
        let (din, bias) = (x.len(), self.p(b));
        let Some(bits) = self.bf16_rows.get(w).and_then(Option::as_deref) else {
            return linear::forward_grouped(out, x, self.p(w), bias, 1, din, hs, group);
        };
        if group == 1 {
            return bf16::forward(out, x, bits, bias, din);
        }
        for start in (0..bias.len()).step_by(group * hs) {
            let (first, rest) = out[start..start + group * hs].split_at_mut(hs);
            bf16::forward(first, x, &bits[start * din..(start + hs) * din], &bias[start..start + hs], din);
            rest.chunks_exact_mut(hs).for_each(|h| h.copy_from_slice(first));
        }
    }

    /// Empties `kv` and runs `window` (1 to T tokens) through it at once: the full forward pass over
    /// the window (its products as matrices, not one row at a time), whose keys and values the
    /// cache keeps. Returns the logits (V) of the token after the window.
    pub fn prefill<'a>(&self, kv: &'a mut KvCache<S>, window: &[u32]) -> Result<&'a [S]> {
        let (t, c, v) = (kv.context, self.cfg.d_model, self.cfg.vocab);
        let n = window.len();
        if n == 0 || n > t {
            return Err(Error::Data(format!("a window of 1 to {t} tokens, got {n}")));
        }
        kv.clear();
        if n == 1 || !self.cfg.causal {
            // One token, or a model forward_next refuses with its message.
            return self.forward_next(kv, window[0]);
        }
        if kv.full.as_ref().is_none_or(|f| f.t != n) {
            kv.full = Some(Box::new(super::Cache::window(&self.cfg, 1, n)));
        }
        let full = kv.full.as_mut().expect("set above");
        // The trunk only: the head runs on the last row alone (the other rows' logits, 4.9 GFLOP of
        // GPT-2's 64-token prompt, would be thrown away).
        super::on_pool(|| self.trunk(full, window))?;
        for (i, b) in full.blocks.iter().enumerate() {
            kv.k[i][..n * c].copy_from_slice(&b.k[..n * c]);
            kv.v[i][..n * c].copy_from_slice(&b.v[..n * c]);
        }
        let l = &self.layout;
        let last = &full.lnf_out[(n - 1) * c..n * c];
        linear::forward(&mut kv.logits, last, self.p(l.head_w), self.p(l.head_b), 1, c, v);
        kv.len = n;
        Ok(&kv.logits)
    }

    /// The logits (V) of the token after each of `tokens` (at most T), from the readable full
    /// forward pass over just those positions (causal attention never looks ahead, so a shorter
    /// window gives the same rows as the padded one).
    pub fn logits_full(&self, tokens: &[u32]) -> Result<Vec<Vec<S>>> {
        let cache = self.read(tokens)?;
        Ok(self.logits(&cache).chunks_exact(self.cfg.vocab).map(<[S]>::to_vec).collect())
    }

    /// The forward pass over `tokens` (1 to T positions, one row) up to the head, its cache kept
    /// for the lab's measures (`logits` takes the head); a model that attends both ways needs the
    /// whole window.
    pub fn read(&self, tokens: &[u32]) -> Result<super::Cache<S>> {
        let t = self.cfg.context;
        if tokens.is_empty() || tokens.len() > t {
            return Err(Error::Data(format!("a window of 1 to {t} tokens, got {}", tokens.len())));
        }
        // The lab's own bidirectional models are trained on full windows; a real one (BERT) reads
        // any length.
        if !self.cfg.causal && tokens.len() < t && self.cfg.arch.is_lab_block() {
            return Err(Error::Config("a model that attends both ways needs a full window".into()));
        }
        let mut cache = super::Cache::window(&self.cfg, 1, tokens.len());
        super::on_pool(|| self.trunk(&mut cache, tokens))?;
        Ok(cache)
    }

    /// The logits (N, V) of a forward pass (`read`'s, or `forward`'s, whose cache keeps the
    /// probabilities instead); a masked-LM head (BERT) transforms the final stream first.
    pub fn logits(&self, cache: &super::Cache<S>) -> Vec<S> {
        self.head(&cache.lnf_out)
    }

    /// The logit lens at `depth` (0 to L): the head read from the stream entering block `depth`,
    /// normalised as the model normalises its last stream (Pre-LN: the final norm; Post-LN, BERT:
    /// the stream between blocks is already the norm's output, transformers' hidden state).
    /// Depth L is the model's own logits. (N, V).
    pub fn lens_logits(&self, cache: &super::Cache<S>, depth: usize) -> Result<Vec<S>> {
        let (n, c, layers) = (cache.b * cache.t, self.cfg.d_model, self.cfg.layers);
        if depth > layers {
            return Err(Error::Data(format!("the logit lens reads depths 0 to {layers}, not {depth}")));
        }
        if depth == layers {
            return Ok(self.logits(cache));
        }
        if self.cfg.arch.post_norm {
            return Ok(self.head(&cache.blocks[depth].ln1_out));
        }
        let (arch, l) = (&self.cfg.arch, &self.layout);
        let (mut out, mut u, mut rstd) = (vec![S::zero(); n * c], vec![S::zero(); n * c], vec![S::zero(); n]);
        let (w, b) = (self.p(l.lnf_w), self.p(l.lnf_b));
        layer_norm::forward_as(arch.norm, arch.norm_eps, &mut out, &mut u, &mut rstd, &cache.resid[depth], w, b, c);
        Ok(self.head(&out))
    }

    /// The head on normalised rows `x` (N, C): a masked-LM head (BERT) transforms them first, then
    /// the unembedding gives (N, V) logits.
    fn head(&self, x: &[S]) -> Vec<S> {
        let (c, v) = (self.cfg.d_model, self.cfg.vocab);
        let n = x.len() / c;
        let mut logits = vec![S::zero(); n * v];
        let l = &self.layout;
        let transformed = l.transform.map(|tr| {
            let (mut pre, mut act, mut out) = (vec![S::zero(); n * c], vec![S::zero(); n * c], vec![S::zero(); n * c]);
            linear::forward(&mut pre, x, self.p(tr.w), self.p(tr.b), n, c, c);
            activation::forward(self.cfg.activation, &mut act, &pre);
            // The norm's centred rows are not kept: `pre` takes them.
            let (arch, mut rstd) = (&self.cfg.arch, vec![S::zero(); n]);
            let (w, b) = (self.p(tr.ln_w), self.p(tr.ln_b));
            layer_norm::forward_as(arch.norm, arch.norm_eps, &mut out, &mut pre, &mut rstd, &act, w, b, c);
            out
        });
        let x = transformed.as_deref().unwrap_or(x);
        linear::forward(&mut logits, x, self.p(l.head_w), self.p(l.head_b), n, c, v);
        logits
    }
}
