//! What the page and its training worker say to each other. Messages cross as JS values through
//! serde-wasm-bindgen: `{"cmd": ...}` from the page, `{"event": ...}` from the worker, each with a
//! `bulk` array beside it for the big numbers (sphere points, attention matrices, file bytes) as
//! typed arrays, whose buffers are transferred rather than copied.

use engine::data::baseline::BaselineLoss;
use engine::lenses::history::Checkpoint;
use engine::lenses::{Comparison, DepthFit, Inspection};
use engine::sample::{Sample, SampleSpec};
use engine::session::bench::{BenchResult, BenchSpec};
use engine::session::duration::{Rates, Work};
use engine::session::{BackendChoice, DiagPoint, Experiment, Metrics, Panels, Writing, Written};
use js_sys::{Array, Float32Array, Object, Reflect, Uint32Array, Uint8Array};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use wasm_bindgen::{JsCast, JsValue};

use crate::settings::Settings;

/// The training worker's loader (`public/worker_loader.js`), for the workers started without the
/// page's progress line: a race's rivals, the scripting API's, the training worker's second one.
pub const WORKER_URL: &str = "./worker_loader.js";
/// The model worker (`reader`), started when the page first opens a model.
pub const READER_URL: &str = "./worker_loader.js?worker=reader";

/// What a browser test makes a worker do that a visitor never asks for.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "hook", rename_all = "snake_case")]
pub enum TestHook {
    /// A busy wait of `factor - 1` times each step's own time, so the worker runs as on a machine
    /// `factor` times slower (Chromium cannot CPU-throttle a worker through DevTools).
    Slowdown { factor: f64 },
    /// Aborts the worker's wasm, as a bug or a failed allocation would.
    Trap,
    /// Makes the training worker's second worker trap (`shard_pool`).
    TrapSecond,
}

/// The page to the worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// A new run (`settings` is what the page shows and saves beside it); `run` starts training;
    /// `second_worker`: its CPU steps may use a second worker (a second core). A race turns it off,
    /// so that every entrant has one core and the race against seconds of compute stays fair.
    Create {
        experiment: Box<Experiment>,
        settings: Option<Settings>,
        run: bool,
        second_worker: bool,
    },
    Run,
    Pause,
    /// One step; with `lr` a new learning rate first.
    Step {
        lr: Option<f32>,
    },
    /// A new learning rate for the run in progress (weights, optimizer state and step kept).
    SetLr {
        lr: f32,
    },
    /// Drops the run (and the saved copy).
    Reset,
    SetBackend {
        choice: BackendChoice,
    },
    /// The depth the Brownian panel analyses.
    SetDepth {
        depth: usize,
    },
    /// Steps per second; None: as fast as possible.
    SetPace {
        steps_per_second: Option<f64>,
    },
    CheckSaved,
    ResumeSaved,
    DiscardSaved,
    DownloadModel,
    /// Uploaded files, named; their bytes are the message's bulk arrays, in order.
    LoadModel {
        names: Vec<String>,
    },
    /// The browser tests' hooks (`spherewalk.testing`), apart from what the page asks.
    Test(TestHook),
    /// Asks for the GPU adapter once for the page: `auto` then needs no new request at each run, and
    /// the page can warn about a software adapter before a run starts.
    ProbeAdapter,
    /// Samples of the run's current model (the writing panel's "Write more", `spherewalk.sample`);
    /// answered by `Event::Samples` with the same `id`.
    Sample {
        spec: SampleSpec,
        id: u64,
    },
    /// The writing schedule's prompt and settings (the writing panel's controls).
    SetWriting {
        writing: Writing,
    },
    /// Times this machine on the experiment's own kinds of work (`engine::session::duration`), for
    /// the estimate beside the pace: answered by `Event::Pace` with the same `id`.
    MeasurePace {
        experiment: Box<Experiment>,
        id: u64,
    },
    /// Times training steps and a GEMM on the CPU path (`spherewalk.bench`), in a worker of its own.
    Bench {
        spec: BenchSpec,
    },
    /// To the model worker: opens a model from its files, named in `files` in the order of the
    /// bulk arrays (config.json, model.safetensors, and tokenizer.json or vocab.json and
    /// merges.txt); answered by `Event::Opened` with the same `id` (the page's opening number).
    OpenModel {
        name: String,
        files: Vec<String>,
        id: u64,
    },
    /// The opened model reads `text`: answered by `Event::Reading` with the same `id`.
    Read {
        text: String,
        id: u64,
    },
    /// The opened model reads two texts and compares them: answered by `Event::Compared` with the
    /// same `id`.
    Compare {
        texts: [String; 2],
        id: u64,
    },
    /// The opened model reads `tokens` (a reading's own) through the logit lens: answered by
    /// `Event::LogitLens` with the same `id`.
    LogitLens {
        tokens: Vec<u32>,
        id: u64,
    },
    /// To the model worker: a checkpoint of a training history, from its files (named in `files`,
    /// bulk arrays as for `OpenModel`), reads `texts` and is dropped; answered by
    /// `Event::Measured` with the same `id`. The model open stays open.
    MeasureCheckpoint {
        step: u64,
        name: String,
        files: Vec<String>,
        texts: Vec<String>,
        id: u64,
    },
    /// What the opened model writes: answered by `Event::Samples` with the same `id`.
    SampleModel {
        spec: SampleSpec,
        id: u64,
    },
    /// From the training worker to its second worker (`shard_pool`): shards `from..to` of a step
    /// of this model and batch; the weights, tokens and targets are bulk arrays 0, 1 and 2.
    Shard {
        model: Box<engine::ModelConfig>,
        batch: usize,
        from: usize,
        to: usize,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Idle,
    Running,
    Paused,
    Done,
    Failed,
}

