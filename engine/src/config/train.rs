//! A training run: the model, the data, the optimizer and its rate, the schedule and the steps,
//! and the lab's limits on what it trains (a browser tab's size).

use serde::{Deserialize, Serialize};

use super::{DataSpec, ModelConfig, OptimizerConfig, Schedule};
use crate::error::{Error, Result};

/// Largest vocabulary the lab accepts (characters of the user's text, or task symbols).
pub const MAX_VOCAB: usize = 256;
/// Largest width and context: the lab is for models that fit a browser tab.
pub const MAX_D_MODEL: usize = 1024;
pub const MAX_CONTEXT: usize = 1024;
/// Most validation batches an evaluation may average: more is a typo, and would never end.
pub const MAX_EVAL_BATCHES: usize = 1000;
pub const MAX_LAYERS: usize = 32;

/// The lab trains models that fit a browser tab: refused above these sizes (a real model opened
/// from its files has its own budget, `memory`).
fn lab_limits(m: &ModelConfig) -> Result<()> {
    if m.vocab > MAX_VOCAB {
        return Err(Error::Config(format!("vocabulary of {} symbols is over the limit of {MAX_VOCAB}", m.vocab)));
    }
    let limits = [
        ("d_model", m.d_model, MAX_D_MODEL),
        ("d_ff", m.d_ff, 4 * MAX_D_MODEL),
        ("context", m.context, MAX_CONTEXT),
        ("layers", m.layers, MAX_LAYERS),
    ];
    for (name, v, max) in limits {
        if v > max {
            return Err(Error::Config(format!("{name} = {v} is over the limit of {max}")));
        }
    }
    // The backward passes, the optimizers' layers and the GPU trainer are written for the lab's
    // block; the other blocks are for reading real models.
    if !m.activation.trains() {
        return Err(Error::Config(format!(
            "activation {:?} is for reading real models; the lab trains with gelu, relu or identity",
            m.activation
        )));
    }
    if !m.arch.is_lab_block() {
        return Err(Error::Config(format!(
            "the lab trains its own Pre-LN block; this one ({}) is for reading real models",
            m.arch.describe(m.heads)
        )));
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub model: ModelConfig,
    pub data: DataSpec,
    pub optimizer: OptimizerConfig,
    pub lr: f32,
    pub schedule: Schedule,
    /// Global gradient-norm clip; 0 turns it off.
    pub clip: f32,
    pub batch: usize,
    pub steps: usize,
    pub eval_every: usize,
    pub eval_batches: usize,
    /// Seed of the data (generation, split and batch order).
    pub seed: u64,
}

impl Default for TrainConfig {
    /// The built-in default experiment: the grammar, a 2-layer model, AdamW.
    fn default() -> Self {
        TrainConfig {
            model: ModelConfig::default(),
            data: DataSpec::Grammar,
            optimizer: OptimizerConfig::adam(),
            lr: 1e-2,
            schedule: Schedule::WarmupCosine { warmup: 50, min_ratio: 0.1 },
            clip: 1.0,
            batch: 16,
            steps: 600,
            eval_every: 50,
            eval_batches: 4,
            seed: 0,
        }
    }
}

impl TrainConfig {
    /// A smaller default that trains visibly within seconds in a browser tab on the CPU path.
    pub fn browser_default() -> Self {
        TrainConfig {
            model: ModelConfig { d_model: 32, heads: 4, layers: 2, d_ff: 128, context: 32, ..ModelConfig::default() },
            batch: 8,
            steps: 400,
            eval_every: 20,
            eval_batches: 2,
            schedule: Schedule::WarmupCosine { warmup: 20, min_ratio: 0.1 },
            ..TrainConfig::default()
        }
    }

    /// Checks every field; `validate` (in `memory`) checks that the run fits its budget too.
    pub fn validate_fields(&self) -> Result<()> {
        if self.batch == 0 {
            return Err(Error::Config("batch must be positive, got 0".into()));
        }
        if self.eval_batches == 0 {
            return Err(Error::Config("eval_batches must be positive, got 0".into()));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(Error::Config(format!("learning rate must be positive and finite, got {}", self.lr)));
        }
        if !(self.clip.is_finite() && self.clip >= 0.0) {
            return Err(Error::Config(format!("clip must be 0 (off) or positive, got {}", self.clip)));
        }
        self.schedule.validate(self.steps)?;
        let tokens = (self.batch as u64).saturating_mul(self.model.context as u64);
        if tokens > 1 << 20 {
            return Err(Error::Config(format!("batch x context = {tokens} tokens is over the limit of {}", 1 << 20)));
        }
        if self.eval_batches > MAX_EVAL_BATCHES {
            return Err(Error::Config(format!(
                "eval_batches = {} is over the limit of {MAX_EVAL_BATCHES}",
                self.eval_batches
            )));
        }
        match &self.optimizer {
            OptimizerConfig::Muon(c) => c.validate()?,
            OptimizerConfig::Soap(c) => c.validate()?,
            &OptimizerConfig::Adam { beta1, beta2, eps, weight_decay } => {
                let unit = |b: f32| b.is_finite() && (0.0..1.0).contains(&b);
                if !(unit(beta1) && unit(beta2)) {
                    return Err(Error::Config(format!("Adam's betas must be in [0, 1), got {beta1} and {beta2}")));
                }
                if !(eps.is_finite() && eps > 0.0 && weight_decay.is_finite() && weight_decay >= 0.0) {
                    return Err(Error::Config(format!(
                        "Adam's eps must be positive and weight_decay non-negative, got {eps} and {weight_decay}"
                    )));
                }
            }
            &OptimizerConfig::Sgd { momentum, weight_decay }
                if !(momentum.is_finite()
                    && (0.0..1.0).contains(&momentum)
                    && weight_decay.is_finite()
                    && weight_decay >= 0.0) =>
            {
                return Err(Error::Config(format!(
                    "SGD's momentum must be in [0, 1) and weight_decay non-negative, got {momentum} and {weight_decay}"
                )));
            }
            _ => {}
        }
        if let Some(so) = self.optimizer.second_order() {
            so.validate()?;
        }
        self.model.check()?;
        lab_limits(&self.model)
    }
}
