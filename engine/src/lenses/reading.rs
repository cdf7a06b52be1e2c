//! A text through a loaded model, seen through every lens the lab has: its tokens on the sphere at
//! every layer (before and after LayerNorm's gain), each head's attention as a Markov chain with
//! its entropy and its distance to the Gaussian kernel, Brownian motion against the particles' flow
//! through depth with the verdicts in words, and the model's next-token candidates. `dump` writes
//! the raw tensors for checks against other implementations.
//!
//! Shapes: T tokens of the text, C = d_model, NH heads of hs = C / NH, V vocab, L layers.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::memory;
use crate::model::{Cache, Model};
use crate::pretrained::Pretrained;
use crate::sample::generate::{top, TOP};
use crate::sample::Choice;
use crate::science::sphere::{affine_drift, radius_stats, AffineDrift, RadiusStats};
use crate::science::{cache as lens, markov};
use crate::session::measures::Axis;
use crate::session::panels::{brownian_of, flow_of};
use crate::session::verdicts::{brownian_over, flow_over};
use crate::session::{Brownian, Flow, Verdict};

/// Dimensions named as the ones the gain moves most.
const DIMS: usize = 5;
/// Tokens the depth fits use (the text's first): enough for the KS comparison, and a 256-token
/// text costs what a 64-token one does.
pub const DEPTH_POINTS: usize = 64;
/// The Brownian walkers' step through depth (`compare_with_brownian_at`).
const DEPTH_RATE_DT: f64 = 1e-2;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeadLens {
    pub head: usize,
    /// Mean entropy of the attention rows, in nats (JoMA's measure).
    pub entropy: f64,
    /// Mean and largest total variation between the head's softmax rows and the row-normalised
    /// Gaussian kernel of the same queries and keys.
    pub kernel_tv_mean: f64,
    pub kernel_tv_max: f64,
    /// What separates the two: the kernel weighs key j by exp(-|k_j|^2 / (2 sqrt(hs))) on top of
    /// the softmax. The largest minus the smallest of those exponents over the text's keys: 0 would
    /// make them the same chain.
    pub key_norm_range: f64,
    /// A head that attends both ways is a walk over every token: its stationary distribution
    /// (`pi P = pi`), when it is unique. Empty for a causal head, whose walk ends at the first token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stationary: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerLens {
    /// 0..L: the input of block `layer` (its first LayerNorm); L: the final LayerNorm.
    pub layer: usize,
    /// Mean length of the residual stream's vectors before LayerNorm.
    pub residual_norm: f64,
    /// The tokens after normalisation, before the gain: on the sphere of radius sqrt(C) up to eps.
    pub radius: RadiusStats,
    /// After the gain and bias: how far they take the tokens off the sphere.
    pub gain: AffineDrift,
    /// The dimensions that move the tokens' squared radius most under the gain and bias, with
    /// their share of that change (mean over tokens of |(g u + b)_j^2 - u_j^2|).
    pub gain_dims: Vec<(usize, f64)>,
    /// Per head (none for the final LayerNorm).
    pub heads: Vec<HeadLens>,
}

