//! The page's second mode: a real model (GPT-2, in Hugging Face's files) opened from files the
//! visitor picks or fetched from the hub by its id, what it read and what it wrote. The model
//! worker holds the model (`common::reader`); here the page's side: the files on their way
//! (`hub`: progress, a cancel, the browser's Cache API), a model refused before its weights come
//! when the tab could not hold it, the last choice winning over a download still running, and
//! the answers.

use engine::lenses::{with_depth, DepthFit, Inspection};
use engine::sample::{Sample, SampleSpec};
use engine::session::Panels;
use js_sys::{Function, Uint8Array};
use leptos::prelude::*;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;

use super::comparing::Comparing;
use super::fetching::{self, fits};
use super::history::HistoryRun;
use super::hub;
use super::logit_lens::Lensing;
use super::model_section::Section;
use super::{model_worker, Lab};
use common::protocol::{self, Command, OpenedModel};

/// Ids of the model's reads and writes: above the writing panel's and scripts' (`writing`).
pub const MODEL_IDS: u64 = 1 << 52;
/// New tokens "Write" asks for.
pub const WRITE_TOKENS: usize = 20;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Train,
    Model,
}

/// A download under way: which file, bytes so far and of how many.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub what: String,
    pub loaded: f64,
    pub total: Option<f64>,
}

/// How the model writes: the most likely token at temperature 0 (greedy), else drawn among the
/// top-k and top-p candidates, from `seed` (the same settings write the same text).
#[derive(Clone, Copy)]
pub struct Drawing {
    pub temperature: RwSignal<f64>,
    pub top_k: RwSignal<usize>,
    pub top_p: RwSignal<f64>,
    pub seed: RwSignal<u64>,
}

#[derive(Clone, Copy)]
pub struct RealModel {
    pub mode: RwSignal<Mode>,
    /// The section on screen.
    pub section: RwSignal<Section>,
    pub opened: RwSignal<Option<OpenedModel>>,
    /// What the model is busy with ("Opening gpt2", "Reading"), shown beside the controls.
    pub busy: RwSignal<Option<String>>,
    pub progress: RwSignal<Option<Progress>>,
    /// A note (Ok) or why something failed (Err), until the next action.
    pub message: RwSignal<Option<Result<String, String>>>,
    pub reading: RwSignal<Option<Inspection>>,
    pub written: RwSignal<Option<Sample>>,
    pub drawing: Drawing,
    /// A second text read beside the first.
    pub comparing: Comparing,
    /// The reading shown through the logit lens.
    pub lensing: Lensing,
    /// A model's checkpoints along its training.
    pub history: HistoryRun,
    pub text: RwSignal<String>,
    pub hub_id: RwSignal<String>,
    /// Where the open model's files came from ("huggingface.co", "your files").
    pub source: RwSignal<Option<String>>,
    /// The cached files of the model being downloaded: dropped if it does not open.
    fetched: StoredValue<Vec<String>>,
    /// Openings sent to the model worker and not answered yet.
    sent: StoredValue<Vec<Sent>>,
    /// Counts the openings asked for: an opening that is no longer the last one asked for stops,
    /// and an answer to an earlier one never touches the last one's state.
    opening: StoredValue<u64>,
    /// The last opening that ended (opened, refused, failed or cancelled): while `opening` is
    /// ahead of it, an opening is under way and "busy" says so.
    settled: StoredValue<u64>,
    /// The panels of the mode not shown: the run's while the model's are on screen, and back.
    other_panels: RwSignal<Option<Panels>>,
    next_id: RwSignal<u64>,
    abort: StoredValue<Option<web_sys::AbortController>, LocalStorage>,
    /// Where the open model came from: what opens it again after its work was stopped.
    pub(super) origin: StoredValue<Option<Origin>, LocalStorage>,
    /// An opening that only brings the model back (after a stop): it reads nothing by itself.
    pub(super) quiet: StoredValue<u64>,
}

