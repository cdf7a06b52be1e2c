//! How much memory a run needs, estimated before anything is allocated, so a configuration that
//! cannot fit is refused with a message instead of failing inside an allocation (in wasm32 that is a
//! trap that takes the page down). Everything is counted in `u64` with checked arithmetic: sizes a
//! link can claim (context 1024, batch 1024, 1024 heads) overflow wasm32's `usize`.

use serde::Serialize;

use crate::config::{ModelConfig, OptimizerConfig, TrainConfig};
use crate::error::{Error, Result};
use crate::train::shards::SHARDS;

impl TrainConfig {
    /// Checks every field and that the run fits the default memory budget.
    pub fn validate(&self) -> Result<()> {
        self.validate_within(DEFAULT_BUDGET, 0)
    }

    /// As `validate`, with the memory needed (plus `probe_bytes` of probe history) within `budget`.
    /// Here rather than in `config`, so that what a run is does not depend on what it costs.
    pub fn validate_within(&self, budget: u64, probe_bytes: u64) -> Result<()> {
        self.validate_fields()?;
        check(self, probe_bytes, budget).map(|_| ())
    }
}

/// The default budget: what a browser tab can give a worker in wasm32, and a generous share of a
/// workstation natively (`lab train --memory-limit` changes it).
#[cfg(target_arch = "wasm32")]
pub const DEFAULT_BUDGET: u64 = 1 << 30;
#[cfg(not(target_arch = "wasm32"))]
pub const DEFAULT_BUDGET: u64 = 16 << 30;

/// What opening a real model (`pretrained`) may take: in a tab, most of wasm32's 4 GiB (the weights
/// and, while they are read, the file: gpt2 and gpt2-medium fit, gpt2-large does not).
#[cfg(target_arch = "wasm32")]
pub const MODEL_BUDGET: u64 = 3 << 30;
#[cfg(not(target_arch = "wasm32"))]
pub const MODEL_BUDGET: u64 = DEFAULT_BUDGET;

/// Bytes of each part of a run, f32 throughout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Estimate {
    pub params: u64,
    pub optimizer: u64,
    /// Forward cache and backward scratch of one batch (attention matrices included).
    pub activations: u64,
    /// The two states a session keeps to go back to after a non-finite loss.
    pub rollback: u64,
    /// The probe's history budget.
    pub probe: u64,
    /// The data, the packing buffers of the matrix products, the second-order solvers' scratch
    /// and the probe's frames in the making: an eighth of the rest and 4 MiB, measured at the
    /// budget's edge for every optimizer (`engine/tests/budget.rs`).
    pub working: u64,
    pub total: u64,
}

fn overflow() -> Error {
    Error::Config("the configuration's sizes overflow 64-bit arithmetic".into())
}

/// a * b * ... with overflow as an error.
fn mul(xs: &[u64]) -> Result<u64> {
    xs.iter().try_fold(1u64, |acc, &x| acc.checked_mul(x)).ok_or_else(overflow)
}

fn sum(xs: &[u64]) -> Result<u64> {
    xs.iter().try_fold(0u64, |acc, &x| acc.checked_add(x)).ok_or_else(overflow)
}

/// Number of parameters of `m` (as `params::Layout` lays them out), in checked arithmetic.
pub fn param_count(m: &ModelConfig) -> Result<u64> {
    let (v, c, f, l) = (m.vocab as u64, m.d_model as u64, m.d_ff as u64, m.layers as u64);
    let t = m.arch.position_rows(m.context) as u64;
    // A gated MLP's gate is a third (F, C) linear with its bias.
    let gate = if m.arch.mlp == crate::config::Mlp::Gated { mul(&[f, c + 1])? } else { 0 };
    let block = sum(&[
        mul(&[4, c])?,    // two norms' gains and biases
        mul(&[4, c, c])?, // q, k, v, o weights (shared key/value heads stored per query head)
        mul(&[4, c])?,    // their biases
        mul(&[2, c, f])?, // fc and proj weights
        f.checked_add(c).ok_or_else(overflow)?,
        gate,
    ])?;
    // A tied head reads the token embedding; the head's bias is kept either way.
    let head = if m.arch.tied_head { 0 } else { mul(&[c, v])? };
    // BERT's head transform: a (C, C) linear with its bias and a norm.
    let transform = if m.arch.head_transform { mul(&[c, c + 3])? } else { 0 };
    sum(&[mul(&[v, c])?, mul(&[t, c])?, mul(&[l, block])?, mul(&[2, c])?, transform, head, v])
}

