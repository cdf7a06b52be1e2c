//! Two texts side by side in the model mode: the second text, and the comparison the model worker
//! answers (`engine::lenses::compare`) for the text box's text and this one.

use engine::lenses::Comparison;
use leptos::prelude::*;

use super::{model_worker, Lab};
use common::protocol::Command;

/// The model mode's first text, and the second: the first with one word changed.
pub const FIRST: &str = "The Brownian motion in the transformer model: tokens walk on the sphere.";
const SECOND: &str = "The Brownian motion in the transformer model: tokens dance on the sphere.";

#[derive(Clone, Copy)]
pub struct Comparing {
    /// The second text: by default the first with one word changed.
    pub text: RwSignal<String>,
    /// The visitor typed the second text: it no longer follows the first.
    typed: StoredValue<bool>,
    pub result: RwSignal<Option<Comparison>>,
    pub error: RwSignal<Option<String>>,
    /// The request whose answer is awaited: an older answer is dropped.
    waiting: StoredValue<Option<u64>>,
}

impl Comparing {
    pub fn new() -> Self {
        Comparing {
            text: RwSignal::new(SECOND.into()),
            typed: StoredValue::new(false),
            result: RwSignal::new(None),
            error: RwSignal::new(None),
            waiting: StoredValue::new(None),
        }
    }

    /// The visitor's own second text.
    pub fn type_text(self, text: String) {
        self.typed.set_value(true);
        self.text.set(text);
    }

    /// A first text of the visitor's own, read: an untyped second text starts from it (a demo
    /// sentence about another text would compare nothing the visitor wrote).
    pub fn follow(self, first: &str) {
        if !self.typed.get_value() && first != FIRST {
            self.text.set(first.to_string());
        }
    }

    /// The comparison under way was stopped: its answer will not come.
    pub fn cancelled(self) {
        self.waiting.set_value(None);
    }

    /// What was compared belongs to the model before: dropped when another opens.
    pub fn clear(self) {
        self.result.set(None);
        self.error.set(None);
        self.waiting.set_value(None);
    }
}

impl Default for Comparing {
    fn default() -> Self {
        Self::new()
    }
}

/// The opened model reads the text box's text and the second text, and compares them.
pub fn compare(lab: Lab) {
    let m = lab.real;
    if m.opened.with_untracked(Option::is_none) {
        return m.message.set(Some(Err("open a model first".into())));
    }
    let c = m.comparing;
    let texts = [m.text.get_untracked(), c.text.get_untracked()];
    let id = m.id();
    m.section.set(super::model_section::Section::Compare);
    m.busy_after(id, Some("Comparing the two texts".into()));
    c.waiting.set_value(Some(id));
    c.error.set(None);
    model_worker::send(lab, Command::Compare { texts, id }, vec![]);
}

/// The model worker's comparison for request `id`.
pub fn on_compared(lab: Lab, id: u64, result: Result<Box<Comparison>, String>) {
    let (m, c) = (lab.real, lab.real.comparing);
    m.busy_after(id, None);
    if c.waiting.get_value() != Some(id) {
        return;
    }
    c.waiting.set_value(None);
    match result {
        Ok(r) => c.result.set(Some(*r)),
        // The comparison shown is of the texts asked for, or none: never an older one beside the error.
        Err(e) => {
            c.result.set(None);
            c.error.set(Some(e))
        }
    }
}
