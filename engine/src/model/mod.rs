//! The Pre-LN decoder (docs/science.md#the-model), forward with a cache and backward by hand.
//!
//! `x0 = wte[tok] + wpe[pos]`; per block `h = x + O(attn(LN1(x)))`, `x' = h + proj(act(fc(LN2(h))))`;
//! then `logits = head(LN_f(x))`. A real model's block varies this as `cfg.arch` says (RMSNorm,
//! rotary positions, a gated MLP, attention and MLP in parallel, Post-LN); the backward pass is the lab's
//! block's, the only one it trains (`config::train` refuses the others).
//!
//! Shapes: B batch rows, T positions, C = d_model, F = d_ff, V vocab, N = B*T tokens.

use rand_distr::{Distribution, Normal};

pub mod architecture;
pub mod cache;
pub mod kv_cache;
pub mod linears;
pub mod params;

pub use cache::{BlockCache, BlockGrads, Cache, Grads, PassRows};
pub use kv_cache::KvCache;

use linears::LinearId;

use crate::config::{ModelConfig, Positions};
use crate::error::{Error, Result};
use crate::nn::attention::{self, Shape};
use crate::nn::{activation, bf16, embedding, layer_norm, linear, loss, rotary};
use crate::rng::{rng, Stream};
use crate::scalar::Scalar;
use params::Layout;

#[derive(Clone, Debug)]
pub struct Model<S> {
    pub cfg: ModelConfig,
    pub layout: Layout,
    pub params: Vec<S>,
    /// Query heads per key/value head when the key and value rows repeat that way (a real
    /// grouped-query model's, checked as it is made): the forward computes each group's once. 1
    /// otherwise (the tests' random grouped-query models compute every head's rows).
    kv_group: usize,
    /// By tensor id, the bfloat16 copy a written token reads instead of the f32 weights, where
    /// they are bfloat16 exactly (`keep_bf16`: a real model stored in BF16); empty otherwise.
    bf16_rows: Vec<Option<Vec<u16>>>,
}

/// Refuses a batch that is not `n` tokens and targets, or holds an id outside the vocabulary of `v`
/// (ignored targets excepted): every backend checks before it runs.
pub fn check_batch(n: usize, v: usize, tokens: &[u32], targets: &[u32]) -> Result<()> {
    if tokens.len() != n || targets.len() != n {
        let (nt, ng) = (tokens.len(), targets.len());
        return Err(Error::Data(format!("expected {n} tokens and targets, got {nt} and {ng}")));
    }
    if let Some(&bad) = tokens.iter().chain(targets.iter().filter(|&&x| x != loss::IGNORE)).find(|&&x| x as usize >= v)
    {
        return Err(Error::Data(format!("token id {bad} is outside the vocabulary of {v}")));
    }
    Ok(())
}

/// Query heads per key/value head if every block's key and value rows repeat per group, else 1.
fn kv_group<S: Scalar>(cfg: &ModelConfig, layout: &Layout, params: &[S]) -> usize {
    let (nh, c) = (cfg.heads, cfg.d_model);
    let group = nh / cfg.arch.kv_heads_of(nh);
    let hs = c / nh;
    // A tensor of `heads` blocks of `size` values, each group's blocks equal to its first.
    let repeats = |id: usize, size: usize| {
        let t = layout.of(params, id);
        t.chunks_exact(group * size).all(|g| g.chunks_exact(size).all(|h| h == &g[..size]))
    };
    let shared = layout.blocks.iter().all(|b| {
        [(b.k_w, hs * c), (b.k_b, hs), (b.v_w, hs * c), (b.v_b, hs)].into_iter().all(|(id, size)| repeats(id, size))
    });
    if group > 1 && shared {
        group
    } else {
        1
    }
}

/// Runs `f` on rayon's pool natively. A large layer's two halves and the attention's heads are
/// joins, cheap between the pool's own threads but a hand-over and a wake-up each from another
/// thread: a text read or a token written from the main thread runs here (`lab sample` of GPT-2,
/// 300 tokens: 13.8-14.3 s before, 12.3-12.5 after). In the browser, `f` itself.
fn on_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    return rayon::scope(|_| f());
    #[cfg(target_arch = "wasm32")]
    f()
}

/// Mutable views of two tensors stored back to back (a weight and its bias, wte and wpe).
pub(crate) fn pair_mut<'a, S>(
    layout: &Layout,
    buf: &'a mut [S],
    first: usize,
    second: usize,
) -> (&'a mut [S], &'a mut [S]) {
    let (a, b) = (&layout.tensors[first], &layout.tensors[second]);
    assert_eq!(a.offset + a.len, b.offset, "tensors are not adjacent");
    buf[a.offset..b.offset + b.len].split_at_mut(a.len)
}

