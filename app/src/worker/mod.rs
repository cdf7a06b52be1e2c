//! The training worker: it owns the engine's session and runs it between messages, so the page's
//! main thread only draws. One task owns all the state and handles one command at a time, in
//! order: presses of Start, Step and Reset in the same instant cannot interleave.
//!
//! While running, the worker takes steps for about [`CHUNK_MS`], then lets its event loop run (new
//! commands), and posts what changed: new loss points at most every [`PROGRESS_EVERY_MS`], the
//! panels at most every [`PANELS_EVERY_MS`] (or four times what they take) when a probe frame was
//! recorded, and saves the run to
//! IndexedDB every [`SAVE_EVERY_MS`] (the page's own run only). These wall-clock intervals only
//! decide when the page hears about the numbers; the numbers follow the session's step schedule.
//!
//! Here the worker's state and its commands; `running` the loop that steps and posts, `saving` the
//! run in IndexedDB and as files; `mailbox` what every worker of the page shares (the queue of
//! commands, events back, crashes told). A real model opens in a worker of its own (`reader`).

pub mod mailbox;
pub mod model_io;
pub mod persist;
mod running;
mod saving;
pub mod shard_pool;

use engine::memory::DEFAULT_BUDGET;
use engine::session::bench::BenchSpec;
use engine::session::duration;
use engine::session::{BackendChoice, Experiment, Session};
use engine::train::remote::{ShardPool, ShardTask, ShardWorker};
use wasm_bindgen::prelude::*;

use crate::js::{now_ms, yield_now};
use crate::protocol::{self, Command, Event, Phase, TestHook};
use crate::settings::Settings;
use mailbox::{Mailbox, Message};
use shard_pool::SecondWorker;

const CHUNK_MS: f64 = 8.0;
const PROGRESS_EVERY_MS: f64 = 50.0;
const PANELS_EVERY_MS: f64 = 250.0;
const SAVE_EVERY_MS: f64 = 3000.0;
/// How long a worker's first measure of the estimate's rates runs each kind of work before it
/// counts: its wasm is still the baseline compiler's (`engine::session::duration::measure`).
const MEASURE_WARM_MS: f64 = 400.0;

/// Starts the worker: listens for commands and says it is ready.
pub fn start() {
    let mailbox = Mailbox::open();
    wasm_bindgen_futures::spawn_local(Worker::new(mailbox).run());
}

struct Worker {
    mailbox: Mailbox,
    /// The page's epoch of the command that made the current run (tags every event).
    epoch: u64,
    session: Option<Session>,
    settings: Option<Settings>,
    phase: Phase,
    backend: BackendChoice,
    depth: usize,
    pace: Option<f64>,
    slowdown: f64,
    /// Points of the metrics already posted.
    sent: (usize, usize, usize),
    last_progress: f64,
    last_panels: f64,
    last_save: f64,
    /// How long the last save took: a run whose save is slow (hundreds of MB) saves less often.
    save_ms: f64,
    /// How long the last panels took: a large model's (hundreds of ms in wasm) come less often.
    panels_ms: f64,
    panels_due: bool,
    /// Pacing: the step count and time the current pace was measured from.
    pace_origin: (usize, f64),
    /// Time spent in steps and their count since the run (re)started, for the summary.
    timed: (f64, usize),
    ms_per_step: Option<f64>,
    /// Why `auto` runs on the CPU here (no adapter, or a software one), once the adapter was asked for.
    auto_cpu: Option<String>,
    /// The second worker this training worker's CPU steps share their shards with, when allowed.
    second: Option<SecondWorker>,
    second_allowed: bool,
    /// As a second worker: the model the shards are computed with.
    shard_worker: Option<ShardWorker>,
    /// The step of the last written sample posted; a new one is due to the page.
    written_sent: Option<usize>,
    written_due: bool,
    /// This worker has measured the estimate's rates once: its code is warm.
    measured: bool,
}