impl Phase {
    pub fn status_text(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Running => "training",
            Phase::Paused => "paused",
            Phase::Done => "done",
            Phase::Failed => "error",
        }
    }

    pub fn button_text(self) -> &'static str {
        match self {
            Phase::Idle => "Start",
            Phase::Running => "Pause",
            Phase::Paused => "Resume",
            Phase::Done => "Restart",
            Phase::Failed => "Retry",
        }
    }
}

/// A model opened from its files: where it came from and its sizes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenedModel {
    pub name: String,
    /// Its family ("GPT-2", "GPT-NeoX", "Llama", "BERT") and its block in words.
    pub family: String,
    pub block: String,
    pub layers: usize,
    pub heads: usize,
    pub d_model: usize,
    pub vocab: usize,
    pub context: usize,
    pub params: usize,
    /// A masked LM's mask token (BERT's `[MASK]`): it fills in masks, it does not write.
    #[serde(default)]
    pub fills: Option<String>,
}

/// The worker to the page.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The GPU adapter this browser offers (None: none, with why), and whether it is software.
    Adapter {
        name: Option<String>,
        software: bool,
        why: Option<String>,
    },
    /// The worker's wasm is loaded and listening.
    Ready {
        engine: String,
    },
    /// A run exists now (new, resumed, loaded): the page replaces its curves with `metrics`.
    Run {
        config: Box<engine::TrainConfig>,
        settings: Option<Settings>,
        step: usize,
        metrics: Metrics,
        /// What a model that ignores all context (unigram) or all but the last token (bigram) scores.
        baselines: BaselineLoss,
        /// The prompt the model writes from.
        prompt: String,
    },
    /// What the model wrote on the schedule since the last such event (all of it after `Run`).
    Written {
        written: Vec<Written>,
    },
    /// The answer to `Command::Sample`.
    Samples {
        id: u64,
        result: Result<Vec<Sample>, String>,
    },
    Phase {
        phase: Phase,
    },
    /// Where the run is: the session's backend line; `adapter` when it is on the GPU.
    Backend {
        line: String,
        adapter: Option<String>,
    },
    /// New points since the last progress event.
    Progress {
        step: usize,
        train: Vec<(usize, f32)>,
        val: Vec<(usize, f32)>,
        diagnostics: Vec<DiagPoint>,
        diag_text: Option<String>,
        ms_per_step: Option<f64>,
        steps_per_second: Option<f64>,
        /// Seconds of compute spent on the steps so far (for the race against time).
        seconds: f64,
    },
    /// The panels; `sphere` and `attention` are bulk arrays 0 and 1.
    Panels {
        panels: Box<Panels>,
    },
    /// A non-finite loss: the run went back to step `kept` and is paused; `metrics` replace the page's.
    NonFinite {
        message: String,
        kept: usize,
        metrics: Metrics,
    },
    Notice {
        text: String,
    },
    Error {
        text: String,
    },
    /// The run was saved to IndexedDB at `step`.
    Saved {
        step: usize,
    },
    /// Storage refused the save (full, blocked): why. Storage still holds the last save, if any.
    NotSaved {
        why: String,
    },
    /// A saved run is waiting to be resumed.
    SavedRun {
        step: usize,
        total: usize,
        what: String,
    },
    /// What became of uploaded model files: a note, or why they could not be used.
    Upload {
        result: Result<String, String>,
    },
    /// The model file (bulk 0) and its CLI config JSON.
    ModelFile {
        config_json: String,
    },
    /// The run is complete; the same fields as `lab train --json`'s last line.
    Summary {
        summary: serde_json::Value,
    },
    /// What `Command::MeasurePace` measured: the run's work and this machine's rates.
    Pace {
        id: u64,
        result: Result<(Work, Rates), String>,
    },
    /// What `Command::Bench` measured.
    Bench {
        result: BenchResult,
    },
    /// What became of `Command::OpenModel`: the model open now (the new one, or the one before
    /// when the new one was refused and both fitted), and why the new one was refused.
    Opened {
        id: u64,
        open: Option<OpenedModel>,
        error: Option<String>,
    },
    /// The answer to `Command::Read`: the inspection and the panels that draw it (their `sphere`
    /// and `attention` are bulk arrays 0 and 1).
    Reading {
        id: u64,
        result: Result<(Box<Inspection>, Box<Panels>), String>,
    },
    /// The depth fits of the reading `id` (Brownian motion and the particles' flow through the
    /// layers), which come after its panels.
    Depth {
        id: u64,
        depth: Box<DepthFit>,
    },
    /// The answer to `Command::MeasureCheckpoint`.
    Measured {
        id: u64,
        result: Result<Box<Checkpoint>, String>,
    },
    /// The answer to `Command::LogitLens`.
    LogitLens {
        id: u64,
        result: Result<Box<engine::lenses::LogitLens>, String>,
    },
    /// The answer to `Command::Compare`.
    Compared {
        id: u64,
        result: Result<Box<Comparison>, String>,
    },
    /// The shards of a `Command::Shard`, with their scored tokens; each one's gradient (but the
    /// weights'), rows and target probabilities are bulk arrays 3i, 3i + 1 and 3i + 2.
    Shards {
        counts: Vec<usize>,
    },
}

