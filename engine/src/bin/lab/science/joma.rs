//! `lab joma`: attention entropy over training (sparse, then dense?) for an MLP and without one,
//! and the JoMA toy dynamics.

use std::path::{Path, PathBuf};

use clap::Args;
use engine::config::{ModelConfig, TrainConfig};
use engine::science::joma::{self, CurveSummary, ToyConfig};
use engine::{Activation, Error};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::json;

use super::*;

#[derive(Args)]
pub struct JomaArgs {
    /// JoMA's toy dynamics dv/dt = eta (mu - v) * softmax(v^2/T) instead of a training run.
    #[arg(long)]
    pub(super) toy: bool,
    /// Toy: keep every this many steps of the entropy curve in the output.
    #[arg(long, default_value_t = 50)]
    pub(super) every: usize,
    /// MLP activation: gelu, relu or identity (JoMA's linear case).
    #[arg(long)]
    pub(super) mlp: Option<String>,
    #[command(flatten)]
    pub(super) run: ProbedRunArgs,
    /// Write entropy (and, on hierarchy data, within-chunk mass) per layer over training as SVG.
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
}

/// One layer's attention over training.
#[derive(Serialize)]
pub(super) struct JomaLayer {
    pub(super) layer: usize,
    pub(super) entropy: CurveSummary,
    /// First, last and largest within-chunk mass (hierarchy data only).
    pub(super) within_chunk: Option<ChunkSummary>,
}

#[derive(Serialize)]
pub(super) struct ChunkSummary {
    pub(super) initial: f64,
    pub(super) max: f64,
    #[serde(rename = "final")]
    pub(super) last: f64,
}

#[derive(Serialize)]
pub(super) struct JomaReport {
    pub(super) engine_version: &'static str,
    pub(super) data: String,
    pub(super) mlp: Activation,
    pub(super) steps: usize,
    pub(super) model: ModelConfig,
    pub(super) final_val_loss: f32,
    pub(super) uniform_entropy: f64,
    /// Within-chunk mass of uniform attention under the model's mask (hierarchy data only).
    pub(super) within_chunk_chance: Option<f64>,
    pub(super) layers: Vec<JomaLayer>,
    pub(super) curve: Vec<CurvePoint>,
}

/// Trains with probes and summarises each layer's entropy curve the way the toy's is summarised.
pub(super) fn joma_experiment(cfg: TrainConfig, p: &ProbeArgs) -> Result<JomaReport, Error> {
    let run = train_probed(cfg, p, 2)?;
    let mcfg = run.trainer.model().cfg.clone();
    let steps: Vec<usize> = run.curve.iter().map(|c| c.step).collect();
    let layers = (0..mcfg.layers)
        .map(|l| {
            let h: Vec<f64> = run.curve.iter().map(|c| c.entropy[l]).collect();
            let within: Option<Vec<f64>> = run.curve.iter().map(|c| c.within_chunk.as_ref().map(|w| w[l])).collect();
            Ok(JomaLayer {
                layer: l,
                entropy: joma::summarize(&h, Some(&steps))?,
                within_chunk: within.map(|w| ChunkSummary {
                    initial: w[0],
                    max: w.iter().copied().fold(0.0, f64::max),
                    last: w[w.len() - 1],
                }),
            })
        })
        .collect::<Result<_, Error>>()?;
    let cfg = run.trainer.config();
    Ok(JomaReport {
        engine_version: engine::VERSION,
        data: cfg.data.name().into(),
        mlp: mcfg.activation,
        steps: cfg.steps,
        final_val_loss: run.final_val_loss,
        uniform_entropy: uniform_entropy(&mcfg),
        within_chunk_chance: run.probe.within_chunk_chance(),
        model: mcfg,
        layers,
        curve: run.curve,
    })
}