impl<S: Scalar> Model<S> {
    /// GPT-2 initialisation: N(0, 0.02) matrices and embeddings, residual projections scaled by
    /// 1/sqrt(2L), unit LayerNorm gains, zero biases. Drawn in f64 so f32 and f64 models agree.
    pub fn new(cfg: ModelConfig) -> Result<Self> {
        cfg.check()?;
        let layout = Layout::new(&cfg);
        let mut params = vec![S::zero(); layout.total];
        let mut r = rng(cfg.seed, Stream::Init, 0);
        let normal = Normal::new(0.0, 0.02).expect("valid normal");
        let resid_scale = 1.0 / (2.0 * cfg.layers as f64).sqrt();
        let residual_outputs: Vec<usize> = linears::linears(&layout)
            .into_iter()
            .filter(|s| matches!(s.id, LinearId::Block(_, r) if r.feeds_residual()))
            .map(|s| s.w)
            .collect();
        for (id, info) in layout.tensors.iter().enumerate() {
            let dst = &mut params[info.range()];
            if info.shape.len() == 2 {
                let scale = if residual_outputs.contains(&id) { resid_scale } else { 1.0 };
                dst.iter_mut().for_each(|x| *x = S::of(normal.sample(&mut r) * scale));
            } else if info.name.ends_with("weight") {
                dst.fill(S::one());
            }
        }
        Self::from_parts(cfg, layout, params)
    }

    /// A model from its parts, checked: every constructor (a new model, a checkpoint, a real
    /// model opened from its files) comes through here, so a model's own checks hold for each.
    pub fn from_parts(cfg: ModelConfig, layout: Layout, params: Vec<S>) -> Result<Self> {
        cfg.check()?;
        let wte = &layout.tensors[layout.wte].shape;
        if layout.blocks.len() != cfg.layers || wte.as_slice() != [cfg.vocab, cfg.d_model] {
            return Err(Error::Config(format!(
                "the weights' layout ({} blocks, embedding {wte:?}) is not the one the config describes ({} layers, \
                 [{}, {}])",
                layout.blocks.len(),
                cfg.layers,
                cfg.vocab,
                cfg.d_model
            )));
        }
        if params.len() != layout.total {
            return Err(Error::Config(format!("{} weights for a layout of {}", params.len(), layout.total)));
        }
        let kv_group = kv_group(&cfg, &layout, &params);
        Ok(Model { cfg, layout, params, kv_group, bf16_rows: Vec::new() })
    }

    pub fn num_params(&self) -> usize {
        self.layout.total
    }

    /// The weights a written token reads (`next_row`), as (f32, bfloat16) counts: bfloat16 where
    /// a copy is kept (`keep_bf16`); of the embeddings one row each (the token's and its
    /// position's; a head tied to the token embedding reads all of it), and of a grouped-query
    /// model's repeated key and value rows one head per group.
    pub fn written_token_weights(&self) -> (usize, usize) {
        let (l, c) = (&self.layout, self.cfg.d_model);
        let grouped: Vec<usize> = l.blocks.iter().flat_map(|b| [b.k_w, b.k_b, b.v_w, b.v_b]).collect();
        let read = |id: usize| {
            let len = l.tensors[id].len;
            match id {
                _ if id == l.wpe || (id == l.wte && !l.is_tied()) => len.min(c),
                _ if grouped.contains(&id) => len / self.kv_group,
                _ => len,
            }
        };
        let kept = |id: usize| self.bf16_rows.get(id).is_some_and(Option::is_some);
        let (bf16, f32): (Vec<usize>, Vec<usize>) = (0..l.tensors.len()).partition(|&id| kept(id));
        (f32.into_iter().map(read).sum(), bf16.into_iter().map(read).sum())
    }

    fn p(&self, id: usize) -> &[S] {
        self.layout.of(&self.params, id)
    }

    fn shape(&self, b: usize, t: usize) -> Shape {
        Shape { b, t, c: self.cfg.d_model, nh: self.cfg.heads, causal: self.cfg.causal }
    }

