//! The page's state, and its link to the training worker.
//!
//! The worker (`common::worker`) owns the run; this side sends it commands (start, pause,
//! step, reset, a new learning rate or backend, save and load) and turns its events into signals the
//! views draw. Nothing here computes: the numbers arrive finished.
//!
//! Here the state and the commands; `events` turns the worker's events into signals, `backend` is
//! where training runs (the visitor's choice and what the page says about it), `race` the rivals'
//! workers of a race, which every command reaches too, `writing` what the model writes (the
//! samples kept, the writing controls, "Write more"), `real_model` the page's second mode (a GPT-2
//! opened from its files: fetching them, and what it read and wrote).

pub mod address;
pub mod backend;
mod client;
pub mod comparing;
pub mod estimate;
mod events;
pub mod export;
mod fetching;
pub mod history;
pub mod hub;
pub mod logit_lens;
pub mod model_section;
mod model_worker;
pub mod pace;
pub mod race;
pub mod real_model;
pub mod script_api;
pub mod site;
mod state;
pub mod stopping;
pub mod url_state;
pub mod writing;

pub use backend::{choice_of, gpu_copy_note, InWords, CHOICES};
pub(crate) use client::Client;
pub use state::{Backend, Curves, Storage, View};

use std::cell::RefCell;

use common::protocol::{self, Command, Event, Phase};
use common::settings::Settings;
use engine::session::{BackendChoice, Experiment, Panels};
use engine::TrainConfig;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;

/// Earlier runs kept on the loss chart for comparison.
const EARLIER_RUNS: usize = 3;
/// Frames of sphere points drawn as trails.
pub const TRAIL_LEN: usize = 12;
pub use common::protocol::WORKER_URL;

/// One attention chain of the probe row: P of `layer` and `head`, to the power `k`.
#[derive(Clone, Copy)]
pub struct Chain {
    pub layer: RwSignal<usize>,
    pub head: RwSignal<usize>,
    pub k: RwSignal<usize>,
}

impl Chain {
    /// The (T, T) matrix P^k of the chain, when the panels hold its layer and head.
    pub fn matrix(self, panels: &Panels) -> Option<Vec<f64>> {
        let (l, h, k) = (self.layer.get(), self.head.get(), self.k.get());
        let t = panels.context;
        if l >= panels.layers || h >= panels.heads || t == 0 {
            return None;
        }
        let p: Vec<f64> = panels.attention_of(l, h).iter().map(|&x| x as f64).collect();
        (p.len() == t * t).then(|| if k > 1 { engine::science::markov::power(&p, t, k as u32) } else { p })
    }
}

/// An earlier run's training curve: (label, (step, loss) points).
pub type EarlierRun = (String, Vec<(usize, f32)>);

thread_local! {
    static CLIENT: RefCell<Option<Client>> = const { RefCell::new(None) };
}

/// Which file the next model file is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Download {
    Model,
    Config,
}

