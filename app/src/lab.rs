//! The page's state and its training loop.
//!
//! Training runs in small chunks: each animation frame runs optimizer steps for at most
//! [`FRAME_BUDGET_MS`], then looks at a fixed probe row through the model (sphere points, attention,
//! entropy) at most every [`PROBE_EVERY_MS`], publishes the new points and hands control back to the
//! browser, so the page stays responsive.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use engine::data::Split;
use engine::model::Cache;
use engine::science::{cache as sci_cache, sphere};
use engine::{TrainConfig, Trainer};
use leptos::prelude::*;
use serde::Serialize;

use crate::settings::Settings;

/// Milliseconds of training per animation frame before yielding to the browser.
const FRAME_BUDGET_MS: f64 = 12.0;
/// Least time between two probe snapshots while training.
const PROBE_EVERY_MS: f64 = 120.0;
/// Frames of sphere points kept for the trails.
pub const TRAIL_LEN: usize = 12;
/// Earlier runs kept on the loss chart for comparison.
const EARLIER_RUNS: usize = 3;

thread_local! {
    /// The running trainer and its probe. They live outside the reactive graph: neither is `Send`
    /// nor cheap to clone, and only the frame loop touches them.
    static TRAINER: RefCell<Option<(Trainer, Probe)>> = const { RefCell::new(None) };
    /// Generation of the frame loop: bumping it stops any loop already scheduled.
    static LOOP_GENERATION: Cell<u64> = const { Cell::new(0) };
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
    /// Per layer and head (layer * heads + head): the (T, T) attention of the probe row.
    pub attention: Vec<Vec<f64>>,
}

/// An earlier run's training curve: (label, (step, loss) points).
pub type EarlierRun = (String, Vec<(usize, f32)>);

/// One point of the CG-FAC / K-FAC diagnostics history.
#[derive(Clone, Debug, PartialEq, Serialize)]
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
            last_ms: f64::NEG_INFINITY,
        }
    }

    /// Runs the probe row through the model; returns the snapshot and the per-layer entropies.
    fn look(&mut self, trainer: &Trainer) -> Result<(Snapshot, Vec<f64>), String> {
        let model = trainer.model();
        let cfg = &model.cfg;
        model.forward(&mut self.cache, &self.tokens, &self.targets).map_err(|e| format!("probe failed: {e}"))?;
        let mut explained = Vec::with_capacity(cfg.layers + 1);
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
        }
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
            attention,
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
            Phase::Paused => self.run(),
        }
    }

    pub fn pause(self) {
        next_generation();
        self.phase.set(Phase::Paused);
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
        self.advance(true);
    }

    /// Drops the run (keeping its curve for comparison) and goes back to idle.
    pub fn reset(self) {
        next_generation();
        self.keep_curve();
        TRAINER.with_borrow_mut(|slot| *slot = None);
        self.clear();
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
        self.phase.set(Phase::Running);
        request_animation_frame(move || self.frame(generation));
    }

    fn frame(self, generation: u64) {
        if generation != LOOP_GENERATION.get() || self.phase.get_untracked() != Phase::Running {
            return;
        }
        self.yaw.update(|y| *y += 0.004);
        match self.advance(false) {
            Some(false) => request_animation_frame(move || self.frame(generation)),
            Some(true) => {
                next_generation();
                self.phase.set(Phase::Done);
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
                let r = chunk.run(trainer, need_initial_eval, started, budget);
                let now = now_ms();
                let finished = matches!(r, Ok(true));
                if r.is_ok() && (single || finished || now - probe.last_ms >= PROBE_EVERY_MS) {
                    probe.last_ms = now;
                    match probe.look(trainer) {
                        Ok(look) => chunk.look = Some(look),
                        Err(e) => return Err(e),
                    }
                }
                chunk.diag = trainer.diagnostics().map(|d| {
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
                        step: trainer.step_count(),
                        mean_iterations: d.layers.iter().map(|l| l.cg.iterations as f64).sum::<f64>() / n,
                        max_residual: d.layers.iter().map(|l| l.cg.rel_residual).fold(0.0, f64::max),
                        damping: d.damping,
                        fallbacks_total: d.fallbacks_total,
                    };
                    let header = format!(
                        "{} after step {}: damping {:.1e}, KL-clip scale {:.3}, fallbacks {} this step, {} in all",
                        trainer.config().optimizer.name(),
                        point.step,
                        d.damping,
                        d.kl_scale,
                        d.fallbacks_this_step,
                        d.fallbacks_total
                    );
                    (point, format!("{header}\n{text}"))
                });
                r
            }
            None => Err("the trainer is gone (internal error)".to_string()),
        });
        let elapsed = now_ms() - started;
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
}

impl Chunk {
    /// Steps until `budget_ms` is spent (at least one step). Returns Ok(true) when the run is complete.
    fn run(&mut self, trainer: &mut Trainer, initial_eval: bool, started: f64, budget_ms: f64) -> Result<bool, String> {
        let total = trainer.config().steps;
        let eval_every = trainer.config().eval_every;
        if initial_eval {
            let loss = trainer.evaluate().map_err(|e| format!("validation failed before training: {e}"))?;
            self.val.push((trainer.step_count(), loss));
        }
        loop {
            if trainer.step_count() >= total {
                return Ok(true);
            }
            let report =
                trainer.step().map_err(|e| format!("training step {} failed: {e}", trainer.step_count() + 1))?;
            let done = trainer.step_count();
            self.train.push((done, report.loss));
            if done == total || (eval_every > 0 && done.is_multiple_of(eval_every)) {
                let loss = trainer.evaluate().map_err(|e| format!("validation after step {done} failed: {e}"))?;
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