    /// Runs the model on `tokens` (B*T, T the cache's window: the context, or fewer positions for
    /// a text read once) and scores `targets`; returns the mean cross-entropy.
    pub fn forward(&self, cache: &mut Cache<S>, tokens: &[u32], targets: &[u32]) -> Result<S> {
        let (n, c, v) = (cache.b * cache.t, self.cfg.d_model, self.cfg.vocab);
        check_batch(n, v, tokens, targets)?;
        self.trunk(cache, tokens)?;
        cache.targets.copy_from_slice(targets);
        let l = &self.layout;
        linear::forward(&mut cache.probs, &cache.lnf_out, self.p(l.head_w), self.p(l.head_b), n, c, v);
        let (mean, count) = loss::forward(&mut cache.probs, targets, v);
        cache.loss = mean;
        cache.count = count;
        Ok(mean)
    }

    /// Everything before the head: the embedding, every block and the final norm, kept in `cache`
    /// (a text read once stops here, and takes the logits it wants: `Model::logits`). The block is
    /// the lab's Pre-LN GPT-2 block, or a real model's variant of it as `cfg.arch` says: RMSNorm,
    /// rotary positions, a gated MLP, attention and MLP in parallel.
    pub(crate) fn trunk(&self, cache: &mut Cache<S>, tokens: &[u32]) -> Result<()> {
        let (t, c, f, v) = (cache.t, self.cfg.d_model, self.cfg.d_ff, self.cfg.vocab);
        if t > self.cfg.context {
            return Err(Error::Data(format!("a window of {t} positions is over the context of {}", self.cfg.context)));
        }
        let n = cache.b * t;
        check_batch(n, v, tokens, tokens)?;
        let (l, arch) = (&self.layout, &self.cfg.arch);
        let (nh, hs) = (self.cfg.heads, self.cfg.head_size());
        let norm = |out: &mut [S], u: &mut [S], rstd: &mut [S], x: &[S], w: usize, b: usize| {
            layer_norm::forward_as(arch.norm, arch.norm_eps, out, u, rstd, x, self.p(w), self.p(b), c)
        };
        cache.tokens.copy_from_slice(tokens);
        embedding::forward(&mut cache.resid[0], tokens, self.p(l.wte), self.p(l.wpe), t, c);
        let shape = self.shape(cache.b, t);
        for (i, ids) in l.blocks.iter().enumerate() {
            let (done, rest) = cache.resid.split_at_mut(i + 1);
            let (x, next) = (&done[i], &mut rest[0]);
            let bc = &mut cache.blocks[i];
            norm(&mut bc.ln1_out, &mut bc.ln1_u, &mut bc.ln1_rstd, x, ids.ln1_w, ids.ln1_b);
            linear::forward(&mut bc.q, &bc.ln1_out, self.p(ids.q_w), self.p(ids.q_b), n, c, c);
            let g = self.kv_group;
            linear::forward_grouped(&mut bc.k, &bc.ln1_out, self.p(ids.k_w), self.p(ids.k_b), n, c, hs, g);
            linear::forward_grouped(&mut bc.v, &bc.ln1_out, self.p(ids.v_w), self.p(ids.v_b), n, c, hs, g);
            if let Positions::Rotary { dims, base, scaling } = arch.positions {
                let inv = rotary::frequencies(dims, base, scaling);
                rotary::forward(&mut bc.q, t, 0, nh, hs, &inv);
                rotary::forward(&mut bc.k, t, 0, nh, hs, &inv);
            }
            attention::forward(&mut bc.att, &mut bc.attn_y, &bc.q, &bc.k, &bc.v, shape);
            linear::forward(&mut bc.h, &bc.attn_y, self.p(ids.o_w), self.p(ids.o_b), n, c, c);
            // Post-LN (BERT) adds the normalised stream the attention read.
            let skip = if arch.post_norm { &bc.ln1_out } else { x };
            bc.h.iter_mut().zip(skip).for_each(|(h, &x)| *h += x);
            // In parallel (GPT-NeoX) the MLP reads the block's input, not h.
            let mlp_in = if arch.parallel_residual { x } else { &bc.h };
            norm(&mut bc.ln2_out, &mut bc.ln2_u, &mut bc.ln2_rstd, mlp_in, ids.ln2_w, ids.ln2_b);
            linear::forward(&mut bc.fc_pre, &bc.ln2_out, self.p(ids.fc_w), self.p(ids.fc_b), n, c, f);
            match ids.gate {
                None => activation::forward(self.cfg.activation, &mut bc.fc_act, &bc.fc_pre),
                Some((gw, gb)) => {
                    linear::forward(&mut bc.gate, &bc.ln2_out, self.p(gw), self.p(gb), n, c, f);
                    activation::forward(self.cfg.activation, &mut bc.fc_act, &bc.gate);
                    bc.fc_act.iter_mut().zip(&bc.fc_pre).for_each(|(a, &up)| *a *= up);
                }
            }
            linear::forward(next, &bc.fc_act, self.p(ids.proj_w), self.p(ids.proj_b), n, f, c);
            let skip = if arch.post_norm { &bc.ln2_out } else { &bc.h };
            next.iter_mut().zip(skip).for_each(|(y, &h)| *y += h);
        }
        let last = &cache.resid[self.cfg.layers];
        norm(&mut cache.lnf_out, &mut cache.lnf_u, &mut cache.lnf_rstd, last, l.lnf_w, l.lnf_b);
        Ok(())
    }

