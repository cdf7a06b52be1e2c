//! What the page's programs share: the page (`main.rs`, the view), its training worker
//! (`bin/worker.rs`, which owns the engine's session) and its model worker (`bin/reader.rs`, a real
//! model opened from its files).
//!
//! - `protocol`: the messages between them, one enum a direction (`Command` to the worker,
//!   `Event` back), as JS values with typed arrays beside them.
//! - `settings`: the experiment a visitor picks (presets, free settings), as the URL holds it.
//! - `worker`: the worker side. Its state and commands; `running` the loop that steps the session
//!   between messages; `saving`, `persist` and `model_io` the run in IndexedDB and as files;
//!   `shard_pool` the second core's worker; `mailbox` what every worker shares.
//! - `reader`: the model worker: a model opened, read and written after.
//! - `js`: clocks and yields that work on the page and in the worker.
//!
//! The page's own rooms are in `main.rs`: `lab` (its state) and `views` (what it draws).

pub mod js;
pub mod protocol;
pub mod reader;
pub mod settings;
pub mod worker;