/// The tokens' paths through depth (times 0..L, one per layer; the first `DEPTH_POINTS` tokens)
/// against Brownian motion and the particles' attention flow, each with its verdict, or why it
/// could not be fitted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DepthFit {
    pub brownian: Option<Brownian>,
    pub flow: Option<Flow>,
    pub verdicts: Vec<Verdict>,
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inspection {
    pub model: String,
    /// The model's family ("GPT-2", "GPT-NeoX", "Llama") and what its block does in words.
    #[serde(default)]
    pub family: String,
    #[serde(default)]
    pub block: String,
    /// The norm that puts the tokens on the sphere: "LayerNorm", or "RMSNorm" (no centring).
    #[serde(default = "layer_norm")]
    pub norm: String,
    pub n_layer: usize,
    pub n_head: usize,
    pub d_model: usize,
    pub vocab: usize,
    pub context: usize,
    pub tokens: Vec<u32>,
    /// Each token's own text, as the tokenizer cut it.
    pub pieces: Vec<String>,
    /// Per layer 0..=L.
    pub layers: Vec<LayerLens>,
    pub depth: DepthFit,
    /// Per token, the model's best candidates with their probabilities: for the token after it
    /// (`predicts` "next"), or for the token itself, as if it were masked (a masked LM, "masked").
    pub next: Vec<Vec<(String, f64)>>,
    #[serde(default = "next_token")]
    pub predicts: String,
    /// Where the text holds the mask token (a masked LM's candidates there are what it fills in).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masks: Vec<usize>,
    /// Where the forward pass ran: "CPU", or "WebGPU (adapter)".
    #[serde(default)]
    pub on: String,
    /// The model's head read at every depth, when asked for (`lab inspect --logit-lens`): as
    /// costly as 1 + L more heads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_lens: Option<super::LogitLens>,
}

fn layer_norm() -> String {
    "LayerNorm".into()
}

fn next_token() -> String {
    "next".into()
}

/// A text's forward pass: its tokens, what the pass kept, the (T, V) logits, and where it ran
/// (the CPU here, the GPU in `gpu::reader`).
pub struct Read {
    pub ids: Vec<u32>,
    pub cache: Cache<f32>,
    pub logits: Vec<f32>,
    pub on: String,
}

/// The tokens of `text` for `p`, checked against the model's context and the memory `budget` a
/// pass over them needs: what a forward pass on any backend reads.
pub fn tokens_within(p: &Pretrained, text: &str, budget: u64) -> Result<Vec<u32>> {
    let ids = tokens(p, text)?;
    memory::check_read(&p.model.cfg, p.model.bf16_bytes(), ids.len(), budget)?;
    Ok(ids)
}

/// The text's tokens, refused when empty or longer than the model's context.
pub fn tokens(p: &Pretrained, text: &str) -> Result<Vec<u32>> {
    // Before the tokenizer: BERT's would give an empty text its [CLS] and [SEP].
    if text.is_empty() {
        return Err(Error::Data("the text is empty: type something for the model to read".into()));
    }
    let ids = p.tokenizer.encode(text)?;
    let t = p.model.cfg.context;
    match ids.len() {
        0 => Err(Error::Data("the text is empty: type something for the model to read".into())),
        n if n > t => Err(Error::Data(format!("the text is {n} tokens, over the model's context of {t}: shorten it"))),
        _ => Ok(ids),
    }
}

/// The forward pass over `text` on the CPU, within `budget`.
pub fn read(p: &Pretrained, text: &str, budget: u64) -> Result<Read> {
    read_ids(p, tokens(p, text)?, budget)
}

/// [`read`] of tokens already cut (a reading's own, read again for another lens).
pub fn read_ids(p: &Pretrained, ids: Vec<u32>, budget: u64) -> Result<Read> {
    let t = p.model.cfg.context;
    if ids.is_empty() || ids.len() > t || ids.iter().any(|&i| i as usize >= p.model.cfg.vocab) {
        return Err(Error::Data(format!("1 to {t} tokens of the model's vocabulary, got {}", ids.len())));
    }
    memory::check_read(&p.model.cfg, p.model.bf16_bytes(), ids.len(), budget)?;
    let cache = p.model.read(&ids)?;
    let logits = p.model.logits(&cache);
    Ok(Read { ids, cache, logits, on: "CPU".into() })
}