/// Where a model's files came from.
#[derive(Clone)]
pub(super) enum Origin {
    Hub(String),
    Files(Vec<web_sys::File>),
}

impl RealModel {
    pub fn new() -> Self {
        RealModel {
            mode: RwSignal::new(Mode::Train),
            section: RwSignal::new(Section::Reading),
            opened: RwSignal::new(None),
            busy: RwSignal::new(None),
            progress: RwSignal::new(None),
            message: RwSignal::new(None),
            reading: RwSignal::new(None),
            written: RwSignal::new(None),
            drawing: Drawing {
                temperature: RwSignal::new(0.0),
                top_k: RwSignal::new(0),
                top_p: RwSignal::new(1.0),
                seed: RwSignal::new(0),
            },
            comparing: Comparing::new(),
            lensing: Lensing::new(),
            history: HistoryRun::new(),
            text: RwSignal::new(super::comparing::FIRST.into()),
            hub_id: RwSignal::new("openai-community/gpt2".into()),
            source: RwSignal::new(None),
            fetched: StoredValue::new(Vec::new()),
            sent: StoredValue::new(Vec::new()),
            opening: StoredValue::new(0),
            settled: StoredValue::new(0),
            other_panels: RwSignal::new(None),
            next_id: RwSignal::new(MODEL_IDS),
            abort: StoredValue::new_local(None),
            origin: StoredValue::new_local(None),
            quiet: StoredValue::new(0),
        }
    }

    /// Busy with a reading, a comparison or a writing (not an opening): what "Cancel" stops.
    pub fn working(self) -> bool {
        self.busy.with(Option::is_some) && self.settled.get_value() == self.opening.get_value()
    }

    /// The last opening asked for.
    pub(super) fn opening_number(self) -> u64 {
        self.opening.get_value()
    }

    pub(super) fn id(self) -> u64 {
        let id = self.next_id.get_untracked();
        self.next_id.set(id + 1);
        id
    }

    /// Says what an answer to read or write request `id` leaves the model busy with, unless a
    /// later request or an opening under way has the word.
    pub(super) fn busy_after(self, id: u64, busy: Option<String>) {
        let last = id + 1 == self.next_id.get_untracked();
        if last && self.settled.get_value() == self.opening.get_value() {
            self.busy.set(busy);
        }
    }
}

/// An opening sent to the model worker: where its files came from, and which of them this
/// browser keeps (dropped if the model does not open).
struct Sent {
    opening: u64,
    source: String,
    fetched: Vec<String>,
    origin: Origin,
}

impl Default for RealModel {
    fn default() -> Self {
        Self::new()
    }
}

/// Switches the page between training and the opened model; each mode keeps its own panels.
pub fn set_mode(lab: Lab, mode: Mode) {
    let m = lab.real;
    if m.mode.get_untracked() == mode {
        return;
    }
    if mode == Mode::Model && lab.phase.get_untracked() == protocol::Phase::Running {
        lab.toggle();
    }
    let shown = lab.panels.get_untracked();
    lab.panels.set(m.other_panels.get_untracked());
    m.other_panels.set(shown);
    lab.view.depth.set(0);
    lab.view.selected.set(None);
    lab.view.chain.layer.set(0);
    lab.view.chain.head.set(0);
    m.mode.set(mode);
}

/// Panels from the run: shown in training mode, kept aside while the model's are shown.
pub fn on_run_panels(lab: Lab, panels: Panels) {
    match lab.real.mode.get_untracked() {
        Mode::Train => lab.panels.set(Some(panels)),
        Mode::Model => lab.real.other_panels.set(Some(panels)),
    }
}

/// A new opening: the one before (a download still running) is cancelled, and whatever it
/// still does is ignored. Returns the opening's number.
fn opening(lab: Lab, name: &str) -> u64 {
    let m = lab.real;
    if let Some(c) = m.abort.get_value() {
        c.abort();
    }
    m.abort.set_value(None);
    m.fetched.set_value(Vec::new());
    m.progress.set(None);
    m.message.set(None);
    m.busy.set(Some(format!("Opening {name}")));
    m.opening.update_value(|n| *n += 1);
    m.opening.get_value()
}