impl Worker {
    fn new(mailbox: Mailbox) -> Self {
        Worker {
            mailbox,
            epoch: 0,
            session: None,
            settings: None,
            phase: Phase::Idle,
            backend: BackendChoice::Auto,
            depth: 0,
            pace: None,
            slowdown: 1.0,
            sent: (0, 0, 0),
            last_progress: f64::NEG_INFINITY,
            last_panels: f64::NEG_INFINITY,
            last_save: f64::NEG_INFINITY,
            save_ms: 0.0,
            panels_ms: 0.0,
            panels_due: false,
            pace_origin: (0, 0.0),
            timed: (0.0, 0),
            ms_per_step: None,
            auto_cpu: None,
            second: None,
            second_allowed: true,
            shard_worker: None,
            written_sent: None,
            written_due: false,
            measured: false,
        }
    }

    fn post(&self, event: Event) {
        self.post_with(&event, vec![]);
    }

    fn post_with(&self, event: &Event, bulk: Vec<JsValue>) {
        self.mailbox.post(event, bulk, self.epoch);
    }

    fn error(&mut self, text: String) {
        web_sys::console::warn_1(&format!("Spherewalk: {text}").into());
        self.post(Event::Error { text });
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase;
        self.post(Event::Phase { phase });
        self.pace_origin = (self.session.as_ref().map_or(0, Session::step_count), now_ms());
    }

    async fn run(mut self) {
        self.post(Event::Ready { engine: engine::VERSION.into() });
        loop {
            while let Some(m) = self.mailbox.try_next() {
                self.handle(m).await;
            }
            if self.phase == Phase::Running {
                self.chunk().await;
                yield_now().await;
            } else {
                let m = self.mailbox.next().await;
                self.handle(m).await;
            }
        }
    }

    async fn handle(&mut self, (cmd, bulk, epoch): Message) {
        if matches!(cmd, Command::Create { .. } | Command::Reset | Command::ResumeSaved | Command::LoadModel { .. }) {
            self.epoch = epoch;
        }
        match cmd {
            Command::Create { experiment, settings, run, second_worker } => {
                self.second_allowed = second_worker;
                self.create(*experiment, settings, run).await
            }
            Command::Run => {
                if self.session.as_ref().is_some_and(|s| !s.is_done()) {
                    self.set_phase(Phase::Running);
                }
            }
            Command::Pause => {
                if self.phase == Phase::Running {
                    self.settle().await;
                }
                if self.phase == Phase::Running {
                    // The last points first: when the page hears "paused" its step is final.
                    self.publish(true);
                    self.set_phase(Phase::Paused);
                    self.save(true).await;
                }
            }
            Command::Step { lr } => {
                if self.session.is_none() || self.phase == Phase::Running {
                    return;
                }
                if let Some(lr) = lr {
                    self.set_lr(lr).await;
                }
                self.set_phase(Phase::Paused);
                self.advance(1).await;
                self.settle().await;
                self.publish(true);
                self.save(true).await;
            }
            Command::SetLr { lr } => self.set_lr(lr).await,
            Command::Reset => {
                self.session = None;
                self.settings = None;
                self.set_phase(Phase::Idle);
                if let Err(e) = persist::delete().await {
                    web_sys::console::warn_1(&format!("Spherewalk: {e}").into());
                }
            }
            Command::SetBackend { choice } => {
                self.backend = choice;
                if let Some(s) = self.session.as_mut() {
                    if let Err(e) = s.set_backend(choice).await {
                        self.post(Event::Notice { text: format!("the run stays where it is: {e}") });
                    }
                }
                self.post_backend();
                self.publish(true);
            }
            Command::SetDepth { depth } => {
                self.depth = depth;
                self.publish(true);
            }
            Command::SetPace { steps_per_second } => {
                self.pace = steps_per_second.filter(|p| p.is_finite() && *p > 0.0);
                self.pace_origin = (self.session.as_ref().map_or(0, Session::step_count), now_ms());
            }
            Command::CheckSaved => self.check_saved().await,
            Command::ResumeSaved => self.resume_saved().await,
            Command::DiscardSaved => {
                if let Err(e) = persist::delete().await {
                    web_sys::console::warn_1(&format!("Spherewalk: {e}").into());
                }
            }
            Command::DownloadModel => self.download_model().await,
            Command::LoadModel { names } => {
                let files: Vec<(String, Vec<u8>)> =
                    names.into_iter().enumerate().map(|(i, n)| (n, protocol::bytes_of(bulk.get(i)))).collect();
                self.load_model(files).await;
            }
            Command::Test(TestHook::Slowdown { factor }) => self.slowdown = factor.max(1.0),
            // What a bug or a failed allocation does to the wasm: the page must notice.
            Command::Test(TestHook::Trap) => core::arch::wasm32::unreachable(),
            Command::Test(TestHook::TrapSecond) => {
                if let Some(w) = &self.second {
                    w.send(&Command::Test(TestHook::Trap));
                }
            }
            Command::Sample { spec, id } => {
                let result = match self.session.as_mut() {
                    Some(s) => s.sample(&spec).await.map_err(|e| e.to_string()),
                    None => Err("no model yet: start or step a run first".into()),
                };
                self.post(Event::Samples { id, result });
            }
            Command::SetWriting { writing } => {
                if let Some(s) = self.session.as_mut() {
                    if let Err(e) = s.set_writing(writing) {
                        self.error(format!("the writing settings were not changed: {e}"));
                    }
                }
            }
            Command::ProbeAdapter => self.probe_adapter().await,
            Command::MeasurePace { experiment, id } => self.measure_pace(*experiment, id).await,
            Command::Bench { spec } => self.bench(spec).await,
            Command::Shard { model, batch, from, to } => self.shard(*model, batch, from..to, &bulk),
            Command::OpenModel { .. }
            | Command::Read { .. }
            | Command::Compare { .. }
            | Command::LogitLens { .. }
            | Command::MeasureCheckpoint { .. }
            | Command::SampleModel { .. } => {
                self.error("a real model opens in the model worker, not the training worker".into())
            }
        }
    }

