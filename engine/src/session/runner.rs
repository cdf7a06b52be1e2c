//! Where the steps run: the CPU engine or the WGSL backend, chosen once by [`BackendChoice`], with
//! the failover both the CLI and the page rely on. A GPU run keeps a host copy of its whole state
//! (weights, optimizer state, step), refreshed every [`SYNC_EVERY`] steps; when the device fails
//! (lost, out of memory) the CPU restores that copy, recomputes the steps since (the batches depend
//! only on the step number) and the run goes on there, with a notice. The GPU reports its steps
//! in rounds (see `gpu::trainer::READ_EVERY`), so a step's report may come with a later one.

use crate::checkpoint::Snapshot;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::optim::second_order::Diagnostics;
use crate::session::experiment::BackendChoice;
use crate::train::interrupt::Interrupt;
use crate::train::remote::{self, ShardPool};
use crate::train::{Reported, Trainer};

#[cfg(feature = "gpu")]
use crate::gpu::{trainer::GpuTrainer, GpuContext, GpuError};

/// Steps between host copies of the GPU state: a lost device costs at most this many recomputed
/// CPU steps, while the readback (three times the weights) stays rare.
pub const SYNC_EVERY: usize = 100;

pub enum Runner {
    Cpu(Box<Trainer>),
    #[cfg(feature = "gpu")]
    Gpu(Box<GpuRun>),
}

#[cfg(feature = "gpu")]
pub struct GpuRun {
    gpu: GpuTrainer,
    /// The state at step `saved.step`, where the CPU takes over if the device fails.
    saved: Snapshot,
    adapter: String,
    sync_every: usize,
    /// The GPU's weights as last read back, for the probe.
    host: Model<f32>,
    host_step: Option<usize>,
}

#[cfg(feature = "gpu")]
fn auto_prefix(choice: BackendChoice) -> &'static str {
    if choice == BackendChoice::Auto {
        "auto: "
    } else {
        ""
    }
}

#[cfg(feature = "gpu")]
fn gpu_error(e: impl std::fmt::Display) -> Error {
    Error::Config(format!("GPU backend: {e}"))
}

impl Runner {
    /// Puts `cpu`'s run where `choice` says. The line says what was chosen and why: "gpu
    /// (adapter)", or "cpu" with the reason when the GPU was asked for (or left to `Auto`) and cannot
    /// be had (no adapter, a software one under `Auto`, an optimizer or a size the GPU cannot run).
    pub async fn new(cpu: Trainer, choice: BackendChoice) -> Result<(Runner, String)> {
        #[cfg(feature = "gpu")]
        if choice != BackendChoice::Cpu {
            let ctx = GpuContext::new().await;
            return Self::with_context(cpu, choice, ctx);
        }
        #[cfg(not(feature = "gpu"))]
        if choice == BackendChoice::Gpu {
            return Err(Error::Config("this build has no GPU backend".into()));
        }
        let why = if choice == BackendChoice::Auto { " (auto: this build has no GPU backend)" } else { "" };
        Ok((Runner::Cpu(Box::new(cpu)), format!("cpu{why}")))
    }

    /// As `new`, with the adapter (or why there is none) already requested.
    #[cfg(feature = "gpu")]
    pub fn with_context(
        cpu: Trainer,
        choice: BackendChoice,
        ctx: std::result::Result<GpuContext, GpuError>,
    ) -> Result<(Runner, String)> {
        let ctx = match ctx {
            Ok(ctx) => ctx,
            Err(e) => return Ok((Runner::Cpu(Box::new(cpu)), format!("cpu ({}{e})", auto_prefix(choice)))),
        };
        let adapter = ctx.adapter_name();
        if choice == BackendChoice::Auto && ctx.is_software() {
            let line = format!("cpu (auto: the GPU adapter {adapter} is software, slower than the CPU path)");
            return Ok((Runner::Cpu(Box::new(cpu)), line));
        }
        let saved = cpu.snapshot();
        let host = cpu.model().clone();
        match GpuTrainer::restore(ctx, saved.clone()) {
            Ok(gpu) => {
                let run =
                    GpuRun { gpu, saved, host, host_step: None, adapter: adapter.clone(), sync_every: SYNC_EVERY };
                Ok((Runner::Gpu(Box::new(run)), format!("gpu ({adapter})")))
            }
            // What the GPU trainer does not support (K-FAC, a model past the adapter's limits) runs
            // on the CPU; the session tells a user who asked for the GPU.
            Err(e) => Ok((Runner::Cpu(Box::new(cpu)), format!("cpu (the GPU {adapter} cannot run this: {e})"))),
        }
    }