/// Floats of one batch's forward cache and backward scratch (see `model::Cache` and `Grads`).
fn activation_floats(m: &ModelConfig, batch: u64) -> Result<u64> {
    let (v, c, f, t, l, nh) =
        (m.vocab as u64, m.d_model as u64, m.d_ff as u64, m.context as u64, m.layers as u64, m.heads as u64);
    let n = mul(&[batch, t])?;
    let att = mul(&[batch, nh, t, t])?;
    // Per block: 9 cached (N, C) rows and 5 of their gradients, 2 LayerNorm rstd, fc before and
    // after the activation and its gradient, the attention matrices.
    let per_block = sum(&[mul(&[14, n, c])?, mul(&[2, n])?, mul(&[3, n, f])?, att])?;
    // Residual stream, final LayerNorm and 3 scratch rows, rstd and the token ids, probabilities
    // and logit gradients, the MLP scratch and one (T, T) attention gradient.
    sum(&[
        mul(&[l, per_block])?,
        mul(&[l + 1, n, c])?,
        mul(&[5, n, c])?,
        mul(&[3, n])?,
        mul(&[2, n, v])?,
        mul(&[n, f])?,
        mul(&[t, t])?,
    ])
}

/// Floats of the optimizer's state.
fn optimizer_floats(cfg: &TrainConfig, params: u64) -> Result<u64> {
    let m = &cfg.model;
    Ok(match &cfg.optimizer {
        OptimizerConfig::Sgd { .. } => params,
        OptimizerConfig::Adam { .. } => mul(&[2, params])?,
        // AdamW's two moments over all parameters, a momentum per hidden matrix (at most the
        // parameters) and two (dout, din) scratch matrices of the largest layer.
        OptimizerConfig::Muon(_) => {
            let largest = (m.d_model as u64).max(m.d_ff as u64) * m.d_model as u64;
            sum(&[mul(&[3, params])?, mul(&[2, largest])?])?
        }
        // AdamW's two moments over all parameters, and per linear layer its factors L and R, their
        // bases and two (dout, din) moments; two scratch matrices of the largest layer.
        OptimizerConfig::Soap(_) => {
            let (c, f, v) = (m.d_model as u64, m.d_ff as u64, m.vocab as u64);
            let site = |din: u64, dout: u64| -> Result<u64> {
                sum(&[mul(&[2, din, din])?, mul(&[2, dout, dout])?, mul(&[2, dout, din])?])
            };
            let block = sum(&[mul(&[4, site(c, c)?])?, site(c, f)?, site(f, c)?])?;
            let largest = f.max(v).max(c) * c;
            sum(&[mul(&[m.layers as u64, block])?, site(c, v)?, mul(&[2, params])?, mul(&[2, largest])?])?
        }
        OptimizerConfig::Kfac(_) | OptimizerConfig::CgFac(_) => {
            // Per linear layer: A and G, their inverses, the solution and its velocity, and the
            // copy of all but the velocity a step keeps to undo itself; plus the per-token batch
            // copies of inputs and output gradients and Adam for the rest.
            let (c, f, v, n) =
                (m.d_model as u64 + 1, m.d_ff as u64 + 1, m.vocab as u64, mul(&[cfg.batch as u64, m.context as u64])?);
            let site = |din1: u64, dout: u64| -> Result<u64> {
                sum(&[mul(&[4, din1, din1])?, mul(&[4, dout, dout])?, mul(&[3, dout, din1])?])
            };
            let block = sum(&[mul(&[4, site(c, c - 1)?])?, site(c, f - 1)?, site(f, c - 1)?])?;
            sum(&[mul(&[m.layers as u64, block])?, site(c, v)?, mul(&[2, n, f.max(c).max(v)])?, mul(&[3, params])?])?
        }
    })
}

/// Bytes of a model's weights as f32.
pub fn weight_bytes(m: &ModelConfig) -> Result<u64> {
    mul(&[4, param_count(m)?])
}

