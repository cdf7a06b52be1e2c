//! `--backend cpu|gpu|auto` for `lab train`: the same run on the CPU engine or on the WGSL backend.
//! The CPU trainer always exists: it evaluates GPU weights (copied back at each evaluation) and is the
//! fallback when no GPU adapter is found under `auto`.

use engine::gpu::trainer::GpuTrainer;
use engine::gpu::{block_on, GpuContext};
use engine::{Error, StepReport, Trainer};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Cpu,
    Gpu,
    /// The GPU when an adapter exists, else the CPU.
    Auto,
}

pub enum Runner {
    Cpu(Trainer),
    Gpu { gpu: Box<GpuTrainer>, cpu: Trainer, adapter: String },
}

fn gpu_error(e: impl std::fmt::Display) -> Error {
    Error::Config(format!("GPU backend: {e}"))
}

impl Runner {
    /// Picks the backend; the returned line says what was chosen and why.
    pub fn new(cpu: Trainer, backend: Backend) -> Result<(Runner, String), Error> {
        if backend == Backend::Cpu {
            return Ok((Runner::Cpu(cpu), "backend: cpu".into()));
        }
        let ctx = match block_on(GpuContext::new()) {
            Ok(ctx) => ctx,
            Err(e) if backend == Backend::Auto => {
                return Ok((Runner::Cpu(cpu), format!("backend: cpu (auto: {e})")));
            }
            Err(e) => return Err(gpu_error(e)),
        };
        let adapter = ctx.adapter_name();
        let gpu = GpuTrainer::new(ctx, cpu.config().clone()).map_err(gpu_error)?;
        let line = format!("backend: gpu ({adapter})");
        Ok((Runner::Gpu { gpu: Box::new(gpu), cpu, adapter }, line))
    }

    pub fn step(&mut self) -> Result<StepReport, Error> {
        match self {
            Runner::Cpu(t) => t.step(),
            Runner::Gpu { gpu, .. } => block_on(gpu.step()).map_err(gpu_error),
        }
    }

    pub fn step_count(&self) -> usize {
        match self {
            Runner::Cpu(t) => t.step_count(),
            Runner::Gpu { gpu, .. } => gpu.step_count(),
        }
    }

    /// Validation loss; GPU weights are read back and scored by the CPU reference.
    pub fn evaluate(&mut self) -> Result<f32, Error> {
        match self {
            Runner::Cpu(t) => t.evaluate(),
            Runner::Gpu { gpu, cpu, .. } => {
                cpu.set_params(block_on(gpu.params()).map_err(gpu_error)?)?;
                cpu.evaluate()
            }
        }
    }

    /// The CPU trainer (for diagnostics, checkpoints and the summary).
    pub fn cpu(&self) -> &Trainer {
        match self {
            Runner::Cpu(t) | Runner::Gpu { cpu: t, .. } => t,
        }
    }

    pub fn adapter(&self) -> Option<&str> {
        match self {
            Runner::Cpu(_) => None,
            Runner::Gpu { adapter, .. } => Some(adapter),
        }
    }
}
