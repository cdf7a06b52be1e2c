//! The Pre-LN decoder of SCIENCE.md §1, forward with a cache and backward by hand.
//!
//! `x0 = wte[tok] + wpe[pos]`; per block `h = x + O(attn(LN1(x)))`, `x' = h + proj(act(fc(LN2(h))))`;
//! then `logits = head(LN_f(x))`. Shapes: B batch rows, T positions, C = d_model, F = d_ff, V vocab,
//! N = B*T tokens.

use rand_distr::{Distribution, Normal};

use crate::attention::{self, Shape};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::params::Layout;
use crate::rng::{rng, Stream};
use crate::scalar::Scalar;
use crate::{activation, embedding, layer_norm, linear, loss};

#[derive(Clone, Debug)]
pub struct Model<S> {
    pub cfg: ModelConfig,
    pub layout: Layout,
    pub params: Vec<S>,
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
    /// (N, V) probabilities after the forward pass.
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

#[derive(Clone, Debug)]
pub struct Grads<S> {
    /// Parameter gradients, laid out like `Model::params`.
    pub data: Vec<S>,
    pub blocks: Vec<BlockGrads<S>>,
    pub dlogits: Vec<S>,
    dresid: Vec<S>,
    dln: Vec<S>,
    dattn_y: Vec<S>,
    dfc_act: Vec<S>,
    datt: Vec<S>,
}

fn zeros<S: Scalar>(n: usize) -> Vec<S> {
    vec![S::zero(); n]
}

impl<S: Scalar> Cache<S> {
    pub fn new(cfg: &ModelConfig, b: usize) -> Self {
        let (t, c, f, v, nh) = (cfg.context, cfg.d_model, cfg.d_ff, cfg.vocab, cfg.heads);
        let n = b * t;
        let block = BlockCache {
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
        };
        Cache {
            b,
            t,
            tokens: vec![0; n],
            targets: vec![0; n],
            resid: vec![zeros(n * c); cfg.layers + 1],
            blocks: vec![block; cfg.layers],
            lnf_u: zeros(n * c),
            lnf_rstd: zeros(n),
            lnf_out: zeros(n * c),
            probs: zeros(n * v),
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

/// Mutable views of two tensors stored back to back (a weight and its bias, wte and wpe).
fn pair_mut<'a, S>(layout: &Layout, buf: &'a mut [S], first: usize, second: usize) -> (&'a mut [S], &'a mut [S]) {
    let (a, b) = (&layout.tensors[first], &layout.tensors[second]);
    assert_eq!(a.offset + a.len, b.offset, "tensors are not adjacent");
    buf[a.offset..b.offset + b.len].split_at_mut(a.len)
}

impl<S: Scalar> Model<S> {
    /// GPT-2 initialisation: N(0, 0.02) matrices and embeddings, residual projections scaled by
    /// 1/sqrt(2L), unit LayerNorm gains, zero biases. Drawn in f64 so f32 and f64 models agree.
    pub fn new(cfg: ModelConfig) -> Result<Self> {
        cfg.validate()?;
        let layout = Layout::new(&cfg);
        let mut params = zeros::<S>(layout.total);
        let mut r = rng(cfg.seed, Stream::Init, 0);
        let normal = Normal::new(0.0, 0.02).expect("valid normal");
        let resid_scale = 1.0 / (2.0 * cfg.layers as f64).sqrt();
        let residual_outputs: Vec<usize> = layout.blocks.iter().flat_map(|b| [b.o_w, b.proj_w]).collect();
        for (id, info) in layout.tensors.iter().enumerate() {
            let dst = &mut params[info.range()];
            if info.shape.len() == 2 {
                let scale = if residual_outputs.contains(&id) { resid_scale } else { 1.0 };
                dst.iter_mut().for_each(|x| *x = S::of(normal.sample(&mut r) * scale));
            } else if info.name.ends_with("weight") {
                dst.fill(S::one());
            }
        }
        Ok(Model { cfg, layout, params })
    }

    pub fn num_params(&self) -> usize {
        self.layout.total
    }

    fn p(&self, id: usize) -> &[S] {
        self.layout.of(&self.params, id)
    }

    fn shape(&self, b: usize) -> Shape {
        Shape { b, t: self.cfg.context, c: self.cfg.d_model, nh: self.cfg.heads, causal: self.cfg.causal }
    }

    /// Runs the model on `tokens` (B*T) and scores `targets`; returns the mean cross-entropy.
    pub fn forward(&self, cache: &mut Cache<S>, tokens: &[u32], targets: &[u32]) -> Result<S> {
        let (t, c, f, v) = (self.cfg.context, self.cfg.d_model, self.cfg.d_ff, self.cfg.vocab);
        let n = cache.b * t;
        if tokens.len() != n || targets.len() != n {
            return Err(Error::Data(format!(
                "expected {n} tokens and targets, got {} and {}",
                tokens.len(),
                targets.len()
            )));
        }
        if let Some(&bad) =
            tokens.iter().chain(targets.iter().filter(|&&x| x != loss::IGNORE)).find(|&&x| x as usize >= v)
        {
            return Err(Error::Data(format!("token id {bad} is outside the vocabulary of {v}")));
        }
        let l = &self.layout;
        cache.tokens.copy_from_slice(tokens);
        cache.targets.copy_from_slice(targets);
        embedding::forward(&mut cache.resid[0], tokens, self.p(l.wte), self.p(l.wpe), t, c);
        let shape = self.shape(cache.b);
        for (i, ids) in l.blocks.iter().enumerate() {
            let (done, rest) = cache.resid.split_at_mut(i + 1);
            let (x, next) = (&done[i], &mut rest[0]);
            let bc = &mut cache.blocks[i];
            layer_norm::forward(
                &mut bc.ln1_out,
                &mut bc.ln1_u,
                &mut bc.ln1_rstd,
                x,
                self.p(ids.ln1_w),
                self.p(ids.ln1_b),
                c,
            );
            linear::forward(&mut bc.q, &bc.ln1_out, self.p(ids.q_w), self.p(ids.q_b), n, c, c);
            linear::forward(&mut bc.k, &bc.ln1_out, self.p(ids.k_w), self.p(ids.k_b), n, c, c);
            linear::forward(&mut bc.v, &bc.ln1_out, self.p(ids.v_w), self.p(ids.v_b), n, c, c);
            attention::forward(&mut bc.att, &mut bc.attn_y, &bc.q, &bc.k, &bc.v, shape);
            linear::forward(&mut bc.h, &bc.attn_y, self.p(ids.o_w), self.p(ids.o_b), n, c, c);
            bc.h.iter_mut().zip(x).for_each(|(h, &x)| *h += x);
            layer_norm::forward(
                &mut bc.ln2_out,
                &mut bc.ln2_u,
                &mut bc.ln2_rstd,
                &bc.h,
                self.p(ids.ln2_w),
                self.p(ids.ln2_b),
                c,
            );
            linear::forward(&mut bc.fc_pre, &bc.ln2_out, self.p(ids.fc_w), self.p(ids.fc_b), n, c, f);
            activation::forward(self.cfg.activation, &mut bc.fc_act, &bc.fc_pre);
            linear::forward(next, &bc.fc_act, self.p(ids.proj_w), self.p(ids.proj_b), n, f, c);
            next.iter_mut().zip(&bc.h).for_each(|(y, &h)| *y += h);
        }
        let last = &cache.resid[self.cfg.layers];
        layer_norm::forward(
            &mut cache.lnf_out,
            &mut cache.lnf_u,
            &mut cache.lnf_rstd,
            last,
            self.p(l.lnf_w),
            self.p(l.lnf_b),
            c,
        );
        linear::forward(&mut cache.probs, &cache.lnf_out, self.p(l.head_w), self.p(l.head_b), n, c, v);
        let (mean, count) = loss::forward(&mut cache.probs, targets, v);
        cache.loss = mean;
        cache.count = count;
        Ok(mean)
    }

    /// Fills `grads` with the gradient of the last forward pass's mean loss.
    pub fn backward(&self, cache: &Cache<S>, grads: &mut Grads<S>) {
        let (t, c, f, v) = (self.cfg.context, self.cfg.d_model, self.cfg.d_ff, self.cfg.vocab);
        let n = cache.b * t;
        let l = &self.layout;
        let shape = self.shape(cache.b);
        let g = grads;
        g.data.fill(S::zero());
        loss::backward(&mut g.dlogits, &cache.probs, &cache.targets, cache.count, v);
        let (dw, db) = pair_mut(l, &mut g.data, l.head_w, l.head_b);
        linear::backward(&mut g.dln, S::zero(), dw, db, &g.dlogits, &cache.lnf_out, self.p(l.head_w), n, c, v);
        g.dresid.fill(S::zero());
        let (dw, db) = pair_mut(l, &mut g.data, l.lnf_w, l.lnf_b);
        layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &cache.lnf_u, &cache.lnf_rstd, self.p(l.lnf_w), c);
        for (i, ids) in l.blocks.iter().enumerate().rev() {
            let (bc, bg) = (&cache.blocks[i], &mut g.blocks[i]);
            // MLP: dresid is the gradient at x' = h + proj(...).
            bg.d_proj.copy_from_slice(&g.dresid);
            let (dw, db) = pair_mut(l, &mut g.data, ids.proj_w, ids.proj_b);
            linear::backward(&mut g.dfc_act, S::zero(), dw, db, &bg.d_proj, &bc.fc_act, self.p(ids.proj_w), n, f, c);
            activation::backward(self.cfg.activation, &mut bg.d_fc, &g.dfc_act, &bc.fc_pre);
            let (dw, db) = pair_mut(l, &mut g.data, ids.fc_w, ids.fc_b);
            linear::backward(&mut g.dln, S::zero(), dw, db, &bg.d_fc, &bc.ln2_out, self.p(ids.fc_w), n, c, f);
            let (dw, db) = pair_mut(l, &mut g.data, ids.ln2_w, ids.ln2_b);
            layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &bc.ln2_u, &bc.ln2_rstd, self.p(ids.ln2_w), c);
            // Attention: dresid is now the gradient at h = x + O(...).
            bg.d_o.copy_from_slice(&g.dresid);
            let (dw, db) = pair_mut(l, &mut g.data, ids.o_w, ids.o_b);
            linear::backward(&mut g.dattn_y, S::zero(), dw, db, &bg.d_o, &bc.attn_y, self.p(ids.o_w), n, c, c);
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
                let (dw, db) = pair_mut(l, &mut g.data, w, b);
                linear::backward(&mut g.dln, beta, dw, db, dy, &bc.ln1_out, self.p(w), n, c, c);
            }
            let (dw, db) = pair_mut(l, &mut g.data, ids.ln1_w, ids.ln1_b);
            layer_norm::backward(&mut g.dresid, dw, db, &g.dln, &bc.ln1_u, &bc.ln1_rstd, self.p(ids.ln1_w), c);
        }
        let (dwte, dwpe) = pair_mut(l, &mut g.data, l.wte, l.wpe);
        embedding::backward(dwte, dwpe, &g.dresid, &cache.tokens, t, c);
    }
}
