//! One lab session: an [`Experiment`] trained step by step on the CPU or the GPU, with everything
//! the page, the CLI and scripts show. The page's worker, `lab train` and `window.spherewalk` all
//! drive this one type, so the same experiment gives the same numbers everywhere:
//!
//! - the schedule is in steps, never in wall-clock time: validation every `eval_every` steps, probe
//!   frames every `probe.every` steps (decimated deterministically when the history is full);
//! - a non-finite loss pauses the run at its last good state (the state before the last step that
//!   went well: a step with a huge learning rate leaves finite weights that overflow at the next
//!   forward pass), recomputed from a copy kept every [`ROLLBACK_EVERY`] steps, and says which
//!   learning rate did it, on every backend;
//! - a lost GPU device continues on the CPU from the exact state (`runner`).
//!
//! The session is async because the GPU is; natively `gpu::block_on` drives it.

pub mod bench;
pub mod duration;
pub mod experiment;
pub mod measures;
pub mod overfitting;
pub mod panels;
pub mod runner;
pub mod summary;
pub mod verdicts;
pub mod writing;

use serde::{Deserialize, Serialize};

use crate::checkpoint::Snapshot;
use crate::data::baseline::BaselineLoss;
use crate::data::Split;
use crate::error::{Error, Result};
use crate::optim::second_order::Diagnostics;
use crate::sample::{Sample, SampleSpec, Vocab};
use crate::science::probe::Probe;
use crate::train::interrupt::Interrupt;
use crate::train::remote::ShardPool;
use crate::train::{Reported, Trainer};

pub use experiment::{BackendChoice, Experiment, ProbeSchedule};
pub use overfitting::Overfitting;
pub use panels::{Brownian, EntropyPoint, Flow, Panels};
pub use runner::Runner;
pub use summary::Summary;
pub use verdicts::{Agreement, Claim, Verdict, Verdicts};
pub use writing::{Writing, Written};

/// The value of a future that never waits (the CPU path without a second worker), for the native
/// tests.
#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("a future without a second worker waited"),
    }
}

/// One point of the K-FAC / CG-FAC diagnostics history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiagPoint {
    pub step: usize,
    pub mean_iterations: f64,
    pub max_residual: f64,
    pub damping: f32,
    pub fallbacks_total: u64,
}

impl DiagPoint {
    pub fn of(d: &Diagnostics, step: usize) -> DiagPoint {
        let n = d.layers.len().max(1) as f64;
        DiagPoint {
            step,
            mean_iterations: d.layers.iter().map(|l| l.cg.iterations as f64).sum::<f64>() / n,
            max_residual: d.layers.iter().map(|l| l.cg.rel_residual).fold(0.0, f64::max),
            damping: d.damping,
            fallbacks_total: d.fallbacks_total,
        }
    }
}

/// The curves of a run: what the loss chart, the export and a saved run hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metrics {
    /// (completed steps, training loss of that step)
    pub train: Vec<(usize, f32)>,
    /// (completed steps, validation loss after them)
    pub val: Vec<(usize, f32)>,
    pub diagnostics: Vec<DiagPoint>,
}

impl Metrics {
    fn forget_after(&mut self, step: usize) {
        self.train.retain(|p| p.0 <= step);
        self.val.retain(|p| p.0 <= step);
        self.diagnostics.retain(|p| p.step <= step);
    }
}

/// What one call to [`Session::step`] did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Progress {
    /// One step: its training loss when known (on the GPU a round of steps later, and always when
    /// a validation loss was due), and that validation loss.
    /// `wrote`: the model wrote a sample at this step (`Session::written`).
    Stepped { step: usize, loss: Option<f32>, val: Option<f32>, recorded: bool, wrote: bool },
    /// The run has all its steps.
    Done,
    /// A non-finite loss or gradient: the run went back to step `kept` and waits (a lower
    /// learning rate, then `step` again).
    NonFinite { message: String, kept: usize },
    /// The step after `step` stopped for the session's interrupt (`set_interrupt`) and changed
    /// nothing; the next call takes it from its start.
    Interrupted { step: usize },
}

/// Steps between the CPU's copies of its whole state (weights and optimizer state) for going back
/// after a non-finite loss. A copy every step cost a d1024 Adam run in a tab (150 MB) more than its
/// step did; every 32 steps it costs a few percent, and going back recomputes at most 32 steps,
/// with the same numbers (the batches depend on the step number only).
pub const ROLLBACK_EVERY: usize = 32;