    /// Times this machine on the experiment's kinds of work for the page's estimate, with the
    /// second worker the run will share its steps with (started here and kept for the run). The
    /// tests' slowed worker measures as slowly as it steps.
    async fn measure_pace(&mut self, experiment: Experiment, id: u64) {
        if self.second_allowed && self.second.as_ref().is_none_or(SecondWorker::is_dead) {
            self.second = SecondWorker::spawn();
        }
        if let Some(w) = &self.second {
            w.ready().await;
        }
        let pool = self.second.as_ref().filter(|w| !w.is_dead()).map(|w| w as &dyn ShardPool);
        // The first measure in this worker warms its code up (and the second worker's) first.
        let warm_ms = if self.measured { 0.0 } else { MEASURE_WARM_MS };
        let result = duration::measure(&experiment, DEFAULT_BUDGET, &now_ms, pool, warm_ms)
            .await
            .map(|(work, rates)| (work, rates.slower(self.slowdown)))
            .map_err(|e| e.to_string());
        self.measured |= result.is_ok();
        self.post(Event::Pace { id, result });
    }

    /// Times the engine (`spherewalk.bench`), with a second worker as the page's training worker
    /// has one, unless the spec asks for one worker.
    async fn bench(&mut self, spec: BenchSpec) {
        let second = match spec.config() {
            Ok(_) if spec.workers != 1 => SecondWorker::spawn(),
            _ => None,
        };
        if let Some(w) = &second {
            if !w.ready().await {
                return self.post(Event::Error { text: "the second worker did not start".into() });
            }
        }
        if spec.workers == 2 && second.is_none() {
            return self.post(Event::Error { text: "this machine has one core: no second worker".into() });
        }
        match spec.run(&now_ms, second.as_ref().map(|w| w as &dyn ShardPool)).await {
            Ok(result) => self.post(Event::Bench { result }),
            Err(e) => self.post(Event::Error { text: e.to_string() }),
        }
    }

    /// As the second worker of another training worker: computes the shards it was sent.
    fn shard(&mut self, model: engine::ModelConfig, batch: usize, parts: std::ops::Range<usize>, bulk: &[JsValue]) {
        let task = ShardTask {
            model,
            batch,
            params: protocol::floats_of(bulk.first()),
            tokens: protocol::words_of(bulk.get(1)),
            targets: protocol::words_of(bulk.get(2)),
            parts,
        };
        let worker = match self.shard_worker.take() {
            Some(w) if w.fits(&task) => Ok(w),
            _ => ShardWorker::for_task(&task),
        };
        let result = worker.and_then(|w| self.shard_worker.insert(w).run(task));
        match result {
            Ok(outs) => {
                let counts = outs.iter().map(|o| o.count).collect();
                let bulk =
                    outs.iter().flat_map(|o| [&o.grads, &o.rows, &o.target_p].map(|x| protocol::floats(x))).collect();
                self.post_with(&Event::Shards { counts }, bulk);
            }
            Err(e) => self.post(Event::Error { text: e.to_string() }),
        }
    }

