//! What the page's two programs share: the page (`main.rs`, the view) and its worker
//! (`bin/worker.rs`, which owns the engine's session).
//!
//! - `protocol`: the messages between them, one enum a direction (`Command` to the worker,
//!   `Event` back), as JS values with typed arrays beside them.
//! - `settings`: the experiment a visitor picks (presets, free settings), as the URL holds it.
//! - `worker`: the worker side. Its state and commands; `running` the loop that steps the session
//!   between messages; `reading` a real model opened beside the run; `saving`, `persist` and
//!   `model_io` the run in IndexedDB and as files; `shard_pool` the second core's worker.
//! - `js`: clocks and yields that work on the page and in the worker.
//!
//! The page's own rooms are in `main.rs`: `lab` (its state) and `views` (what it draws).

pub mod js;
pub mod protocol;
pub mod settings;
pub mod worker;