/// All the page's reactive state; every field is a `Copy` signal handle.
#[derive(Clone, Copy)]
pub struct Lab {
    pub settings: RwSignal<Settings>,
    /// The settings of the run in progress (None before the first run).
    pub run_settings: RwSignal<Option<Settings>>,
    pub run_config: RwSignal<Option<TrainConfig>>,
    pub phase: RwSignal<Phase>,
    pub total_steps: RwSignal<usize>,
    pub eval_every: RwSignal<usize>,
    pub step: RwSignal<usize>,
    pub ms_per_step: RwSignal<Option<f64>>,
    pub steps_per_second: RwSignal<Option<f64>>,
    pub error: RwSignal<Option<String>>,
    pub panels: RwSignal<Option<Panels>>,
    /// A note about the run (restored, model loaded, ...).
    pub notice: RwSignal<Option<String>>,
    /// The worker crashed: what happened (the page offers the last saved run).
    pub crashed: RwSignal<Option<String>>,
    /// The last run's summary (the scripting API's answer), as JSON text.
    pub summary: RwSignal<Option<String>>,
    /// The file download asked of the worker.
    pub download: RwSignal<Option<Download>>,
    pub model_msg: RwSignal<Option<Result<String, String>>>,
    /// The entrants of a race in progress (empty: no race); entrant 0 is this page's own run.
    pub race: RwSignal<Vec<race::Entrant>>,
    /// Bumped whenever the page replaces the run: events of older runs are dropped.
    pub epoch: RwSignal<u64>,
    /// The link's values that could not be used: (field, value as linked, why); the form marks them.
    pub link_errors: RwSignal<Vec<(String, String, String)>>,
    /// Counts the times the settings were replaced whole (a preset, a tour step, a link, a resumed
    /// run): a field's kept bad entry then gives way to the new value.
    pub replaced: RwSignal<u64>,
    /// The run's curves over its steps.
    pub curves: Curves,
    /// How the picture is looked at: the sphere's turn and depth, the chain, the token picked.
    pub view: View,
    /// The run kept in the browser's storage.
    pub storage: Storage,
    /// Where the run computes.
    pub backend: Backend,
    /// What the model writes (`writing`).
    pub writing: writing::WritingState,
    /// The built-in English text, once fetched from the page's own server (`data/austen.txt`).
    pub corpus: RwSignal<Option<Result<String, String>>>,
    /// The page's second mode: a real model (`real_model`).
    pub real: real_model::RealModel,
    /// The page as a web site: the engine's download, the offline copy, a new build (`site`).
    pub site: site::Site,
    /// This computer's rates for the estimate beside the pace (`pace`).
    pub pace: pace::Pace,
}

impl Lab {
    pub fn new(settings: Settings) -> Self {
        let lab = Lab {
            total_steps: RwSignal::new(settings.steps),
            eval_every: RwSignal::new((settings.steps / 20).max(1)),
            settings: RwSignal::new(settings),
            run_settings: RwSignal::new(None),
            run_config: RwSignal::new(None),
            phase: RwSignal::new(Phase::Idle),
            step: RwSignal::new(0),
            ms_per_step: RwSignal::new(None),
            steps_per_second: RwSignal::new(None),
            error: RwSignal::new(None),
            panels: RwSignal::new(None),
            notice: RwSignal::new(None),
            crashed: RwSignal::new(None),
            summary: RwSignal::new(None),
            download: RwSignal::new(None),
            model_msg: RwSignal::new(None),
            race: RwSignal::new(Vec::new()),
            epoch: RwSignal::new(0),
            link_errors: RwSignal::new(Vec::new()),
            replaced: RwSignal::new(0),
            curves: Curves::new(),
            view: View::new(),
            storage: Storage::new(),
            backend: Backend::new(),
            writing: writing::WritingState::new(),
            corpus: RwSignal::new(None),
            real: real_model::RealModel::new(),
            site: site::Site::new(),
            pace: pace::Pace::new(),
        };
        lab.spawn_worker();
        pace::keep_measured(lab);
        lab
    }

    /// Starts (or restarts, after a crash) the training worker.
    pub fn spawn_worker(self) {
        let client = Client::spawn(
            site::TRAINING_WORKER_URL,
            move |data| self.on_message(data),
            move |what| self.on_crash(what),
        );
        let client = match client {
            Ok(c) => c,
            Err(e) => return self.crashed.set(Some(format!("the training worker could not start: {e}"))),
        };
        self.site.loading.set(Some((0.0, 0.0)));
        if let Some(mut old) = CLIENT.with_borrow_mut(|c| c.replace(client)) {
            old.stop();
        }
        self.crashed.set(None);
        self.send(Command::SetBackend { choice: self.backend.choice.get_untracked() });
        self.send(Command::CheckSaved);
        self.send(Command::ProbeAdapter);
    }

