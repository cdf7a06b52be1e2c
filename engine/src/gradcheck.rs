//! Finite-difference check of the hand-written backward pass, in f64, on small models.
//!
//! For each tensor, the relative error is `|g - g_fd| / max(|g|, |g_fd|, 1e-3 |G|)` over the checked
//! entries (norms over the entries, so a single tiny gradient cannot dominate through round-off). A
//! tensor whose true gradient is exactly zero (the key bias: softmax ignores a shift shared by a row)
//! is judged against the scale of the whole gradient G, so its round-off is not mistaken for an error
//! and `max_rel_err` is the worst real one. Central differences in f64 reach ~1e-9 here: a correct
//! backward pass stays below [`TOLERANCE`].

use rand::Rng;
use serde::Serialize;

use crate::config::{Activation, ModelConfig};
use crate::error::Result;
use crate::model::{Cache, Grads, Model};
use crate::nn::loss::IGNORE;
use crate::rng::{rng, Stream};

const STEP: f64 = 1e-5;
/// Entries checked per tensor (all of them when the tensor is smaller).
const ENTRIES: usize = 24;
/// What a correct backward pass stays below (measured: a few 1e-8).
pub const TOLERANCE: f64 = 1e-6;
/// The share of the whole gradient's norm a tensor's error is judged against when its own is zero.
const SCALE_FLOOR: f64 = 1e-3;

#[derive(Clone, Debug, Serialize)]
pub struct TensorError {
    pub name: String,
    pub rel_err: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct CaseReport {
    pub activation: Activation,
    pub causal: bool,
    pub tensors: Vec<TensorError>,
    pub max_rel_err: f64,
}

/// A tiny model that still has every part: two layers, two heads, an ignored target.
pub fn small_config(activation: Activation, causal: bool) -> ModelConfig {
    ModelConfig {
        vocab: 7,
        d_model: 8,
        heads: 2,
        layers: 2,
        d_ff: 12,
        context: 5,
        activation,
        causal,
        seed: 11,
        ..ModelConfig::default()
    }
}

pub fn check(cfg: ModelConfig, batch: usize) -> Result<CaseReport> {
    check_tampered(cfg, batch, |_| {})
}

/// As `check`, with `tamper` applied to the analytic gradients first (how the tests show that a
/// wrong backward pass fails the check).
fn check_tampered(cfg: ModelConfig, batch: usize, tamper: impl Fn(&mut Grads<f64>)) -> Result<CaseReport> {
    let mut model = Model::<f64>::new(cfg.clone())?;
    // Random LayerNorm gains and biases, so their gradients are not special.
    let mut r = rng(cfg.seed, Stream::Init, 99);
    for v in model.params.iter_mut() {
        *v += r.random_range(-0.3..0.3);
    }
    let n = batch * cfg.context;
    let tokens: Vec<u32> = (0..n).map(|_| r.random_range(0..cfg.vocab as u32)).collect();
    let mut targets: Vec<u32> = (0..n).map(|_| r.random_range(0..cfg.vocab as u32)).collect();
    targets[1] = IGNORE;
    let mut cache = Cache::new(&cfg, batch);
    let mut grads = Grads::new(&model, batch);
    model.forward(&mut cache, &tokens, &targets)?;
    model.backward(&cache, &mut grads);
    tamper(&mut grads);
    let scale = SCALE_FLOOR * grads.data.iter().map(|g| g * g).sum::<f64>().sqrt();

    let mut tensors = Vec::new();
    for info in model.layout.tensors.clone() {
        let picks: Vec<usize> = if info.len <= ENTRIES {
            (0..info.len).collect()
        } else {
            (0..ENTRIES).map(|_| r.random_range(0..info.len)).collect()
        };
        let (mut diff, mut a_norm, mut n_norm) = (0.0f64, 0.0f64, 0.0f64);
        for j in picks {
            let idx = info.offset + j;
            let orig = model.params[idx];
            model.params[idx] = orig + STEP;
            let plus = model.forward(&mut cache, &tokens, &targets)?;
            model.params[idx] = orig - STEP;
            let minus = model.forward(&mut cache, &tokens, &targets)?;
            model.params[idx] = orig;
            let numeric = (plus - minus) / (2.0 * STEP);
            let analytic = grads.data[idx];
            diff += (analytic - numeric).powi(2);
            a_norm += analytic.powi(2);
            n_norm += numeric.powi(2);
        }
        let denom = a_norm.sqrt().max(n_norm.sqrt()).max(scale).max(f64::MIN_POSITIVE);
        tensors.push(TensorError { name: info.name.clone(), rel_err: diff.sqrt() / denom });
    }
    let max_rel_err = tensors.iter().map(|t| t.rel_err).fold(0.0, f64::max);
    Ok(CaseReport { activation: cfg.activation, causal: cfg.causal, tensors, max_rel_err })
}

/// Every activation, causal and bidirectional.
pub fn check_all() -> Result<Vec<CaseReport>> {
    let mut out = Vec::new();
    for act in [Activation::Gelu, Activation::Relu, Activation::Identity] {
        for causal in [true, false] {
            out.push(check(small_config(act, causal), 2)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tensor_matches_finite_differences() {
        for case in check_all().unwrap() {
            for t in &case.tensors {
                assert!(
                    t.rel_err < TOLERANCE,
                    "{:?} causal={} {}: {}",
                    case.activation,
                    case.causal,
                    t.name,
                    t.rel_err
                );
            }
        }
    }

    /// A head tied to the token embedding: its weight's gradient is the head's product added to the
    /// embedding's rows.
    #[test]
    fn a_tied_head_matches_finite_differences() {
        let small = small_config(Activation::Gelu, true);
        let cfg = ModelConfig { arch: crate::config::Arch { tied_head: true, ..small.arch.clone() }, ..small };
        let report = check(cfg, 2).unwrap();
        assert!(!report.tensors.iter().any(|t| t.name.starts_with("head.weight")), "the head has no weight of its own");
        assert!(report.max_rel_err < TOLERANCE, "{:?}", report.tensors);
    }

    #[test]
    fn a_gradient_wrong_by_a_tenth_of_a_percent_fails_the_check() {
        let cfg = small_config(Activation::Gelu, true);
        let model = Model::<f64>::new(cfg.clone()).unwrap();
        let q = model.layout.tensors.iter().find(|t| t.name == "blocks.0.attn.q.weight").unwrap().range();
        let report = check_tampered(cfg, 2, |g| g.data[q.clone()].iter_mut().for_each(|x| *x *= 1.001)).unwrap();
        let bad = report.tensors.iter().find(|t| t.name == "blocks.0.attn.q.weight").unwrap();
        assert!(bad.rel_err > 100.0 * TOLERANCE, "a 0.1% error reads {}", bad.rel_err);
        assert!(report.max_rel_err >= bad.rel_err);
    }
}