    /// Fills `grads` with the gradient of the last forward pass's mean loss.
    pub fn backward(&self, cache: &Cache<S>, grads: &mut Grads<S>) {
        self.backward_for(cache, &cache.targets, grads)
    }

    /// As `backward`, for the mean loss of the same forward pass scored against `targets` instead
    /// of the batch's own (K-FAC's sampled Fisher draws them from the model); `IGNORE` stays ignored.
    pub fn backward_for(&self, cache: &Cache<S>, targets: &[u32], grads: &mut Grads<S>) {
        self.backward_scored(cache, targets, cache.count, grads)
    }

    /// As `backward_for`, for a mean over `scored` targets (a shard's for its whole batch's).
    pub fn backward_scored(&self, cache: &Cache<S>, targets: &[u32], scored: usize, grads: &mut Grads<S>) {
        self.backward_rows(cache, targets, scored, grads);
        let Grads { data, blocks, dlogits, .. } = grads;
        self.weight_grads(std::iter::once(PassRows { cache, blocks, dlogits }), data, &mut Vec::new(), 1);
    }

    /// Numbers a token adds to the rows the weights' gradients read (`weight_grads`): each linear
    /// layer's input and output widths.
    pub fn weight_row_width(&self) -> usize {
        let l = &self.layout;
        linears::ids(l).map(|id| l.tensors[id.weight(l)].shape.iter().sum::<usize>()).sum()
    }

