//! The page's state and its training loop.
//!
//! Training runs in small chunks: each animation frame runs optimizer steps for at most
//! [`FRAME_BUDGET_MS`], then looks at a fixed probe row through the model (sphere points, attention,
//! entropy) at most every [`PROBE_EVERY_MS`], publishes the new points and hands control back to the
//! browser, so the page stays responsive.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;

use engine::checkpoint::Snapshot as Checkpoint;
use engine::data::Split;
use engine::gpu::trainer::GpuTrainer;
use engine::gpu::{GpuContext, GpuError};
use engine::model::Cache;
use engine::science::{cache as sci_cache, sphere};
use engine::{TrainConfig, Trainer};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::brownian_view::{self, Analysis};
use crate::model_io::{self, SavedMeta};
use crate::persist;
use crate::settings::Settings;

/// Milliseconds of training per animation frame before yielding to the browser.
const FRAME_BUDGET_MS: f64 = 12.0;
/// Least time between two probe snapshots while training.
const PROBE_EVERY_MS: f64 = 120.0;
/// Frames of sphere points kept for the trails.
pub const TRAIL_LEN: usize = 12;
/// Earlier runs kept on the loss chart for comparison.
const EARLIER_RUNS: usize = 3;
/// Least time between two saves of the run to the browser's storage while training.
const SAVE_EVERY_MS: f64 = 3000.0;
/// Probe snapshots kept for the Brownian analysis (thinned evenly beyond).
const HISTORY_LEN: usize = 40;
/// Least time between two Brownian analyses while training.
const BROWNIAN_EVERY_MS: f64 = 600.0;
/// On WebGPU: least time between two copies of the GPU's state to the CPU (the panels' weights,
/// the saved run, and where the CPU takes over if the device fails).
pub const GPU_SYNC_EVERY_MS: f64 = 2000.0;

thread_local! {
    /// The running trainer and its probe. They live outside the reactive graph: neither is `Send`
    /// nor cheap to clone, and only the frame loop touches them.
    static TRAINER: RefCell<Option<(Trainer, Probe)>> = const { RefCell::new(None) };
    /// Generation of the frame loop: bumping it stops any loop already scheduled.
    static LOOP_GENERATION: Cell<u64> = const { Cell::new(0) };
    /// The trainer before its last step that went well: where a non-finite loss goes back to.
    static ROLLBACK: RefCell<Option<Checkpoint>> = const { RefCell::new(None) };
    /// When the run was last saved to IndexedDB.
    static LAST_SAVE_MS: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
    /// The run on WebGPU, when it is there; taken out of the slot while a step is in flight.
    static GPU: RefCell<Option<GpuRun>> = const { RefCell::new(None) };
    /// Whether the run is on WebGPU (its trainer may be out of [`GPU`] for a step in flight).
    static GPU_ON: Cell<bool> = const { Cell::new(false) };
    /// Bumped whenever the GPU run is dropped: a step in flight for an older one is thrown away.
    static GPU_EPOCH: Cell<u64> = const { Cell::new(0) };
}

/// Where training runs: the user's choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// WebGPU on a hardware adapter, else the CPU (a software adapter is slower than the CPU path).
    #[default]
    Auto,
    WebGpu,
    Cpu,
}

impl BackendChoice {
    pub const ALL: [BackendChoice; 3] = [BackendChoice::Auto, BackendChoice::WebGpu, BackendChoice::Cpu];

    pub fn id(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::WebGpu => "webgpu",
            BackendChoice::Cpu => "cpu",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto (WebGPU on a hardware GPU, else CPU)",
            BackendChoice::WebGpu => "WebGPU",
            BackendChoice::Cpu => "CPU",
        }
    }

    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.id() == id)
    }

    /// The backend line before a run has picked its backend.
    fn idle_line(self) -> String {
        match self {
            BackendChoice::Auto => {
                "Backend: auto (WebGPU on a hardware GPU, else CPU; chosen when the run starts)".into()
            }
            BackendChoice::WebGpu => "Backend: WebGPU (the adapter is requested when the run starts)".into(),
            BackendChoice::Cpu => "Backend: CPU".into(),
        }
    }
}

/// The run on the GPU.
struct GpuRun {
    gpu: GpuTrainer,
    adapter: String,
    /// When the CPU copy was last refreshed from the GPU.
    synced_ms: f64,
    /// The step count after the last step that went well.
    last_ok: usize,
}