pub struct Session {
    exp: Experiment,
    runner: Runner,
    probe: Probe,
    /// Entropy of every probe frame, in step with the probe's (decimated) history.
    entropy: Vec<EntropyPoint>,
    metrics: Metrics,
    baselines: BaselineLoss,
    symbols: Vec<String>,
    /// On the CPU, a state at most [`ROLLBACK_EVERY`] steps old and older than the last step that went
    /// well: a non-finite loss goes back to it and recomputes the steps since.
    rollback: Option<Snapshot>,
    /// The backend line: where the run is and why.
    backend: String,
    notices: Vec<String>,
    components: Vec<Option<Vec<f64>>>,
    /// The last flow comparison, kept while the probe history is the same.
    flow: Option<Flow>,
    /// A non-finite step found outside `step` (by a flush before a save): the next `step` says so.
    stopped: Option<Progress>,
    /// Another worker that computes half of each CPU step's shards (`train::remote`).
    pool: Option<Box<dyn ShardPool>>,
    /// Asked between the pieces of each CPU step (`train::interrupt`: the page's Pause).
    interrupt: Option<Box<dyn Interrupt>>,
    /// The data's symbols, for prompts and what the model writes.
    vocab: Vocab,
    /// The prompt the schedule writes from (the experiment's, or the start of a validation line).
    prompt: String,
    /// The probe's first row and the token after it, whose predictions the writing panel shows.
    probe_row: (Vec<u32>, u32),
    /// What the model wrote on the schedule, the last [`writing::HISTORY`] samples.
    written: Vec<Written>,
}

impl Session {
    /// A new run of `exp`, refused with a message when it does not fit `budget` bytes.
    pub async fn new(exp: Experiment, budget: u64) -> Result<Session> {
        // Before any allocation; the vocabulary, known once the data is, is checked again at start.
        let mut early = exp.clone();
        early.train.model.vocab = early.train.model.vocab.max(1);
        early.validate(budget)?;
        let trainer = Trainer::new(exp.train.clone())?;
        Self::start(exp, trainer, budget, Metrics::default()).await
    }

    /// Continues the run `snap` (a checkpoint, a saved run, an uploaded model) with its metrics.
    pub async fn restore(mut exp: Experiment, snap: Snapshot, metrics: Metrics, budget: u64) -> Result<Session> {
        exp.train = snap.config.clone();
        exp.validate(budget)?;
        let trainer = Trainer::restore(snap)?;
        Self::start(exp, trainer, budget, metrics).await
    }

    async fn start(mut exp: Experiment, trainer: Trainer, budget: u64, mut metrics: Metrics) -> Result<Session> {
        // The vocabulary is known once the data is.
        exp.train = trainer.config().clone();
        exp.validate(budget)?;
        let cfg = trainer.config();
        let probe =
            Probe::on_validation(&cfg.model, trainer.data(), exp.probe.rows, exp.probe.config(cfg.steps, &cfg.model))?;
        let symbols = probe.tokens()[..cfg.model.context].iter().map(|&t| trainer.data().decode(&[t])).collect();
        let baselines = trainer.baselines();
        let step = trainer.step_count();
        let vocab = Vocab::of(trainer.data());
        let t = cfg.model.context;
        let prompt = match &exp.writing.prompt {
            Some(p) => p.clone(),
            None => vocab.decode(&trainer.data().val_prompt(t.clamp(1, 24))),
        };
        let (mut row, mut next) = (vec![0; t], vec![0; t]);
        trainer.data().batch(Split::Val, 0, &mut row, &mut next);
        metrics.forget_after(step);
        let choice = exp.backend;
        let (runner, backend) = Runner::new(trainer, choice).await?;
        let mut s = Session {
            exp,
            runner,
            probe,
            entropy: Vec::new(),
            metrics,
            baselines,
            symbols,
            rollback: None,
            backend: String::new(),
            notices: Vec::new(),
            components: Vec::new(),
            flow: None,
            stopped: None,
            pool: None,
            interrupt: None,
            vocab,
            prompt,
            probe_row: (row, next[t - 1]),
            written: Vec::new(),
        };
        s.set_line(backend, choice);
        if step == 0 && s.metrics.val.is_empty() {
            let loss = s.runner.evaluate(&mut s.notices).await?;
            s.metrics.val.push((0, loss));
        }
        s.record(step).await?;
        if step == 0 {
            s.write_due(0).await?;
        }
        Ok(s)
    }

