//! The page's second mode: a real model (GPT-2, in Hugging Face's files) opened from files the
//! visitor picks or fetched from the hub by its id, what it read and what it wrote. The worker
//! holds the model (`worker::reading`); here the page's side: the files on their way (with
//! progress, a cancel button and the browser's Cache API, so a reload does not fetch 0.5 GB
//! again), and the answers.

use engine::pretrained::inspect::DepthFit;
use engine::pretrained::view::with_depth;
use engine::pretrained::Inspection;
use engine::sample::{Sample, SampleSpec};
use engine::session::Panels;
use js_sys::{Function, Reflect, Uint8Array};
use leptos::prelude::*;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use super::{model_worker, Lab};
use spherewalk::protocol::{self, Command, OpenedModel};

/// Ids of the model's reads and writes: above the writing panel's and scripts' (`writing`).
pub const MODEL_IDS: u64 = 1 << 52;
/// Where "Fetch" finds a model id's files; a link's `?hub=` replaces it (the tests serve a
/// fixture under the same path layout from the page's own server).
pub const HUB: &str = "https://huggingface.co";
/// The browser cache the fetched files are kept in.
const CACHE: &str = "spherewalk-models";
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

#[derive(Clone, Copy)]
pub struct RealModel {
    pub mode: RwSignal<Mode>,
    pub opened: RwSignal<Option<OpenedModel>>,
    /// What the model is busy with ("Opening gpt2", "Reading"), shown beside the controls.
    pub busy: RwSignal<Option<String>>,
    pub progress: RwSignal<Option<Progress>>,
    /// A note (Ok) or why something failed (Err), until the next action.
    pub message: RwSignal<Option<Result<String, String>>>,
    pub reading: RwSignal<Option<Inspection>>,
    pub written: RwSignal<Option<Sample>>,
    pub text: RwSignal<String>,
    pub hub_id: RwSignal<String>,
    /// The panels of the mode not shown: the run's while the model's are on screen, and back.
    other_panels: RwSignal<Option<Panels>>,
    next_id: RwSignal<u64>,
    abort: StoredValue<Option<web_sys::AbortController>, LocalStorage>,
}

impl RealModel {
    pub fn new() -> Self {
        RealModel {
            mode: RwSignal::new(Mode::Train),
            opened: RwSignal::new(None),
            busy: RwSignal::new(None),
            progress: RwSignal::new(None),
            message: RwSignal::new(None),
            reading: RwSignal::new(None),
            written: RwSignal::new(None),
            text: RwSignal::new("The Brownian motion in the transformer model: tokens walk on the sphere.".into()),
            hub_id: RwSignal::new("openai-community/gpt2".into()),
            other_panels: RwSignal::new(None),
            next_id: RwSignal::new(MODEL_IDS),
            abort: StoredValue::new_local(None),
        }
    }

    fn id(self) -> u64 {
        let id = self.next_id.get_untracked();
        self.next_id.set(id + 1);
        id
    }
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
    lab.depth.set(0);
    lab.selected.set(None);
    lab.chain.layer.set(0);
    lab.chain.head.set(0);
    m.mode.set(mode);
}

/// Panels from the run: shown in training mode, kept aside while the model's are shown.
pub fn on_run_panels(lab: Lab, panels: Panels) {
    match lab.real.mode.get_untracked() {
        Mode::Train => lab.panels.set(Some(panels)),
        Mode::Model => lab.real.other_panels.set(Some(panels)),
    }
}

fn opening(lab: Lab, name: &str) {
    lab.real.message.set(None);
    lab.real.busy.set(Some(format!("Opening {name}")));
}

/// The tokenizer's files a model may have beside its weights, in the order they are tried.
const TOKENIZER_FILES: [&str; 3] = ["tokenizer.json", "vocab.json", "merges.txt"];

