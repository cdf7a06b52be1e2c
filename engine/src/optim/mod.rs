//! Optimizers over the flat parameter buffer. Each one sees the whole step (parameters, gradients
//! and the forward cache), so second-order methods that need layer inputs and output gradients plug
//! in beside the first-order ones.

pub mod adam;
pub mod cg;
pub mod clip;
pub mod curvature;
pub mod kfac;
pub mod kronecker;
pub mod muon;
#[cfg(not(target_arch = "wasm32"))]
pub mod pieces;
pub mod schedule;
pub mod second_order;
pub mod settings;
pub mod sgd;
pub mod soap;

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::model::{Cache, Grads, Model};
use second_order::{Diagnostics, Method, SecondOrder};
use settings::OptimizerConfig;

/// What one step reads: the gradients and cache of the last forward/backward, and the learning
/// rate `lr` (the schedule's `factor` times the base rate). The step's gradient is `grads` times
/// `clip`, the clipping's factor (`Optimizer::take_clip`).
#[derive(Clone, Copy)]
pub struct StepInput<'a> {
    pub grads: &'a Grads<f32>,
    pub cache: &'a Cache<f32>,
    pub lr: f32,
    pub factor: f32,
    pub clip: f32,
    /// Threads SGD's and Adam's updates may use (`pieces`); the bits do not depend on it.
    pub threads: usize,
}

/// Hands out a saved optimizer state by name and length (the state of `state()`), for `load_state`.
pub type Take<'a, E = Error> = dyn FnMut(&str, usize) -> std::result::Result<Vec<f32>, E> + 'a;

pub enum Optimizer {
    Sgd(sgd::Sgd),
    Adam(adam::Adam),
    SecondOrder(Box<SecondOrder>),
    Muon(Box<muon::Muon>),
    Soap(Box<soap::Soap>),
}

impl Optimizer {
    pub fn new(cfg: &OptimizerConfig, model: &Model<f32>) -> Self {
        match cfg {
            &OptimizerConfig::Sgd { momentum, weight_decay } => {
                Optimizer::Sgd(sgd::Sgd::new(momentum, weight_decay, model.num_params()))
            }
            &OptimizerConfig::Adam { beta1, beta2, eps, weight_decay } => {
                Optimizer::Adam(adam::Adam::new(beta1, beta2, eps, weight_decay, model.num_params()))
            }
            OptimizerConfig::Kfac(c) => {
                Optimizer::SecondOrder(Box::new(SecondOrder::new(Method::Kfac, c.clone(), model)))
            }
            OptimizerConfig::CgFac(c) => {
                Optimizer::SecondOrder(Box::new(SecondOrder::new(Method::CgFac, c.clone(), model)))
            }
            OptimizerConfig::Muon(c) => Optimizer::Muon(Box::new(muon::Muon::new(c.clone(), model))),
            OptimizerConfig::Soap(c) => Optimizer::Soap(Box::new(soap::Soap::new(c.clone(), model))),
        }
    }

    /// Scales `grads` by the clipping's factor `clip` where the update cannot take it as it reads
    /// them, and returns the factor left for `StepInput::clip`. SGD and Adam take it in their
    /// element-by-element update (a pass over the gradient fewer, the same bits); the others read
    /// the gradient in several places, so it is scaled first.
    pub fn take_clip(&self, grads: &mut Grads<f32>, clip: f32) -> f32 {
        match self {
            Optimizer::Sgd(_) | Optimizer::Adam(_) => clip,
            _ => {
                clip::scale(&mut grads.data, clip);
                1.0
            }
        }
    }

    /// Applies one update. A non-finite update is an error and changes nothing.
    pub fn step(&mut self, model: &mut Model<f32>, s: StepInput) -> Result<()> {
        let StepInput { grads, lr, factor, clip, threads, .. } = s;
        debug_assert!(
            clip == 1.0 || matches!(self, Optimizer::Sgd(_) | Optimizer::Adam(_)),
            "this optimizer reads a gradient already clipped (take_clip)"
        );
        match self {
            Optimizer::Sgd(o) => o.step(&mut model.params, &grads.data, clip, &model.layout, lr, threads),
            Optimizer::Adam(o) => o.step(&mut model.params, &grads.data, clip, &model.layout, lr, threads),
            Optimizer::Muon(o) => o.step(model, grads, lr, factor),
            Optimizer::Soap(o) => return o.step(model, grads, lr),
            Optimizer::SecondOrder(o) => return o.step(model, s),
        }
        Ok(())
    }