    /// Records a probe frame at `step` if one is due.
    async fn record(&mut self, step: usize) -> Result<bool> {
        if !self.probe.due(step) {
            return Ok(false);
        }
        let model = self.runner.model(&mut self.notices).await?;
        if !self.probe.record(step, model)? {
            return Ok(false);
        }
        let cfg = self.probe.config();
        let frames = self.probe.frames();
        // After a decimation, keep the entropy of the frames kept.
        self.entropy.retain(|e| frames.iter().any(|f| f.step == e.step));
        self.entropy.push(EntropyPoint::of(cfg, frames.last().expect("just recorded")));
        Ok(true)
    }

    /// One step (with the validation and the probe frame when due). On the GPU the step's loss is
    /// known a round of steps later, or at once when anything else is due at that step.
    pub async fn step(&mut self) -> Result<Progress> {
        if let Some(stopped) = self.stopped.take() {
            return Ok(stopped);
        }
        let total = self.exp.train.steps;
        let done = self.runner.step_count();
        if done >= total {
            return Ok(Progress::Done);
        }
        // A copy is taken when the kept one is old enough; it becomes the kept one once this step
        // went well (a non-finite loss at the next step goes back before this step).
        let due = self.rollback.as_ref().is_none_or(|r| done - r.step >= ROLLBACK_EVERY);
        let before = if due { self.runner.cpu().map(Trainer::snapshot) } else { None };
        let mut known = Vec::new();
        let interrupt = self.interrupt.as_deref();
        let mut stepped = match self.runner.step_with(&mut self.notices, &mut known, &mut self.pool, interrupt).await {
            Ok(false) => return Ok(Progress::Interrupted { step: done }),
            other => other.map(|_| ()),
        };
        let s = self.runner.step_count();
        let every = self.exp.train.eval_every;
        let eval_due = s == total || (every > 0 && s.is_multiple_of(every));
        // What else is due reads the device anyway: the steps' reports come first.
        if stepped.is_ok() && (eval_due || self.probe.due(s)) {
            stepped = self.runner.flush(&mut self.notices, &mut known).await;
        }
        self.take_reports(known);
        match stepped {
            Ok(()) => {}
            Err(Error::NonFinite { what, step }) => return self.went_non_finite(&what, step),
            // The trainer changes nothing on an error; a GPU run is where it was.
            Err(e) => return Err(e),
        }
        if before.is_some() {
            self.rollback = before;
        }
        let mut val = None;
        if eval_due {
            match self.runner.evaluate(&mut self.notices).await {
                Ok(loss) => {
                    self.metrics.val.push((s, loss));
                    val = Some(loss);
                }
                Err(Error::NonFinite { what, .. }) => return self.went_non_finite(&what, s),
                Err(e) => return Err(e),
            }
        }
        let recorded = self.record(s).await?;
        let wrote = self.write_due(s).await?;
        let loss = self.metrics.train.last().filter(|p| p.0 == s).map(|p| p.1);
        Ok(Progress::Stepped { step: s, loss, val, recorded, wrote })
    }

    /// Writes the schedule's sample at `step` if one is due. A model that cannot write (attention
    /// both ways) says so once and the schedule stops.
    async fn write_due(&mut self, step: usize) -> Result<bool> {
        if !self.exp.writing.due(step, self.exp.train.steps) {
            return Ok(false);
        }
        let spec = self.exp.writing.spec(&self.prompt, self.exp.train.seed, step);
        let model = self.runner.model(&mut self.notices).await?;
        match writing::write(model, &self.vocab, &spec, &self.probe_row.0, self.probe_row.1, step) {
            Ok(w) => {
                self.written.retain(|x| x.step != step);
                self.written.push(w);
                let extra = self.written.len().saturating_sub(writing::HISTORY);
                self.written.drain(..extra);
                Ok(true)
            }
            Err(e) => {
                self.notices.push(format!("the model does not write: {e}"));
                self.exp.writing.every = 0;
                Ok(false)
            }
        }
    }

    /// Samples of the current model (`lab sample`, `spherewalk.sample`, the page's "write more").
    pub async fn sample(&mut self, spec: &SampleSpec) -> Result<Vec<Sample>> {
        spec.validate()?;
        let model = self.runner.model(&mut self.notices).await?;
        crate::sample::generate(model, &self.vocab, spec)
    }

