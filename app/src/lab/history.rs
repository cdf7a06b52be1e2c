//! A model's training history in the page: the checkpoints a model keeps as hub revisions (Pythia's
//! `step0` … `step143000`) fetched one at a time (`fetching`: each kept in the browser's cache,
//! so Start after a reload or a cancel goes on without downloading again), each measured in the
//! model worker and dropped before the next comes (`Command::MeasureCheckpoint`); the history and
//! its verdicts are the engine's (`engine::lenses::history`), recomputed as each checkpoint
//! arrives and settled when the last has.

use std::cell::RefCell;

use engine::lenses::history::{self, Checkpoint, History};
use js_sys::{Function, Promise};
use leptos::prelude::*;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;

use super::{fetching, hub, model_worker, Lab};
use common::protocol::{self, Command};

/// Pythia's sizes a teacher may pick: id, what it is, and one checkpoint's download in MB.
pub const SIZES: [(&str, &str, f64); 4] = [
    ("EleutherAI/pythia-14m", "6 layers, width 128", 53.3),
    ("EleutherAI/pythia-31m", "6 layers, width 256", 86.2),
    ("EleutherAI/pythia-70m", "6 layers, width 512", 166.0),
    ("EleutherAI/pythia-160m", "12 layers, width 768", 375.0),
];
/// Sixteen of Pythia's 154 revisions, about evenly spaced on a log scale from the start.
pub const STEPS: &str = "0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 4000, 16000, 64000, 143000";

#[derive(Clone, Copy)]
pub struct HistoryRun {
    pub model: RwSignal<String>,
    pub steps: RwSignal<String>,
    /// The checkpoints measured so far, and the history they make.
    pub history: RwSignal<Option<History>>,
    /// Every checkpoint asked for has been measured: the verdicts are final.
    pub settled: RwSignal<bool>,
    /// "Checkpoint 3 of 16: step 4", while it runs.
    pub status: RwSignal<Option<String>>,
    pub error: RwSignal<Option<String>>,
    /// What the browser would not do on the way (keep a checkpoint: no room), said once each.
    pub notes: RwSignal<Vec<String>>,
    /// Counts the runs: a run that is no longer the last one stops.
    run: StoredValue<u64>,
    /// Counts the checkpoints sent to be measured (their answers' ids).
    sent: StoredValue<u64>,
    abort: StoredValue<Option<web_sys::AbortController>, LocalStorage>,
}

impl HistoryRun {
    pub fn new() -> Self {
        HistoryRun {
            model: RwSignal::new(SIZES[0].0.into()),
            steps: RwSignal::new(STEPS.into()),
            history: RwSignal::new(None),
            settled: RwSignal::new(false),
            status: RwSignal::new(None),
            error: RwSignal::new(None),
            notes: RwSignal::new(Vec::new()),
            run: StoredValue::new(0),
            sent: StoredValue::new(0),
            abort: StoredValue::new_local(None),
        }
    }
}

impl Default for HistoryRun {
    fn default() -> Self {
        Self::new()
    }
}

/// The steps asked for, or why they cannot be read.
pub fn steps(text: &str) -> Result<Vec<u64>, String> {
    let steps: Vec<u64> = text
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_start_matches("step").parse().map_err(|_| format!("\"{s}\" is not a step")))
        .collect::<Result<_, _>>()?;
    match steps.is_empty() {
        true => Err("give the steps of the checkpoints to read, such as 0, 1000, 143000".into()),
        false => Ok(steps),
    }
}

/// What the download will be: the checkpoints and, for a size the page knows, about how many MB.
pub fn plan(model: &str, steps: &[u64]) -> String {
    match SIZES.iter().find(|s| s.0 == model) {
        Some((_, _, mb)) => format!(
            "{} checkpoints of {model}, about {:.0} MB to download ({mb} MB each; those this browser keeps come from it)",
            steps.len(),
            mb * steps.len() as f64
        ),
        None => format!(
            "{} checkpoints of {model}, each as large as its weights' file (this page knows the sizes of Pythia's; \
             the download bar shows each one's as it comes)",
            steps.len()
        ),
    }
}

/// A checkpoint on its way to being measured: its id, what wakes its run, the answer once it came.
type Waiting = (u64, Function, Option<Result<Checkpoint, String>>);

thread_local! {
    static WAITING: RefCell<Vec<Waiting>> = const { RefCell::new(Vec::new()) };
    /// `spherewalk.history` calls waiting for the run to end: (resolve, reject).
    static SCRIPTS: RefCell<Vec<(Function, Function)>> = const { RefCell::new(Vec::new()) };
}

/// The model worker's measure of checkpoint `id`.
pub fn on_measured(id: u64, result: Result<Box<Checkpoint>, String>) {
    WAITING.with_borrow_mut(|w| {
        if let Some(entry) = w.iter_mut().find(|e| e.0 == id) {
            entry.2 = Some(result.map(|c| *c));
            let _ = entry.1.call0(&JsValue::NULL);
        }
    });
}

/// The model worker crashed: every checkpoint waiting for it is answered with `why`.
pub fn on_worker_lost(why: &str) {
    let waiting: Vec<u64> = WAITING.with_borrow(|w| w.iter().map(|e| e.0).collect());
    for id in waiting {
        on_measured(id, Err(why.to_string()));
    }
}

