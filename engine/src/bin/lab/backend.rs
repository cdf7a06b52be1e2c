//! `--backend cpu|gpu|auto` for `lab train`: the same run on the CPU engine or on the WGSL backend.
//! The GPU run keeps a host copy of its whole state (weights, optimizer state, step), refreshed
//! every [`SYNC_EVERY`] steps; when the device fails (lost, out of memory) the CPU trainer restores
//! that copy, recomputes the steps since, and the run goes on there.

use engine::checkpoint::Snapshot;
use engine::gpu::trainer::GpuTrainer;
use engine::gpu::{block_on, GpuContext, GpuError};
use engine::{Error, StepReport, Trainer};

/// Steps between host copies of the GPU state: a lost device costs at most this many recomputed
/// CPU steps, while the readback (three times the weights) stays rare.
pub const SYNC_EVERY: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Cpu,
    Gpu,
    /// The GPU when an adapter exists, else the CPU.
    Auto,
}

pub enum Runner {
    Cpu(Box<Trainer>),
    Gpu(Box<GpuRun>),
}

pub struct GpuRun {
    gpu: GpuTrainer,
    /// The state at step `saved.step`, where the CPU takes over if the device fails.
    saved: Snapshot,
    adapter: String,
    sync_every: usize,
}

fn gpu_error(e: impl std::fmt::Display) -> Error {
    Error::Config(format!("GPU backend: {e}"))
}

impl Runner {
    /// Picks the backend; the returned line says what was chosen and why. The GPU starts from the
    /// CPU trainer's state, so a run loaded from a checkpoint continues there.
    pub fn new(cpu: Trainer, backend: Backend) -> Result<(Runner, String), Error> {
        if backend == Backend::Cpu {
            return Ok((Runner::Cpu(Box::new(cpu)), "backend: cpu".into()));
        }
        Self::with_context(cpu, backend, block_on(GpuContext::new()))
    }

    fn with_context(
        cpu: Trainer,
        backend: Backend,
        ctx: Result<GpuContext, GpuError>,
    ) -> Result<(Runner, String), Error> {
        let ctx = match ctx {
            Ok(ctx) => ctx,
            Err(e) if backend == Backend::Auto => {
                return Ok((Runner::Cpu(Box::new(cpu)), format!("backend: cpu (auto: {e})")));
            }
            Err(e) => return Err(gpu_error(e)),
        };
        let adapter = ctx.adapter_name();
        let saved = cpu.snapshot();
        match GpuTrainer::restore(ctx, saved.clone()) {
            Ok(gpu) => {
                let line = format!("backend: gpu ({adapter})");
                Ok((Runner::Gpu(Box::new(GpuRun { gpu, saved, adapter, sync_every: SYNC_EVERY })), line))
            }
            // What the GPU trainer does not support (K-FAC, CG-FAC's matrix-free and exact-Fisher
            // products) is the user's choice to revisit,
            // unless they left the choice to us.
            Err(GpuError::Engine(e)) if backend == Backend::Gpu => Err(gpu_error(e)),
            Err(e) => {
                Ok((Runner::Cpu(Box::new(cpu)), format!("backend: cpu (the GPU {adapter} cannot run this: {e})")))
            }
        }
    }

    pub fn step(&mut self) -> Result<StepReport, Error> {
        let (report, failure) = match self {
            Runner::Cpu(t) => return t.step(),
            Runner::Gpu(run) => match block_on(run.gpu.step()) {
                // The step happened even if the host copy after it fails.
                Ok(r) => (Some(r), run.sync().err()),
                Err(GpuError::Engine(e)) => return Err(e),
                Err(e) => (None, Some(e)),
            },
        };
        if let Some(e) = failure {
            self.fall_back(e)?;
        }
        match report {
            Some(r) => Ok(r),
            None => self.step(),
        }
    }

    pub fn step_count(&self) -> usize {
        match self {
            Runner::Cpu(t) => t.step_count(),
            Runner::Gpu(run) => run.gpu.step_count(),
        }
    }