/// The model's files, picked by the visitor: its config.json, a .safetensors and its tokenizer's
/// files (tokenizer.json, or GPT-2's vocab.json and merges.txt).
pub fn open_files(lab: Lab, files: Vec<web_sys::File>) {
    let named = |name: &str| files.iter().find(|f| f.name().eq_ignore_ascii_case(name)).cloned();
    let weights = files.iter().find(|f| f.name().to_lowercase().ends_with(".safetensors")).cloned();
    let (Some(config), Some(weights)) = (named("config.json"), weights) else {
        let names: Vec<String> = files.iter().map(|f| f.name()).collect();
        let bin = names.iter().any(|n| n.ends_with(".bin"));
        lab.real.message.set(Some(Err(format!(
            "pick the model's config.json, its model.safetensors and its tokenizer.json together (picked: {}){}",
            names.join(", "),
            if bin { "; a .bin file is a PyTorch pickle, which the lab does not open" } else { "" }
        ))));
        return;
    };
    let mut picked = vec![("config.json".to_string(), config), ("model.safetensors".to_string(), weights.clone())];
    picked.extend(TOKENIZER_FILES.iter().filter_map(|&n| named(n).map(|f| (n.to_string(), f))));
    opening(lab, &weights.name());
    leptos::task::spawn_local(async move {
        let mut bulk = Vec::new();
        let mut names = Vec::new();
        for (name, f) in picked {
            match JsFuture::from(f.array_buffer()).await {
                // The file's own buffer goes to the worker (transferred, not copied).
                Ok(buf) => bulk.push(Uint8Array::new(&buf).into()),
                Err(e) => {
                    return failed(lab, format!("could not read {}: {}", f.name(), spherewalk::js::error_text(&e)))
                }
            }
            names.push(name);
        }
        model_worker::send(lab, Command::OpenModel { name: weights.name(), files: names }, bulk);
    });
}

pub(super) fn failed(lab: Lab, why: String) {
    lab.real.busy.set(None);
    lab.real.progress.set(None);
    lab.real.message.set(Some(Err(why)));
}