    /// One step; the reports that became known are pushed onto `out` (on the CPU this step's, on
    /// the GPU a round's at a time). A failed device moves the run to the CPU (the notice says so)
    /// and the step is taken there; a non-finite loss is `Error::NonFinite` on every backend.
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables, clippy::ptr_arg))]
    pub async fn step(&mut self, notices: &mut Vec<String>, out: &mut Vec<Reported>) -> Result<()> {
        self.step_with(notices, out, &mut None, None).await.map(|_| ())
    }

    /// `step`, with `pool` (another worker) computing half of a CPU step's shards; one that fails
    /// is dropped (the notice says so) and the step is finished here, with the same numbers. A CPU
    /// step asks `interrupt` between its pieces; false: it stopped there and changed nothing.
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables, clippy::ptr_arg))]
    pub async fn step_with(
        &mut self,
        notices: &mut Vec<String>,
        out: &mut Vec<Reported>,
        pool: &mut Option<Box<dyn ShardPool>>,
        interrupt: Option<&dyn Interrupt>,
    ) -> Result<bool> {
        #[cfg(feature = "gpu")]
        if let Runner::Gpu(run) = self {
            let failure = match run.gpu.step(out).await {
                Ok(()) => match run.sync(out).await {
                    Ok(()) => return Ok(true),
                    // The step happened; the read or the copy after it failed.
                    Err(GpuError::Engine(e)) => return Err(e),
                    Err(e) => return self.fall_back(e, notices, out).map(|()| true),
                },
                Err(GpuError::Engine(e)) => return Err(e),
                Err(e) => e,
            };
            self.fall_back(failure, notices, out)?;
        }
        match self {
            Runner::Cpu(t) => {
                let (report, failed) = remote::step(t, pool.as_deref(), interrupt).await;
                if let Some(why) = failed {
                    notices.push(format!(
                        "The second worker stopped ({why}): training goes on in one worker, with the same numbers."
                    ));
                    *pool = None;
                }
                let Some(report) = report? else { return Ok(false) };
                out.push((report, t.diagnostics().cloned()));
                Ok(true)
            }
            #[cfg(feature = "gpu")]
            Runner::Gpu(_) => unreachable!("the GPU run moved to the CPU"),
        }
    }

    /// Pushes the reports of steps taken but not yet reported onto `out` (none on the CPU).
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables, clippy::ptr_arg))]
    pub async fn flush(&mut self, notices: &mut Vec<String>, out: &mut Vec<Reported>) -> Result<()> {
        #[cfg(feature = "gpu")]
        if let Runner::Gpu(run) = self {
            match run.gpu.flush(out).await {
                Ok(()) => {}
                Err(GpuError::Engine(e)) => return Err(e),
                Err(e) => self.fall_back(e, notices, out)?,
            }
        }
        Ok(())
    }

    /// Validation loss, computed where the weights are.
    #[cfg_attr(not(feature = "gpu"), allow(clippy::ptr_arg))]
    pub async fn evaluate(&mut self, notices: &mut Vec<String>) -> Result<f32> {
        #[cfg(feature = "gpu")]
        if let Runner::Gpu(run) = self {
            match run.gpu.evaluate().await {
                Ok(loss) => return Ok(loss),
                Err(GpuError::Engine(e)) => return Err(e),
                Err(e) => self.fall_back(e, notices, &mut Vec::new())?,
            }
        }
        #[cfg(not(feature = "gpu"))]
        let _ = notices;
        match self {
            Runner::Cpu(t) => t.evaluate(),
            #[cfg(feature = "gpu")]
            Runner::Gpu(_) => unreachable!("the GPU run moved to the CPU"),
        }
    }

    /// The weights as a CPU model (read back from the GPU when the run is there), for the probe.
    #[cfg_attr(not(feature = "gpu"), allow(clippy::ptr_arg))]
    pub async fn model(&mut self, notices: &mut Vec<String>) -> Result<&Model<f32>> {
        #[cfg(feature = "gpu")]
        if let Runner::Gpu(run) = self {
            let step = run.gpu.step_count();
            if run.host_step != Some(step) {
                match run.gpu.params().await {
                    Ok(p) => {
                        run.host.params = p;
                        run.host_step = Some(step);
                    }
                    Err(e) => self.fall_back(e, notices, &mut Vec::new())?,
                }
            }
        }
        #[cfg(not(feature = "gpu"))]
        let _ = notices;
        Ok(match self {
            Runner::Cpu(t) => t.model(),
            #[cfg(feature = "gpu")]
            Runner::Gpu(run) => &run.host,
        })
    }

    pub fn step_count(&self) -> usize {
        match self {
            Runner::Cpu(t) => t.step_count(),
            #[cfg(feature = "gpu")]
            Runner::Gpu(run) => run.gpu.step_count(),
        }
    }

    /// Everything a checkpoint holds, read back from the GPU when the run is there.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        match self {
            Runner::Cpu(t) => Ok(t.snapshot()),
            #[cfg(feature = "gpu")]
            Runner::Gpu(run) => run.gpu.snapshot().await.map_err(gpu_error),
        }
    }

    /// K-FAC / CG-FAC diagnostics of the last step.
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        match self {
            Runner::Cpu(t) => t.diagnostics(),
            #[cfg(feature = "gpu")]
            Runner::Gpu(run) => run.gpu.diagnostics(),
        }
    }

    /// The GPU adapter the run is on; None on the CPU.
    pub fn adapter(&self) -> Option<&str> {
        match self {
            Runner::Cpu(_) => None,
            #[cfg(feature = "gpu")]
            Runner::Gpu(run) => Some(&run.adapter),
        }
    }

    /// The CPU trainer, when the run is on the CPU.
    pub fn cpu(&self) -> Option<&Trainer> {
        match self {
            Runner::Cpu(t) => Some(t),
            #[cfg(feature = "gpu")]
            Runner::Gpu(_) => None,
        }
    }

    /// Goes back to the state after `target` steps (at most the current one), from a kept state plus
    /// the steps since, recomputed: on the CPU `before`, the state the caller kept; on the GPU the
    /// host copy, and the run is then on the CPU. Returns the step it is at.
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
    pub fn rewind(&mut self, target: usize, before: Option<Snapshot>) -> Result<usize> {
        #[cfg(feature = "gpu")]
        if let Runner::Gpu(run) = self {
            let mut cpu = Trainer::restore(run.saved.clone())?;
            while cpu.step_count() < target {
                cpu.step()?;
            }
            let at = cpu.step_count();
            *self = Runner::Cpu(Box::new(cpu));
            return Ok(at);
        }
        if let (Runner::Cpu(t), Some(snap)) = (&mut *self, before) {
            if snap.step <= target {
                let mut cpu = Trainer::restore(snap)?;
                cpu.set_threads(t.threads());
                while cpu.step_count() < target {
                    cpu.step()?;
                }
                **t = cpu;
            }
        }
        Ok(self.step_count())
    }

    /// Moves a failed GPU run to the CPU: the last host copy, plus the steps taken since it,
    /// recomputed (the batches depend on the step number only, so they are the same batches). The
    /// reports the GPU had not given yet are pushed onto `out` from the recomputed steps.
    #[cfg(feature = "gpu")]
    fn fall_back(&mut self, e: GpuError, notices: &mut Vec<String>, out: &mut Vec<Reported>) -> Result<()> {
        let Runner::Gpu(run) = self else { return Ok(()) };
        let at = run.gpu.step_count();
        let reported = at - run.gpu.pending();
        let mut cpu = Trainer::restore(run.saved.clone())?;
        let from = cpu.step_count();
        while cpu.step_count() < at {
            let report = cpu.step()?;
            if report.step > reported {
                out.push((report, cpu.diagnostics().cloned()));
            }
        }
        notices.push(format!(
            "the GPU {} failed at step {at}: {e}. Training continues on the CPU from the GPU's copy at step \
             {from} plus {} steps recomputed; nothing is lost",
            run.adapter,
            at - from
        ));
        *self = Runner::Cpu(Box::new(cpu));
        Ok(())
    }

    /// Test hook: how often the GPU run refreshes its host copy.
    #[cfg(feature = "gpu")]
    pub fn set_sync_every(&mut self, steps: usize) {
        if let Runner::Gpu(run) = self {
            run.sync_every = steps.max(1);
        }
    }

    /// Test hook: the GPU context of a GPU run.
    #[cfg(feature = "gpu")]
    pub fn gpu_context(&self) -> Option<&GpuContext> {
        match self {
            Runner::Gpu(run) => Some(run.gpu.context()),
            Runner::Cpu(_) => None,
        }
    }
}

#[cfg(feature = "gpu")]
impl GpuRun {
    /// Refreshes the host copy every `sync_every` steps, once the steps before it are known to be
    /// finite (their reports go onto `out`).
    async fn sync(&mut self, out: &mut Vec<Reported>) -> std::result::Result<(), GpuError> {
        if self.gpu.step_count().is_multiple_of(self.sync_every) {
            self.gpu.flush(out).await?;
            self.saved = self.gpu.snapshot().await?;
        }
        Ok(())
    }
}
