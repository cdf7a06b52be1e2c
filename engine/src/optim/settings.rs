//! The optimizers' own settings (serde, part of a run's JSON): SGD and AdamW's, Muon's, SOAP's,
//! and K-FAC / CG-FAC's (which Fisher, which products, damping, the CG solve).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum OptimizerConfig {
    Sgd {
        momentum: f32,
        weight_decay: f32,
    },
    Adam {
        beta1: f32,
        beta2: f32,
        eps: f32,
        weight_decay: f32,
    },
    Kfac(SecondOrderConfig),
    #[serde(rename = "cgfac")]
    CgFac(SecondOrderConfig),
    Muon(MuonConfig),
    Soap(SoapConfig),
}

/// SOAP's settings (`optim::soap`): Adam's moments in the eigenbasis of Shampoo's factors, which
/// are refreshed every `precondition_interval` steps.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoapConfig {
    pub beta1: f32,
    /// The second moment's and the factors' averaging.
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub precondition_interval: usize,
}

impl Default for SoapConfig {
    /// The paper's settings: betas (0.95, 0.95), a new basis every 10 steps.
    fn default() -> Self {
        SoapConfig { beta1: 0.95, beta2: 0.95, eps: 1e-8, weight_decay: 0.01, precondition_interval: 10 }
    }
}

impl SoapConfig {
    pub fn validate(&self) -> Result<()> {
        let unit = |b: f32| b.is_finite() && (0.0..1.0).contains(&b);
        if !(unit(self.beta1) && unit(self.beta2)) {
            return Err(Error::Config(format!(
                "SOAP's betas must be in [0, 1), got {} and {}",
                self.beta1, self.beta2
            )));
        }
        if !(self.eps.is_finite() && self.eps > 0.0 && self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(Error::Config(format!(
                "SOAP's eps must be positive and weight_decay non-negative, got {} and {}",
                self.eps, self.weight_decay
            )));
        }
        if self.precondition_interval == 0 {
            return Err(Error::Config("SOAP's precondition_interval must be at least 1".into()));
        }
        Ok(())
    }
}

/// Muon's settings (`optim::muon`): momentum and Newton-Schulz steps for the hidden matrices, AdamW
/// for the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MuonConfig {
    pub momentum: f32,
    /// Orthogonalise g + momentum m (Nesterov) rather than m.
    pub nesterov: bool,
    pub ns_steps: usize,
    /// Decoupled weight decay on the matrices, times the learning rate.
    pub weight_decay: f32,
    /// AdamW's learning rate for embeddings, LayerNorm, biases and the head (scaled by the schedule).
    pub adam_lr: f32,
}

impl Default for MuonConfig {
    /// The modded-nanogpt settings: momentum 0.95 with Nesterov, five Newton-Schulz steps.
    fn default() -> Self {
        MuonConfig { momentum: 0.95, nesterov: true, ns_steps: 5, weight_decay: 0.0, adam_lr: 1e-2 }
    }
}

impl MuonConfig {
    pub fn validate(&self) -> Result<()> {
        if !(self.momentum.is_finite() && (0.0..1.0).contains(&self.momentum)) {
            return Err(Error::Config(format!("Muon momentum must be in [0, 1), got {}", self.momentum)));
        }
        if self.ns_steps == 0 || self.ns_steps > 20 {
            return Err(Error::Config(format!("Muon needs 1 to 20 Newton-Schulz steps, got {}", self.ns_steps)));
        }
        if !(self.adam_lr.is_finite()
            && self.adam_lr > 0.0
            && self.weight_decay.is_finite()
            && self.weight_decay >= 0.0)
        {
            return Err(Error::Config(format!(
                "Muon's adam_lr must be positive and weight_decay non-negative, got {} and {}",
                self.adam_lr, self.weight_decay
            )));
        }
        Ok(())
    }
}

impl OptimizerConfig {
    /// The names `named` takes (besides the alias "adamw"), in the order the page lists them.
    pub const NAMES: [&'static str; 6] = ["sgd", "adam", "muon", "soap", "kfac", "cgfac"];

    pub fn sgd() -> Self {
        OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.0 }
    }
    pub fn adam() -> Self {
        OptimizerConfig::Adam { beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.01 }
    }
    pub fn named(name: &str) -> Result<Self> {
        match name {
            "sgd" => Ok(Self::sgd()),
            "adam" | "adamw" => Ok(Self::adam()),
            "kfac" => Ok(OptimizerConfig::Kfac(SecondOrderConfig::new(Method::Kfac))),
            "cgfac" => Ok(OptimizerConfig::CgFac(SecondOrderConfig::new(Method::CgFac))),
            "muon" => Ok(OptimizerConfig::Muon(MuonConfig::default())),
            "soap" => Ok(OptimizerConfig::Soap(SoapConfig::default())),
            _ => Err(Error::Config(format!("unknown optimizer {name:?}; use {}", Self::NAMES.join(", ")))),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            OptimizerConfig::Sgd { .. } => "sgd",
            OptimizerConfig::Adam { .. } => "adam",
            OptimizerConfig::Kfac(_) => "kfac",
            OptimizerConfig::CgFac(_) => "cgfac",
            OptimizerConfig::Muon(_) => "muon",
            OptimizerConfig::Soap(_) => "soap",
        }
    }
    /// The learning rate each optimizer starts from when none is given (see README's sweep).
    pub fn default_lr(&self) -> f32 {
        match self {
            OptimizerConfig::Sgd { .. } => 1.0,
            OptimizerConfig::Adam { .. } => 1e-2,
            OptimizerConfig::Kfac(_) => 0.3,
            OptimizerConfig::CgFac(_) => 0.03,
            OptimizerConfig::Muon(_) => 0.02,
            OptimizerConfig::Soap(_) => 1e-2,
        }
    }