/// The hub's address: `?hub=` of the page's link, or Hugging Face.
fn hub() -> String {
    let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
    web_sys::UrlSearchParams::new_with_str(&search)
        .ok()
        .and_then(|p| p.get("hub"))
        .unwrap_or_else(|| HUB.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// Fetches the model `id`'s files (config.json, its tokenizer's, model.safetensors) from the hub (or the browser's
/// cache), with progress and a cancel button, and opens it.
pub fn fetch_hub(lab: Lab) {
    let id = lab.real.hub_id.get_untracked().trim().to_string();
    if id.is_empty() || id.contains("..") || id.starts_with('/') {
        return lab.real.message.set(Some(Err("type a model id, such as openai-community/gpt2".into())));
    }
    let Ok(controller) = web_sys::AbortController::new() else { return };
    lab.real.abort.set_value(Some(controller.clone()));
    opening(lab, &id);
    leptos::task::spawn_local(async move {
        let base = format!("{}/{id}/resolve/main", hub());
        let mut bulk = Vec::new();
        let mut names = Vec::new();
        let mut notes = Vec::new();
        // The small files first: a model whose files cannot be found fails before its weights come.
        let mut plan = vec!["config.json", "tokenizer.json", "model.safetensors"];
        let mut next = 0;
        while let Some(&file) = plan.get(next) {
            next += 1;
            match download(lab, &format!("{base}/{file}"), file, &controller).await {
                Ok(Some((bytes, note))) => {
                    bulk.push(bytes.into());
                    names.push(file.to_string());
                    notes.extend(note);
                }
                // No tokenizer.json: GPT-2's older pair (without it the model worker says what is missing).
                Ok(None) if file == "tokenizer.json" => drop(plan.splice(next..next, ["vocab.json", "merges.txt"])),
                Ok(None) if matches!(file, "vocab.json" | "merges.txt") => {}
                Ok(None) => return failed(lab, format!("{base}/{file} was not found (404): is the model id right?")),
                Err(why) => return failed(lab, why),
            }
        }
        lab.real.abort.set_value(None);
        lab.real.progress.set(None);
        if !notes.is_empty() {
            lab.real.message.set(Some(Ok(notes.join(" "))));
        }
        model_worker::send(lab, Command::OpenModel { name: id, files: names }, bulk);
    });
}

/// Cancels the download under way: nothing is opened, the model already open stays.
pub fn cancel(lab: Lab) {
    if let Some(c) = lab.real.abort.get_value() {
        c.abort();
    }
}

/// One file: from the browser's cache if it is there, else fetched (then kept in the cache; a
/// refusal to keep it is a note, not a failure). Returns its bytes and that note, or None when
/// the hub has no such file (404).
async fn download(
    lab: Lab,
    url: &str,
    what: &str,
    controller: &web_sys::AbortController,
) -> Result<Option<(Uint8Array, Option<String>)>, String> {
    let window = web_sys::window().ok_or("no window")?;
    let text = |e: JsValue| spherewalk::js::error_text(&e);
    let cache: Option<web_sys::Cache> = match window.caches() {
        Ok(c) => JsFuture::from(c.open(CACHE)).await.ok().map(JsCast::unchecked_into),
        Err(_) => None,
    };
    if let Some(cache) = &cache {
        if let Ok(hit) = JsFuture::from(cache.match_with_str(url)).await {
            if let Ok(response) = hit.dyn_into::<web_sys::Response>() {
                lab.real.progress.set(Some(Progress {
                    what: format!("{what} (from the browser's cache)"),
                    loaded: 0.0,
                    total: None,
                }));
                let buf = JsFuture::from(response.array_buffer().map_err(text)?).await.map_err(text)?;
                return Ok(Some((Uint8Array::new(&buf), None)));
            }
        }
    }
    let init = web_sys::RequestInit::new();
    init.set_signal(Some(&controller.signal()));
    let response = JsFuture::from(window.fetch_with_str_and_init(url, &init)).await.map_err(|e| {
        if controller.signal().aborted() {
            "cancelled: nothing was opened".to_string()
        } else {
            format!("could not fetch {url}: {} (no network, or the hub refused)", text(e))
        }
    })?;
    let response: web_sys::Response = response.unchecked_into();
    if response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("{url} answered {} {}: is the model id right?", response.status(), response.status_text()));
    }
    let total = response.headers().get("content-length").ok().flatten().and_then(|v| v.parse::<f64>().ok());
    let body = response.body().ok_or("the response has no body")?;
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let mut chunks: Vec<Uint8Array> = Vec::new();
    let mut loaded = 0.0;
    loop {
        let part = JsFuture::from(reader.read()).await.map_err(|e| match controller.signal().aborted() {
            true => "cancelled: nothing was opened".to_string(),
            false => format!("the download of {what} broke off: {}", text(e)),
        })?;
        if Reflect::get(&part, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true) {
            break;
        }
        let chunk: Uint8Array = Reflect::get(&part, &"value".into()).map_err(text)?.unchecked_into();
        loaded += chunk.length() as f64;
        chunks.push(chunk);
        lab.real.progress.set(Some(Progress { what: what.to_string(), loaded, total }));
    }
    let whole = Uint8Array::new_with_length(loaded as u32);
    let mut at = 0;
    for c in &chunks {
        whole.set(c, at);
        at += c.length();
    }
    let mut note = None;
    if let Some(cache) = &cache {
        let kept = match web_sys::Response::new_with_opt_buffer_source(Some(&whole)) {
            Ok(copy) => JsFuture::from(cache.put_with_str(url, &copy)).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = kept {
            note = Some(format!("The browser would not keep {what} ({}): the next visit fetches it again.", text(e)));
        }
    }
    Ok(Some((whole, note)))
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
    m.busy.set(Some("Reading".into()));
    // An error is answered by reading again; a note (the cache refused the files) stays.
    if m.message.with_untracked(|x| matches!(x, Some(Err(_)))) {
        m.message.set(None);
    }
    model_worker::send(lab, Command::Read { text: m.text.get_untracked(), id: m.id() }, vec![]);
}

/// The opened model writes after the text (greedy).
pub fn write(lab: Lab) {
    let m = lab.real;
    let spec =
        SampleSpec { prompt: m.text.get_untracked(), tokens: WRITE_TOKENS, temperature: 0.0, ..SampleSpec::default() };
    m.busy.set(Some("Writing".into()));
    model_worker::send(lab, Command::SampleModel { spec, id: m.id() }, vec![]);
}

pub fn on_opened(lab: Lab, open: Option<OpenedModel>, error: Option<String>) {
    let m = lab.real;
    m.busy.set(None);
    m.progress.set(None);
    if open.is_none() {
        m.reading.set(None);
        m.written.set(None);
        if m.mode.get_untracked() == Mode::Model {
            lab.panels.set(None);
        }
    }
    m.opened.set(open);
    match error {
        Some(e) => m.message.set(Some(Err(e))),
        None => read(lab),
    }
}

/// The model worker crashed: the model is gone, every call waiting on it is refused with `why`.
pub fn on_worker_lost(lab: Lab, why: String) {
    let waiting = SCRIPT_READS.with_borrow_mut(std::mem::take);
    for (_, _, reject) in waiting {
        let _ = reject.call1(&JsValue::NULL, &js_sys::Error::new(&why).into());
    }
    on_opened(lab, None, Some(why));
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
    m.busy.set(result.is_ok().then(|| "Fitting Brownian motion and the particles' flow through depth".into()));
    if let Err(e) = &result {
        settle(id, Err(e.clone()));
    }
    match result {
        Ok((inspection, mut panels)) => {
            panels.sphere = protocol::floats_of(bulk.first());
            panels.attention = protocol::floats_of(bulk.get(1));
            m.reading.set(Some(*inspection));
            m.written.set(None);
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
    m.busy.set(None);
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

pub fn on_samples(lab: Lab, result: Result<Vec<Sample>, String>) {
    let m = lab.real;
    m.busy.set(None);
    match result {
        Ok(mut s) => m.written.set(s.pop()),
        Err(e) => m.message.set(Some(Err(e))),
    }
}