fn current(lab: Lab, opening: u64) -> bool {
    lab.real.opening.get_value() == opening
}

/// The tokenizer's files a model may have beside its weights, in the order they are tried.
const TOKENIZER_FILES: [&str; 3] = ["tokenizer.json", "vocab.json", "merges.txt"];

/// The model's files, picked by the visitor: its config.json, a .safetensors (or a
/// pytorch_model.bin, read without running its pickle) and its tokenizer's files (tokenizer.json,
/// or GPT-2's vocab.json and merges.txt). A lone .safetensors may be one of the lab's own
/// checkpoints: it opens as a run in the training mode.
pub fn open_files(lab: Lab, files: Vec<web_sys::File>) {
    let named = |name: &str| files.iter().find(|f| f.name().eq_ignore_ascii_case(name)).cloned();
    let safetensors = files.iter().find(|f| f.name().to_lowercase().ends_with(".safetensors")).cloned();
    let config = named("config.json");
    if let (None, Some(w), 1) = (&config, &safetensors, files.len()) {
        return open_checkpoint(lab, w.clone());
    }
    let (Some(config), Some(weights)) = (config, safetensors.or_else(|| named("pytorch_model.bin"))) else {
        let names: Vec<String> = files.iter().map(|f| f.name()).collect();
        let bin = names.iter().any(|n| n.ends_with(".bin"));
        lab.real.message.set(Some(Err(format!(
            "pick the model's config.json, its model.safetensors (or pytorch_model.bin) and its tokenizer.json \
             together (picked: {}){}",
            names.join(", "),
            if bin { "; a .bin file is read when it is the model's pytorch_model.bin" } else { "" }
        ))));
        return;
    };
    let mut picked =
        vec![("config.json".to_string(), config.clone()), ("model.safetensors".to_string(), weights.clone())];
    picked.extend(TOKENIZER_FILES.iter().filter_map(|&n| named(n).map(|f| (n.to_string(), f))));
    let n = opening(lab, &weights.name());
    leptos::task::spawn_local(async move {
        // The config first: a model the tab cannot hold is refused before its weights are read.
        let config_bytes = match read_file(&config).await {
            Ok(b) => b.to_vec(),
            Err(why) => return failed(lab, why),
        };
        if let Err(why) = fits(&config_bytes, weights.size(), weights.name().ends_with(".bin")) {
            return failed(lab, why);
        }
        let mut bulk = Vec::new();
        let mut names = Vec::new();
        for (name, f) in picked {
            match read_file(&f).await {
                // The file's own buffer goes to the worker (transferred, not copied).
                Ok(bytes) => bulk.push(bytes.into()),
                Err(why) => return failed(lab, why),
            }
            names.push(name);
        }
        if current(lab, n) {
            let origin = Origin::Files(files.clone());
            send_open(lab, n, weights.name(), names, bulk, ("your files".into(), origin));
        }
    });
}

async fn read_file(f: &web_sys::File) -> Result<Uint8Array, String> {
    JsFuture::from(f.array_buffer())
        .await
        .map(|buf| Uint8Array::new(&buf))
        .map_err(|e| format!("could not read {}: {}", f.name(), common::js::error_text(&e)))
}

/// A lone .safetensors picked in the model mode: if it is one of the lab's own checkpoints, it
/// opens as a run in the training mode (as "Upload model" does); else the training worker says why.
fn open_checkpoint(lab: Lab, file: web_sys::File) {
    leptos::task::spawn_local(async move {
        match read_file(&file).await {
            Ok(bytes) => {
                lab.real.message.set(Some(Ok(format!(
                    "{} has no config.json beside it: it is opened as the lab's own checkpoint, a run in the \
                     training mode",
                    file.name()
                ))));
                set_mode(lab, Mode::Train);
                lab.load_model(vec![(file.name(), bytes.to_vec())]);
            }
            Err(why) => lab.real.message.set(Some(Err(why))),
        }
    });
}