fn layer(model: &Model<f32>, cache: &Cache<f32>, l: usize) -> Result<LayerLens> {
    let cfg = &model.cfg;
    let (c, t, hs) = (cfg.d_model, cache.t, cfg.head_size());
    let u = lens::sphere_points(cfg, cache, l)?;
    let stream = &cache.resid[l];
    let residual_norm =
        stream.chunks_exact(c).map(|x| x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt()).sum::<f64>()
            / t as f64;
    let (gain, bias) = lens::layer_norm_affine(model, l)?;
    let mut moved = vec![0.0; c];
    for row in u.chunks_exact(c) {
        for (j, m) in moved.iter_mut().enumerate() {
            let y = gain[j] * row[j] + bias[j];
            *m += (y * y - row[j] * row[j]).abs();
        }
    }
    let total: f64 = moved.iter().sum();
    let mut dims: Vec<(usize, f64)> = moved.iter().map(|&m| m / total.max(f64::MIN_POSITIVE)).enumerate().collect();
    dims.sort_by(|a, b| b.1.total_cmp(&a.1));
    dims.truncate(DIMS);
    let mut heads = Vec::new();
    if l < cfg.layers {
        for h in 0..cfg.heads {
            let p = lens::attention(cfg, cache, l, 0, h)?;
            let (q, k) = lens::queries_keys(cfg, cache, l, 0, h)?;
            let entropy = markov::row_entropy(&p, t).iter().sum::<f64>() / t as f64;
            let kd = markov::kernel_distance(&p, &q, &k, t, hs, true)?;
            let exps: Vec<f64> = k
                .chunks_exact(hs)
                .map(|kj| kj.iter().map(|x| x * x).sum::<f64>() / (2.0 * (hs as f64).sqrt()))
                .collect();
            let range = exps.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                - exps.iter().copied().fold(f64::INFINITY, f64::min);
            heads.push(HeadLens {
                head: h,
                entropy,
                kernel_tv_mean: kd.mean,
                kernel_tv_max: kd.max,
                key_norm_range: range,
                stationary: match cfg.causal {
                    true => Vec::new(),
                    // Rows summed in f32 are 1 within about 1e-7: the chain is P with its rows
                    // renormalised in f64, so the stationary check sees the walk, not the rounding.
                    false => {
                        let chain: Vec<f64> = p
                            .chunks_exact(t)
                            .flat_map(|row| {
                                let z: f64 = row.iter().sum();
                                row.iter().map(move |x| x / z)
                            })
                            .collect();
                        markov::stationary(&chain, t).unwrap_or_default()
                    }
                },
            });
        }
    }
    Ok(LayerLens {
        layer: l,
        residual_norm,
        radius: radius_stats(&u, c)?,
        gain: affine_drift(&u, &gain, &bias, c)?,
        gain_dims: dims,
        heads,
    })
}

/// Brownian motion and the particles' flow fitted to the tokens' paths through the layers.
pub(super) fn depth(model: &Model<f32>, cache: &Cache<f32>) -> DepthFit {
    let cfg = &model.cfg;
    let keep = DEPTH_POINTS.min(cache.t) * cfg.d_model;
    let frames: Vec<Vec<f64>> = lens::depth_trajectory(cfg, cache).into_iter().map(|f| f[..keep].to_vec()).collect();
    let times: Vec<f64> = (0..frames.len()).map(|l| l as f64).collect();
    let mut out = DepthFit { brownian: None, flow: None, verdicts: vec![], errors: vec![] };
    match brownian_of(&frames, &times, cfg.d_model, 0, (&[], 0), (0, DEPTH_RATE_DT)) {
        Ok(b) => out.brownian = Some(b),
        Err(e) => out.errors.push(format!("Brownian fit through depth: {e}")),
    }
    match flow_of(&frames, &times, cfg.d_model, (0, cfg.layers), &[], (0, DEPTH_RATE_DT)) {
        Ok(f) => out.flow = Some(f),
        Err(e) => out.errors.push(format!("particle flow through depth: {e}")),
    }
    let diffusion = out.brownian.as_ref().map(|b| brownian_over(b, Axis::Depth));
    let flow = out.flow.as_ref().map(|f| flow_over(f, diffusion.as_ref().map(|v| v.agreement), Axis::Depth));
    // A model read once does not change: its verdicts are final.
    out.verdicts = diffusion.into_iter().chain(flow).map(|v| Verdict { settled: true, ..v }).collect();
    out
}