    /// The backward pass but for the linear layers' weights, for a mean over `scored` targets (a
    /// shard's own count, or its whole batch's): every other gradient in `grads.data`, and the
    /// gradient at each linear layer's outputs in `grads` for `weight_grads` (and K-FAC).
    pub fn backward_rows(&self, cache: &Cache<S>, targets: &[u32], scored: usize, grads: &mut Grads<S>) {
        debug_assert!(
            crate::config::Arch { tied_head: false, ..self.cfg.arch.clone() }.is_lab_block(),
            "the backward pass is the lab's block's"
        );
        let (t, c, f, v) = (self.cfg.context, self.cfg.d_model, self.cfg.d_ff, self.cfg.vocab);
        assert_eq!(cache.t, t, "training runs full windows");
        let n = cache.b * t;
        let l = &self.layout;
        let shape = self.shape(cache.b, t);
        let g = grads;
        // Only what accumulates is zeroed: the linear layers' biases are written whole here and
        // their weights by `weight_grads` (the weights are nearly all of the gradient; zeroing
        // them took 8% of a d1024 step natively). A head tied to the token embedding adds to it.
        for (_, t) in l.tensors.iter().enumerate().filter(|&(i, _)| !l.is_linear(i) || i == l.wte) {
            g.data[t.range()].fill(S::zero());
        }
        loss::backward(&mut g.dlogits, &cache.probs, targets, scored, v);
        let db = &mut g.data[l.tensors[l.head_b].range()];
        linear::backward_input(&mut g.dln, S::zero(), db, &g.dlogits, self.p(l.head_w), n, c, v);
        g.dresid.fill(S::zero());
        let (dw, db) = pair_mut(l, &mut g.data, l.lnf_w, l.lnf_b);
        layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &cache.lnf_u, &cache.lnf_rstd, self.p(l.lnf_w), c);
        for (i, ids) in l.blocks.iter().enumerate().rev() {
            let (bc, bg) = (&cache.blocks[i], &mut g.blocks[i]);
            // MLP: dresid is the gradient at x' = h + proj(...).
            bg.d_proj.copy_from_slice(&g.dresid);
            let db = &mut g.data[l.tensors[ids.proj_b].range()];
            linear::backward_input(&mut g.dfc_act, S::zero(), db, &bg.d_proj, self.p(ids.proj_w), n, f, c);
            activation::backward(self.cfg.activation, &mut bg.d_fc, &g.dfc_act, &bc.fc_pre);
            let db = &mut g.data[l.tensors[ids.fc_b].range()];
            linear::backward_input(&mut g.dln, S::zero(), db, &bg.d_fc, self.p(ids.fc_w), n, c, f);
            let (dw, db) = pair_mut(l, &mut g.data, ids.ln2_w, ids.ln2_b);
            layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &bc.ln2_u, &bc.ln2_rstd, self.p(ids.ln2_w), c);
            // Attention: dresid is now the gradient at h = x + O(...).
            bg.d_o.copy_from_slice(&g.dresid);
            let db = &mut g.data[l.tensors[ids.o_b].range()];
            linear::backward_input(&mut g.dattn_y, S::zero(), db, &bg.d_o, self.p(ids.o_w), n, c, c);
            attention::backward(
                &mut bg.dq,
                &mut bg.dk,
                &mut bg.dv,
                &mut g.datt,
                &g.dattn_y,
                &bc.att,
                &bc.q,
                &bc.k,
                &bc.v,
                shape,
            );
            let qkv = [(ids.q_w, ids.q_b, &bg.dq), (ids.k_w, ids.k_b, &bg.dk), (ids.v_w, ids.v_b, &bg.dv)];
            for (j, (w, b, dy)) in qkv.into_iter().enumerate() {
                let beta = if j == 0 { S::zero() } else { S::one() };
                let db = &mut g.data[l.tensors[b].range()];
                linear::backward_input(&mut g.dln, beta, db, dy, self.p(w), n, c, c);
            }
            let (dw, db) = pair_mut(l, &mut g.data, ids.ln1_w, ids.ln1_b);
            layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &bc.ln1_u, &bc.ln1_rstd, self.p(ids.ln1_w), c);
        }
        let (dwte, dwpe) = pair_mut(l, &mut g.data, l.wte, l.wpe);
        embedding::backward(dwte, dwpe, &g.dresid, &cache.tokens, t, c);
    }

    /// A linear layer's input rows and the gradient rows at its outputs in `pass`.
    fn weight_operands<'a>(&self, pass: &PassRows<'a, S>, id: LinearId, din: usize, dout: usize) -> (&'a [S], &'a [S]) {
        let n = pass.cache.b * pass.cache.t;
        let (x, dy) = match id {
            LinearId::Block(i, r) => (pass.cache.slot(i, r.input()), pass.blocks[i].of(r)),
            LinearId::Head => (&pass.cache.lnf_out[..], pass.dlogits),
        };
        (&x[..n * din], &dy[..n * dout])
    }

    /// The linear layers' weight gradients, `dW = dY^T X` over the rows of every pass in `passes`
    /// (a batch's shards, in batch order) as one product each, written into `out` (laid out like
    /// the parameters): the shards' gradients are never summed, each weight's is written once,
    /// and its pieces are shared out over `threads` (`linear::backward_weight`: the same bits on
    /// any number). `rows` is scratch for the passes' rows put end to end.
    pub fn weight_grads<'a>(
        &self,
        passes: impl Iterator<Item = PassRows<'a, S>> + Clone,
        out: &mut [S],
        rows: &mut Vec<S>,
        threads: usize,
    ) where
        S: 'a,
    {
        let (count, n) = passes.clone().fold((0, 0), |(k, n), p| (k + 1, n + p.cache.b * p.cache.t));
        let l = &self.layout;
        for id in linears::ids(l) {
            let w = id.weight(l);
            let (dout, din) = (l.tensors[w].shape[0], l.tensors[w].shape[1]);
            let mut each = passes.clone().map(|p| self.weight_operands(&p, id, din, dout));
            let (x, dy) = match count {
                1 => each.next().expect("one pass"),
                _ => {
                    rows.clear();
                    each.clone().for_each(|(x, _)| rows.extend_from_slice(x));
                    each.for_each(|(_, dy)| rows.extend_from_slice(dy));
                    rows.split_at(n * din)
                }
            };
            // A head tied to the token embedding adds to the embedding's gradient.
            let beta = if w == l.wte { S::one() } else { S::zero() };
            linear::backward_weight(&mut out[l.tensors[w].range()], beta, dy, x, n, din, dout, threads);
        }
    }
}