/// An opening (or a step of it) failed: said, with the model still open named.
pub(super) fn failed(lab: Lab, why: String) {
    let m = lab.real;
    m.settled.set_value(m.opening.get_value());
    m.busy.set(None);
    m.progress.set(None);
    m.fetched.set_value(Vec::new());
    let still = m.opened.with_untracked(|o| o.as_ref().map(|o| format!(" ({} is still open)", o.name)));
    m.message.set(Some(Err(format!("{why}{}", still.unwrap_or_default()))));
}

/// Fetches the model `id`'s files from the hub or the browser's cache (`fetching`), with progress
/// and a cancel button, and opens it; a second Fetch cancels the first.
pub fn fetch_hub(lab: Lab) {
    let id = lab.real.hub_id.get_untracked().trim().to_string();
    let base = match hub::files_base(&id) {
        Ok(base) => base,
        Err(why) => return lab.real.message.set(Some(Err(why))),
    };
    let Ok(controller) = web_sys::AbortController::new() else { return };
    let n = opening(lab, &id);
    lab.real.abort.set_value(Some(controller.clone()));
    leptos::task::spawn_local(async move {
        let got = match fetching::fetch(lab, &base, &controller, || current(lab, n)).await {
            Ok(Some(got)) => got,
            Ok(None) => return,
            Err(why) => return failed(lab, why),
        };
        lab.real.fetched.set_value(got.urls);
        lab.real.abort.set_value(None);
        lab.real.progress.set(None);
        if !got.notes.is_empty() {
            lab.real.message.set(Some(Ok(got.notes.join(" "))));
        }
        send_open(lab, n, id.clone(), got.names, got.bulk, (hub::host_of(&base), Origin::Hub(id)));
    });
}

/// Hands opening `n`'s files to the model worker, remembering where they came from (the host's
/// name shown, and what opens them again).
fn send_open(lab: Lab, n: u64, name: String, files: Vec<String>, bulk: Vec<JsValue>, from: (String, Origin)) {
    let fetched = lab.real.fetched.try_update_value(std::mem::take).unwrap_or_default();
    let (source, origin) = from;
    lab.real.sent.update_value(|s| s.push(Sent { opening: n, source, fetched, origin }));
    model_worker::send(lab, Command::OpenModel { name, files, id: n }, bulk);
}

/// "Fetch again": the model's copies in this browser are dropped, and its files fetched anew.
pub fn fetch_again(lab: Lab) {
    let id = lab.real.hub_id.get_untracked().trim().to_string();
    let Ok(base) = hub::files_base(&id) else { return fetch_hub(lab) };
    let urls: Vec<String> = ["config.json", "model.safetensors", "pytorch_model.bin"]
        .into_iter()
        .chain(TOKENIZER_FILES)
        .map(|f| format!("{base}/{f}"))
        .collect();
    leptos::task::spawn_local(async move {
        hub::forget(&urls).await;
        fetch_hub(lab);
    });
}

/// "Download reading": the reading shown as `lab inspect` gives it, the whole report as JSON
/// (`csv`: false) or its layer table as CSV, named after the model.
pub fn download_reading(lab: Lab, csv: bool) {
    let m = lab.real;
    let got = m.reading.with_untracked(|r| {
        let r = r.as_ref().ok_or("read a text first")?;
        let name: String =
            r.model.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        match csv {
            true => super::export::download(&format!("{name}-layers.csv"), &engine::lenses::table::csv(r), "text/csv"),
            false => serde_json::to_string(r)
                .map_err(|e| e.to_string())
                .and_then(|json| super::export::download(&format!("{name}-reading.json"), &json, "application/json")),
        }
    });
    if let Err(e) = got {
        m.message.set(Some(Err(format!("could not download the reading: {e}"))));
    }
}