    /// Validation loss, computed where the weights are.
    pub fn evaluate(&mut self) -> Result<f32, Error> {
        let failure = match self {
            Runner::Cpu(t) => return t.evaluate(),
            Runner::Gpu(run) => match block_on(run.gpu.evaluate()) {
                Ok(loss) => return Ok(loss),
                Err(GpuError::Engine(e)) => return Err(e),
                Err(e) => e,
            },
        };
        self.fall_back(failure)?;
        self.evaluate()
    }

    /// Everything a checkpoint holds, read back from the GPU when the run is there.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        match self {
            Runner::Cpu(t) => Ok(t.snapshot()),
            Runner::Gpu(run) => block_on(run.gpu.snapshot()).map_err(gpu_error),
        }
    }

    /// K-FAC / CG-FAC diagnostics of the last step (K-FAC runs on the CPU only).
    pub fn diagnostics(&self) -> Option<&engine::optim::second_order::Diagnostics> {
        match self {
            Runner::Cpu(t) => t.diagnostics(),
            Runner::Gpu(run) => run.gpu.diagnostics(),
        }
    }

    pub fn adapter(&self) -> Option<&str> {
        match self {
            Runner::Cpu(_) => None,
            Runner::Gpu(run) => Some(&run.adapter),
        }
    }

    /// Moves a failed GPU run to the CPU: the last host copy, plus the steps taken since it,
    /// recomputed (the batches depend on the step number only, so they are the same batches).
    fn fall_back(&mut self, e: GpuError) -> Result<(), Error> {
        let Runner::Gpu(run) = self else { return Ok(()) };
        let at = run.gpu.step_count();
        let mut cpu = Trainer::restore(run.saved.clone())?;
        let from = cpu.step_count();
        while cpu.step_count() < at {
            cpu.step()?;
        }
        eprintln!(
            "GPU {} failed at step {at}: {e}\ncontinuing on the CPU from the GPU's state at step {from} \
             ({} steps recomputed)",
            run.adapter,
            at - from
        );
        *self = Runner::Cpu(Box::new(cpu));
        Ok(())
    }
}

