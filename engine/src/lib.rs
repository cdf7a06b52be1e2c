//! Spherewalk's engine: a small Pre-LN transformer trained on the CPU (the reference, written to be
//! read) or on the GPU through WGSL, and the measurements the lab makes of it.
//!
//! Data flow, top to bottom:
//! - `config`: what the model and the run are (serde).
//! - `data`: built-in seeded data sets and the user's text, split into train and validation, and the
//!   count baselines a model must beat.
//! - `nn`: the layers as forward/backward pairs on flat slices (embedding, layer_norm, linear,
//!   attention, activation, loss) and the GEMM they share.
//! - `model`: the Pre-LN transformer: `architecture` (its layer sequence and linear layers, written
//!   once for the CPU, the GPU and the curvature sites), `params` (one flat buffer with named views),
//!   `cache` (what a forward pass keeps), and the forward and backward passes.
//! - `model::kv_cache`: the incremental forward that writes one token at a time.
//! - `optim`: SGD with momentum, AdamW, Muon, SOAP, clipping, schedules, and K-FAC / CG-FAC
//!   (`second_order`).
//! - `train`: one training step at a time, the batch in data-parallel `shards` whose result does not
//!   depend on the thread count, half of them in another worker where there are no threads
//!   (`remote`, the browser's second core); `checkpoint`: safetensors on disk; `memory`: what a run
//!   needs, refused before allocation when over the budget.
//! - `session`: an experiment (the whole run as JSON) trained with probes on a step schedule, CPU/GPU
//!   choice and failover, non-finite pause-and-keep, the panels and the summary: what the page's
//!   worker, `lab train` and `window.spherewalk` all drive; `session::duration`: how long its whole
//!   schedule takes in a page, said before it starts.
//! - `gpu` (feature `gpu`): the same step in WGSL kernels through wgpu, checked against the CPU;
//!   its forward pass (`gpu::forward`) also reads a text for a loaded model (`gpu::reader`).
//! - `sample`: what the model writes: temperature, top-k and top-p from a seeded stream, through
//!   the key/value cache, and its next-token predictions for a text.
//! - `pretrained`: real transformers: the GPT-2 family from Hugging Face's files with the model's
//!   own tokenizer, run by the same forward pass.
//! - `lenses`: a real model's reading of a text through every lens the lab has, and as the page's
//!   panels draw it.
//! - `science`: tokens on the sphere, attention as a Markov chain, Brownian, particle and JoMA
//!   references.
//! - `gradcheck` and `bench`: how we know it is right and how fast it is.

pub mod checkpoint;
pub mod config;
pub mod data;
pub mod error;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod gradcheck;
pub mod lenses;
pub mod memory;
pub mod model;
pub mod nn;
pub mod optim;
pub mod pretrained;
pub mod rng;
pub mod sample;
pub mod scalar;
pub mod science;
pub mod session;
pub mod train;

#[cfg(not(target_arch = "wasm32"))]
pub mod bench;

pub use config::{Activation, DataSpec, ModelConfig, TrainConfig};
pub use error::Error;
pub use model::Model;
pub use train::{StepReport, Trainer};

/// The engine's version, shown on the page and in every JSON summary.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
