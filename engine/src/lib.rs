//! Spherewalk's engine: a small Pre-LN transformer trained on the CPU, written to be read.
//!
//! Data flow, top to bottom:
//! - `config`: what the model and the run are (serde).
//! - `data`: built-in seeded data sets and the user's text, split into train and validation.
//! - model: `params` (one flat buffer with named views) -> `model` (forward with a cache, backward by
//!   hand) built from `embedding`, `layer_norm`, `linear`, `attention`, `activation`, `loss`.
//! - `optim`: SGD with momentum, AdamW, clipping, schedules.
//! - `train`: the training loop the CLI and the page share; `checkpoint`: safetensors on disk.
//! - `gradcheck` and `bench`: how we know it is right and how fast it is.

pub mod activation;
pub mod attention;
pub mod baseline;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod embedding;
pub mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod gradcheck;
pub mod layer_norm;
pub mod linear;
pub mod loss;
pub mod matmul;
pub mod model;
pub mod optim;
pub mod params;
pub mod rng;
pub mod scalar;
/// What the lab measures: tokens on the sphere, attention as a Markov chain, Brownian references.
pub mod science;
pub mod train;

#[cfg(not(target_arch = "wasm32"))]
pub mod bench;

pub use config::{Activation, DataSpec, ModelConfig, TrainConfig};
pub use error::Error;
pub use model::Model;
pub use train::{StepReport, Trainer};

/// The engine's version, shown on the page and in every JSON summary.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