/// Cancels the download under way: nothing is opened, the model already open stays.
pub fn cancel(lab: Lab) {
    if let Some(c) = lab.real.abort.get_value() {
        c.abort();
    }
}

thread_local! {
    /// `spherewalk.inspect` calls waiting for their reading: (id, resolve, reject).
    static SCRIPT_READS: std::cell::RefCell<Vec<(u64, Function, Function)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `spherewalk.inspect(text)`: the opened model reads `text` (into the text box and the views too).
pub fn script_read(lab: Lab, text: String, resolve: Function, reject: Function) {
    if lab.real.opened.with_untracked(Option::is_none) {
        let e = js_sys::Error::new("no model is open: open one first (\"Open a real model\")");
        let _ = reject.call1(&JsValue::NULL, &e.into());
        return;
    }
    lab.real.text.set(text);
    let id = lab.real.next_id.get_untracked();
    SCRIPT_READS.with_borrow_mut(|r| r.push((id, resolve, reject)));
    read(lab);
}

/// The opened model reads the text box.
pub fn read(lab: Lab) {
    let m = lab.real;
    if m.opened.with_untracked(Option::is_none) {
        return m.message.set(Some(Err("open a model first".into())));
    }
    let id = m.id();
    m.section.set(Section::Reading);
    m.busy_after(id, Some("Reading".into()));
    // An error is answered by reading again; a note (the cache refused the files) stays.
    if m.message.with_untracked(|x| matches!(x, Some(Err(_)))) {
        m.message.set(None);
    }
    let text = m.text.get_untracked();
    m.comparing.follow(&text);
    model_worker::send(lab, Command::Read { text, id }, vec![]);
}

/// The opened model writes after the text, as `drawing` says.
pub fn write(lab: Lab) {
    let m = lab.real;
    let d = m.drawing;
    let spec = SampleSpec {
        prompt: m.text.get_untracked(),
        tokens: WRITE_TOKENS,
        temperature: d.temperature.get_untracked(),
        top_k: d.top_k.get_untracked(),
        top_p: d.top_p.get_untracked(),
        seed: d.seed.get_untracked(),
        samples: 1,
    };
    let id = m.id();
    m.busy_after(id, Some("Writing".into()));
    model_worker::send(lab, Command::SampleModel { spec, id }, vec![]);
}

/// The model worker's answer to opening `n`. An answer to an opening that a later one replaced
/// says which model the worker holds now, and nothing else: the later opening keeps its busy
/// line, its progress and its message, and reads when its own answer comes.
pub fn on_opened(lab: Lab, n: u64, open: Option<OpenedModel>, error: Option<String>) {
    let m = lab.real;
    let sent = m
        .sent
        .try_update_value(|s| {
            let mine = s.iter().position(|x| x.opening == n).map(|i| s.remove(i));
            s.retain(|x| x.opening > n);
            mine
        })
        .flatten();
    let last = n == m.opening.get_value();
    if last {
        m.settled.set_value(n);
        m.busy.set(None);
        m.progress.set(None);
    }
    // The model changed under a later opening: what was read belongs to the model before.
    if open.is_none() || (error.is_none() && !last) {
        m.reading.set(None);
        m.written.set(None);
        m.comparing.clear();
        m.lensing.clear();
        if m.mode.get_untracked() == Mode::Model {
            lab.panels.set(None);
        }
    }
    if open.is_none() {
        m.source.set(None);
    } else if error.is_none() {
        m.source.set(sent.as_ref().map(|s| s.source.clone()));
        m.origin.set_value(sent.as_ref().map(|s| s.origin.clone()));
    }
    let kept = open.as_ref().map(|o| o.name.clone());
    m.opened.set(open);
    match error {
        Some(mut e) => {
            // A model that does not open leaves no copy behind: the next Fetch asks the hub again.
            if let Some(fetched) = sent.map(|s| s.fetched).filter(|f| !f.is_empty()) {
                leptos::task::spawn_local(async move { hub::forget(&fetched).await });
                e.push_str(" (its files kept in this browser were dropped: Fetch asks the hub again)");
            }
            if let Some(name) = kept {
                e.push_str(&format!(". {name} is still open."));
            }
            if last {
                m.message.set(Some(Err(e)))
            }
        }
        None if last && m.quiet.get_value() != n => read(lab),
        None => {}
    }
}

/// The model worker crashed: the model is gone, every call waiting on it is refused with `why`.
pub fn on_worker_lost(lab: Lab, why: String) {
    refuse_waiting(&why);
    // An opening it died in fails as a refused one does: its files' copies are dropped too (a file
    // that crashed the worker would crash the next one).
    on_opened(lab, lab.real.opening.get_value(), None, Some(why));
    lab.real.sent.set_value(Vec::new());
}

/// Every call waiting on the model worker (a script's reading, a history's checkpoint) is refused
/// with `why`: the worker is gone, or was stopped.
pub(super) fn refuse_waiting(why: &str) {
    let waiting = SCRIPT_READS.with_borrow_mut(std::mem::take);
    for (_, _, reject) in waiting {
        let _ = reject.call1(&JsValue::NULL, &js_sys::Error::new(why).into());
    }
    super::history::on_worker_lost(why);
}

/// Settles the `spherewalk.inspect` call waiting for reading `id`, if any.
fn settle(id: u64, result: Result<&Inspection, String>) {
    let waiting = SCRIPT_READS.with_borrow_mut(|r| r.iter().position(|x| x.0 == id).map(|i| r.remove(i)));
    if let Some((_, resolve, reject)) = waiting {
        let _ = match result.and_then(protocol::to_js) {
            Ok(v) => resolve.call1(&JsValue::NULL, &v),
            Err(e) => reject.call1(&JsValue::NULL, &js_sys::Error::new(&e).into()),
        };
    }
}

/// Every layer's panels of a reading; its depth fits follow (`on_depth`).
pub fn on_reading(lab: Lab, id: u64, result: Result<(Box<Inspection>, Box<Panels>), String>, bulk: &[JsValue]) {
    let m = lab.real;
    m.busy_after(id, result.is_ok().then(|| "Fitting Brownian motion and the particles' flow through depth".into()));
    if let Err(e) = &result {
        settle(id, Err(e.clone()));
    }
    match result {
        Ok((inspection, mut panels)) => {
            panels.sphere = protocol::floats_of(bulk.first());
            panels.attention = protocol::floats_of(bulk.get(1));
            m.reading.set(Some(*inspection));
            m.written.set(None);
            m.lensing.clear();
            match m.mode.get_untracked() {
                Mode::Model => lab.panels.set(Some(*panels)),
                Mode::Train => m.other_panels.set(Some(*panels)),
            }
        }
        Err(e) => m.message.set(Some(Err(e))),
    }
}

/// The depth fits of the reading shown: its verdicts join the panels, and a script gets the whole.
pub fn on_depth(lab: Lab, id: u64, fit: DepthFit) {
    let m = lab.real;
    m.busy_after(id, None);
    let panels = match m.mode.get_untracked() {
        Mode::Model => lab.panels,
        Mode::Train => m.other_panels,
    };
    m.reading.update(|r| {
        if let Some(r) = r.as_mut() {
            panels.update(|p| match p.as_mut() {
                Some(p) => with_depth(r, p, fit),
                None => r.depth = fit,
            });
        }
    });
    m.reading.with_untracked(|r| settle(id, r.as_ref().ok_or_else(|| "the reading was replaced".to_string())));
}

pub fn on_samples(lab: Lab, id: u64, result: Result<Vec<Sample>, String>) {
    let m = lab.real;
    m.busy_after(id, None);
    match result {
        Ok(mut s) => m.written.set(s.pop()),
        Err(e) => m.message.set(Some(Err(e))),
    }
}
