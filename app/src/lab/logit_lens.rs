//! The logit lens on the page's side: asked for the reading shown (its own tokens, read again by
//! the model worker, `engine::lenses::logit_lens`), kept with that reading, dropped with it.

use engine::lenses::LogitLens;
use leptos::prelude::*;

use super::{model_worker, Lab};
use common::protocol::Command;

/// The lens of the reading shown, or why it could not be read; the request awaited.
#[derive(Clone, Copy)]
pub struct Lensing {
    pub result: RwSignal<Option<Result<LogitLens, String>>>,
    waiting: StoredValue<Option<u64>>,
}

impl Lensing {
    pub fn new() -> Self {
        Lensing { result: RwSignal::new(None), waiting: StoredValue::new(None) }
    }

    /// The lens under way was stopped: its answer will not come.
    pub fn cancelled(self) {
        self.waiting.set_value(None);
    }

    /// A new reading (or model): its lens is still to be asked for.
    pub fn clear(self) {
        self.result.set(None);
        self.waiting.set_value(None);
    }
}

impl Default for Lensing {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads the reading shown through the logit lens.
pub fn ask(lab: Lab) {
    let m = lab.real;
    let Some(tokens) = m.reading.with_untracked(|r| r.as_ref().map(|r| r.tokens.clone())) else {
        return m.message.set(Some(Err("read a text first".into())));
    };
    let id = m.id();
    m.busy_after(id, Some("Reading every depth through the model's head (the logit lens)".into()));
    m.lensing.waiting.set_value(Some(id));
    model_worker::send(lab, Command::LogitLens { tokens, id }, vec![]);
}

/// The model worker's lens for request `id` (an answer for a reading since replaced is dropped).
pub fn on_lens(lab: Lab, id: u64, result: Result<Box<LogitLens>, String>) {
    let m = lab.real;
    m.busy_after(id, None);
    if m.lensing.waiting.get_value() == Some(id) {
        m.lensing.waiting.set_value(None);
        m.lensing.result.set(Some(result.map(|l| *l)));
    }
}