    /// What the model wrote on the schedule, oldest first.
    pub fn written(&self) -> &[Written] {
        &self.written
    }

    /// The prompt the schedule writes from.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// Sets the schedule's prompt, temperature, top-k and top-p (the page's writing controls);
    /// refused with a message, and nothing changed, when the prompt or the settings are not usable.
    pub fn set_writing(&mut self, writing: Writing) -> Result<()> {
        writing.validate()?;
        let prompt = match &writing.prompt {
            Some(p) => {
                self.vocab.encode(p)?;
                p.clone()
            }
            None => self.prompt.clone(),
        };
        self.exp.writing = writing;
        self.prompt = prompt;
        Ok(())
    }

    /// Puts the steps' reports into the metrics.
    fn take_reports(&mut self, reports: Vec<Reported>) {
        for (r, diag) in reports {
            self.metrics.train.push((r.step, r.loss));
            if let Some(d) = diag {
                self.metrics.diagnostics.push(DiagPoint::of(&d, r.step));
            }
        }
    }

    /// The reports of every step taken, in the metrics (a GPU run gives them a round at a time).
    /// A non-finite step among them pauses the run as `step` would: true, and the next `step`
    /// returns its `Progress::NonFinite`.
    pub async fn flush(&mut self) -> Result<bool> {
        let mut known = Vec::new();
        let flushed = self.runner.flush(&mut self.notices, &mut known).await;
        self.take_reports(known);
        match flushed {
            Err(Error::NonFinite { what, step }) => {
                self.stopped = Some(self.went_non_finite(&what, step)?);
                Ok(true)
            }
            r => r.map(|()| false),
        }
    }

    /// Goes back to the last good state and says why, naming the learning rate.
    fn went_non_finite(&mut self, what: &str, step: usize) -> Result<Progress> {
        let target = step.saturating_sub(1);
        let was_gpu = self.runner.adapter().map(str::to_string);
        let kept = self.runner.rewind(target, self.rollback.take())?;
        self.metrics.forget_after(kept);
        self.probe.forget_after(kept);
        self.written.retain(|w| w.step <= kept);
        self.entropy.retain(|e| e.step <= kept);
        if let Some(adapter) = was_gpu {
            self.backend = format!("cpu (after a non-finite loss on the GPU {adapter})");
        }
        let lr = self.exp.train.lr;
        let lr = if lr != 0.0 && !(1e-4..1e4).contains(&lr.abs()) { format!("{lr:e}") } else { lr.to_string() };
        let message = format!(
            "the {what} is not finite (NaN or infinity) at step {} with learning rate {lr}: training paused. \
             The state after step {kept} is kept; lower the learning rate and go on.",
            step + 1
        );
        Ok(Progress::NonFinite { message, kept })
    }

    /// A new base learning rate for the run in progress (weights, optimizer state and step kept).
    pub async fn set_lr(&mut self, lr: f32) -> Result<()> {
        let mut snap = self.snapshot().await?;
        snap.config.lr = lr;
        snap.config.validate()?;
        self.replace(snap, self.exp.backend).await?;
        self.exp.train.lr = lr;
        self.rollback = None;
        Ok(())
    }

    /// Moves the run to `choice`, from its exact state.
    pub async fn set_backend(&mut self, choice: BackendChoice) -> Result<()> {
        let snap = self.snapshot().await?;
        self.replace(snap, choice).await?;
        self.exp.backend = choice;
        Ok(())
    }

    async fn replace(&mut self, snap: Snapshot, choice: BackendChoice) -> Result<()> {
        let (runner, line) = Runner::new(Trainer::restore(snap)?, choice).await?;
        self.runner = runner;
        self.set_line(line, choice);
        Ok(())
    }

    /// Keeps the backend line; a GPU that was asked for and not had is a notice too.
    fn set_line(&mut self, line: String, choice: BackendChoice) {
        if choice == BackendChoice::Gpu && self.runner.adapter().is_none() {
            self.notices
                .push(format!("{}; training on the CPU", line.trim_start_matches("cpu (").trim_end_matches(')')));
        }
        self.backend = line;
    }