/// Everything the lab shows for a text's forward pass `r` through `p` (`read`, or the GPU's).
pub fn inspect(p: &Pretrained, r: &Read) -> Result<Inspection> {
    let mut out = measure(p, r)?;
    out.depth = depth(&p.model, &r.cache);
    Ok(out)
}

/// The inspection of a forward pass, all but the depth fits (the slow part: `depth`).
pub(super) fn measure(p: &Pretrained, r: &Read) -> Result<Inspection> {
    let (m, cache) = (&p.model, &r.cache);
    let cfg = &m.cfg;
    let layers = (0..=cfg.layers).map(|l| layer(m, cache, l)).collect::<Result<Vec<_>>>()?;
    let choice = Choice::default();
    let next = r.logits.chunks_exact(cfg.vocab).map(|row| top(&p.tokenizer, &choice.best(row, TOP), TOP));
    Ok(Inspection {
        model: p.name.clone(),
        family: p.family.name().to_string(),
        block: match cfg.causal {
            true => cfg.arch.describe(cfg.heads),
            false => format!("{}, attention both ways", cfg.arch.describe(cfg.heads)),
        },
        norm: match cfg.arch.norm {
            crate::config::NormKind::LayerNorm => layer_norm(),
            crate::config::NormKind::RmsNorm => "RMSNorm".into(),
        },
        n_layer: cfg.layers,
        n_head: cfg.heads,
        d_model: cfg.d_model,
        vocab: cfg.vocab,
        context: cfg.context,
        pieces: p.tokenizer.pieces(&r.ids),
        tokens: r.ids.clone(),
        layers,
        depth: DepthFit::default(),
        next: next.collect(),
        predicts: if cfg.arch.head_transform { "masked".into() } else { next_token() },
        masks: match p.tokenizer.mask() {
            Some(m) if cfg.arch.head_transform => (0..r.ids.len()).filter(|&i| r.ids[i] == m).collect(),
            _ => Vec::new(),
        },
        on: r.on.clone(),
        logit_lens: None,
    })
}

/// The raw tensors of a forward pass as a safetensors file: `hidden.{i}` (T, C), the
/// residual stream entering block i (i = L: the last block's output, before `ln_f`; Post-LN: after
/// the norm that ends the block before, as transformers' hidden states are); `attn.{l}`
/// (NH, T, T), layer l's attention probabilities; `logits` (T, V); `lens.{d}` (T, V), the logit
/// lens at depth d < L (`Model::lens_logits`).
pub fn dump(p: &Pretrained, r: &Read) -> Result<Vec<u8>> {
    let (cache, cfg) = (&r.cache, &p.model.cfg);
    let (t, c, nh, v) = (r.ids.len(), cfg.d_model, cfg.heads, cfg.vocab);
    let bytes = |xs: &[f32]| xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for (i, x) in cache.resid.iter().enumerate() {
        // Post-LN (BERT): the stream between blocks is the normalised one (transformers'
        // hidden states), which the engine keeps as the next norm's output.
        let x = match (cfg.arch.post_norm, cache.blocks.get(i)) {
            (false, _) => x,
            (true, Some(b)) => &b.ln1_out,
            (true, None) => &cache.lnf_out,
        };
        tensors.push((format!("hidden.{i}"), vec![t, c], bytes(x)));
    }
    for (l, b) in cache.blocks.iter().enumerate() {
        tensors.push((format!("attn.{l}"), vec![nh, t, t], bytes(&b.att)));
    }
    tensors.push(("logits".into(), vec![t, v], bytes(&r.logits)));
    for d in 0..cfg.layers {
        tensors.push((format!("lens.{d}"), vec![t, v], bytes(&p.model.lens_logits(cache, d)?)));
    }
    let views = tensors
        .iter()
        .map(|(n, s, d)| safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), d).map(|v| (n, v)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Checkpoint(format!("cannot write the dump: {e}")))?;
    safetensors::serialize(views, None).map_err(|e| Error::Checkpoint(format!("cannot write the dump: {e}")))
}