/// The toy's entropy curve, or per-layer attention entropy over a real training run.
pub fn run_joma(a: JomaArgs) -> Result<(), Error> {
    if a.toy {
        return run_toy(&a);
    }
    let mut cfg = a.run.config()?;
    if let Some(m) = &a.mlp {
        cfg.model.activation = m.parse()?;
    }
    let rep = joma_experiment(cfg, &a.run.probe)?;
    if let Some(path) = &a.plot {
        plot_joma(path, &[&rep]).map_err(|e| plot_error(path, e))?;
    }
    if a.run.json {
        say!("{}", serde_json::to_string(&rep)?);
        return Ok(());
    }
    say!(
        "{} with {:?} MLP, {} layers, {} steps: val loss {:.4} (uniform entropy {:.4})",
        rep.data,
        rep.mlp,
        rep.model.layers,
        rep.steps,
        rep.final_val_loss,
        rep.uniform_entropy
    );
    for l in &rep.layers {
        let s = &l.entropy;
        say!(
            "layer {}: entropy {:.4} -> min {:.4} at step {} -> final {:.4} (rebound {:.4}, {:?})",
            l.layer,
            s.initial,
            s.min,
            s.min_step,
            s.last,
            s.rebound,
            s.shape
        );
        if let (Some(w), Some(chance)) = (&l.within_chunk, rep.within_chunk_chance) {
            say!(
                "         within-chunk mass {:.4} -> final {:.4} (max {:.4}; uniform {:.4})",
                w.initial,
                w.last,
                w.max,
                chance
            );
        }
    }
    Ok(())
}

/// Left: entropy per layer of each run over training; right: within-chunk mass where known.
pub(super) fn plot_joma(path: &Path, runs: &[&JomaReport]) -> PlotResult {
    let root = SVGBackend::new(path, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let series = |r: &JomaReport, pick: &dyn Fn(&CurvePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        r.curve.iter().filter_map(|p| pick(p).map(|v| (p.step as f64, v))).collect()
    };
    let mut entropy = Vec::new();
    let mut within = Vec::new();
    for r in runs {
        for l in 0..r.model.layers {
            let name = format!("{:?} layer {l}", r.mlp).to_lowercase();
            entropy.push((name.clone(), series(r, &|p| Some(p.entropy[l]))));
            let w = series(r, &|p| p.within_chunk.as_ref().map(|w| w[l]));
            if !w.is_empty() {
                within.push((name, w));
            }
        }
    }
    let ceiling = runs.iter().map(|r| r.uniform_entropy).fold(0.0, f64::max);
    line_panel(&panels[0], "attention entropy", "step", "entropy", &entropy, Some(ceiling))?;
    line_panel(&panels[1], "attention mass inside the true chunk", "step", "mass", &within, Some(1.0))?;
    root.present()?;
    Ok(())
}

pub(super) fn run_toy(a: &JomaArgs) -> Result<(), Error> {
    let run = joma::toy(&ToyConfig { seed: a.run.seed, ..ToyConfig::default() })?;
    let every = a.every.max(1);
    let last = run.entropy.len() - 1;
    let curve: Vec<(usize, f64)> =
        run.entropy.iter().copied().enumerate().filter(|(s, _)| s % every == 0 || *s == last).collect();
    if a.run.json {
        let curve: Vec<_> = curve.iter().map(|(s, h)| json!({"step": s, "entropy": h})).collect();
        say!(
            "{}",
            json!({"engine_version": engine::VERSION, "config": run.config, "mu": run.mu,
                   "summary": run.summary, "curve": curve})
        );
        return Ok(());
    }
    let s = &run.summary;
    let mu: Vec<String> = run.mu.iter().map(|m| format!("{m:.3}")).collect();
    say!("JoMA toy dynamics, seed {}: mu = [{}]", a.run.seed, mu.join(", "));
    say!(
        "entropy {:.4} -> min {:.4} at step {} -> final {:.4} (rebound {:.4}, {:?})",
        s.initial,
        s.min,
        s.min_step,
        s.last,
        s.rebound,
        s.shape
    );
    let coarse = (500 / every).max(1);
    for (step, h) in curve.iter().step_by(coarse) {
        say!("{step:>6} {h:>8.4}");
    }
    Ok(())
}