    /// The panels, with the Brownian comparison at `depth`; once the run has ended, the flow fit
    /// too (about a second, then cached). Every verdict says whether it is final; one about the run
    /// states its conclusion only then (`Verdict::settle`).
    pub fn panels(&mut self, depth: usize) -> Result<Panels> {
        let mut out = self.fitted_panels(depth)?;
        if self.is_done() && out.brownian.is_some() {
            out.flow = Some(self.flow(depth).map_err(|e| e.to_string()));
        }
        let diffusion = out.verdicts.brownian.as_ref().map(|v| v.agreement);
        out.verdicts.flow = out.flow.as_ref().and_then(|f| f.as_ref().ok()).map(|f| verdicts::flow(f, diffusion));
        out.verdicts.settle(self.step_count(), self.exp.train.steps);
        Ok(out)
    }

    /// The panels at `depth` without the flow fit and with unsettled verdicts: what the summary
    /// reads at every depth (the flow costs about a second per depth).
    pub(crate) fn fitted_panels(&mut self, depth: usize) -> Result<Panels> {
        let seed = self.exp.train.seed;
        panels::panels(&self.probe, &self.entropy, self.symbols.clone(), &mut self.components, depth, seed)
    }

    /// Brownian motion or interacting particles for the first probe row at `depth`, over the
    /// recorded frames (about a second of compute; kept until a new frame is recorded). The sphere
    /// view's basis for `depth` comes from the panels.
    pub fn flow(&mut self, depth: usize) -> Result<Flow> {
        let layers = self.exp.train.model.layers;
        if depth > layers {
            return Err(Error::Config(format!("depth {depth} is not one of this model's depths, 0 to {layers}")));
        }
        let last = self.probe.frames().last().map_or(0, |f| f.step);
        if let Some(f) = self.flow.as_ref().filter(|f| f.depth == depth && f.step == last) {
            return Ok(f.clone());
        }
        if self.probe.frames().len() < 3 {
            return Err(Error::Data("the flow fit needs three or more probe frames".into()));
        }
        if self.components.get(depth).is_none_or(|c| c.is_none()) {
            self.fitted_panels(depth)?;
        }
        let basis = self.components[depth].clone().unwrap_or_default();
        let f = panels::flow(&self.probe, depth, &basis, self.exp.train.seed)?;
        self.flow = Some(f.clone());
        Ok(f)
    }

    /// The run's summary: the same fields as the last line of `lab train --json`.
    pub fn summary(&mut self, wall_s: f64, steps_timed: usize) -> Summary {
        Summary::of(self, wall_s, steps_timed)
    }

    /// Everything a checkpoint holds (read back from the GPU when the run is there, after the
    /// reports of the steps it holds).
    pub async fn snapshot(&mut self) -> Result<Snapshot> {
        self.flush().await?;
        self.runner.snapshot().await
    }

    pub fn experiment(&self) -> &Experiment {
        &self.exp
    }
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    pub fn step_count(&self) -> usize {
        self.runner.step_count()
    }
    pub fn is_done(&self) -> bool {
        self.runner.step_count() >= self.exp.train.steps
    }
    pub fn baselines(&self) -> BaselineLoss {
        self.baselines
    }
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        self.runner.diagnostics()
    }
    pub fn probe(&self) -> &Probe {
        &self.probe
    }
    pub fn entropy(&self) -> &[EntropyPoint] {
        &self.entropy
    }
    /// Gives half of each CPU step's shards to `pool` (another worker): the numbers stay the same.
    pub fn set_shard_pool(&mut self, pool: Option<Box<dyn ShardPool>>) {
        self.pool = pool;
    }
    /// What each CPU step asks between its pieces whether to stop (`Progress::Interrupted`).
    pub fn set_interrupt(&mut self, interrupt: Option<Box<dyn Interrupt>>) {
        self.interrupt = interrupt;
    }
    /// Whether another worker takes part in the steps: there is one, the run is on the CPU and its
    /// steps split (`Trainer::splits`).
    pub fn uses_shard_pool(&self) -> bool {
        self.pool.is_some() && self.runner.cpu().is_some_and(Trainer::splits)
    }
    /// Where the run is: "cpu", "gpu (adapter)", with the reason when the choice was not honoured.
    pub fn backend(&self) -> &str {
        &self.backend
    }
    pub fn adapter(&self) -> Option<&str> {
        self.runner.adapter()
    }
    /// Replaces the backend line's reason (a caller that decided the backend itself, e.g. the page's
    /// worker after asking for the adapter once).
    pub fn explain_backend(&mut self, line: String) {
        self.backend = line;
    }
    /// Notices since the last call (a failed device, the run moved): for the user.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }
    /// Test hook: the runner.
    pub fn runner_mut(&mut self) -> &mut Runner {
        &mut self.runner
    }
}