/// Bytes one forward pass over `t` positions keeps when a text is read (`Model::read`): per block
/// 9 (T, C) rows, 2 rstd, fc before and after the activation (and a gated MLP's gate) and the attention matrices; the
/// residual stream, the final LayerNorm, the token ids, and the logits (T, V).
pub fn read_bytes(m: &ModelConfig, t: usize) -> Result<u64> {
    let (v, c, f, l, nh, t) =
        (m.vocab as u64, m.d_model as u64, m.d_ff as u64, m.layers as u64, m.heads as u64, t as u64);
    let mlp = if m.arch.mlp == crate::config::Mlp::Gated { 3 } else { 2 };
    let per_block = sum(&[mul(&[9, t, c])?, mul(&[2, t])?, mul(&[mlp, t, f])?, mul(&[nh, t, t])?])?;
    // BERT's head transform: its linear's output, its norm's centred rows and output, and 1/std.
    let transform = if m.arch.head_transform { sum(&[mul(&[3, t, c])?, t])? } else { 0 };
    let floats = sum(&[mul(&[l, per_block])?, mul(&[l + 3, t, c])?, mul(&[3, t])?, mul(&[t, v])?, transform])?;
    mul(&[4, floats])
}

/// Refuses to open a model whose weights, with the file they are read from (held meanwhile), are
/// over `budget`.
pub fn check_open(m: &ModelConfig, file_bytes: u64, budget: u64) -> Result<u64> {
    let weights = weight_bytes(m)?;
    // A weights file holds each weight in at most 8 bytes (F64), beside a header of at most 100 MB
    // and the causal masks older files keep (a T x T byte matrix a layer): a longer one (a download
    // that never ends) is no file of this model.
    let masks = (m.layers as u64).saturating_mul((m.context as u64).saturating_pow(2));
    let most = sum(&[weights.saturating_mul(2), masks, 100_000_000])?;
    if file_bytes > most {
        return Err(Error::Config(format!(
            "the weights' file is {}, more than this model's weights can take (at most {})",
            human(file_bytes),
            human(most)
        )));
    }
    let total = sum(&[weights, file_bytes])?;
    if total > budget {
        return Err(Error::Config(format!(
            "opening this model needs about {} (weights {}, and the file {} while it is read), over the memory limit \
             of {}: open a smaller model{}",
            human(total),
            human(weights),
            human(file_bytes),
            human(budget),
            if cfg!(target_arch = "wasm32") {
                ", or run it with `lab inspect`"
            } else {
                " or raise --memory-limit-mib"
            }
        )));
    }
    Ok(total)
}

/// Refuses to read `t` positions when the weights (and `copies`, the bytes the model keeps beside
/// them: `Model::bf16_bytes`) and the pass's cache are over `budget`.
pub fn check_read(m: &ModelConfig, copies: u64, t: usize, budget: u64) -> Result<u64> {
    let (weights, pass) = (sum(&[weight_bytes(m)?, copies])?, read_bytes(m, t)?);
    let total = sum(&[weights, pass])?;
    if total > budget {
        return Err(Error::Config(format!(
            "reading {t} tokens needs about {} (weights {}, the pass over the text {}), over the memory limit of {}: \
             shorten the text",
            human(total),
            human(weights),
            human(pass),
            human(budget)
        )));
    }
    Ok(total)
}

/// Bytes the page's reading keeps beside the pass (`lenses::first_view`): every head's attention
/// copied into the panels, and again into the message that carries them to the page.
pub fn drawn_bytes(m: &ModelConfig, t: usize) -> Result<u64> {
    mul(&[2, 4, m.layers as u64, m.heads as u64, t as u64, t as u64])
}

/// [`check_read`] for a reading the page draws: the pass and its drawn copies within `budget`.
pub fn check_draw(m: &ModelConfig, copies: u64, t: usize, budget: u64) -> Result<u64> {
    let (weights, pass, drawn) = (sum(&[weight_bytes(m)?, copies])?, read_bytes(m, t)?, drawn_bytes(m, t)?);
    let total = sum(&[weights, pass, drawn])?;
    if total > budget {
        return Err(Error::Config(format!(
            "reading {t} tokens here needs about {} (weights {}, the pass over the text {}, every head's attention \
             drawn {}), over the memory limit of {}: shorten the text, or read it with `lab inspect`",
            human(total),
            human(weights),
            human(pass),
            human(drawn),
            human(budget)
        )));
    }
    Ok(total)
}