    fn send_with(self, cmd: Command, bulk: Vec<JsValue>) {
        if matches!(cmd, Command::Create { .. } | Command::Reset | Command::ResumeSaved | Command::LoadModel { .. }) {
            self.epoch.update_untracked(|e| *e += 1);
        }
        let (msg, transfer) = match protocol::encode_at(&cmd, bulk, self.epoch.get_untracked()) {
            Ok(m) => m,
            Err(e) => return self.error.set(Some(e)),
        };
        CLIENT.with_borrow_mut(|c| {
            if let Some(c) = c.as_mut() {
                c.deliver(msg, transfer);
            }
        });
    }

    pub fn send(self, cmd: Command) {
        self.send_with(cmd, Vec::new());
    }

    fn on_crash(self, what: String) {
        web_sys::console::error_1(&format!("Spherewalk: the training worker crashed: {what}").into());
        let kept = self.storage.saved_step.get_untracked();
        let offer = match kept {
            Some(step) => {
                format!("The last saved state (step {step}) is kept: press \"Restart and resume\" to go on from it.")
            }
            None => "Nothing was saved yet; press \"Restart and resume\" to start the worker again.".into(),
        };
        self.crashed.set(Some(format!("The training worker crashed ({what}). {offer}")));
        self.pace.forget_asked();
        writing::on_crash(&format!("the training worker crashed ({what})"));
        self.phase.set(Phase::Failed);
        self.site.loading.set(None);
        // The client stays (its listener is what runs now) until a new worker replaces it.
        CLIENT.with_borrow_mut(|c| {
            if let Some(c) = c.as_mut() {
                c.stop();
            }
        });
    }

    /// After a crash: a new worker, and the saved run resumed in it.
    pub fn restart_and_resume(self) {
        self.spawn_worker();
        // With nothing saved there is nothing to resume: the new worker waits for a run.
        if self.storage.saved_step.get_untracked().is_some() || self.storage.saved.with_untracked(Option::is_some) {
            self.send(Command::ResumeSaved);
        }
    }

    fn on_message(self, data: JsValue) {
        if let Some(what) = js_sys::Reflect::get(&data, &"crashed".into()).ok().and_then(|c| c.as_string()) {
            return self.on_crash(what);
        }
        if self.site.on_loading(&data) {
            return;
        }
        let current = protocol::epoch_of(&data) == self.epoch.get_untracked();
        match protocol::decode::<Event>(&data) {
            Ok((event, bulk)) => {
                if current
                    || matches!(
                        event,
                        Event::Ready { .. }
                            | Event::SavedRun { .. }
                            | Event::NotSaved { .. }
                            | Event::Adapter { .. }
                            | Event::Pace { .. }
                    )
                {
                    self.on_event(event, bulk);
                }
            }
            Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
        }
    }

    /// The Start / Pause / Resume / Restart button (and the space key).
    pub fn toggle(self) {
        match self.phase.get_untracked() {
            Phase::Idle | Phase::Done | Phase::Failed => self.create_then(true, false),
            Phase::Running => {
                self.send(Command::Pause);
                race::send(Command::Pause);
            }
            Phase::Paused => {
                if self.only_lr_changed() {
                    self.send(Command::SetLr { lr: self.settings.get_untracked().lr });
                    self.run_settings.set(Some(self.settings.get_untracked()));
                }
                self.error.set(None);
                // At once, so a second press pauses; the worker's own phase follows.
                self.phase.set(Phase::Running);
                self.send(Command::Run);
                race::send(Command::Run);
            }
        }
    }

    /// Whether the settings differ from the run's only in the learning rate (it applies on Resume).
    pub fn only_lr_changed(self) -> bool {
        let now = self.settings.get();
        self.run_settings.with(|r| {
            r.as_ref().is_some_and(|r| !r.same_run(&now) && r.same_run(&Settings { lr: r.lr, ..now.clone() }))
        })
    }