impl Model<f32> {
    /// Keeps a bfloat16 copy of each weight a written token reads (every block's linear layers
    /// and the head) that is bfloat16 exactly, for `forward_next` (`nn::bf16`): half the bytes
    /// read a token, the same values. For a model read from its files, whose weights never change
    /// after: a copy is not updated with them.
    pub fn keep_bf16(&mut self) {
        let l = &self.layout;
        let linears = l
            .blocks
            .iter()
            .flat_map(|b| [b.q_w, b.k_w, b.v_w, b.o_w, b.fc_w, b.proj_w].into_iter().chain(b.gate.map(|g| g.0)));
        let mut kept = vec![None; l.tensors.len()];
        for id in linears.chain([l.head_w]) {
            kept[id] = bf16::exact(self.p(id));
        }
        self.bf16_rows = kept;
    }

    /// Whether `keep_bf16` kept any copy.
    pub fn keeps_bf16(&self) -> bool {
        self.bf16_rows.iter().any(Option::is_some)
    }

    /// The bytes of the bfloat16 copies `keep_bf16` kept.
    pub fn bf16_bytes(&self) -> u64 {
        2 * self.bf16_rows.iter().flatten().map(Vec::len).sum::<usize>() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Activation, Arch, Mlp, NormKind};

    /// A token written reads one row of the token embedding (untied) and of the positions: of the
    /// 29 x 32 and 16 x 32 tables, 28 and 15 rows fewer than the weights hold.
    #[test]
    fn a_written_token_reads_one_row_of_each_embedding() {
        let cfg = ModelConfig {
            vocab: 29,
            d_model: 32,
            heads: 4,
            layers: 2,
            d_ff: 48,
            context: 16,
            ..ModelConfig::default()
        };
        let m = Model::<f32>::new(cfg).unwrap();
        assert_eq!(m.written_token_weights(), (m.num_params() - (28 + 15) * 32, 0));
    }

    /// A grouped-query model whose key and value rows repeat per group computes each group's once
    /// and reads, and writes, what computing every head's rows gives.
    #[test]
    fn repeated_key_and_value_rows_are_computed_once_per_group() {
        let arch = Arch {
            norm: NormKind::RmsNorm,
            positions: Positions::Rotary { dims: 8, base: 1e4, scaling: Default::default() },
            mlp: Mlp::Gated,
            kv_heads: 2,
            ..Arch::default()
        };
        let (heads, c) = (4, 32);
        let cfg = ModelConfig {
            vocab: 29,
            d_model: c,
            heads,
            layers: 2,
            d_ff: 48,
            context: 16,
            arch,
            activation: Activation::Silu,
            ..ModelConfig::default()
        };
        let random = Model::<f64>::new(cfg.clone()).unwrap();
        assert_eq!(random.kv_group, 1, "random rows differ from head to head");
        // Every weight and bias moved off its initial value, then each group's rows repeated.
        let mut params: Vec<f64> = random.params.iter().enumerate().map(|(i, x)| x + 0.1 * (i as f64).sin()).collect();
        let hs = c / heads;
        for b in &random.layout.blocks {
            for (id, size) in [(b.k_w, hs * c), (b.k_b, hs), (b.v_w, hs * c), (b.v_b, hs)] {
                for g in params[random.layout.tensors[id].range()].chunks_exact_mut(2 * size) {
                    let (first, second) = g.split_at_mut(size);
                    second.copy_from_slice(first);
                }
            }
        }
        let shared = Model::from_parts(cfg, random.layout.clone(), params).unwrap();
        assert_eq!(shared.kv_group, 2);
        let every = Model { kv_group: 1, ..shared.clone() };
        // A token written reads half the key and value rows: 2 blocks x 2 tensors x (32 x 32
        // weights + 32 biases) / 2.
        let (grouped, all) = (shared.written_token_weights(), every.written_token_weights());
        assert_eq!((all.0 - grouped.0, grouped.1), (2112, 0));
        let tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3];
        let (a, b) = (shared.logits_full(&tokens).unwrap(), every.logits_full(&tokens).unwrap());
        let (mut ka, mut kb) = (KvCache::new(&shared.cfg, 16), KvCache::new(&every.cfg, 16));
        for (i, &t) in tokens.iter().enumerate() {
            let (na, nb) = (shared.forward_next(&mut ka, t).unwrap(), every.forward_next(&mut kb, t).unwrap());
            for (x, y) in a[i].iter().zip(&b[i]).chain(na.iter().zip(nb.iter())) {
                assert!((x - y).abs() < 1e-12, "position {i}: {x} vs {y}");
            }
        }
    }
}
