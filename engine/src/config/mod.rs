//! What a model and a training run are. Everything here is serde, so a run is one JSON object
//! (the page keeps it in the URL, checkpoints keep it beside the weights).
//!
//! - `model`: the model's sizes and its own checks; `arch` what its block does (the norm, the
//!   positions, the MLP, shared key/value heads, the residual, the head);
//! - `data`: where the tokens come from;
//! - `train`: the run, and the lab's limits on what it trains.
//!
//! The optimizers' settings are theirs (`optim::settings`), the schedule too (`optim::schedule`).

pub mod arch;
mod data;
mod model;
mod train;

pub use crate::optim::schedule::Schedule;
pub use crate::optim::settings::{Fisher, Method, MuonConfig, OptimizerConfig, Product, SecondOrderConfig, SoapConfig};
pub use arch::{Arch, Mlp, NormKind, Positions, RopeScaling, LAYER_NORM_EPS};
pub use data::DataSpec;
pub use model::{Activation, ModelConfig};
pub use train::{TrainConfig, MAX_CONTEXT, MAX_D_MODEL, MAX_EVAL_BATCHES, MAX_LAYERS, MAX_VOCAB};