/// Waits `ms` milliseconds without blocking the browser.
async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(w) = web_sys::window() {
            let _ = w.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// Takes the GPU run out of its slot, waiting for a step in flight. None: the run is not on the GPU.
async fn take_gpu() -> Option<(GpuRun, u64)> {
    loop {
        if !GPU_ON.get() {
            return None;
        }
        if let Some(run) = GPU.with_borrow_mut(Option::take) {
            return Some((run, GPU_EPOCH.get()));
        }
        sleep(5).await;
    }
}

/// Puts the GPU run back, unless the run was dropped meanwhile.
fn put_gpu(run: GpuRun, epoch: u64) {
    if GPU_EPOCH.get() == epoch && GPU_ON.get() {
        GPU.with_borrow_mut(|slot| *slot = Some(run));
    }
}

fn drop_gpu() {
    GPU_EPOCH.set(GPU_EPOCH.get().wrapping_add(1));
    GPU_ON.set(false);
    GPU.with_borrow_mut(|slot| *slot = None);
}

/// Replaces the CPU trainer (keeping the probe) with `snap`'s state.
fn replace_cpu(snap: Checkpoint) -> Result<(), String> {
    let t = Trainer::restore(snap).map_err(|e| e.to_string())?;
    TRAINER.with_borrow_mut(|slot| match slot.as_mut() {
        Some((trainer, _)) => {
            *trainer = t;
            Ok(())
        }
        None => Err("the trainer is gone (internal error)".to_string()),
    })?;
    ROLLBACK.with_borrow_mut(|r| *r = None);
    Ok(())
}

/// The second-order diagnostics of the last step as a history point and text.
fn diag_of(d: &engine::optim::second_order::Diagnostics, optimizer: &str, step: usize) -> (DiagPoint, String) {
    let n = d.layers.len().max(1) as f64;
    let text = d
        .layers
        .iter()
        .map(|l| {
            format!(
                "{}: {} CG iterations, residual {:.1e}{}",
                l.name,
                l.cg.iterations,
                l.cg.rel_residual,
                if l.fell_back { " (fell back to the gradient)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let point = DiagPoint {
        step,
        mean_iterations: d.layers.iter().map(|l| l.cg.iterations as f64).sum::<f64>() / n,
        max_residual: d.layers.iter().map(|l| l.cg.rel_residual).fold(0.0, f64::max),
        damping: d.damping,
        fallbacks_total: d.fallbacks_total,
    };
    let header = format!(
        "{optimizer} after step {step}: damping {:.1e}, KL-clip scale {:.3}, fallbacks {} this step, {} in all",
        d.damping, d.kl_scale, d.fallbacks_this_step, d.fallbacks_total
    );
    (point, format!("{header}\n{text}"))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
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

/// What the probe row looks like at one moment: everything the sphere, heatmap and entropy panels draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub step: usize,
    pub layers: usize,
    pub heads: usize,
    pub t: usize,
    pub vocab: usize,
    /// The probe row's tokens and their text.
    pub tokens: Vec<u32>,
    pub symbols: Vec<String>,
    /// Per depth 0..=L: trail of projected points (oldest first, the last is now), N points each.
    pub trails: Vec<Vec<Vec<[f64; 3]>>>,
    /// Per depth 0..=L: fraction of the second moment the 3-D view shows.
    pub explained: Vec<f64>,
    /// The model width: the length of each raw sphere point in `history`.
    pub d_model: usize,
    /// Per depth 0..=L: the live view's (3, d_model) projection components.
    pub components: Vec<Vec<f64>>,
    /// Earlier probe frames, oldest first, the last is now (shared, thinned evenly beyond
    /// `HISTORY_LEN`): (step, raw (N, d_model) points of every depth), for scrubbing through time.
    pub history: Vec<ProbeFrame>,
    /// Per layer and head (layer * heads + head): the (T, T) attention of the probe row.
    pub attention: Vec<Vec<f64>>,
    /// The Brownian analysis of the points over training at one depth (None: too few frames yet).
    pub brownian: Option<Result<Analysis, String>>,
}

/// One probe frame: (step, the raw sphere points of every depth).
pub type ProbeFrame = Arc<(usize, Vec<Vec<f64>>)>;

/// An earlier run's training curve: (label, (step, loss) points).
pub type EarlierRun = (String, Vec<(usize, f32)>);

/// One point of the CG-FAC / K-FAC diagnostics history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiagPoint {
    pub step: usize,
    pub mean_iterations: f64,
    pub max_residual: f64,
    pub damping: f32,
    pub fallbacks_total: u64,
}

/// A fixed probe row (validation batch 0, first row), run through the model for the science panels.
struct Probe {
    cache: Cache<f32>,
    tokens: Vec<u32>,
    targets: Vec<u32>,
    previous: Vec<Option<Vec<f64>>>,
    trails: Vec<VecDeque<Vec<[f64; 3]>>>,
    /// (step, points of every depth) of earlier snapshots, for the Brownian analysis.
    history: Vec<ProbeFrame>,
    /// The last Brownian analysis, and when it ran: reused between analyses while training.
    brownian: Option<Result<Analysis, String>>,
    brownian_ms: f64,
    last_ms: f64,
}

impl Probe {
    fn new(trainer: &Trainer) -> Self {
        let cfg = &trainer.config().model;
        let n = cfg.context;
        let (mut tokens, mut targets) = (vec![0; n], vec![0; n]);
        trainer.data().batch(Split::Val, 0, &mut tokens, &mut targets);
        Probe {
            cache: Cache::new(cfg, 1),
            tokens,
            targets,
            previous: vec![None; cfg.layers + 1],
            trails: vec![VecDeque::new(); cfg.layers + 1],
            history: Vec::new(),
            brownian: None,
            brownian_ms: f64::NEG_INFINITY,
            last_ms: f64::NEG_INFINITY,
        }
    }

    /// The Brownian analysis of the history at `depth` (None with fewer than three snapshots).
    fn analyse(&self, trainer: &Trainer, depth: usize) -> Option<Result<Analysis, String>> {
        let cfg = &trainer.model().cfg;
        if self.history.len() < 3 || depth > cfg.layers {
            return None;
        }
        let frames: Vec<&[f64]> = self.history.iter().map(|h| h.1[depth].as_slice()).collect();
        let times: Vec<f64> = self.history.iter().map(|h| h.0 as f64).collect();
        let components = self.previous[depth].as_deref().unwrap_or(&[]);
        Some(brownian_view::analyse(&frames, &times, cfg.d_model, components, depth, trainer.config().seed))
    }

    /// Runs the probe row through the model; returns the snapshot and the per-layer entropies.
    /// The Brownian analysis (of `depth`) runs at most every [`BROWNIAN_EVERY_MS`] unless `fresh`.
    fn look(&mut self, trainer: &Trainer, depth: usize, fresh: bool) -> Result<(Snapshot, Vec<f64>), String> {
        let model = trainer.model();
        let cfg = &model.cfg;
        model.forward(&mut self.cache, &self.tokens, &self.targets).map_err(|e| format!("probe failed: {e}"))?;
        let mut explained = Vec::with_capacity(cfg.layers + 1);
        let step = trainer.step_count();
        // Times must increase: a rollback (non-finite loss) goes back in steps.
        self.history.retain(|h| h.0 < step);
        let mut frame = Vec::with_capacity(cfg.layers + 1);
        for depth in 0..=cfg.layers {
            let points = sci_cache::sphere_points(cfg, &self.cache, depth).map_err(|e| e.to_string())?;
            let p =
                sphere::project3(&points, cfg.d_model, self.previous[depth].as_deref()).map_err(|e| e.to_string())?;
            explained.push(p.explained.iter().sum());
            self.previous[depth] = Some(p.components);
            let trail = &mut self.trails[depth];
            if trail.len() == TRAIL_LEN {
                trail.pop_front();
            }
            trail.push_back(p.points);
            frame.push(points);
        }
        self.history.push(Arc::new((step, frame)));
        if self.history.len() > HISTORY_LEN {
            let last = self.history.len() - 1;
            let old = std::mem::take(&mut self.history);
            self.history = old
                .into_iter()
                .enumerate()
                .filter(|(i, _)| *i == 0 || (last - i).is_multiple_of(2))
                .map(|(_, h)| h)
                .collect();
        }
        let now = now_ms();
        let stale = self.brownian.as_ref().and_then(|b| b.as_ref().ok()).is_some_and(|a| a.depth != depth);
        if fresh || stale || self.brownian.is_none() || now - self.brownian_ms >= BROWNIAN_EVERY_MS {
            self.brownian = self.analyse(trainer, depth);
            self.brownian_ms = now;
        }
        let brownian = self.brownian.clone();
        let mut attention = Vec::with_capacity(cfg.layers * cfg.heads);
        let mut entropy = Vec::with_capacity(cfg.layers);
        for layer in 0..cfg.layers {
            for head in 0..cfg.heads {
                attention.push(sci_cache::attention(cfg, &self.cache, layer, 0, head).map_err(|e| e.to_string())?);
            }
            entropy.push(sci_cache::layer_entropy(cfg, &self.cache, layer).map_err(|e| e.to_string())?);
        }
        let data = trainer.data();
        let snap = Snapshot {
            step: trainer.step_count(),
            layers: cfg.layers,
            heads: cfg.heads,
            t: cfg.context,
            vocab: cfg.vocab,
            symbols: self.tokens.iter().map(|&t| data.decode(&[t])).collect(),
            tokens: self.tokens.clone(),
            trails: self.trails.iter().map(|t| t.iter().cloned().collect()).collect(),
            explained,
            d_model: cfg.d_model,
            components: self.previous.iter().map(|c| c.clone().unwrap_or_default()).collect(),
            history: self.history.clone(),
            attention,
            brownian,
        };
        Ok((snap, entropy))
    }
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
    /// (completed steps, training loss of that step)
    pub train: RwSignal<Vec<(usize, f32)>>,
    /// (completed steps, validation loss after them)
    pub val: RwSignal<Vec<(usize, f32)>>,
    /// Earlier runs' training curves: (label, points).
    pub earlier: RwSignal<Vec<EarlierRun>>,
    pub ms_per_step: RwSignal<Option<f64>>,
    pub error: RwSignal<Option<String>>,
    pub snapshot: RwSignal<Option<Snapshot>>,
    /// (step, mean attention entropy of each layer) of the probe row.
    pub entropy: RwSignal<Vec<(usize, Vec<f64>)>>,
    pub diagnostics: RwSignal<Vec<DiagPoint>>,
    /// The last step's per-layer second-order diagnostics, as text.
    pub diag_text: RwSignal<Option<String>>,
    /// Rotation of the sphere view (radians); the loop turns it while training.
    pub yaw: RwSignal<f64>,
    pub pitch: RwSignal<f64>,
    /// The depth the sphere view and the Brownian panel show (0..=L).
    pub depth: RwSignal<usize>,
    /// Steps done before the first point of `train` (a loaded model).
    pub base_step: RwSignal<usize>,
    /// A run saved in the browser's storage that can be resumed: (step, total, description).
    pub saved: RwSignal<Option<(usize, usize, String)>>,
    /// The step of the last save to the browser's storage.
    pub saved_step: RwSignal<Option<usize>>,
    /// A note about the run (restored, model loaded, ...).
    pub notice: RwSignal<Option<String>>,
    /// The backend the user picked.
    pub backend: RwSignal<BackendChoice>,
    /// "Backend: ..." as shown: the one in use and the adapter's name, or why not WebGPU.
    pub backend_line: RwSignal<String>,
    /// The WebGPU adapter the run is on (None: on the CPU).
    pub on_gpu: RwSignal<Option<String>>,
    /// On WebGPU: the step of the CPU copy the panels show.
    pub gpu_copy_step: RwSignal<Option<usize>>,
}

impl Lab {
    pub fn new(settings: Settings) -> Self {
        Lab {
            total_steps: RwSignal::new(settings.steps),
            eval_every: RwSignal::new((settings.steps / 20).max(1)),
            settings: RwSignal::new(settings),
            run_settings: RwSignal::new(None),
            run_config: RwSignal::new(None),
            phase: RwSignal::new(Phase::Idle),
            train: RwSignal::new(Vec::new()),
            val: RwSignal::new(Vec::new()),
            earlier: RwSignal::new(Vec::new()),
            ms_per_step: RwSignal::new(None),
            error: RwSignal::new(None),
            snapshot: RwSignal::new(None),
            entropy: RwSignal::new(Vec::new()),
            diagnostics: RwSignal::new(Vec::new()),
            diag_text: RwSignal::new(None),
            yaw: RwSignal::new(0.6),
            pitch: RwSignal::new(0.35),
            depth: RwSignal::new(0),
            base_step: RwSignal::new(0),
            saved: RwSignal::new(None),
            saved_step: RwSignal::new(None),
            notice: RwSignal::new(None),
            backend: RwSignal::new(BackendChoice::default()),
            backend_line: RwSignal::new(BackendChoice::default().idle_line()),
            on_gpu: RwSignal::new(None),
            gpu_copy_step: RwSignal::new(None),
        }
    }

    fn fail(self, message: String) {
        web_sys::console::warn_1(&format!("Spherewalk: {message}").into());
        self.error.set(Some(message));
        self.phase.set(Phase::Failed);
        next_generation();
    }

    /// The Start / Pause / Resume / Restart button (and the space key).
    pub fn toggle(self) {
        match self.phase.get_untracked() {
            Phase::Idle | Phase::Done | Phase::Failed => {
                if self.create() {
                    self.run();
                }
            }
            Phase::Running => self.pause(),
            Phase::Paused => {
                if GPU_ON.get() && self.only_lr_changed() {
                    // The new learning rate applies on the CPU copy, which then goes back to the GPU.
                    self.phase.set(Phase::Running);
                    leptos::task::spawn_local(async move {
                        self.to_cpu(None).await;
                        self.apply_lr_change();
                        self.run();
                    });
                } else {
                    self.apply_lr_change();
                    self.run();
                }
            }
        }
    }

    pub fn pause(self) {
        let generation = next_generation();
        if GPU_ON.get() {
            // Paused once the step in flight has landed and the CPU copy holds it.
            leptos::task::spawn_local(async move {
                self.sync_gpu().await;
                if generation == LOOP_GENERATION.get() && self.phase.get_untracked() == Phase::Running {
                    self.phase.set(Phase::Paused);
                }
                self.save(true);
            });
        } else {
            self.phase.set(Phase::Paused);
            self.save(true);
        }
    }

    /// Whether the settings differ from the run's only in the learning rate (it applies on Resume).
    pub fn only_lr_changed(self) -> bool {
        let now = self.settings.get();
        self.run_settings.with(|r| r.as_ref().is_some_and(|r| *r != now && Settings { lr: r.lr, ..now.clone() } == *r))
    }

    /// On Resume or Step of a paused run: a new learning rate applies to the run in progress
    /// (weights, optimizer state and step are kept).
    fn apply_lr_change(self) {
        if !self.only_lr_changed() {
            return;
        }
        let settings = self.settings.get_untracked();
        let lr = settings.lr;
        let result = TRAINER.with_borrow_mut(|slot| -> Result<TrainConfig, String> {
            let (trainer, _) = slot.as_mut().ok_or("no run")?;
            let mut snap = trainer.snapshot();
            snap.config.lr = lr;
            let t = Trainer::restore(snap).map_err(|e| e.to_string())?;
            *trainer = t;
            Ok(trainer.config().clone())
        });
        match result {
            Ok(cfg) => {
                ROLLBACK.with_borrow_mut(|r| *r = None);
                self.run_config.set(Some(cfg));
                self.run_settings.set(Some(settings));
                self.notice.set(Some(format!("learning rate {lr} applied; training continues")));
            }
            Err(e) => self.error.set(Some(format!("could not apply the learning rate: {e}"))),
        }
    }

    /// One optimizer step, starting a run first when there is none.
    pub fn step_once(self) {
        match self.phase.get_untracked() {
            Phase::Running => return,
            Phase::Idle | Phase::Done | Phase::Failed => {
                if !self.create() {
                    return;
                }
            }
            Phase::Paused => {}
        }
        self.phase.set(Phase::Paused);
        leptos::task::spawn_local(async move {
            if GPU_ON.get() && self.only_lr_changed() {
                self.to_cpu(None).await;
            }
            self.apply_lr_change();
            self.ensure_backend().await;
            if let Some((run, epoch)) = take_gpu().await {
                self.gpu_step(run, epoch, true).await;
            } else if self.advance(true).is_some() {
                self.save(true);
            }
        });
    }

    /// Drops the run (keeping its curve for comparison) and goes back to idle.
    pub fn reset(self) {
        next_generation();
        self.leave_gpu();
        self.keep_curve();
        TRAINER.with_borrow_mut(|slot| *slot = None);
        ROLLBACK.with_borrow_mut(|r| *r = None);
        self.clear();
        self.saved_step.set(None);
        leptos::task::spawn_local(async {
            if let Err(e) = persist::delete().await {
                web_sys::console::warn_1(&format!("Spherewalk: {e}").into());
            }
        });
        self.run_settings.set(None);
        self.run_config.set(None);
        self.total_steps.set(self.settings.with_untracked(|s| s.steps));
        self.phase.set(Phase::Idle);
    }

    fn keep_curve(self) {
        let points = self.train.get_untracked();
        if points.is_empty() {
            return;
        }
        let label = self
            .run_settings
            .with_untracked(|s| s.as_ref().map(|s| format!("{} lr {}", s.optimizer, s.lr)))
            .unwrap_or_else(|| "earlier run".into());
        self.earlier.update(|e| {
            e.push((label, points));
            if e.len() > EARLIER_RUNS {
                e.remove(0);
            }
        });
    }

    fn clear(self) {
        self.error.set(None);
        self.notice.set(None);
        self.base_step.set(0);
        self.train.set(Vec::new());
        self.val.set(Vec::new());
        self.ms_per_step.set(None);
        self.snapshot.set(None);
        self.entropy.set(Vec::new());
        self.diagnostics.set(Vec::new());
        self.diag_text.set(None);
    }

    /// Builds a trainer from the current settings. On bad settings it shows the engine's message.
    fn create(self) -> bool {
        next_generation();
        self.leave_gpu();
        self.keep_curve();
        self.clear();
        let settings = self.settings.get_untracked();
        let made = settings.to_config().and_then(|cfg| {
            Trainer::new(cfg).map_err(|e| e.to_string()).map(|t| {
                let probe = Probe::new(&t);
                (t, probe)
            })
        });
        match made {
            Ok((trainer, probe)) => {
                self.saved.set(None);
                ROLLBACK.with_borrow_mut(|r| *r = None);
                self.total_steps.set(trainer.config().steps);
                self.eval_every.set(trainer.config().eval_every);
                self.run_config.set(Some(trainer.config().clone()));
                self.run_settings.set(Some(settings));
                TRAINER.with_borrow_mut(|slot| *slot = Some((trainer, probe)));
                true
            }
            Err(e) => {
                TRAINER.with_borrow_mut(|slot| *slot = None);
                self.fail(format!("could not start the run: {e}"));
                false
            }
        }
    }

    fn run(self) {
        let generation = next_generation();
        self.error.set(None);
        self.phase.set(Phase::Running);
        leptos::task::spawn_local(async move {
            self.ensure_backend().await;
            if generation == LOOP_GENERATION.get() {
                request_animation_frame(move || self.frame(generation));
            }
        });
    }

    fn frame(self, generation: u64) {
        if generation != LOOP_GENERATION.get() || self.phase.get_untracked() != Phase::Running {
            return;
        }
        self.yaw.update(|y| *y += 0.004);
        if GPU_ON.get() {
            // One step in flight at a time; the frames keep coming (and drawing) meanwhile.
            if let Some(run) = GPU.with_borrow_mut(Option::take) {
                let epoch = GPU_EPOCH.get();
                leptos::task::spawn_local(async move { self.gpu_step(run, epoch, false).await });
            }
            request_animation_frame(move || self.frame(generation));
            return;
        }
        match self.advance(false) {
            Some(false) => {
                self.save(false);
                request_animation_frame(move || self.frame(generation))
            }
            Some(true) => {
                next_generation();
                self.phase.set(Phase::Done);
                self.save(true);
            }
            None => {}
        }
    }

    /// Runs one chunk (or one step) and publishes it. Returns whether the run is complete, or None
    /// when it failed (the message is shown).
    fn advance(self, single: bool) -> Option<bool> {
        let need_initial_eval = self.val.with_untracked(Vec::is_empty);
        let mut chunk = Chunk::default();
        let started = now_ms();
        let budget = if single { 0.0 } else { FRAME_BUDGET_MS };
        let outcome = TRAINER.with_borrow_mut(|slot| match slot.as_mut() {
            Some((trainer, probe)) => {
                let r = ROLLBACK.with_borrow_mut(|rb| chunk.run(trainer, rb, need_initial_eval, started, budget));
                let r = match r {
                    Err(Fault::NonFinite(message)) => {
                        // Back to the state before the last step that went well: the step after it
                        // may have left weights that overflow, whatever the learning rate.
                        if let Some(snap) = ROLLBACK.with_borrow_mut(Option::take) {
                            match Trainer::restore(snap) {
                                Ok(t) => *trainer = t,
                                Err(e) => return Err(format!("{message}; going back failed: {e}")),
                            }
                        }
                        chunk.non_finite = Some((message, trainer.step_count()));
                        Ok(false)
                    }
                    Err(Fault::Other(message)) => Err(message),
                    Ok(done) => Ok(done),
                };
                let now = now_ms();
                let finished = matches!(r, Ok(true));
                if r.is_ok() && (single || finished || now - probe.last_ms >= PROBE_EVERY_MS) {
                    probe.last_ms = now;
                    match probe.look(trainer, self.depth.get_untracked(), single || finished) {
                        Ok(look) => chunk.look = Some(look),
                        Err(e) => return Err(e),
                    }
                }
                chunk.diag =
                    trainer.diagnostics().map(|d| diag_of(d, trainer.config().optimizer.name(), trainer.step_count()));
                r
            }
            None => Err("the trainer is gone (internal error)".to_string()),
        });
        let elapsed = now_ms() - started;
        if let Some((message, kept)) = chunk.non_finite.take() {
            let keep = |v: &mut Vec<(usize, f32)>| v.retain(|p| p.0 <= kept);
            chunk.train.retain(|p| p.0 <= kept);
            chunk.val.retain(|p| p.0 <= kept);
            self.train.update(|t| {
                t.extend_from_slice(&chunk.train);
                keep(t)
            });
            self.val.update(|v| {
                v.extend_from_slice(&chunk.val);
                keep(v)
            });
            self.entropy.update(|e| e.retain(|p| p.0 <= kept));
            self.diagnostics.update(|d| d.retain(|p| p.step <= kept));
            let lr = self.run_settings.with_untracked(|s| s.as_ref().map(|s| s.lr)).unwrap_or(f32::NAN);
            let lr = if lr != 0.0 && !(1e-4..1e4).contains(&lr.abs()) { format!("{lr:e}") } else { lr.to_string() };
            web_sys::console::warn_1(&format!("Spherewalk: {message}").into());
            self.error.set(Some(format!(
                "{message} with learning rate {lr}: training paused. The state after step {kept} is kept; \
                 lower the learning rate and press Resume."
            )));
            next_generation();
            self.phase.set(Phase::Paused);
            self.save(true);
            return None;
        }
        if !chunk.train.is_empty() {
            self.ms_per_step.set(Some(elapsed / chunk.train.len() as f64));
            self.train.update(|t| t.extend_from_slice(&chunk.train));
        }
        if !chunk.val.is_empty() {
            self.val.update(|v| v.extend_from_slice(&chunk.val));
        }
        if let Some((snap, entropy)) = chunk.look {
            self.entropy.update(|e| e.push((snap.step, entropy)));
            self.snapshot.set(Some(snap));
        }
        if let Some((point, text)) = chunk.diag {
            if !chunk.train.is_empty() {
                self.diagnostics.update(|d| d.push(point));
            }
            self.diag_text.set(Some(text));
        }
        match outcome {
            Err(message) => {
                self.fail(message);
                None
            }
            Ok(done) => {
                if done && single {
                    self.phase.set(Phase::Done);
                }
                Some(done)
            }
        }
    }
}

/// What one frame's worth of training produced.
#[derive(Default)]
struct Chunk {
    train: Vec<(usize, f32)>,
    val: Vec<(usize, f32)>,
    look: Option<(Snapshot, Vec<f64>)>,
    diag: Option<(DiagPoint, String)>,
    /// A non-finite loss: the message and the step the trainer went back to.
    non_finite: Option<(String, usize)>,
}

/// Why a chunk stopped early.
enum Fault {
    /// A non-finite loss or gradient: the run pauses and keeps its last good state.
    NonFinite(String),
    Other(String),
}

fn fault(e: engine::Error, context: String) -> Fault {
    match e {
        engine::Error::NonFinite { what, step } => {
            Fault::NonFinite(format!("the {what} is not finite (NaN or infinity) at step {}", step + 1))
        }
        e => Fault::Other(format!("{context}: {e}")),
    }
}

impl Chunk {
    /// Steps until `budget_ms` is spent (at least one step). Returns Ok(true) when the run is complete.
    fn run(
        &mut self,
        trainer: &mut Trainer,
        rollback: &mut Option<Checkpoint>,
        initial_eval: bool,
        started: f64,
        budget_ms: f64,
    ) -> Result<bool, Fault> {
        let total = trainer.config().steps;
        let eval_every = trainer.config().eval_every;
        if initial_eval {
            let loss = trainer.evaluate().map_err(|e| fault(e, "validation failed before training".into()))?;
            self.val.push((trainer.step_count(), loss));
        }
        loop {
            if trainer.step_count() >= total {
                return Ok(true);
            }
            let before = trainer.snapshot();
            let n = trainer.step_count() + 1;
            let report = trainer.step().map_err(|e| fault(e, format!("training step {n} failed")))?;
            *rollback = Some(before);
            let done = trainer.step_count();
            self.train.push((done, report.loss));
            if done == total || (eval_every > 0 && done.is_multiple_of(eval_every)) {
                let loss = trainer.evaluate().map_err(|e| fault(e, format!("validation after step {done} failed")))?;
                self.val.push((done, loss));
            }
            if now_ms() - started >= budget_ms {
                return Ok(trainer.step_count() >= total);
            }
        }
    }
}

fn next_generation() -> u64 {
    LOOP_GENERATION.with(|g| {
        g.set(g.get().wrapping_add(1));
        g.get()
    })
}

pub fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map(|p| p.now()).unwrap_or(0.0)
}

/// Keeping the run: saving to the browser's storage, resuming, and models from files.
impl Lab {
    /// Saves the run to IndexedDB, at most every [`SAVE_EVERY_MS`] unless `force`.
    pub fn save(self, force: bool) {
        let now = now_ms();
        if !force && now - LAST_SAVE_MS.get() < SAVE_EVERY_MS {
            return;
        }
        let Some(settings) = self.run_settings.get_untracked() else { return };
        let record = TRAINER.with_borrow(|slot| {
            let (trainer, _) = slot.as_ref()?;
            let snap = trainer.snapshot();
            let meta = SavedMeta {
                engine: engine::VERSION.into(),
                saved_at: js_sys::Date::now(),
                settings,
                config: snap.config.clone(),
                step: snap.step,
                train: self.train.get_untracked().into_iter().filter(|p| p.0 <= snap.step).collect(),
                val: self.val.get_untracked().into_iter().filter(|p| p.0 <= snap.step).collect(),
                entropy: self.entropy.get_untracked(),
                diagnostics: self.diagnostics.get_untracked(),
            };
            Some((snap.step, model_io::to_record(&snap, &meta)))
        });
        let Some((step, record)) = record else { return };
        LAST_SAVE_MS.set(now);
        match record {
            Ok(record) => leptos::task::spawn_local(async move {
                match persist::put(record).await {
                    Ok(()) => self.saved_step.set(Some(step)),
                    Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
                }
            }),
            Err(e) => web_sys::console::warn_1(&format!("Spherewalk: could not save the run: {e}").into()),
        }
    }

    /// Looks for a saved run and offers it.
    pub fn check_saved(self) {
        leptos::task::spawn_local(async move {
            match persist::get().await {
                Ok(Some(record)) => match model_io::meta_of(&record) {
                    Ok(meta) => {
                        if self.run_settings.with_untracked(Option::is_none) {
                            let when = js_sys::Date::new(&meta.saved_at.into());
                            let what = format!(
                                "{} preset, {} lr {}, saved {}",
                                meta.settings.preset,
                                meta.settings.optimizer,
                                meta.settings.lr,
                                String::from(when.to_locale_string("default", &wasm_bindgen::JsValue::UNDEFINED))
                            );
                            self.saved.set(Some((meta.step, meta.config.steps, what)));
                        }
                    }
                    Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
                },
                Ok(None) => {}
                Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
            }
        });
    }

    /// Restores the saved run exactly (weights, optimizer state, step, metrics) and continues it.
    pub fn resume_saved(self) {
        leptos::task::spawn_local(async move {
            let restored = match persist::get().await {
                Ok(Some(record)) => model_io::from_record(&record),
                Ok(None) => Err("there is no saved run any more".into()),
                Err(e) => Err(e),
            }
            .and_then(|(snap, meta)| Trainer::restore(snap).map(|t| (t, meta)).map_err(|e| e.to_string()));
            match restored {
                Ok((trainer, meta)) => {
                    let step = trainer.step_count();
                    let total = trainer.config().steps;
                    self.install(trainer, meta.settings, 0);
                    self.train.set(meta.train);
                    self.val.set(meta.val);
                    self.entropy.set(meta.entropy);
                    self.diagnostics.set(meta.diagnostics);
                    self.saved_step.set(Some(step));
                    self.notice.set(Some(format!("resumed the saved run at step {step}")));
                    if step < total {
                        self.run();
                    } else {
                        self.phase.set(Phase::Done);
                    }
                }
                Err(e) => {
                    self.saved.set(None);
                    self.error.set(Some(format!("could not resume the saved run: {e}")));
                }
            }
        });
    }

    /// Forgets the saved run.
    pub fn discard_saved(self) {
        self.saved.set(None);
        leptos::task::spawn_local(async {
            if let Err(e) = persist::delete().await {
                web_sys::console::warn_1(&format!("Spherewalk: {e}").into());
            }
        });
    }

    /// Makes `trainer` the paused run in progress, with `settings` as its settings.
    fn install(self, trainer: Trainer, settings: Settings, base_step: usize) {
        next_generation();
        self.leave_gpu();
        self.keep_curve();
        self.clear();
        self.saved.set(None);
        ROLLBACK.with_borrow_mut(|r| *r = None);
        self.base_step.set(base_step);
        self.total_steps.set(trainer.config().steps);
        self.eval_every.set(trainer.config().eval_every);
        self.run_config.set(Some(trainer.config().clone()));
        self.settings.set(settings.clone());
        self.run_settings.set(Some(settings));
        let probe = Probe::new(&trainer);
        TRAINER.with_borrow_mut(|slot| *slot = Some((trainer, probe)));
        self.phase.set(Phase::Paused);
    }

    /// The model of the run in progress as a safetensors file, and its config JSON.
    pub fn model_files(self) -> Result<(Vec<u8>, String), String> {
        let settings = self.run_settings.get_untracked().ok_or("no model yet: start or step a run first")?;
        TRAINER.with_borrow(|slot| {
            let (trainer, _) = slot.as_ref().ok_or("no model yet: start or step a run first")?;
            let cfg = trainer.config();
            let file = model_io::model_file(cfg, &settings, trainer.step_count(), &trainer.model().params)?;
            Ok((file, model_io::config_file(cfg, trainer.step_count())))
        })
    }

    /// Continues training from uploaded weights (the optimizer state starts fresh). Returns a note.
    pub fn load_model(self, up: model_io::Uploaded) -> Result<String, String> {
        let name = up.name.clone();
        let trainer = Trainer::new(up.config).map_err(|e| format!("{name}: its config does not make a run: {e}"))?;
        let params = engine::checkpoint::flat_from_named(&trainer.model().layout, up.weights, &name)
            .map_err(|e| format!("{e} (does the config belong to this model?)"))?;
        if let Some(i) = params.iter().position(|v| !v.is_finite()) {
            return Err(format!("{name}: weight {i} is not finite; the model cannot be trained on"));
        }
        let total = trainer.config().steps;
        let step = if up.step < total { up.step } else { 0 };
        let mut snap = trainer.snapshot();
        snap.params = params;
        snap.step = step;
        let trainer = Trainer::restore(snap).map_err(|e| format!("{name}: {e}"))?;
        let settings = up.settings.unwrap_or_else(|| Settings::from_config(trainer.config()));
        let n = trainer.model().params.len();
        self.install(trainer, settings, step);
        let note = format!(
            "loaded {name}: {n} weights at step {step} of {total}; press Resume to train on (the optimizer starts fresh)"
        );
        self.notice.set(Some(note.clone()));
        Ok(note)
    }
}

impl Lab {
    /// Redoes the Brownian analysis for the depth now shown (after the depth slider moved).
    pub fn refresh_brownian(self) {
        let depth = self.depth.get_untracked();
        let fresh = TRAINER.with_borrow_mut(|slot| {
            let (trainer, probe) = slot.as_mut()?;
            probe.brownian = probe.analyse(trainer, depth);
            probe.brownian_ms = now_ms();
            Some(probe.brownian.clone())
        });
        if let Some(b) = fresh {
            self.snapshot.update(|s| {
                if let Some(s) = s {
                    s.brownian = b;
                }
            });
        }
    }
}

/// The WebGPU backend: moving the run between the CPU and the GPU, and the awaited GPU steps.
impl Lab {
    /// What the export records: "webgpu (adapter)" or "cpu".
    pub fn backend_in_use(self) -> String {
        match self.on_gpu.get_untracked() {
            Some(adapter) => format!("webgpu ({adapter})"),
            None => "cpu".into(),
        }
    }

    /// The user picked a backend: a run in progress moves there (from the GPU's latest state).
    pub fn set_backend(self, choice: BackendChoice) {
        if self.backend.get_untracked() == choice {
            return;
        }
        self.backend.set(choice);
        if TRAINER.with_borrow(Option::is_none) {
            self.backend_line.set(choice.idle_line());
            return;
        }
        let running = self.phase.get_untracked() == Phase::Running;
        if running {
            next_generation();
        }
        leptos::task::spawn_local(async move {
            self.ensure_backend().await;
            if running {
                self.run();
            } else {
                self.save(true);
            }
        });
    }

    /// Drops the GPU run (a new run or a loaded one replaces it).
    fn leave_gpu(self) {
        drop_gpu();
        self.on_gpu.set(None);
        self.gpu_copy_step.set(None);
        self.backend_line.set(self.backend.get_untracked().idle_line());
    }

    /// Puts the run where the choice says: WebGPU (when an adapter exists and can run it) or the CPU.
    async fn ensure_backend(self) {
        match self.backend.get_untracked() {
            BackendChoice::Cpu => {
                if GPU_ON.get() {
                    self.to_cpu(None).await;
                } else {
                    self.backend_line.set("Backend: CPU".into());
                }
            }
            choice => {
                if !GPU_ON.get() && TRAINER.with_borrow(Option::is_some) {
                    self.to_gpu(choice).await;
                }
            }
        }
    }

    /// Moves the CPU run to a WebGPU device; on no adapter or a run the GPU cannot do, stays on the CPU
    /// and says why.
    async fn to_gpu(self, choice: BackendChoice) {
        let ctx = match GpuContext::new().await {
            Ok(ctx) => ctx,
            Err(e) => {
                let why = e.to_string().replacen("no GPU adapter", "no WebGPU adapter", 1);
                self.backend_line.set(format!("Backend: CPU ({why})"));
                if choice == BackendChoice::WebGpu {
                    self.notice.set(Some(format!("WebGPU is not available here ({why}); training on the CPU")));
                }
                return;
            }
        };
        let adapter = ctx.adapter_name();
        if choice == BackendChoice::Auto && ctx.is_software() {
            self.backend_line.set(format!(
                "Backend: CPU (auto: the WebGPU adapter, {adapter}, is software; the CPU path is faster)"
            ));
            return;
        }
        let Some(snap) = TRAINER.with_borrow(|slot| slot.as_ref().map(|(t, _)| t.snapshot())) else { return };
        let step = snap.step;
        match GpuTrainer::restore(ctx, snap) {
            Ok(gpu) => {
                drop_gpu();
                GPU.with_borrow_mut(|slot| {
                    *slot = Some(GpuRun { gpu, adapter: adapter.clone(), synced_ms: now_ms(), last_ok: step })
                });
                GPU_ON.set(true);
                self.gpu_copy_step.set(Some(step));
                self.backend_line.set(format!("Backend: WebGPU ({adapter})"));
                self.on_gpu.set(Some(adapter));
            }
            Err(e) => {
                let why = format!("WebGPU ({adapter}) cannot run this: {e}");
                self.backend_line.set(format!("Backend: CPU ({why})"));
                self.notice.set(Some(format!("{why}; training on the CPU")));
            }
        }
    }

    /// Brings the run back to the CPU from the GPU's state now (or, when the GPU fails, from its
    /// last copy plus the steps since, recomputed). `why`: the line's reason.
    async fn to_cpu(self, why: Option<String>) {
        let Some((run, _)) = take_gpu().await else { return };
        let moved = match run.gpu.snapshot().await {
            Ok(snap) => replace_cpu(snap),
            Err(e) => Err(e.to_string()),
        };
        match moved {
            Ok(()) => {
                drop_gpu();
                self.on_gpu.set(None);
                self.gpu_copy_step.set(None);
                let why = why.map(|w| format!(" ({w})")).unwrap_or_default();
                self.backend_line.set(format!("Backend: CPU{why}"));
                self.refresh_panels();
            }
            Err(e) => self.fall_back(run, e),
        }
    }

    /// Refreshes the CPU copy from the GPU (the GPU run stays).
    async fn sync_gpu(self) {
        let Some((mut run, epoch)) = take_gpu().await else { return };
        match run.gpu.snapshot().await.map_err(|e| e.to_string()).and_then(replace_cpu) {
            Ok(()) => {
                run.synced_ms = now_ms();
                self.gpu_copy_step.set(Some(run.gpu.step_count()));
                put_gpu(run, epoch);
                self.refresh_panels();
            }
            Err(e) => self.fall_back(run, e),
        }
    }

    /// Looks at the probe row through the CPU copy and publishes it.
    fn refresh_panels(self) {
        let depth = self.depth.get_untracked();
        let look = TRAINER.with_borrow_mut(|slot| {
            let (trainer, probe) = slot.as_mut()?;
            probe.last_ms = now_ms();
            Some(probe.look(trainer, depth, true))
        });
        match look {
            Some(Ok((snap, entropy))) => {
                self.entropy.update(|e| {
                    e.retain(|p| p.0 < snap.step);
                    e.push((snap.step, entropy))
                });
                self.snapshot.set(Some(snap));
            }
            Some(Err(e)) => self.error.set(Some(e)),
            None => {}
        }
    }

    /// The GPU failed: the CPU takes over from the last copy, recomputing the steps since it
    /// (the batches depend only on the step number), and says so.
    fn fall_back(self, run: GpuRun, e: String) {
        drop_gpu();
        self.on_gpu.set(None);
        self.gpu_copy_step.set(None);
        let target = run.last_ok;
        let recomputed = TRAINER.with_borrow_mut(|slot| -> Result<(usize, usize), String> {
            let (trainer, _) = slot.as_mut().ok_or("the trainer is gone (internal error)")?;
            let from = trainer.step_count();
            while trainer.step_count() < target {
                trainer
                    .step()
                    .map_err(|e| format!("recomputing step {} on the CPU failed: {e}", trainer.step_count() + 1))?;
            }
            Ok((from, target))
        });
        let adapter = run.adapter;
        match recomputed {
            Ok((from, to)) => {
                let message = format!(
                    "WebGPU ({adapter}) failed: {e}. Training continues on the CPU from step {to} \
                     (the GPU's copy at step {from}, plus {} steps recomputed); nothing is lost",
                    to - from
                );
                web_sys::console::warn_1(&format!("Spherewalk: {message}").into());
                self.backend_line.set(format!("Backend: CPU (WebGPU failed: {e})"));
                self.notice.set(Some(message));
                self.refresh_panels();
            }
            Err(message) => self.fail(format!("WebGPU ({adapter}) failed: {e}; {message}")),
        }
    }

    /// One step on the GPU (with the evaluation and copy to the CPU when due), then the run goes back
    /// to its slot. `single`: the Step button.
    async fn gpu_step(self, mut run: GpuRun, epoch: u64, single: bool) {
        let total = self.total_steps.get_untracked();
        let eval_every = self.eval_every.get_untracked();
        let need_initial_eval = self.val.with_untracked(Vec::is_empty);
        let started = now_ms();
        let mut chunk = Chunk::default();
        let outcome: Result<bool, GpuError> = async {
            if need_initial_eval {
                let loss = run.gpu.evaluate().await?;
                chunk.val.push((run.gpu.step_count(), loss));
            }
            if run.gpu.step_count() >= total {
                return Ok(true);
            }
            let report = run.gpu.step().await?;
            run.last_ok = run.gpu.step_count();
            let done = run.gpu.step_count();
            chunk.train.push((done, report.loss));
            if done == total || (eval_every > 0 && done.is_multiple_of(eval_every)) {
                let loss = run.gpu.evaluate().await?;
                chunk.val.push((done, loss));
            }
            Ok(done >= total)
        }
        .await;
        if GPU_EPOCH.get() != epoch {
            return; // the run was replaced meanwhile
        }
        let elapsed = now_ms() - started;
        if !chunk.train.is_empty() {
            self.ms_per_step.set(Some(elapsed));
            self.train.update(|t| t.extend_from_slice(&chunk.train));
        }
        if !chunk.val.is_empty() {
            self.val.update(|v| v.extend_from_slice(&chunk.val));
        }
        let optimizer = self.run_config.with_untracked(|c| c.as_ref().map(|c| c.optimizer.name().to_string()));
        if let (Some(d), Some(name)) = (run.gpu.diagnostics(), optimizer) {
            let (point, text) = diag_of(d, &name, run.gpu.step_count());
            if !chunk.train.is_empty() {
                self.diagnostics.update(|d| d.push(point));
            }
            self.diag_text.set(Some(text));
        }
        let done = match outcome {
            Ok(done) => done,
            Err(e) => {
                self.fall_back(run, e.to_string());
                return;
            }
        };
        put_gpu(run, epoch);
        let due = GPU.with_borrow(|slot| slot.as_ref().is_some_and(|r| now_ms() - r.synced_ms >= GPU_SYNC_EVERY_MS));
        if single || done || due {
            self.sync_gpu().await;
        }
        if done {
            next_generation();
            self.phase.set(Phase::Done);
            self.save(true);
        } else if single {
            self.save(true);
        } else if due {
            self.save(false);
        }
    }
}

/// The line under a panel drawn from the CPU copy while the run is on WebGPU.
pub fn gpu_copy_note(lab: Lab) -> impl IntoView {
    view! {
        <Show when=move || lab.on_gpu.with(Option::is_some)>
            <p class="note gpu-copy-note">
                {move || {
                    format!(
                        "Drawn from a CPU copy of the WebGPU weights, refreshed every {} s{}.",
                        GPU_SYNC_EVERY_MS / 1000.0,
                        lab.gpu_copy_step.get().map(|s| format!(" (now: step {s})")).unwrap_or_default(),
                    )
                }}
            </p>
        </Show>
    }
}