    /// Preconditioner diagnostics of the last step (K-FAC and CG-FAC).
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        match self {
            Optimizer::SecondOrder(o) => Some(&o.diag),
            _ => None,
        }
    }

    /// Named state tensors for a checkpoint.
    pub fn state(&self) -> Vec<(String, Vec<f32>)> {
        match self {
            Optimizer::Sgd(o) => vec![("sgd.momentum".into(), o.velocity.clone())],
            Optimizer::Adam(o) => vec![
                ("adam.m".into(), o.m.clone()),
                ("adam.v".into(), o.v.clone()),
                ("adam.t".into(), vec![o.t as f32]),
            ],
            Optimizer::SecondOrder(o) => o.state(),
            Optimizer::Muon(o) => o.state(),
            Optimizer::Soap(o) => o.state(),
        }
    }

    pub fn load_state(&mut self, mut tensors: HashMap<String, Vec<f32>>) -> Result<()> {
        let mut take = |name: &str, len: usize| -> Result<Vec<f32>> {
            let t = tensors
                .remove(name)
                .ok_or_else(|| Error::Checkpoint(format!("optimizer state {name:?} is missing")))?;
            if t.len() != len {
                return Err(Error::Checkpoint(format!(
                    "optimizer state {name:?} has {} values, expected {len}",
                    t.len()
                )));
            }
            Ok(t)
        };
        match self {
            Optimizer::Sgd(o) => o.velocity = take("sgd.momentum", o.velocity.len())?,
            Optimizer::Adam(o) => {
                o.m = take("adam.m", o.m.len())?;
                o.v = take("adam.v", o.v.len())?;
                o.t = take("adam.t", 1)?[0] as u64;
            }
            Optimizer::SecondOrder(o) => o.load_state(&mut take)?,
            Optimizer::Muon(o) => o.load_state(&mut take)?,
            Optimizer::Soap(o) => o.load_state(&mut take)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::optim::settings::SecondOrderConfig;

    /// Adam and SGD take the clipping's factor in their update; the others get the gradient scaled
    /// first. Either way the step is the one on the scaled gradient, to the bit.
    #[test]
    fn the_clipping_factor_taken_in_the_update_gives_the_scaled_gradients_step() {
        let cfg =
            ModelConfig { vocab: 13, d_model: 16, heads: 2, layers: 1, d_ff: 32, context: 8, ..ModelConfig::default() };
        let model = Model::<f32>::new(cfg.clone()).unwrap();
        let mut grads = Grads::new(&model, 1);
        grads.data.iter_mut().enumerate().for_each(|(i, g)| *g = ((i * 7919 % 997) as f32 - 498.0) * 1e-3);
        let cache = Cache::new(&cfg, 1);
        let s = 0.37;
        let configs = [OptimizerConfig::sgd(), OptimizerConfig::adam(), OptimizerConfig::Muon(Default::default())];
        for c in configs {
            let (mut a, mut b) = (model.clone(), model.clone());
            let (mut oa, mut ob) = (Optimizer::new(&c, &a), Optimizer::new(&c, &b));
            for _ in 0..3 {
                let mut taken = grads.clone();
                let clip = oa.take_clip(&mut taken, s);
                oa.step(&mut a, StepInput { grads: &taken, cache: &cache, lr: 0.01, factor: 1.0, clip, threads: 1 })
                    .unwrap();
                let mut scaled = grads.clone();
                clip::scale(&mut scaled.data, s);
                ob.step(
                    &mut b,
                    StepInput { grads: &scaled, cache: &cache, lr: 0.01, factor: 1.0, clip: 1.0, threads: 1 },
                )
                .unwrap();
            }
            assert!(a.params.iter().zip(&b.params).all(|(x, y)| x.to_bits() == y.to_bits()), "{}", c.name());
            assert_ne!(a.params, model.params);
        }
    }

    #[test]
    fn a_failed_second_order_step_changes_nothing() {
        let cfg =
            ModelConfig { vocab: 13, d_model: 16, heads: 2, layers: 1, d_ff: 32, context: 8, ..ModelConfig::default() };
        let mut model = Model::<f32>::new(cfg.clone()).unwrap();
        let (mut cache, mut grads) = (Cache::new(&cfg, 2), Grads::new(&model, 2));
        let tokens: Vec<u32> = (0..16).map(|i| (i * 7 % 13) as u32).collect();
        let targets: Vec<u32> = (0..16).map(|i| (i * 5 % 13) as u32).collect();
        model.forward(&mut cache, &tokens, &targets).unwrap();
        model.backward(&cache, &mut grads);
        // One good step, so the factors are not zero; then a damping whose square root is NaN makes
        // the inverse fail half-way through the layers (validation refuses it; a bug would not).
        let mut so = SecondOrderConfig::new(Method::Kfac);
        let mut opt = Optimizer::new(&OptimizerConfig::Kfac(so.clone()), &model);
        opt.step(&mut model, StepInput { grads: &grads, cache: &cache, lr: 0.01, factor: 1.0, clip: 1.0, threads: 1 })
            .unwrap();
        so.damping = -1.0;
        let Optimizer::SecondOrder(o) = &mut opt else { unreachable!() };
        o.cfg.damping = so.damping;
        o.cfg.inverse_interval = 1;
        let (state, params) = (opt.state(), model.params.clone());
        assert!(opt
            .step(&mut model, StepInput { grads: &grads, cache: &cache, lr: 0.01, factor: 1.0, clip: 1.0, threads: 1 })
            .is_err());
        assert_eq!(opt.state(), state, "the optimizer state is as before the failed step");
        assert_eq!(model.params, params);
    }
}
