//! `lab sphere`: tokens on the sphere over training and depth, through a probe batch: radius
//! errors, the kernel identity, entropy per head, fitted diffusion per phase and discrete walkers.

use std::path::{Path, PathBuf};

use clap::Args;
use engine::config::{ModelConfig, TrainConfig};
use engine::model::{Cache, Model};
use engine::nn::layer_norm::EPS;
use engine::science::brownian::Scheme;
use engine::science::fit::{compare_with_brownian, fit_diffusion, fit_diffusion_ml};
use engine::science::flow_fit::{compare_flow, FlowComparison, MAX_POINTS};
use engine::science::probe::Probe;
use engine::science::sphere::{affine_drift, radius_stats, AffineDrift, RadiusStats};
use engine::science::{cache, markov, walkers};
use engine::Error;
use plotters::prelude::*;
use serde::Serialize;

use super::*;

#[derive(Args)]
pub struct SphereArgs {
    #[command(flatten)]
    pub(super) run: ProbedRunArgs,
    /// Write E[cos theta] per training phase (measured and fitted) and entropy curves as SVG.
    #[arg(long)]
    pub(super) plot: Option<PathBuf>,
}

/// Sphere points entering one layer (l = L: the final LayerNorm) on the final model.
#[derive(Serialize)]
pub(super) struct LayerSphere {
    pub(super) layer: usize,
    pub(super) radius: RadiusStats,
    /// Largest `| |u| - sqrt(d var / (var + eps)) | / sqrt(d)`: what is left once LayerNorm's eps
    /// is accounted for (f32 rounding).
    pub(super) max_rel_err_after_eps: f64,
    /// Mean `1 - sqrt(var / (var + eps))`: how far eps pulls points inside the sphere.
    pub(super) mean_eps_shrink: f64,
    /// How the LayerNorm gain and bias move the points off the sphere.
    pub(super) affine: AffineDrift,
    /// Mean TV between softmax(u u^T / sqrt d) and the Gaussian kernel, with u put exactly on the
    /// sphere (largest over probe rows): the identity of docs/science.md#softmax-as-a-gaussian-kernel, ~0.
    pub(super) pure_kernel_tv: f64,
    /// The same with u as LayerNorm gives it: eps leaves key norms slightly unequal.
    pub(super) pure_kernel_tv_raw: f64,
}

#[derive(Serialize)]
pub(super) struct HeadStats {
    pub(super) layer: usize,
    pub(super) head: usize,
    /// Mean row entropy at the first probe and on the final model.
    pub(super) entropy_initial: f64,
    pub(super) entropy: f64,
    /// Mean and largest per-row TV between the learned head's P and the Gaussian kernel of its q, k.
    pub(super) kernel_tv_mean: f64,
    pub(super) kernel_tv_max: f64,
}

/// A Brownian fit of one trajectory (over training steps or over depth) and its KS comparison.
#[derive(Serialize)]
pub(super) struct Fit {
    pub(super) layer: Option<usize>,
    pub(super) phase: String,
    pub(super) times: Vec<f64>,
    pub(super) mean_cos: Vec<f64>,
    pub(super) fitted_cos: Vec<f64>,
    pub(super) diffusion: Option<f64>,
    /// D by maximum likelihood on the increments between frames, and its 95% interval.
    pub(super) diffusion_ml: Option<f64>,
    pub(super) diffusion_ci: Option<[f64; 2]>,
    pub(super) r_squared: Option<f64>,
    pub(super) ks_mean: Option<f64>,
    pub(super) ks_max: Option<f64>,
    /// Why a number is missing (e.g. the points did not move, so there is no D to simulate).
    pub(super) error: Option<String>,
    /// Brownian diffusion against the particles' attention flow, fitted to the same curves.
    pub(super) flow: Option<FlowComparison>,
}