impl GpuRun {
    /// Refreshes the host copy every `sync_every` steps.
    fn sync(&mut self) -> Result<(), GpuError> {
        if self.gpu.step_count().is_multiple_of(self.sync_every) {
            self.saved = block_on(self.gpu.snapshot())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::config::{ModelConfig, OptimizerConfig, TrainConfig};

    fn config(optimizer: OptimizerConfig, steps: usize) -> TrainConfig {
        let mut cfg = TrainConfig::browser_default();
        cfg.model = ModelConfig { d_model: 32, heads: 4, layers: 2, d_ff: 72, context: 24, ..cfg.model };
        cfg.batch = 3;
        cfg.steps = steps;
        cfg.optimizer = optimizer;
        cfg
    }

    fn ctx() -> GpuContext {
        block_on(GpuContext::new()).expect("GPU tests need an adapter (apt-get install mesa-vulkan-drivers)")
    }

    /// max |a - b| / (1 + |b|).
    fn max_err(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
    }

    /// The device is lost after `lose_after` GPU steps; the run must end where an uninterrupted
    /// CPU run ends.
    fn lost_device(optimizer: OptimizerConfig) {
        let is_cgfac = matches!(optimizer, OptimizerConfig::CgFac(_));
        let (total, sync_every, lose_after) = (9, 3, 5);
        let cfg = config(optimizer, total);
        let mut reference = Trainer::new(cfg.clone()).unwrap();
        let expected: Vec<f32> = (0..total).map(|_| reference.step().unwrap().loss).collect();

        let (mut runner, line) = Runner::with_context(Trainer::new(cfg).unwrap(), Backend::Gpu, Ok(ctx())).unwrap();
        assert!(line.starts_with("backend: gpu ("), "{line}");
        let Runner::Gpu(run) = &mut runner else { panic!("not on the GPU") };
        run.sync_every = sync_every;
        let mut losses = Vec::new();
        for _ in 0..lose_after {
            losses.push(runner.step().unwrap().loss);
        }
        let Runner::Gpu(run) = &runner else { panic!("not on the GPU") };
        assert_eq!(run.saved.step, 3, "host copy after step 3");
        run.gpu.context().device.destroy();
        while runner.step_count() < total {
            losses.push(runner.step().unwrap().loss);
        }
        assert!(runner.adapter().is_none(), "the run moved to the CPU");
        let el = max_err(&losses, &expected);
        let snap = runner.snapshot().unwrap();
        let pe = max_err(&snap.params, &reference.model().params);
        eprintln!("{}: losses {el:e}, params {pe:e}", reference.config().optimizer.name());
        assert_eq!(snap.step, total);
        assert!(el < 1e-5, "losses differ by {el}");
        assert!(pe < 1e-3, "parameters differ by {pe}");
        if is_cgfac {
            // The CPU continued from the GPU's CG-FAC state, so its counters carry on.
            let (d, r) = (runner.diagnostics().unwrap(), reference.diagnostics().unwrap());
            assert_eq!(d.fallbacks_total, r.fallbacks_total);
        }
        let ev = (runner.evaluate().unwrap() - reference.evaluate().unwrap()).abs();
        assert!(ev < 1e-4, "validation losses differ by {ev}");
    }

    #[test]
    fn a_lost_device_continues_on_the_cpu_with_the_adam_state() {
        lost_device(OptimizerConfig::adam());
    }

    #[test]
    fn a_lost_device_continues_on_the_cpu_with_the_sgd_state() {
        lost_device(OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.01 });
    }

    #[test]
    fn a_lost_device_continues_on_the_cpu_with_the_cgfac_state() {
        lost_device(OptimizerConfig::named("cgfac").unwrap());
    }

    #[test]
    fn a_model_past_the_buffer_limit_runs_on_the_cpu() {
        let cpu = Trainer::new(config(OptimizerConfig::adam(), 2)).unwrap();
        // The weights alone are over 64 KiB.
        let small = block_on(GpuContext::with_max_buffer(64 << 10)).unwrap();
        let (mut runner, line) = Runner::with_context(cpu, Backend::Gpu, Ok(small)).unwrap();
        assert!(line.starts_with("backend: cpu (the GPU ") && line.contains("over the adapter's limit"), "{line}");
        assert!(runner.adapter().is_none());
        runner.step().unwrap();
    }

    #[test]
    fn auto_without_an_adapter_runs_on_the_cpu_and_gpu_is_an_error() {
        let cfg = config(OptimizerConfig::adam(), 2);
        let none = || Err(GpuError::NoAdapter("none here".into()));
        let (runner, line) = Runner::with_context(Trainer::new(cfg.clone()).unwrap(), Backend::Auto, none()).unwrap();
        assert!(runner.adapter().is_none() && line.starts_with("backend: cpu (auto: no GPU adapter"), "{line}");
        let err = Runner::with_context(Trainer::new(cfg).unwrap(), Backend::Gpu, none()).err().unwrap();
        assert!(err.to_string().contains("no GPU adapter"), "{err}");
    }

    #[test]
    fn cgfac_runs_on_the_gpu_and_kfac_stays_on_the_cpu() {
        let cfg = config(OptimizerConfig::named("cgfac").unwrap(), 2);
        let (mut runner, line) = Runner::with_context(Trainer::new(cfg).unwrap(), Backend::Gpu, Ok(ctx())).unwrap();
        assert!(line.starts_with("backend: gpu ("), "{line}");
        runner.step().unwrap();
        assert_eq!(runner.diagnostics().unwrap().layers.len(), 2 * 6 + 1, "every linear layer reports");

        let cfg = config(OptimizerConfig::named("kfac").unwrap(), 2);
        let (runner, line) =
            Runner::with_context(Trainer::new(cfg.clone()).unwrap(), Backend::Auto, Ok(ctx())).unwrap();
        assert!(runner.adapter().is_none() && line.contains("runs AdamW, SGD and CG-FAC"), "{line}");
        let err = Runner::with_context(Trainer::new(cfg).unwrap(), Backend::Gpu, Ok(ctx())).err().unwrap();
        assert!(err.to_string().contains("runs AdamW, SGD and CG-FAC"), "{err}");
    }
}