    /// The second-order settings, when this is K-FAC or CG-FAC.
    pub fn second_order(&self) -> Option<&SecondOrderConfig> {
        match self {
            OptimizerConfig::Kfac(c) | OptimizerConfig::CgFac(c) => Some(c),
            _ => None,
        }
    }
    pub fn second_order_mut(&mut self) -> Option<&mut SecondOrderConfig> {
        match self {
            OptimizerConfig::Kfac(c) | OptimizerConfig::CgFac(c) => Some(c),
            _ => None,
        }
    }
}

/// Which second-order optimizer: K-FAC (explicit inverses) or CG-FAC (matrix-free CG).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Kfac,
    CgFac,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SecondOrderConfig {
    /// lambda: Tikhonov damping (K-FAC splits it between the factors, see `pi_damping`).
    pub damping: f32,
    /// K-FAC: damp `A + pi sqrt(lambda) I` and `G + sqrt(lambda)/pi I` with
    /// `pi = sqrt((tr A / dim A) / (tr G / dim G))` (Martens and Grosse 2015, sec. 6.3), so the
    /// damping is the same share of each factor's scale; off: sqrt(lambda) on both.
    #[serde(default = "on")]
    pub pi_damping: bool,
    /// Which Fisher the factors and products estimate (docs/science.md#which-fisher).
    #[serde(default)]
    pub fisher: Fisher,
    /// Running-average decay of the factors A and G.
    pub decay: f32,
    /// Steps between factor updates.
    pub update_interval: usize,
    /// Steps between K-FAC inverse refreshes.
    pub inverse_interval: usize,
    /// CG-FAC: iteration cap and relative-residual tolerance on |r|^2/|r0|^2.
    pub max_iters: usize,
    pub tol: f32,
    /// CG-FAC: start from the previous solution instead of zero.
    pub warm_start: bool,
    pub product: Product,
    /// KL-clip kappa; 0 turns it off.
    pub kl_clip: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    /// AdamW learning rate of the tensors that are not linear layers (scaled by the schedule).
    pub adam_lr: f32,
}

fn on() -> bool {
    true
}

impl SecondOrderConfig {
    /// Published defaults (docs/science.md#cg-fac: 10 CG iterations, tolerance 1e-2, factor decay 0.95),
    /// except damping 1e-2 instead of 1e-3: the lab's sweep (README, bench/sweep.sh) chose it.
    pub fn new(method: Method) -> Self {
        SecondOrderConfig {
            damping: 1e-2,
            pi_damping: true,
            fisher: Fisher::Empirical,
            decay: 0.95,
            update_interval: 1,
            inverse_interval: if method == Method::Kfac { 10 } else { 1 },
            max_iters: 10,
            tol: 1e-2,
            warm_start: false,
            product: Product::Factors,
            kl_clip: 1e-3,
            momentum: 0.9,
            weight_decay: 0.0,
            adam_lr: 1e-2,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if !(self.damping.is_finite() && self.damping > 0.0) {
            return bad(format!("damping must be positive and finite, got {}", self.damping));
        }
        if !(self.decay.is_finite() && (0.0..1.0).contains(&self.decay)) {
            return bad(format!("factor decay must be in [0, 1), got {}", self.decay));
        }
        if self.max_iters == 0 {
            return bad("CG max iterations must be at least 1, got 0".into());
        }
        if !(self.tol > 0.0 && self.tol < 1.0) {
            return bad(format!("CG tolerance must be in (0, 1), got {}", self.tol));
        }
        if self.update_interval == 0 || self.inverse_interval == 0 {
            return bad("update and inverse intervals must be at least 1".into());
        }
        if !(self.kl_clip.is_finite() && self.kl_clip >= 0.0) {
            return bad(format!("KL-clip must be 0 (off) or positive, got {}", self.kl_clip));
        }
        if !(self.momentum.is_finite() && (0.0..1.0).contains(&self.momentum)) {
            return bad(format!("momentum must be in [0, 1), got {}", self.momentum));
        }
        if !(self.adam_lr.is_finite() && self.adam_lr > 0.0) {
            return bad(format!("adam_lr must be positive, got {}", self.adam_lr));
        }
        Ok(())
    }
}

/// The output gradients the curvature is built from: the batch's own labels (the empirical Fisher,
/// the default), or labels drawn from the model's predictive distribution at each scored position
/// (the Fisher itself, what a KL-divergence constraint means; Kunstner et al. 2019 on why they differ).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fisher {
    #[default]
    Empirical,
    Sampled,
}

impl std::str::FromStr for Fisher {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::error::Result<Self> {
        match s {
            "empirical" => Ok(Fisher::Empirical),
            "sampled" | "true" => Ok(Fisher::Sampled),
            _ => Err(crate::Error::Config(format!("unknown Fisher {s:?}; use empirical or sampled"))),
        }
    }
}

/// The curvature product CG-FAC multiplies by (`optim::kronecker` has the products themselves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Product {
    Factors,
    MatrixFree,
    ExactFisher,
}

impl std::str::FromStr for Product {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::error::Result<Self> {
        match s {
            "factors" => Ok(Product::Factors),
            "matrix-free" | "matrix_free" => Ok(Product::MatrixFree),
            "exact-fisher" | "exact_fisher" | "fisher" => Ok(Product::ExactFisher),
            _ => {
                Err(crate::Error::Config(format!("unknown CG product {s:?}; use factors, matrix-free or exact-fisher")))
            }
        }
    }
}
