//! Stopping inside a long step. A browser worker hears its messages only between the tasks it
//! runs, so a step ran to its end before the worker heard Pause: half a second for a d1024 B8
//! step in a tab. A step run with an [`Interrupt`] asks it between its pieces (each shard's forward
//! pass, each shard's backward pass) whether to go on. A step stopped there has changed nothing:
//! the next call does it again from its start, with the same numbers (its batch depends on the
//! step number alone).

use std::future::Future;
use std::pin::Pin;

/// What a step asks between its pieces.
pub trait Interrupt {
    /// A point where the step may stop: the caller may let its event loop run (its own choice of
    /// how often) and resolves to true when the step should stop here.
    fn stop(&self) -> Pin<Box<dyn Future<Output = bool> + '_>>;
}