    /// Makes `session` the run, tells the page, and starts or pauses it.
    fn install(&mut self, mut session: Session, settings: Option<Settings>, run: bool) {
        if !self.second_allowed {
            self.second = None;
        } else if self.second.as_ref().is_none_or(SecondWorker::is_dead) {
            self.second = SecondWorker::spawn();
        }
        session.set_shard_pool(self.second.clone().map(|w| Box::new(w) as Box<dyn ShardPool>));
        session.set_interrupt(Some(Box::new(running::Breaks::new(self.mailbox.clone()))));
        let m = session.metrics().clone();
        self.sent = (m.train.len(), m.val.len(), m.diagnostics.len());
        self.post(Event::Run {
            config: Box::new(session.experiment().train.clone()),
            settings: settings.clone(),
            step: session.step_count(),
            metrics: m,
            baselines: session.baselines(),
            prompt: session.prompt().to_string(),
        });
        self.written_sent = None;
        self.written_due = !session.written().is_empty();
        self.settings = settings;
        self.timed = (0.0, 0);
        self.ms_per_step = None;
        let done = session.is_done();
        self.session = Some(session);
        self.post_backend();
        self.set_phase(if done {
            Phase::Done
        } else if run {
            Phase::Running
        } else {
            Phase::Paused
        });
        self.publish(true);
    }

    /// Asks for the adapter once, says what it is, and remembers whether `auto` keeps the CPU.
    async fn probe_adapter(&mut self) {
        let event = match engine::gpu::GpuContext::new().await {
            Ok(ctx) => {
                let name = ctx.adapter_name();
                let software = ctx.is_software();
                if software {
                    self.auto_cpu =
                        Some(format!("cpu (auto: the GPU adapter {name} is software, slower than the CPU path)"));
                }
                Event::Adapter { name: Some(name), software, why: None }
            }
            Err(e) => {
                self.auto_cpu = Some(format!("cpu (auto: {e})"));
                Event::Adapter { name: None, software: false, why: Some(e.to_string()) }
            }
        };
        self.post(event);
    }

    async fn create(&mut self, mut experiment: Experiment, settings: Option<Settings>, run: bool) {
        self.session = None;
        self.backend = experiment.backend;
        // Auto on a page whose adapter is known to be software (or absent): the CPU, without asking again.
        let reason = self.auto_cpu.clone().filter(|_| experiment.backend == BackendChoice::Auto);
        if reason.is_some() {
            experiment.backend = BackendChoice::Cpu;
        }
        match Session::new(experiment, DEFAULT_BUDGET).await {
            Ok(mut session) => {
                if let Some(line) = reason {
                    session.explain_backend(line);
                }
                self.install(session, settings, run);
                self.save(true).await;
            }
            Err(e) => {
                self.set_phase(Phase::Failed);
                self.error(format!("could not start the run: {e}"));
            }
        }
    }

    async fn set_lr(&mut self, lr: f32) {
        let Some(s) = self.session.as_mut() else { return };
        match s.set_lr(lr).await {
            Ok(()) => {
                if let Some(settings) = self.settings.as_mut() {
                    settings.lr = lr;
                }
                self.post(Event::Notice { text: format!("learning rate {lr} applied; training continues") });
                self.post_backend();
            }
            Err(e) => self.error(format!("could not apply the learning rate: {e}")),
        }
    }

    fn post_backend(&self) {
        if let Some(s) = &self.session {
            let mut line = s.backend().to_string();
            if s.uses_shard_pool() {
                line.push_str(" · 2 cores (a second worker computes half of each step)");
            }
            self.post(Event::Backend { line, adapter: s.adapter().map(String::from) });
        }
    }
}