pub(super) fn fit(frames: &[Vec<f64>], times: &[f64], dim: usize, layer: Option<usize>, phase: &str) -> Fit {
    let mut out = Fit {
        layer,
        phase: phase.into(),
        times: times.to_vec(),
        mean_cos: vec![],
        fitted_cos: vec![],
        diffusion: None,
        diffusion_ml: None,
        diffusion_ci: None,
        r_squared: None,
        ks_mean: None,
        ks_max: None,
        error: None,
        flow: None,
    };
    let f = match fit_diffusion(frames, times, dim) {
        Ok(f) => f,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    (out.mean_cos, out.fitted_cos, out.diffusion) = (f.mean_cos.clone(), f.fitted_cos.clone(), Some(f.diffusion));
    out.r_squared = f.r_squared.is_finite().then_some(f.r_squared);
    if let Ok(ml) = fit_diffusion_ml(frames, times, dim) {
        (out.diffusion_ml, out.diffusion_ci) = (Some(ml.diffusion), Some([ml.ci_low, ml.ci_high]));
    }
    match compare_flow(frames, times, dim, MAX_POINTS, 0) {
        Ok(flow) => out.flow = Some(flow),
        Err(e) => out.error = Some(e.to_string()),
    }
    match compare_with_brownian(frames, times, &f, Scheme::EulerMaruyama, 0) {
        Ok(cmp) => {
            let cmp = cmp.frames;
            out.ks_mean = Some(cmp.iter().map(|c| c.ks).sum::<f64>() / cmp.len() as f64);
            out.ks_max = Some(cmp.iter().map(|c| c.ks).fold(0.0, f64::max));
        }
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

#[derive(Serialize)]
pub(super) struct SphereReport {
    pub(super) engine_version: &'static str,
    pub(super) data: String,
    pub(super) steps: usize,
    pub(super) model: ModelConfig,
    pub(super) final_val_loss: f32,
    pub(super) layer_norm_eps: f64,
    pub(super) probe_rows: usize,
    pub(super) probe_frames: usize,
    pub(super) probe_every_stored: usize,
    pub(super) probe_bytes: usize,
    pub(super) radius: Vec<LayerSphere>,
    /// Mean entropy of uniform attention under the model's mask: the largest a row can have.
    pub(super) uniform_entropy: f64,
    pub(super) heads: Vec<HeadStats>,
    /// Per layer (0..=L), early / mid / late thirds of the stored probe history, time = step.
    pub(super) training_fits: Vec<Fit>,
    /// Tokens' paths through depth on the final model, time = layer.
    pub(super) depth_fit: Fit,
    pub(super) entropy_curve: Vec<CurvePoint>,
    /// Discrete walkers from the last token of probe row 0 through the head-averaged attention.
    pub(super) walkers: walkers::WalkReport,
}

pub(super) fn f64s(xs: &[f32]) -> Vec<f64> {
    xs.iter().map(|&x| x as f64).collect()
}

pub(super) fn row_norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

/// Mean TV of softmax(u u^T / sqrt d) from the Gaussian kernel, largest over the rows of `u` (B*T, d).
pub(super) fn pure_kernel_tv(u: &[f64], t: usize, d: usize, causal: bool) -> Result<f64, Error> {
    let mut worst = 0.0f64;
    for row in u.chunks_exact(t * d) {
        let p = markov::softmax_attention(row, row, t, d, causal);
        worst = worst.max(markov::kernel_distance(&p, row, row, t, d, causal)?.mean);
    }
    Ok(worst)
}

pub(super) fn layer_sphere(model: &Model<f32>, c: &Cache<f32>, layer: usize) -> Result<LayerSphere, Error> {
    let cfg = &model.cfg;
    let d = cfg.d_model;
    let u = cache::sphere_points(cfg, c, layer)?;
    let target = (d as f64).sqrt();
    let (mut after_eps, mut shrink) = (0.0f64, 0.0);
    for (x, ui) in c.resid[layer].chunks_exact(d).zip(u.chunks_exact(d)) {
        let x = f64s(x);
        let mean = x.iter().sum::<f64>() / d as f64;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        let factor = (var / (var + EPS)).sqrt();
        after_eps = after_eps.max((row_norm(ui) - target * factor).abs() / target);
        shrink += 1.0 - factor;
    }
    let exact: Vec<f64> = u.chunks_exact(d).flat_map(|x| x.iter().map(|v| v * target / row_norm(x))).collect();
    let (gain, bias) = cache::layer_norm_affine(model, layer)?;
    Ok(LayerSphere {
        layer,
        radius: radius_stats(&u, d)?,
        max_rel_err_after_eps: after_eps,
        mean_eps_shrink: shrink / (u.len() / d) as f64,
        affine: affine_drift(&u, &gain, &bias, d)?,
        pure_kernel_tv: pure_kernel_tv(&exact, c.t, d, cfg.causal)?,
        pure_kernel_tv_raw: pure_kernel_tv(&u, c.t, d, cfg.causal)?,
    })
}

pub(super) fn head_stats(model: &Model<f32>, probe: &Probe, layer: usize, head: usize) -> Result<HeadStats, Error> {
    let (cfg, c) = (&model.cfg, probe.cache());
    let (t, rows) = (c.t, probe.rows());
    let (mut h, mut h0, mut tv, mut tv_max) = (0.0, 0.0, 0.0, 0.0f64);
    let first = &probe.frames()[0];
    for b in 0..rows {
        let p = cache::attention(cfg, c, layer, b, head)?;
        let (q, k) = cache::queries_keys(cfg, c, layer, b, head)?;
        let kd = markov::kernel_distance(&p, &q, &k, t, cfg.head_size(), cfg.causal)?;
        tv += kd.mean;
        tv_max = tv_max.max(kd.max);
        h += markov::row_entropy(&p, t).iter().sum::<f64>();
        let start = (b * cfg.heads + head) * t * t;
        let p0 = f64s(&first.attention(cfg, layer)[start..start + t * t]);
        h0 += markov::row_entropy(&p0, t).iter().sum::<f64>();
    }
    let n = rows as f64;
    Ok(HeadStats {
        layer,
        head,
        entropy_initial: h0 / (n * t as f64),
        entropy: h / (n * t as f64),
        kernel_tv_mean: tv / n,
        kernel_tv_max: tv_max,
    })
}

/// The sphere experiment: train with probes, then measure the final model and the history.
pub(super) fn sphere_experiment(cfg: TrainConfig, p: &ProbeArgs) -> Result<SphereReport, Error> {
    // Three phases sharing their boundary frames need four probes.
    let run = train_probed(cfg, p, 4)?;
    let model = run.trainer.model();
    let mcfg = &model.cfg;
    let c = run.probe.cache();
    let radius = (0..=mcfg.layers).map(|l| layer_sphere(model, c, l)).collect::<Result<_, _>>()?;
    let mut heads = Vec::new();
    for l in 0..mcfg.layers {
        for h in 0..mcfg.heads {
            heads.push(head_stats(model, &run.probe, l, h)?);
        }
    }
    let n = run.probe.frames().len();
    let bounds: Vec<usize> = (0..4).map(|k| ((k * (n - 1)) as f64 / 3.0).round() as usize).collect();
    let mut training_fits = Vec::new();
    for l in 0..=mcfg.layers {
        for (i, phase) in ["early", "mid", "late"].into_iter().enumerate() {
            let (frames, times) = run.probe.trajectory(l, bounds[i]..bounds[i + 1] + 1)?;
            training_fits.push(fit(&frames, &times, mcfg.d_model, Some(l), phase));
        }
    }
    let depth = cache::depth_trajectory(mcfg, c);
    let times: Vec<f64> = (0..depth.len()).map(|l| l as f64).collect();
    let cfg = run.trainer.config();
    let (t, d) = (mcfg.context, mcfg.d_model);
    let mut chains = Vec::new();
    for l in 0..mcfg.layers {
        let mut mean = vec![0.0; t * t];
        for h in 0..mcfg.heads {
            let p = cache::attention(mcfg, c, l, 0, h)?;
            mean.iter_mut().zip(&p).for_each(|(m, x)| *m += x / mcfg.heads as f64);
        }
        chains.push(mean);
    }
    let row0: Vec<Vec<f64>> = depth.iter().map(|f| f[..t * d].to_vec()).collect();
    let walkers = walkers::walk(&chains, t, t - 1, 2000, Some((&row0, d)), cfg.seed)?;
    Ok(SphereReport {
        engine_version: engine::VERSION,
        data: cfg.data.name().into(),
        steps: cfg.steps,
        model: mcfg.clone(),
        final_val_loss: run.final_val_loss,
        layer_norm_eps: EPS,
        probe_rows: run.probe.rows(),
        probe_frames: n,
        probe_every_stored: run.probe.every(),
        probe_bytes: run.probe.bytes(),
        radius,
        uniform_entropy: uniform_entropy(mcfg),
        heads,
        training_fits,
        depth_fit: fit(&depth, &times, mcfg.d_model, None, "depth"),
        entropy_curve: run.curve,
        walkers,
    })
}

pub fn run_sphere(a: SphereArgs) -> Result<(), Error> {
    let rep = sphere_experiment(a.run.config()?, &a.run.probe)?;
    if let Some(path) = &a.plot {
        plot_sphere(path, &rep).map_err(|e| plot_error(path, e))?;
    }
    if a.run.json {
        say!("{}", serde_json::to_string(&rep)?);
        return Ok(());
    }
    print_sphere(&rep);
    Ok(())
}

pub(super) fn print_sphere(rep: &SphereReport) {
    say!(
        "{} after {} steps: val loss {:.4}; {} probe frames of {} rows ({} KiB)",
        rep.data,
        rep.steps,
        rep.final_val_loss,
        rep.probe_frames,
        rep.probe_rows,
        rep.probe_bytes >> 10
    );
    let w = &rep.walkers;
    say!(
        "{} walkers from token {} through the head-averaged attention: max |share - exact| per layer {:?}",
        w.walkers,
        w.start,
        w.max_abs_error.iter().map(|e| format!("{e:.3}")).collect::<Vec<_>>()
    );
    say!(
        "\n{:>5} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "layer",
        "max |u| err",
        "after eps",
        "gain offset",
        "gain angle",
        "pure TV",
        "pure TV raw"
    );
    for r in &rep.radius {
        say!(
            "{:>5} {:>10.2e} {:>12.2e} {:>12.4} {:>12.4} {:>12.2e} {:>12.2e}",
            r.layer,
            r.radius.max_rel_err,
            r.max_rel_err_after_eps,
            r.affine.mean_rel_offset,
            r.affine.mean_angle,
            r.pure_kernel_tv,
            r.pure_kernel_tv_raw
        );
    }
    say!("(eps = {:e}: |u| = sqrt(d var / (var + eps)) sits a hair inside sqrt(d))", rep.layer_norm_eps);
    say!(
        "\n{:>5} {:>4} {:>10} {:>10} {:>10} {:>10}   (uniform entropy {:.4})",
        "layer",
        "head",
        "H first",
        "H final",
        "kernel TV",
        "TV max",
        rep.uniform_entropy
    );
    for h in &rep.heads {
        say!(
            "{:>5} {:>4} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
            h.layer,
            h.head,
            h.entropy_initial,
            h.entropy,
            h.kernel_tv_mean,
            h.kernel_tv_max
        );
    }
    let head = ["layer", "phase", "D (line)", "D (steps)", "95% interval", "R^2", "KS mean", "KS max"];
    say!(
        "\n{:>5} {:>6} {:>10} {:>10} {:>21} {:>8} {:>8} {:>8}",
        head[0],
        head[1],
        head[2],
        head[3],
        head[4],
        head[5],
        head[6],
        head[7]
    );
    for f in rep.training_fits.iter().chain(std::iter::once(&rep.depth_fit)) {
        let layer = f.layer.map_or("all".into(), |l| l.to_string());
        let d = f.diffusion.map_or("-".into(), |v| format!("{v:.3e}"));
        let ml = f.diffusion_ml.map_or("-".into(), |v| format!("{v:.3e}"));
        let ci = f.diffusion_ci.map_or("-".into(), |[a, b]| format!("{a:.3e}-{b:.3e}"));
        say!(
            "{layer:>5} {:>6} {d:>10} {ml:>10} {ci:>21} {:>8} {:>8} {:>8} {}",
            f.phase,
            opt(f.r_squared),
            opt(f.ks_mean),
            opt(f.ks_max),
            f.error.as_deref().unwrap_or("")
        );
    }
    say!(
        "\nBrownian diffusion or the particles' attention flow (RMSE over E[cos] and the pairs' mean inner product; \
         * the flow's whole time used):"
    );
    let head = ["layer", "phase", "Brownian", "particles", "beta", "scale", "KS B", "KS p", "better"];
    say!(
        "{:>5} {:>6} {:>10} {:>10} {:>7} {:>9} {:>6} {:>6} {:>10}",
        head[0],
        head[1],
        head[2],
        head[3],
        head[4],
        head[5],
        head[6],
        head[7],
        head[8]
    );
    for f in rep.training_fits.iter().chain(std::iter::once(&rep.depth_fit)) {
        let Some(c) = &f.flow else { continue };
        say!(
            "{:>5} {:>6} {:>10.3e} {:>10.3e} {:>7.2} {:>9.3e}{} {:>6.3} {:>6.3} {:>10}",
            f.layer.map_or("all".into(), |l| l.to_string()),
            f.phase,
            c.brownian.rmse,
            c.particles.rmse,
            c.beta,
            c.time_scale,
            if c.time_at_limit { "*" } else { " " },
            c.brownian.ks_last,
            c.particles.ks_last,
            c.better
        );
    }
}

/// Left: E[cos theta] from each phase's first frame, measured (thick) and fitted (thin), per layer.
/// Right: mean attention entropy per layer over training.
pub(super) fn plot_sphere(path: &Path, rep: &SphereReport) -> PlotResult {
    let root = SVGBackend::new(path, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let max_step = rep.steps.max(1) as f64;
    let mut chart = ChartBuilder::on(&panels[0])
        .caption("E[cos theta] per training phase (thin: Brownian fit)", ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..max_step, -0.05..1.05)?;
    chart.configure_mesh().x_desc("step").y_desc("E[cos]").draw()?;
    for f in &rep.training_fits {
        let (Some(layer), Some(&t0)) = (f.layer, f.times.first()) else { continue };
        let color = Palette99::pick(layer).to_rgba();
        let at = |ys: &[f64]| -> Vec<(f64, f64)> {
            std::iter::once((t0, 1.0)).chain(f.times[1..].iter().zip(ys).map(|(&t, &y)| (t, y))).collect()
        };
        let series = chart.draw_series(LineSeries::new(at(&f.mean_cos), color.stroke_width(2)))?;
        if f.phase == "early" {
            series
                .label(format!("layer {layer}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        chart.draw_series(LineSeries::new(at(&f.fitted_cos), color.stroke_width(1)))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE.mix(0.8)).draw()?;
    let curves: Vec<(String, Vec<(f64, f64)>)> = (0..rep.model.layers)
        .map(|l| (format!("layer {l}"), rep.entropy_curve.iter().map(|p| (p.step as f64, p.entropy[l])).collect()))
        .collect();
    line_panel(&panels[1], "attention entropy", "step", "entropy", &curves, Some(rep.uniform_entropy))
}