/// The estimate for `cfg` with a probe history of `probe_bytes`.
pub fn estimate(cfg: &TrainConfig, probe_bytes: u64) -> Result<Estimate> {
    let p = param_count(&cfg.model)?;
    let opt = optimizer_floats(cfg, p)?;
    let params = mul(&[4, p])?;
    let optimizer = mul(&[4, opt])?;
    // Training and the probe share the batch cache size; gradients are one more copy of the params
    // per data-parallel shard, plus their sum (`train::shards`; K-FAC and CG-FAC take one shard).
    let shards = if cfg.optimizer.second_order().is_some() { 1 } else { (SHARDS as u64).min(cfg.batch.max(1) as u64) };
    let grads = mul(&[params, if shards > 1 { shards + 1 } else { 1 }])?;
    let activations = sum(&[mul(&[4, activation_floats(&cfg.model, cfg.batch as u64)?])?, grads])?;
    let rollback = mul(&[2, sum(&[params, optimizer])?])?;
    let known = sum(&[params, optimizer, activations, rollback, probe_bytes])?;
    let working = known / 8 + (4 << 20);
    let total = sum(&[known, working])?;
    Ok(Estimate { params, optimizer, activations, rollback, probe: probe_bytes, working, total })
}

/// Floating-point operations of one training step (forward, and backward at twice the forward),
/// counting the matrix products, which dominate: per token and layer 2(4C² + 2CF) for the linear
/// layers and 4TC for the full T x T attention products, and 2CV for the head.
pub fn step_flops(cfg: &TrainConfig) -> f64 {
    let t = cfg.model.context;
    3.0 * (trunk_flops(&cfg.model, t) + head_flops(&cfg.model)) * (cfg.batch * t) as f64
}

/// Matrix-product FLOPs of one token through the blocks, attending to `seen` positions: 2(4C² + 2CF)
/// for the linear layers and 4 seen C for attention's two products, per layer.
pub fn trunk_flops(m: &ModelConfig, seen: usize) -> f64 {
    let (c, f, l) = (m.d_model as f64, m.d_ff as f64, m.layers as f64);
    l * (8.0 * c * c + 4.0 * c * f + 4.0 * seen as f64 * c)
}

/// Matrix-product FLOPs of one token's logits: 2CV.
pub fn head_flops(m: &ModelConfig) -> f64 {
    2.0 * (m.d_model * m.vocab.max(1)) as f64
}

/// Bytes as people read them.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = bytes as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < UNITS.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{x:.1} {}", UNITS[u])
    }
}