    /// Whether the settings describe another run than the one in progress.
    pub fn pending(self) -> bool {
        let now = self.settings.get();
        self.run_settings.with(|r| r.as_ref().is_some_and(|r| !r.same_run(&now)))
    }

    /// A new pace applies at once, to the run in progress too.
    pub fn set_pace(self, steps_per_second: f64) {
        self.settings.update(|s| s.steps_per_second = steps_per_second);
        let pace = self.settings.with_untracked(Settings::pace);
        self.send(Command::SetPace { steps_per_second: pace });
        race::send(Command::SetPace { steps_per_second: pace });
    }

    /// One optimizer step, starting a run first when there is none.
    pub fn step_once(self) {
        match self.phase.get_untracked() {
            Phase::Running => {}
            Phase::Idle | Phase::Done | Phase::Failed => self.create_then(false, true),
            Phase::Paused => {
                let lr = self.only_lr_changed().then(|| self.settings.get_untracked().lr);
                if lr.is_some() {
                    self.run_settings.set(Some(self.settings.get_untracked()));
                }
                self.send(Command::Step { lr });
                race::send(Command::Step { lr: None });
            }
        }
    }

    /// Drops the run (keeping its curve for comparison) and goes back to idle.
    /// New settings as a whole: the form's bad entries and the link's marks give way to them.
    pub fn replace_settings(self, settings: Settings) {
        // A prompt is written in its data's symbols: other data starts from its own.
        if self.settings.with_untracked(|now| now.data != settings.data) {
            self.writing.prompt.set(String::new());
        }
        self.settings.set(settings);
        self.link_errors.set(Vec::new());
        self.replaced.update(|n| *n += 1);
    }

    pub fn reset(self) {
        self.keep_curve();
        self.clear();
        race::stop(self);
        self.race.set(Vec::new());
        self.phase.set(Phase::Idle);
        self.send(Command::Reset);
        self.storage.saved_step.set(None);
        self.run_settings.set(None);
        self.run_config.set(None);
        self.step.set(0);
        self.total_steps.set(self.settings.with_untracked(|s| s.steps));
        self.backend.line.set(self.backend.choice.get_untracked().idle_line());
        self.backend.detail.set(None);
        self.backend.on_gpu.set(None);
    }

    fn keep_curve(self) {
        let points = self.curves.train.get_untracked();
        if points.is_empty() {
            return;
        }
        let label = self
            .run_settings
            .with_untracked(|s| s.as_ref().map(|s| format!("{} lr {}", s.optimizer, s.lr)))
            .unwrap_or_else(|| "earlier run".into());
        // One curve a setting: a rerun of the same optimizer and rate replaces its earlier curve.
        self.curves.earlier.update(|e| {
            e.retain(|(l, _)| *l != label);
            e.push((label, points));
            if e.len() > EARLIER_RUNS {
                e.remove(0);
            }
        });
    }

    fn clear(self) {
        self.error.set(None);
        self.notice.set(None);
        self.writing.clear();
        self.curves.train.set(Vec::new());
        self.curves.val.set(Vec::new());
        self.ms_per_step.set(None);
        events::forget_times();
        self.steps_per_second.set(None);
        self.panels.set(None);
        self.curves.entropy.set(Vec::new());
        self.curves.diagnostics.set(Vec::new());
        self.curves.diag_text.set(None);
        self.summary.set(None);
    }

    /// The experiment the settings describe, or the message for what is wrong.
    pub fn experiment(self) -> Result<Experiment, String> {
        let mut settings = self.settings.get_untracked();
        if settings.data == "austen" {
            settings.text = match self.corpus.get_untracked() {
                Some(Ok(text)) => text,
                Some(Err(e)) => return Err(e),
                None => return Err("the English text is still loading".into()),
            };
        }
        let mut exp = Experiment::new(settings.to_config()?);
        exp.backend = self.backend.choice.get_untracked();
        exp.writing = self.writing.schedule(exp.train.eval_every);
        Ok(exp)
    }