fn serializer() -> serde_wasm_bindgen::Serializer {
    serde_wasm_bindgen::Serializer::json_compatible()
}

/// A message as a JS object `{msg, bulk}`, and the buffers to transfer.
pub fn encode<T: Serialize>(msg: &T, bulk: Vec<JsValue>) -> Result<(JsValue, Array), String> {
    encode_at(msg, bulk, 0)
}

/// As [`encode`], tagged with the page's run `epoch`: the page bumps it whenever it replaces the run
/// (create, reset, resume, load), the worker tags its events with the epoch of the command that made
/// its run, and the page drops events of runs it has already replaced.
pub fn encode_at<T: Serialize>(msg: &T, bulk: Vec<JsValue>, epoch: u64) -> Result<(JsValue, Array), String> {
    let value = msg.serialize(&serializer()).map_err(|e| format!("message not encodable: {e}"))?;
    let out = Object::new();
    let transfer = Array::new();
    let arrays = Array::new();
    for b in bulk {
        if let Some(buf) = b.dyn_ref::<Float32Array>().map(|a| a.buffer()) {
            transfer.push(&buf);
        } else if let Some(buf) = b.dyn_ref::<Uint8Array>().map(|a| a.buffer()) {
            transfer.push(&buf);
        } else if let Some(buf) = b.dyn_ref::<Uint32Array>().map(|a| a.buffer()) {
            transfer.push(&buf);
        }
        arrays.push(&b);
    }
    Reflect::set(&out, &"msg".into(), &value).map_err(|_| "message object")?;
    Reflect::set(&out, &"bulk".into(), &arrays).map_err(|_| "message object")?;
    Reflect::set(&out, &"epoch".into(), &JsValue::from_f64(epoch as f64)).map_err(|_| "message object")?;
    Ok((out.into(), transfer))
}

/// The epoch a message was tagged with (0 when none).
pub fn epoch_of(data: &JsValue) -> u64 {
    Reflect::get(data, &"epoch".into()).ok().and_then(|e| e.as_f64()).unwrap_or(0.0) as u64
}

/// The message and its bulk arrays from a JS object made by [`encode`].
pub fn decode<T: DeserializeOwned>(data: &JsValue) -> Result<(T, Vec<JsValue>), String> {
    let msg = Reflect::get(data, &"msg".into()).map_err(|_| "no message")?;
    let msg = serde_wasm_bindgen::from_value(msg).map_err(|e| format!("message not understood: {e}"))?;
    let bulk = Reflect::get(data, &"bulk".into()).ok().filter(|b| b.is_object()).map(|b| Array::from(&b));
    Ok((msg, bulk.map(|b| b.iter().collect()).unwrap_or_default()))
}

pub fn floats(v: &[f32]) -> JsValue {
    Float32Array::from(v).into()
}

pub fn words(v: &[u32]) -> JsValue {
    Uint32Array::from(v).into()
}

/// A bulk array back as integers (empty when it is not a Uint32Array).
pub fn words_of(v: Option<&JsValue>) -> Vec<u32> {
    v.and_then(|v| v.dyn_ref::<Uint32Array>()).map(Uint32Array::to_vec).unwrap_or_default()
}

pub fn bytes(v: &[u8]) -> JsValue {
    Uint8Array::from(v).into()
}

/// A bulk array back as numbers (empty when it is not a Float32Array).
pub fn floats_of(v: Option<&JsValue>) -> Vec<f32> {
    v.and_then(|v| v.dyn_ref::<Float32Array>()).map(Float32Array::to_vec).unwrap_or_default()
}

pub fn bytes_of(v: Option<&JsValue>) -> Vec<u8> {
    v.and_then(|v| v.dyn_ref::<Uint8Array>()).map(Uint8Array::to_vec).unwrap_or_default()
}

/// A JS value as a serde value (for the scripting API's config argument).
pub fn to_js<T: Serialize>(v: &T) -> Result<JsValue, String> {
    v.serialize(&serializer()).map_err(|e| e.to_string())
}