/// Refuses a run whose estimate is over `budget`, naming both.
pub fn check(cfg: &TrainConfig, probe_bytes: u64, budget: u64) -> Result<Estimate> {
    let e = estimate(cfg, probe_bytes)?;
    if e.total > budget {
        return Err(Error::Config(format!(
            "this run needs about {} (weights {}, optimizer {}, activations {}, rollback {}, probe {}, \
             working memory {}), over the memory limit of {}: make the model, the context or the batch smaller",
            human(e.total),
            human(e.params),
            human(e.optimizer),
            human(e.activations),
            human(e.rollback),
            human(e.probe),
            human(e.working),
            human(budget)
        )));
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cache, Grads, Model};

    #[test]
    fn parameter_count_matches_the_layout() {
        for (d_model, heads, layers, d_ff, context, vocab) in [(32, 4, 2, 128, 32, 27), (48, 3, 1, 80, 7, 11)] {
            let m = ModelConfig { d_model, heads, layers, d_ff, context, vocab, ..ModelConfig::default() };
            let model = Model::<f32>::new(m.clone()).unwrap();
            assert_eq!(param_count(&m).unwrap(), model.num_params() as u64);
        }
        // Every real model's block: rotary positions store no rows, a gate is a third linear,
        // a tied head no matrix.
        use crate::config::{Arch, Mlp, NormKind, Positions};
        let rotary = Positions::Rotary { dims: 4, base: 1e4, scaling: Default::default() };
        let arches = [
            Arch::gpt2(),
            Arch { positions: rotary, parallel_residual: true, ..Arch::default() },
            Arch { norm: NormKind::RmsNorm, positions: rotary, mlp: Mlp::Gated, kv_heads: 2, ..Arch::gpt2() },
            Arch { post_norm: true, head_transform: true, ..Arch::gpt2() },
        ];
        for arch in arches {
            let m = ModelConfig {
                d_model: 32,
                heads: 4,
                layers: 2,
                d_ff: 56,
                context: 9,
                vocab: 13,
                arch,
                ..Default::default()
            };
            let layout = crate::model::params::Layout::new(&m);
            assert_eq!(param_count(&m).unwrap(), layout.total as u64, "{:?}", m.arch);
        }
    }

    #[test]
    fn reading_a_text_counts_what_the_pass_allocates() {
        let m =
            ModelConfig { d_model: 16, heads: 2, layers: 3, d_ff: 40, context: 9, vocab: 13, ..ModelConfig::default() };
        for t in [1, 5, 9] {
            let logits = t * m.vocab;
            assert_eq!(read_bytes(&m, t).unwrap(), 4 * (Cache::<f32>::window(&m, 1, t).floats() + logits) as u64);
        }
        let gpt2 = ModelConfig { arch: crate::config::Arch::gpt2(), ..m.clone() };
        assert_eq!(weight_bytes(&gpt2).unwrap(), 4 * crate::model::params::Layout::new(&gpt2).total as u64);
        let err = check_read(&m, 0, 9, 1000).unwrap_err().to_string();
        assert!(err.contains("reading 9 tokens needs about") && err.contains("1000 B"), "{err}");
        // The copies a model keeps count with its weights.
        let fits = check_read(&m, 0, 9, 1 << 30).unwrap();
        assert_eq!(check_read(&m, 1000, 9, 1 << 30).unwrap(), fits + 1000);
        assert!(check_open(&m, 1 << 20, 1 << 20).unwrap_err().to_string().contains("and the file 1.0 MiB"));
    }

    #[test]
    fn activation_count_matches_the_allocations() {
        let m =
            ModelConfig { d_model: 16, heads: 2, layers: 3, d_ff: 40, context: 9, vocab: 13, ..ModelConfig::default() };
        let model = Model::<f32>::new(m.clone()).unwrap();
        let b = 5;
        let cache = Cache::<f32>::new(&m, b);
        let grads = Grads::new(&model, b);
        let real = cache.floats() + grads.floats() - model.num_params();
        assert_eq!(activation_floats(&m, b as u64).unwrap() as usize, real);
    }

    #[test]
    fn the_sizes_of_the_bug_report_are_refused_with_both_numbers() {
        let mut cfg = TrainConfig::browser_default();
        cfg.model = ModelConfig { d_model: 1024, heads: 1024, layers: 32, context: 1024, vocab: 27, ..cfg.model };
        cfg.batch = 1024;
        let msg = check(&cfg, 0, 1 << 30).unwrap_err().to_string();
        assert!(msg.contains("over the memory limit of 1.0 GiB") && msg.contains("TiB"), "{msg}");
        cfg.model = ModelConfig { d_model: 512, heads: 8, layers: 8, context: 256, ..cfg.model };
        cfg.batch = 32;
        assert!(check(&cfg, 0, 1 << 30).is_err());
        assert!(check(
            &TrainConfig {
                model: ModelConfig { vocab: 27, ..TrainConfig::browser_default().model },
                ..TrainConfig::browser_default()
            },
            16 << 20,
            1 << 30
        )
        .is_ok());
    }

    #[test]
    fn step_flops_of_the_small_size_match_the_hand_count() {
        // d64 L2 H4 T64 B16, F = 256, V = 27: the "0.73 GFLOP" small step.
        let mut cfg = TrainConfig::default();
        cfg.model.vocab = 27;
        let per_token = 2.0 * (8.0 * 64.0f64.powi(2) + 4.0 * 64.0 * 256.0 + 4.0 * 64.0 * 64.0) + 2.0 * 64.0 * 27.0;
        assert_eq!(step_flops(&cfg), 3.0 * per_token * 16.0 * 64.0);
        assert!((0.6e9..0.8e9).contains(&step_flops(&cfg)), "{}", step_flops(&cfg));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 << 20), "3.0 MiB");
    }
}