    /// Fetches the built-in English text once (the page's own file: nothing from elsewhere).
    pub async fn load_corpus(self) {
        if self.corpus.with_untracked(Option::is_some) {
            return;
        }
        let text = common::js::fetch_text("data/austen.txt")
            .await
            .map_err(|e| format!("the English text (data/austen.txt) could not be loaded: {e}"));
        self.corpus.set(Some(text));
    }

    /// A new run of the current settings, then (`step`) one step of it; the English text is
    /// fetched first when the run needs it.
    fn create_then(self, run: bool, step: bool) {
        if self.settings.with_untracked(|s| s.data == "austen") && self.corpus.with_untracked(Option::is_none) {
            self.phase.set(if run { Phase::Running } else { Phase::Paused });
            leptos::task::spawn_local(async move {
                self.load_corpus().await;
                self.create_then(run, step);
            });
            return;
        }
        self.create(run);
        if step {
            self.send(Command::Step { lr: None });
            race::send(Command::Step { lr: None });
        }
    }

    /// Asks the worker for a new run of the current settings.
    fn create(self, run: bool) {
        match self.experiment() {
            Ok(experiment) => {
                self.error.set(None);
                // Pressed twice before the worker answers, Start or Step must not make two runs.
                self.phase.set(if run { Phase::Running } else { Phase::Paused });
                let racing = self.settings.with_untracked(|s| s.preset == "race");
                if racing {
                    race::start(self, &experiment, run);
                } else {
                    race::stop(self);
                    self.race.set(Vec::new());
                }
                let settings = self.settings.get_untracked();
                let pace = settings.pace();
                self.send(Command::SetPace { steps_per_second: pace });
                race::send(Command::SetPace { steps_per_second: pace });
                self.send(Command::Create {
                    experiment: Box::new(experiment),
                    settings: Some(settings),
                    run,
                    second_worker: !racing,
                });
            }
            Err(e) => {
                self.error.set(Some(format!("could not start the run: {e}")));
                self.phase.set(Phase::Failed);
            }
        }
    }

    /// The run as one JSON document: settings, the engine's config, metrics.
    pub fn run_json(self) -> String {
        let settings = self.run_settings.get_untracked().unwrap_or_else(|| self.settings.get_untracked());
        let config = self.run_config.get_untracked().or_else(|| settings.to_config().ok());
        let doc = serde_json::json!({
            "spherewalk": engine::VERSION,
            "backend": self.backend_in_use(),
            "settings": settings,
            "config": config,
            "metrics": {
                "train_loss": self.curves.train.get_untracked(),
                "val_loss": self.curves.val.get_untracked(),
                "attention_entropy": self.curves.entropy.get_untracked(),
                "second_order": self.curves.diagnostics.get_untracked(),
                "ms_per_step": self.ms_per_step.get_untracked(),
            },
        });
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    pub fn resume_saved(self) {
        self.storage.saved.set(None);
        self.send(Command::ResumeSaved);
    }

    pub fn discard_saved(self) {
        self.storage.saved.set(None);
        self.send(Command::DiscardSaved);
    }

    pub fn ask_download(self, which: Download) {
        if self.run_config.with_untracked(Option::is_none) {
            self.model_msg.set(Some(Err("no model yet: start or step a run first".into())));
            return;
        }
        self.download.set(Some(which));
        self.send(Command::DownloadModel);
    }

    /// Uploaded model files go to the worker, which reads them.
    pub fn load_model(self, files: Vec<(String, Vec<u8>)>) {
        let names = files.iter().map(|f| f.0.clone()).collect();
        let bulk = files.iter().map(|f| protocol::bytes(&f.1)).collect();
        self.send_with(Command::LoadModel { names }, bulk);
    }
}