/// Checkpoint `step` measured in the model worker on `texts`; waits for its answer.
async fn measure(
    lab: Lab,
    step: u64,
    name: String,
    got: fetching::Fetched,
    texts: Vec<String>,
) -> Result<Checkpoint, String> {
    let h = lab.real.history;
    h.sent.update_value(|n| *n += 1);
    let id = h.sent.get_value();
    let mut resolve = None;
    let promise = Promise::new(&mut |res, _| resolve = Some(res));
    WAITING.with_borrow_mut(|w| w.push((id, resolve.expect("the promise runs its closure at once"), None)));
    model_worker::send(lab, Command::MeasureCheckpoint { step, name, files: got.names, texts, id }, got.bulk);
    let _ = JsFuture::from(promise).await;
    let answer = WAITING.with_borrow_mut(|w| w.iter().position(|e| e.0 == id).map(|i| w.remove(i).2));
    answer.flatten().unwrap_or_else(|| Err("the model worker gave no answer".into()))
}

/// Starts reading the history: each checkpoint fetched, measured and dropped in turn.
pub fn start(lab: Lab) {
    start_with(lab, lab.real.text.get_untracked());
}

/// [`start`] reading `text` (a script's, which leaves the visitor's text box as it is).
fn start_with(lab: Lab, text: String) {
    let h = lab.real.history;
    lab.real.section.set(super::model_section::Section::History);
    let model = h.model.get_untracked().trim().to_string();
    let steps = match steps(&h.steps.get_untracked()) {
        Ok(s) => s,
        Err(e) => return h.error.set(Some(e)),
    };
    let texts = vec![text];
    cancel(lab);
    let Ok(controller) = web_sys::AbortController::new() else { return };
    h.abort.set_value(Some(controller.clone()));
    h.run.update_value(|r| *r += 1);
    let run = h.run.get_value();
    let current = move || h.run.get_value() == run;
    h.history.set(None);
    h.settled.set(false);
    h.error.set(None);
    h.notes.set(Vec::new());
    leptos::task::spawn_local(async move {
        let mut measured = Vec::with_capacity(steps.len());
        for (k, &step) in steps.iter().enumerate() {
            h.status.set(Some(format!("Checkpoint {} of {}: step {step}", k + 1, steps.len())));
            let id = format!("{model}@step{step}");
            let got = match hub::files_base(&id) {
                Ok(base) => fetching::fetch(lab, &base, &controller, current).await,
                Err(e) => Err(e),
            };
            let got = match got {
                Ok(Some(got)) => got,
                Ok(None) => return,
                Err(e) => return stopped(lab, run, format!("step {step}: {e}")),
            };
            lab.real.progress.set(None);
            h.notes.update(|n| {
                got.notes.iter().for_each(|x| {
                    if !n.contains(x) {
                        n.push(x.clone())
                    }
                })
            });
            let urls = got.urls.clone();
            match measure(lab, step, id, got, texts.clone()).await {
                Ok(c) if current() => measured.push(c),
                Ok(_) => return,
                Err(e) => {
                    // A checkpoint that would not be read is not kept: Start again fetches it anew.
                    hub::forget(&urls).await;
                    let why = format!("step {step}: {e} (its files were not kept: Start again fetches them anew)");
                    return stopped(lab, run, why);
                }
            }
            match history::history(&model, texts.len(), measured.clone()) {
                Ok(made) => h.history.set(Some(made)),
                Err(e) => return stopped(lab, run, e.to_string()),
            }
        }
        h.settled.set(true);
        h.status.set(None);
        h.abort.set_value(None);
        let resolved = h.history.with_untracked(|x| x.as_ref().map(protocol::to_js));
        for (resolve, reject) in SCRIPTS.with_borrow_mut(std::mem::take) {
            let _ = match &resolved {
                Some(Ok(v)) => resolve.call1(&JsValue::NULL, v),
                Some(Err(e)) => reject.call1(&JsValue::NULL, &js_sys::Error::new(e).into()),
                None => reject.call1(&JsValue::NULL, &js_sys::Error::new("no checkpoint was read").into()),
            };
        }
    });
}

/// Run `run` stopped: why, said, and a script waiting for it refused.
fn stopped(lab: Lab, run: u64, why: String) {
    let h = lab.real.history;
    if h.run.get_value() != run {
        return;
    }
    lab.real.progress.set(None);
    h.status.set(None);
    h.error.set(Some(why.clone()));
    for (_, reject) in SCRIPTS.with_borrow_mut(std::mem::take) {
        let _ = reject.call1(&JsValue::NULL, &js_sys::Error::new(&why).into());
    }
}

/// Cancels the run under way: what was measured stays, what was downloaded stays in the cache.
pub fn cancel(lab: Lab) {
    let h = lab.real.history;
    if let Some(c) = h.abort.try_update_value(Option::take).flatten() {
        c.abort();
    }
    if h.status.get_untracked().is_some() {
        stopped(
            lab,
            h.run.get_value(),
            "cancelled: Start again goes on from the checkpoints this browser keeps".into(),
        );
        // What the run still does is ignored.
        h.run.update_value(|r| *r += 1);
    }
}

/// `spherewalk.history({model, steps, text})`: the run, resolved with its history when it ends.
pub fn script(lab: Lab, model: String, steps: String, text: Option<String>, resolve: Function, reject: Function) {
    // One history at a time: a second call would cancel the first and answer both with its own.
    if SCRIPTS.with_borrow(|s| !s.is_empty()) {
        let why = "a history is being read for an earlier call: wait until it settles";
        return drop(reject.call1(&JsValue::NULL, &js_sys::Error::new(why).into()));
    }
    let h = lab.real.history;
    h.model.set(model);
    h.steps.set(steps);
    start_with(lab, text.unwrap_or_else(|| lab.real.text.get_untracked()));
    match h.error.get_untracked() {
        Some(e) => drop(reject.call1(&JsValue::NULL, &js_sys::Error::new(&e).into())),
        None => SCRIPTS.with_borrow_mut(|s| s.push((resolve, reject))),
    }
}
