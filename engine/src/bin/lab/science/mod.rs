//! `lab brownian`, `lab particles`, `lab sphere`, `lab joma` and `lab report`: the science layer on the command line,
//! from the reference processes alone to real training runs watched through a probe batch. One file
//! per subcommand; here what they share: the probe batch, the probed training run, plotting helpers.

mod brownian;
mod joma;
mod particles;
mod report;
mod sphere;

pub use brownian::{run_brownian, BrownianArgs};
pub use joma::{run_joma, JomaArgs};
pub use particles::{run_particles, ParticlesArgs};
pub use report::{run_report, ReportArgs};
pub use sphere::{run_sphere, SphereArgs};

use std::path::Path;

use clap::Args;
use engine::config::{ModelConfig, TrainConfig};
use engine::science::probe::{Probe, ProbeConfig};
use engine::science::{cache, markov};
use engine::{Error, Trainer};

use crate::args::RunArgs;
use plotters::prelude::*;
use serde::Serialize;

/// The probed training run of `sphere` and `joma`: its optimizer and seed, the run's sizes and
/// steps, the probe batch.
#[derive(Args)]
pub struct ProbedRunArgs {
    #[arg(long, default_value = "adam")]
    pub(super) optimizer: String,
    /// Seed of data and initialisation (`joma --toy`: of the draw of mu).
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    #[command(flatten)]
    pub(super) run: RunArgs,
    #[command(flatten)]
    pub(super) probe: ProbeArgs,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    pub(super) json: bool,
}

impl ProbedRunArgs {
    fn config(&self) -> Result<TrainConfig, Error> {
        self.run.config(&self.optimizer, self.seed)
    }
}

/// The probe batch of `sphere` and `joma`.
#[derive(Args, Clone)]
pub struct ProbeArgs {
    /// Probe every this many training steps (the stored history doubles it when its budget is full).
    #[arg(long, default_value_t = 10)]
    pub(super) probe_every: usize,
    /// Rows of validation batch 0 in the probe batch.
    #[arg(long, default_value_t = 4)]
    pub(super) probe_rows: usize,
    /// Memory budget of the stored probe history, in MiB.
    #[arg(long, default_value_t = 64)]
    pub(super) probe_budget_mb: usize,
}

impl ProbeArgs {
    fn config(&self) -> ProbeConfig {
        ProbeConfig { every: self.probe_every, budget_bytes: self.probe_budget_mb << 20 }
    }
}

/// Per-layer measurements of the probe batch at one training step.
#[derive(Clone, Serialize)]
pub(super) struct CurvePoint {
    pub(super) step: usize,
    /// Mean attention entropy (rows, heads, queries) per layer.
    pub(super) entropy: Vec<f64>,
    /// Share of attention mass inside the query's true chunk, per layer (hierarchy data only).
    pub(super) within_chunk: Option<Vec<f64>>,
}

pub(super) struct Probed {
    pub(super) trainer: Trainer,
    /// Stored history; its cache holds the final model's forward pass on the probe batch.
    pub(super) probe: Probe,
    /// Every `probe_every` steps, never decimated: a few numbers per point.
    pub(super) curve: Vec<CurvePoint>,
    pub(super) final_val_loss: f32,
}

/// Trains `cfg` and probes every `probe_every` steps from step 0; `min_probes` is the fewest probe
/// points the caller's analysis needs.
pub(super) fn train_probed(cfg: TrainConfig, p: &ProbeArgs, min_probes: usize) -> Result<Probed, Error> {
    if cfg.steps == 0 {
        return Err(Error::Config("steps must be positive, got 0".into()));
    }
    if p.probe_every == 0 {
        return Err(Error::Config("--probe-every must be positive, got 0".into()));
    }
    let probes = cfg.steps / p.probe_every + 1;
    if probes < min_probes {
        return Err(Error::Config(format!(
            "{} steps with a probe every {} give {probes} probes; this needs at least {min_probes} \
             (more --steps or a smaller --probe-every)",
            cfg.steps, p.probe_every
        )));
    }
    let mut trainer = Trainer::new(cfg)?;
    let mcfg = trainer.model().cfg.clone();
    let mut probe = Probe::on_validation(&mcfg, trainer.data(), p.probe_rows, p.config())?;
    let mut curve = Vec::with_capacity(probes);
    let total = trainer.config().steps;
    loop {
        let s = trainer.step_count();
        if s % p.probe_every == 0 {
            // The history may skip this step after a decimation; the curve never does.
            if !probe.record(s, trainer.model())? {
                probe.observe(trainer.model())?;
            }
            let entropy =
                (0..mcfg.layers).map(|l| cache::layer_entropy(&mcfg, probe.cache(), l)).collect::<Result<_, _>>()?;
            curve.push(CurvePoint { step: s, entropy, within_chunk: probe.within_chunk_mass() });
        }
        if s == total {
            break;
        }
        trainer.step()?;
    }
    probe.observe(trainer.model())?;
    let final_val_loss = trainer.evaluate()?;
    Ok(Probed { trainer, probe, curve, final_val_loss })
}

pub(super) fn uniform_entropy(cfg: &ModelConfig) -> f64 {
    if cfg.causal {
        markov::uniform_causal_entropy(cfg.context)
    } else {
        (cfg.context as f64).ln()
    }
}

pub(super) fn opt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.4}"))
}

pub(super) fn plot_error(path: &Path, e: Box<dyn std::error::Error>) -> Error {
    Error::Config(format!("cannot draw {}: {e}", path.display()))
}

pub(super) type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// One panel of named curves, y from 0 to a little above the largest value (or `ceiling`).
pub(super) fn line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    curves: &[(String, Vec<(f64, f64)>)],
    ceiling: Option<f64>,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    let pts = curves.iter().flat_map(|(_, c)| c.iter());
    let (x_max, y_max) = pts.fold((1e-9f64, ceiling.unwrap_or(1e-9)), |acc, p| (acc.0.max(p.0), acc.1.max(p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max * 1.05)?;
    chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw()?;
    for (i, (name, c)) in curves.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(c.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    Ok(())
}
