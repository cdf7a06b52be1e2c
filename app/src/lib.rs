//! What the page's two programs share: the page (`main.rs`, the view) and its training worker
//! (`bin/worker.rs`, which owns the engine's session).
//!
//! - `protocol`: the commands and events they exchange, as JS values with typed arrays beside them.
//! - `settings`: the experiment a visitor picks (presets, free settings), as the URL holds it.
//! - `worker`: the worker's state and commands; `worker::running` the loop that steps the session
//!   between messages and posts, `worker::saving` the run in IndexedDB and as files.
//! - `shard_pool`: the training worker's second worker, a second core for the CPU steps.
//! - `persist` and `model_io`: the run in IndexedDB, the model as a safetensors file.
//! - `js`: clocks and yields that work on the page and in the worker.

pub mod js;
pub mod model_io;
pub mod persist;
pub mod protocol;
pub mod settings;
pub mod shard_pool;
pub mod worker;
