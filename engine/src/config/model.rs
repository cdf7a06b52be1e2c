//! A model's sizes and shape, and its own checks (the lab's limits on what it trains are the run's:
//! `train`).

use serde::{Deserialize, Serialize};

use super::arch::Arch;
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// GPT-2's tanh form.
    Gelu,
    Relu,
    Identity,
    /// `x Φ(x)` with the normal CDF itself (GPT-NeoX's "gelu"): for reading real models.
    GeluExact,
    /// `x σ(x)`, the gated MLP's (Llama, Qwen2): for reading real models.
    Silu,
}

impl Activation {
    /// The lab trains with these (the GPU trainer has their kernels); the others read real models.
    pub fn trains(self) -> bool {
        matches!(self, Activation::Gelu | Activation::Relu | Activation::Identity)
    }
}

impl std::str::FromStr for Activation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "gelu" => Ok(Activation::Gelu),
            "relu" => Ok(Activation::Relu),
            "identity" | "linear" => Ok(Activation::Identity),
            _ => Err(Error::Config(format!("unknown activation {s:?}; use gelu, relu or identity"))),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Filled in from the data set when a run starts.
    pub vocab: usize,
    pub d_model: usize,
    pub heads: usize,
    pub layers: usize,
    pub d_ff: usize,
    pub context: usize,
    pub activation: Activation,
    pub causal: bool,
    /// Seed of the weight initialisation.
    pub seed: u64,
    /// What the block does beyond its sizes; the lab's own block unless a real model says otherwise.
    #[serde(default, skip_serializing_if = "Arch::is_lab_block")]
    pub arch: Arch,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            vocab: 0,
            d_model: 64,
            heads: 4,
            layers: 2,
            d_ff: 256,
            context: 64,
            activation: Activation::Gelu,
            causal: true,
            seed: 0,
            arch: Arch::default(),
        }
    }
}

impl ModelConfig {
    /// The default model at another size, its MLP 4x as wide as the model (vocabulary from the data).
    pub fn sized(d_model: usize, layers: usize, heads: usize, context: usize) -> Self {
        ModelConfig { d_model, layers, heads, d_ff: 4 * d_model, context, ..ModelConfig::default() }
    }

    /// The model's own checks, whatever runs it (the lab's training, a real model opened from its
    /// files): every size positive, the heads dividing the width.
    pub fn check(&self) -> Result<()> {
        let positive = [
            ("vocab", self.vocab),
            ("d_model", self.d_model),
            ("heads", self.heads),
            ("layers", self.layers),
            ("d_ff", self.d_ff),
            ("context", self.context),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(Error::Config(format!("{name} must be positive, got 0")));
            }
        }
        if !self.d_model.is_multiple_of(self.heads) {
            return Err(Error::Config(format!("heads ({}) must divide d_model ({})", self.heads, self.d_model)));
        }
        self.arch.check(self.heads, self.head_size())
    }

    pub fn head_size(&self) -> usize {
        self.d_model / self.heads
    }
}
