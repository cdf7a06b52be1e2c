//! `lab race`: the same data, initialisation and seeds for every optimizer; who reaches the target
//! validation loss first, in steps and in seconds.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use engine::{Error, Trainer};
use plotters::prelude::*;
use serde::Serialize;
use serde_json::json;

use crate::args::RunArgs;

#[derive(Args)]
pub struct RaceArgs {
    /// Comma-separated optimizers.
    #[arg(long, default_value = "sgd,adam,muon,soap,kfac,cgfac")]
    optimizers: String,
    /// Validation loss that counts as arrived.
    #[arg(long)]
    target_loss: f32,
    /// Seeds 0..N, the same for every optimizer.
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    #[command(flatten)]
    run: RunArgs,
    /// Write validation loss against steps and against seconds as SVG.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Serialize)]
struct Point {
    step: usize,
    seconds: f64,
    val_loss: f32,
}

#[derive(Serialize)]
struct Run {
    seed: u64,
    curve: Vec<Point>,
    steps_to_target: Option<usize>,
    seconds_to_target: Option<f64>,
    final_val_loss: f32,
    ms_per_step: f64,
    fallbacks: Option<u64>,
}

/// Mean and sample standard deviation.
fn mean_std(xs: &[f64]) -> (Option<f64>, Option<f64>) {
    if xs.is_empty() {
        return (None, None);
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let sd = (xs.len() > 1).then(|| (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt());
    (Some(m), sd)
}

fn race_one(a: &RaceArgs, optimizer: &str, seed: u64) -> Result<(Run, f32), Error> {
    let cfg = a.run.config(optimizer, seed)?;
    let lr = cfg.lr;
    let mut t = Trainer::new(cfg.clone())?;
    let mut curve = vec![Point { step: 0, seconds: 0.0, val_loss: t.evaluate()? }];
    let mut train_time = 0.0;
    let (mut steps_to_target, mut seconds_to_target) = (None, None);
    while t.step_count() < cfg.steps {
        let start = Instant::now();
        t.step()?;
        train_time += start.elapsed().as_secs_f64();
        let s = t.step_count();
        if s % cfg.eval_every.max(1) == 0 || s == cfg.steps {
            let val_loss = t.evaluate()?;
            curve.push(Point { step: s, seconds: train_time, val_loss });
            if steps_to_target.is_none() && val_loss <= a.target_loss {
                steps_to_target = Some(s);
                seconds_to_target = Some(train_time);
            }
        }
    }
    let run = Run {
        seed,
        final_val_loss: curve.last().map_or(f32::NAN, |p| p.val_loss),
        curve,
        steps_to_target,
        seconds_to_target,
        ms_per_step: 1e3 * train_time / cfg.steps.max(1) as f64,
        fallbacks: t.diagnostics().map(|d| d.fallbacks_total),
    };
    Ok((run, lr))
}

pub fn run(a: RaceArgs) -> Result<(), Error> {
    let names: Vec<&str> = a.optimizers.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() || a.seeds == 0 {
        return Err(Error::Config("race needs at least one optimizer and one seed".into()));
    }
    if !(a.target_loss.is_finite() && a.target_loss > 0.0) {
        return Err(Error::Config(format!("--target-loss must be a positive number of nats, got {}", a.target_loss)));
    }
    let mut results = Vec::new();
    for name in &names {
        let mut runs = Vec::new();
        let mut lr = 0.0;
        for seed in 0..a.seeds {
            let (run, used_lr) = race_one(&a, name, seed)?;
            lr = used_lr;
            if !a.json {
                eprintln!(
                    "{name:<6} seed {seed}: final val {:.4}, target at {:?} steps",
                    run.final_val_loss, run.steps_to_target
                );
            }
            runs.push(run);
        }
        let steps: Vec<f64> = runs.iter().filter_map(|r| r.steps_to_target.map(|s| s as f64)).collect();
        let secs: Vec<f64> = runs.iter().filter_map(|r| r.seconds_to_target).collect();
        let finals: Vec<f64> = runs.iter().map(|r| r.final_val_loss as f64).collect();
        let ms: Vec<f64> = runs.iter().map(|r| r.ms_per_step).collect();
        let summary = json!({
            "reached": format!("{}/{}", steps.len(), runs.len()),
            "steps_to_target": mean_std(&steps),
            "seconds_to_target": mean_std(&secs),
            "final_val_loss": mean_std(&finals),
            "ms_per_step": mean_std(&ms),
        });
        results.push((name.to_string(), lr, runs, summary));
    }
    if let Some(path) = &a.plot {
        plot(path, &results).map_err(|e| Error::Config(format!("cannot draw {}: {e}", path.display())))?;
    }
    let cfg = a.run.config(names[0], 0)?;
    let out = json!({
        "data": cfg.data.name(),
        "steps": cfg.steps,
        "target_loss": a.target_loss,
        "seeds": a.seeds,
        "optimizers": results.iter().map(|(n, lr, runs, s)| json!({"name": n, "lr": lr, "summary": s, "runs": runs})).collect::<Vec<_>>(),
    });
    if a.json {
        say!("{out}");
    } else {
        say!(
            "{:<7} {:>8} {:>7} {:>16} {:>16} {:>16} {:>10}",
            "optim",
            "lr",
            "reached",
            "steps to target",
            "s to target",
            "final val",
            "ms/step"
        );
        let fmt = |v: &serde_json::Value| match (v[0].as_f64(), v[1].as_f64()) {
            (Some(m), Some(s)) => format!("{m:.3} ± {s:.3}"),
            (Some(m), None) => format!("{m:.3}"),
            _ => "never".to_string(),
        };
        for (n, lr, _, s) in &results {
            say!(
                "{n:<7} {lr:>8} {:>7} {:>16} {:>16} {:>16} {:>10}",
                s["reached"].as_str().unwrap_or(""),
                fmt(&s["steps_to_target"]),
                fmt(&s["seconds_to_target"]),
                fmt(&s["final_val_loss"]),
                fmt(&s["ms_per_step"])
            );
        }
    }
    Ok(())
}

/// (step, mean seconds, mean validation loss) over seeds.
type CurvePoint = (f64, f64, f64);
type Results = [(String, f32, Vec<Run>, serde_json::Value)];

/// Mean validation curve per optimizer, against steps (left) and seconds (right).
fn plot(path: &PathBuf, results: &Results) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let mean_curve = |runs: &[Run]| -> Vec<CurvePoint> {
        let len = runs.iter().map(|r| r.curve.len()).min().unwrap_or(0);
        (0..len)
            .map(|i| {
                let k = runs.len() as f64;
                let step = runs[0].curve[i].step as f64;
                let secs = runs.iter().map(|r| r.curve[i].seconds).sum::<f64>() / k;
                let loss = runs.iter().map(|r| r.curve[i].val_loss as f64).sum::<f64>() / k;
                (step, secs, loss)
            })
            .collect()
    };
    let curves: Vec<(String, Vec<CurvePoint>)> =
        results.iter().map(|(n, _, runs, _)| (n.clone(), mean_curve(runs))).collect();
    let all = curves.iter().flat_map(|(_, c)| c.iter());
    let (max_step, max_secs, max_loss, min_loss) = all.fold((1.0f64, 1e-3f64, 0.0f64, f64::INFINITY), |acc, p| {
        (acc.0.max(p.0), acc.1.max(p.1), acc.2.max(p.2), acc.3.min(p.2))
    });
    for (panel, (x_label, use_secs)) in panels.iter().zip([("step", false), ("seconds", true)]) {
        let x_max = if use_secs { max_secs } else { max_step };
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("validation loss against {x_label}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..x_max, (min_loss * 0.95)..(max_loss * 1.02))?;
        chart.configure_mesh().x_desc(x_label).y_desc("val loss").draw()?;
        for (i, (name, c)) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts = c.iter().map(|&(s, t, l)| (if use_secs { t } else { s }, l));
            chart
                .draw_series(LineSeries::new(pts, color.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    }
    root.present()?;
    Ok(())
}
