//! What the model writes, on the page's side: the samples the worker's session wrote on its step
//! schedule, the writing controls (prompt, temperature, top-k), "Write more", and the scripting
//! API's `spherewalk.sample`. The worker writes; this side only keeps and asks.

use std::cell::RefCell;

use common::protocol::{self, Command};
use engine::sample::{Sample, SampleSpec};
use engine::session::{Writing, Written};
use js_sys::Function;
use leptos::prelude::*;
use wasm_bindgen::JsValue;

use super::Lab;

/// Tokens "Write more" asks for.
pub const MORE_TOKENS: usize = 200;

/// The writing panel's state: every field is a `Copy` signal handle.
#[derive(Clone, Copy)]
pub struct WritingState {
    /// The schedule's samples, oldest first.
    pub history: RwSignal<Vec<Written>>,
    /// The last "Write more" answer.
    pub more: RwSignal<Option<Sample>>,
    /// The prompt the model writes from ("" until a run says).
    pub prompt: RwSignal<String>,
    pub temperature: RwSignal<f64>,
    pub top_k: RwSignal<usize>,
    /// Bumped by each request ("Write more" or a script's), so each "Write more" draws anew; it also
    /// numbers the requests, so an answer finds its asker.
    pub seed: RwSignal<u64>,
    /// Why the last request was refused.
    pub error: RwSignal<Option<String>>,
}

impl WritingState {
    pub fn new() -> Self {
        let d = Writing::default();
        WritingState {
            history: RwSignal::new(Vec::new()),
            more: RwSignal::new(None),
            prompt: RwSignal::new(String::new()),
            temperature: RwSignal::new(d.temperature),
            top_k: RwSignal::new(d.top_k),
            seed: RwSignal::new(0),
            error: RwSignal::new(None),
        }
    }

    /// The schedule the page's runs write on: a sample at every evaluation.
    pub fn schedule(self, eval_every: usize) -> Writing {
        let prompt = self.prompt.get_untracked();
        Writing {
            every: eval_every,
            temperature: self.temperature.get_untracked(),
            top_k: self.top_k.get_untracked(),
            prompt: (!prompt.is_empty()).then_some(prompt),
            ..Writing::default()
        }
    }

    pub fn clear(self) {
        self.history.set(Vec::new());
        self.more.set(None);
        self.error.set(None);
    }
}

impl Default for WritingState {
    fn default() -> Self {
        Self::new()
    }
}

/// Requests from scripts waiting for their samples: (id, resolve, reject).
type Waiting = Vec<(u64, Function, Function)>;

thread_local! {
    static SCRIPT_REQUESTS: RefCell<Waiting> = const { RefCell::new(Vec::new()) };
}

/// Ids of the panel's own requests are even, scripts' odd: an answer finds its asker.
fn next_id(lab: Lab, script: bool) -> u64 {
    let id = lab.writing.seed.get_untracked() * 2 + u64::from(script);
    lab.writing.seed.update_untracked(|s| *s += 1);
    id
}

/// New settings from the controls: the schedule writes with them from the next evaluation on.
pub fn apply(lab: Lab) {
    lab.writing.error.set(None);
    if lab.run_config.with_untracked(Option::is_some) {
        let writing = lab.writing.schedule(lab.eval_every.get_untracked());
        lab.send(Command::SetWriting { writing });
    }
}

/// "Write more": a long sample of the current model with the panel's settings.
pub fn write_more(lab: Lab) {
    let w = lab.writing;
    let spec = SampleSpec {
        prompt: w.prompt.get_untracked(),
        tokens: MORE_TOKENS,
        temperature: w.temperature.get_untracked(),
        top_k: w.top_k.get_untracked(),
        seed: w.seed.get_untracked(),
        ..SampleSpec::default()
    };
    let id = next_id(lab, false);
    lab.send(Command::Sample { spec, id });
}

/// `spherewalk.sample(spec)`: the page's model writes; resolves to `lab sample --json`'s objects.
pub fn script_sample(lab: Lab, spec: SampleSpec, resolve: Function, reject: Function) {
    if let Some(why) = lab.crashed.get_untracked() {
        let why = format!("the training worker crashed and has not been restarted: {why}");
        let _ = reject.call1(&JsValue::NULL, &js_sys::Error::new(&why).into());
        return;
    }
    let id = next_id(lab, true);
    SCRIPT_REQUESTS.with_borrow_mut(|r| r.push((id, resolve, reject)));
    lab.send(Command::Sample { spec, id });
}

/// The training worker crashed: every script waiting for samples is told why.
pub fn on_crash(why: &str) {
    for (_, _, reject) in SCRIPT_REQUESTS.with_borrow_mut(std::mem::take) {
        let _ = reject.call1(&JsValue::NULL, &js_sys::Error::new(why).into());
    }
}

/// The worker's answer to a `Command::Sample`.
pub fn on_samples(lab: Lab, id: u64, result: Result<Vec<Sample>, String>) {
    let waiting = SCRIPT_REQUESTS.with_borrow_mut(|r| r.iter().position(|x| x.0 == id).map(|i| r.remove(i)));
    if let Some((_, resolve, reject)) = waiting {
        let answer = result.and_then(|s| protocol::to_js(&s));
        let _ = match answer {
            Ok(v) => resolve.call1(&JsValue::NULL, &v),
            Err(e) => reject.call1(&JsValue::NULL, &js_sys::Error::new(&e).into()),
        };
        return;
    }
    match result {
        Ok(mut s) => lab.writing.more.set(s.pop()),
        Err(e) => lab.writing.error.set(Some(e)),
    }
}
