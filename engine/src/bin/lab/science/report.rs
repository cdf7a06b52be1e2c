//! `lab report`: every experiment at once, each paper claim answered with the measured value.

use std::path::{Path, PathBuf};

use clap::Args;
use engine::config::{DataSpec, ModelConfig, TrainConfig};
use engine::science::brownian::{self, Scheme, SimConfig};
use engine::science::ito;
use engine::science::joma::{self, CurveShape, ToyConfig};
use engine::{Activation, Error};
use plotters::prelude::*;
use serde_json::json;

use super::joma::{joma_experiment, plot_joma, JomaReport};
use super::sphere::{plot_sphere, sphere_experiment, Fit, SphereReport};
use super::*;

#[derive(Args)]
pub struct ReportArgs {
    /// Directory for the figures, report.json and summary.md (a race.json there is read).
    #[arg(long)]
    pub(super) out: PathBuf,
    /// Small models and few steps: the whole report in seconds.
    #[arg(long)]
    pub(super) quick: bool,
    /// Seeds (data and initialisation) of the JoMA runs on the hierarchy: the spread over them is
    /// reported beside seed 0's figures.
    #[arg(long, default_value_t = 3)]
    pub(super) seeds: u64,
}

/// One row of summary.md: a claim of the papers, what the lab measured, and whether they agree.
pub(super) struct Claim {
    pub(super) claim: &'static str,
    pub(super) measured: String,
    pub(super) verdict: &'static str,
}

pub(super) fn yes(ok: bool) -> &'static str {
    if ok {
        "agrees"
    } else {
        "disagrees"
    }
}

/// The standard set: sphere on grammar, JoMA (gelu and identity) on hierarchy, the Brownian
/// reference check, the JoMA toy and Ito; figures, report.json and summary.md in `out`.
pub fn run_report(a: ReportArgs) -> Result<(), Error> {
    std::fs::create_dir_all(&a.out)?;
    let base = |data: DataSpec, activation: Activation| {
        let mut cfg = TrainConfig { data, ..TrainConfig::default() };
        if a.quick {
            cfg.model = ModelConfig { d_model: 16, heads: 2, layers: 1, d_ff: 64, context: 16, ..cfg.model };
            (cfg.batch, cfg.steps) = (4, 40);
        } else {
            cfg.steps = 1000;
        }
        cfg.model.activation = activation;
        cfg
    };
    let probe = ProbeArgs { probe_every: if a.quick { 5 } else { 10 }, probe_rows: 4, probe_budget_mb: 64 };
    let sphere = sphere_experiment(base(DataSpec::Grammar, Activation::Gelu), &probe)?;
    let seeded = |activation: Activation, seed: u64| {
        let mut cfg = base(DataSpec::Hierarchy, activation);
        (cfg.seed, cfg.model.seed) = (seed, seed);
        joma_experiment(cfg, &probe)
    };
    let runs = |activation: Activation| {
        (0..a.seeds.max(1)).map(|seed| seeded(activation, seed)).collect::<Result<Vec<_>, _>>()
    };
    let (gelu_seeds, linear_seeds) = (runs(Activation::Gelu)?, runs(Activation::Identity)?);
    let (gelu, linear) = (&gelu_seeds[0], &linear_seeds[0]);
    let (walkers, ito_paths) = if a.quick { (500, 300) } else { (4000, 2000) };
    let bm = brownian::simulate(&SimConfig {
        dim: 16,
        radius: 4.0,
        diffusion: 1.0,
        dt: 0.002,
        steps: 500,
        walkers,
        scheme: Scheme::EulerMaruyama,
        seed: 0,
        record: brownian::even_steps(500, 10),
    })?;
    let toy = joma::toy(&ToyConfig::default())?;
    let ito = ito::run(&ito::ItoConfig { dim: 16, dt: 1e-3, steps: 1000, paths: ito_paths, seed: 0 })?;
    let race: Option<serde_json::Value> = match std::fs::read_to_string(a.out.join("race.json")) {
        Ok(text) => Some(serde_json::from_str(text.lines().last().unwrap_or(""))?),
        Err(_) => None,
    };
    // `OUT=DIR/joma_text.jsonl bench/joma_text.sh` writes one `lab joma --json` report per line.
    let joma_text: Option<Vec<serde_json::Value>> = match std::fs::read_to_string(a.out.join("joma_text.jsonl")) {
        Ok(text) => {
            Some(text.lines().filter(|l| !l.trim().is_empty()).map(serde_json::from_str).collect::<Result<_, _>>()?)
        }
        Err(_) => None,
    };
    let figure = |name: &str| a.out.join(name);
    plot_sphere(&figure("sphere.svg"), &sphere).map_err(|e| plot_error(&figure("sphere.svg"), e))?;
    plot_joma(&figure("joma.svg"), &[gelu, linear]).map_err(|e| plot_error(&figure("joma.svg"), e))?;
    plot_references(&figure("references.svg"), &bm, &toy).map_err(|e| plot_error(&figure("references.svg"), e))?;
    let mut claims = claims(&sphere, gelu, linear, &bm, &toy, &ito, race.as_ref());
    claims.push(seed_claim(&gelu_seeds, &linear_seeds));
    claims.push(joma_text_claim(joma_text.as_deref()));
    let mut md = format!(
        "# Spherewalk report{}\n\nEngine {}. Sphere: {} steps on {}; JoMA: {} steps on {} with GELU and identity MLPs. \
         Figures: sphere.svg, joma.svg, references.svg; every number: report.json.\n\n\
         | claim | measured | data |\n|---|---|---|\n",
        if a.quick { " (quick: tiny models, few steps)" } else { "" },
        engine::VERSION,
        sphere.steps,
        sphere.data,
        gelu.steps,
        gelu.data
    );
    for c in &claims {
        md.push_str(&format!("| {} | {} | {} |\n", c.claim, c.measured, c.verdict));
    }
    std::fs::write(a.out.join("summary.md"), &md)?;
    let all = json!({"engine_version": engine::VERSION, "quick": a.quick, "sphere": sphere, "joma_gelu": gelu,
                     "joma_identity": linear, "joma_gelu_seeds": gelu_seeds, "joma_identity_seeds": linear_seeds, "brownian": bm, "joma_toy": toy.summary, "ito": ito, "race": race, "joma_text": joma_text});
    std::fs::write(a.out.join("report.json"), serde_json::to_string(&all)?)?;
    say_part!("{md}");
    Ok(())
}

pub(super) fn shapes(r: &JomaReport) -> Vec<CurveShape> {
    r.layers.iter().map(|l| l.entropy.shape).collect()
}

pub(super) fn claims(
    sphere: &SphereReport,
    gelu: &JomaReport,
    linear: &JomaReport,
    bm: &brownian::SimReport,
    toy: &joma::ToyRun,
    ito: &ito::ItoReport,
    race: Option<&serde_json::Value>,
) -> Vec<Claim> {
    let fmax = |xs: &mut dyn Iterator<Item = f64>| xs.fold(0.0, f64::max);
    let radius = fmax(&mut sphere.radius.iter().map(|r| r.radius.max_rel_err));
    let after_eps = fmax(&mut sphere.radius.iter().map(|r| r.max_rel_err_after_eps));
    let pure = fmax(&mut sphere.radius.iter().map(|r| r.pure_kernel_tv));
    let learned = sphere.heads.iter().map(|h| h.kernel_tv_mean).sum::<f64>() / sphere.heads.len() as f64;
    let max_z = fmax(&mut bm.samples.iter().map(|s| s.z_cos.abs()));
    let fits: Vec<&Fit> = sphere.training_fits.iter().filter(|f| f.r_squared.is_some()).collect();
    let mean = |xs: Vec<f64>| if xs.is_empty() { f64::NAN } else { xs.iter().sum::<f64>() / xs.len() as f64 };
    let r2 = mean(fits.iter().filter_map(|f| f.r_squared).collect());
    let ks = mean(sphere.training_fits.iter().filter_map(|f| f.ks_mean).collect());
    let brownian_verdict = |r2: f64, ks: f64| match (r2 >= 0.9, ks <= 0.1) {
        (true, true) => "agrees",
        (true, false) => "partly: E[cos] decays like diffusion, the angle law does not (drift)",
        _ => "disagrees",
    };
    let d = &sphere.depth_fit;
    let describe = |r: &JomaReport| {
        r.layers
            .iter()
            .map(|l| {
                let s = &l.entropy;
                format!(
                    "layer {}: {:.3} -> min {:.3} at step {} -> {:.3} (rebound {:.3}, {:?})",
                    l.layer, s.initial, s.min, s.min_step, s.last, s.rebound, s.shape
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let all = |r: &JomaReport, want: CurveShape| shapes(r).iter().all(|&s| s == want);
    let some = |r: &JomaReport, want: CurveShape| shapes(r).contains(&want);
    let chunk = chunk_mass(gelu);
    let chance = gelu.within_chunk_chance.unwrap_or(f64::NAN);
    let ito_ok = (ito.second_order.mean - ito.theory).abs() < 4.0 * ito.second_order.se
        && ito.martingale.mean.abs() < 4.0 * ito.martingale.se;
    let mut out = vec![
        Claim {
            claim: "LayerNorm puts every token on the sphere of radius sqrt(d)",
            measured: format!(
                "max relative radius error {radius:.2e}; {after_eps:.2e} once eps = {:e} is accounted for",
                sphere.layer_norm_eps
            ),
            verdict: yes(after_eps < 1e-5),
        },
        Claim {
            claim: "Pure self-attention (Q = K = u) is the row-normalised Gaussian kernel, sigma^2 = sqrt(d)",
            measured: format!("largest mean TV distance {pure:.2e}"),
            verdict: yes(pure < 1e-6),
        },
        Claim {
            claim: "Learned projections break the kernel identity (unequal key norms)",
            measured: format!("mean TV distance over heads {learned:.4}"),
            verdict: yes(learned > 1e-3),
        },
        Claim {
            claim: "Brownian simulator matches E[cos theta] = exp(-(n-1) D t / R^2)",
            measured: format!("largest |z| over 10 times: {max_z:.2} (n = 16, R = 4, D = 1)"),
            verdict: yes(max_z < 4.0),
        },
        Claim {
            claim: "Tokens move like Brownian motion over training (time = step)",
            measured: format!(
                "mean R^2 {r2:.3}, mean KS against fitted walkers {ks:.3} ({} fits); the line's D inside the 95% \
                 interval of D from the steps between snapshots in {} of them",
                fits.len(),
                fits.iter()
                    .filter(|f| matches!((f.diffusion, f.diffusion_ci), (Some(d), Some([a, b])) if a <= d && d <= b))
                    .count()
            ),
            verdict: brownian_verdict(r2, ks),
        },
        Claim {
            claim: "Tokens move like Brownian motion through depth (time = layer)",
            measured: format!(
                "D {}, R^2 {}, mean KS {}{}",
                opt(d.diffusion),
                opt(d.r_squared),
                opt(d.ks_mean),
                d.error.as_ref().map_or(String::new(), |e| format!(" ({e})"))
            ),
            verdict: match (d.r_squared, d.ks_mean) {
                (Some(r2), Some(ks)) => brownian_verdict(r2, ks),
                (None, Some(ks)) => {
                    if ks <= 0.1 {
                        "agrees (two depths: R^2 undefined)"
                    } else {
                        "disagrees (two depths: R^2 undefined)"
                    }
                }
                _ => "not measurable",
            },
        },
        Claim {
            claim: "JoMA toy dynamics: entropy dips, then rebounds",
            measured: format!(
                "ln 10 -> min {:.3} at step {} -> {:.3} (rebound {:.3})",
                toy.summary.min, toy.summary.min_step, toy.summary.last, toy.summary.rebound
            ),
            verdict: yes(toy.summary.shape == CurveShape::DipAndRebound),
        },
        Claim {
            claim: "JoMA, nonlinear (GELU) MLP: attention entropy dips, then rebounds",
            measured: describe(gelu),
            verdict: if all(gelu, CurveShape::DipAndRebound) {
                "agrees"
            } else if some(gelu, CurveShape::DipAndRebound) {
                "partly (some layers)"
            } else {
                "disagrees"
            },
        },
        Claim {
            claim: "JoMA, linear (identity) MLP: attention entropy keeps falling",
            measured: describe(linear),
            verdict: if all(linear, CurveShape::Falling) {
                "agrees"
            } else if some(linear, CurveShape::Falling) {
                "partly (some layers)"
            } else {
                "disagrees"
            },
        },
        Claim {
            claim: "Attention concentrates inside the true latent chunk (hierarchy data)",
            measured: format!("final within-chunk mass {chunk:.3} (GELU, best layer) against {chance:.3} for uniform"),
            verdict: yes(chunk > chance),
        },
        Claim {
            claim: "Ito: the dt term of |B_t|^2 is its whole mean",
            measured: format!(
                "second-order part {:.4} ± {:.4} vs n t = {:.4}; martingale part {:.4} ± {:.4}",
                ito.second_order.mean, ito.second_order.se, ito.theory, ito.martingale.mean, ito.martingale.se
            ),
            verdict: yes(ito_ok),
        },
    ];
    out.push(flow_claim(sphere));
    out.push(race_claim(race));
    out.push(first_order_claim(race));
    out
}

/// JoMA on real English text (`bench/joma_text.sh`): per MLP, how many layer curves over all seeds
/// dip and rebound (the nonlinear prediction) or keep falling (the linear one).
pub(super) fn joma_text_claim(runs: Option<&[serde_json::Value]>) -> Claim {
    let claim = "JoMA on real text (fortunes): nonlinear MLPs dip and rebound, the identity MLP keeps falling";
    let Some(runs) = runs.filter(|r| !r.is_empty()) else {
        return Claim {
            claim,
            measured: "not run: OUT=DIR/joma_text.jsonl bench/joma_text.sh".into(),
            verdict: "not run",
        };
    };
    let count = |mlp: &str, shape: &str| -> (usize, usize) {
        let layers: Vec<&serde_json::Value> = runs
            .iter()
            .filter(|r| r["mlp"] == mlp)
            .flat_map(|r| r["layers"].as_array().into_iter().flatten())
            .collect();
        (layers.iter().filter(|l| l["entropy"]["shape"] == shape).count(), layers.len())
    };
    let (steps, seeds) = (&runs[0]["steps"], runs.iter().filter(|r| r["mlp"] == runs[0]["mlp"]).count());
    let mut parts = vec![format!("{steps} steps, {seeds} seed(s) per MLP")];
    let (mut nonlinear, mut nonlinear_total) = (0, 0);
    for mlp in ["gelu", "relu"] {
        let (k, n) = count(mlp, "dip_and_rebound");
        (nonlinear, nonlinear_total) = (nonlinear + k, nonlinear_total + n);
        parts.push(format!("{mlp}: {k} of {n} layer curves dip and rebound"));
    }
    let (falling, linear_total) = count("identity", "falling");
    parts.push(format!("identity: {falling} of {linear_total} keep falling"));
    let verdict = match (2 * nonlinear > nonlinear_total, 2 * falling > linear_total) {
        _ if nonlinear_total == 0 || linear_total == 0 => "inconclusive",
        (true, true) => "agrees",
        _ if nonlinear > 0 && falling > 0 => "partly",
        _ => "disagrees",
    };
    Claim { claim, measured: parts.join("; "), verdict }
}

/// Muon and SOAP (docs/science.md#the-race) against CG-FAC in the same race: steps and seconds to target.
pub(super) fn first_order_claim(race: Option<&serde_json::Value>) -> Claim {
    let claim = "Muon and SOAP reach the target in fewer steps and seconds than CG-FAC";
    let Some(race) = race else {
        return Claim { claim, measured: "not run: lab race ... --json > DIR/race.json".into(), verdict: "not run" };
    };
    let get = |name: &str, key: &str| -> Option<f64> {
        race["optimizers"].as_array()?.iter().find(|o| o["name"] == name)?["summary"][key][0].as_f64()
    };
    let Some((cg_steps, cg_secs)) = get("cgfac", "steps_to_target").zip(get("cgfac", "seconds_to_target")) else {
        return Claim {
            claim,
            measured: "CG-FAC did not reach the target (or did not run)".into(),
            verdict: "inconclusive",
        };
    };
    let mut wins = (0, 0);
    let measured = ["muon", "soap"]
        .iter()
        .map(|&n| match get(n, "steps_to_target").zip(get(n, "seconds_to_target")) {
            Some((st, se)) => {
                wins.0 += 1;
                wins.1 += usize::from(st < cg_steps && se < cg_secs);
                format!("{n}: {st:.0} steps, {se:.2} s")
            }
            None => format!("{n}: did not reach the target (or did not run)"),
        })
        .chain(std::iter::once(format!("cgfac: {cg_steps:.0} steps, {cg_secs:.2} s")))
        .collect::<Vec<_>>()
        .join("; ");
    let verdict = match wins {
        (0, _) => "inconclusive",
        (n, w) if w == n => "agrees",
        (_, 0) => "disagrees",
        _ => "partly",
    };
    Claim { claim, measured, verdict }
}

/// Geshkovski et al.'s particles against Brownian motion, over training and through depth.
pub(super) fn flow_claim(sphere: &SphereReport) -> Claim {
    let claim = "Tokens move like interacting particles (the attention flow) rather than Brownian motion";
    let all: Vec<&Fit> = sphere.training_fits.iter().chain(std::iter::once(&sphere.depth_fit)).collect();
    let flows: Vec<_> = all.iter().filter_map(|f| f.flow.as_ref().map(|c| (f, c))).collect();
    if flows.is_empty() {
        return Claim { claim, measured: "no trajectory could be fitted".into(), verdict: "not measurable" };
    }
    let wins = flows.iter().filter(|(_, c)| c.better == "particles").count();
    let depth = sphere.depth_fit.flow.as_ref().map_or("not fitted".to_string(), |c| {
        format!(
            "{} (RMSE {:.3} Brownian, {:.3} particles at beta {:.1})",
            c.better, c.brownian.rmse, c.particles.rmse, c.beta
        )
    });
    let measured = format!(
        "the flow fits better in {wins} of {} trajectories (layer x phase over training, and depth); through depth: \
         {depth}",
        flows.len()
    );
    let verdict = match wins {
        0 => "disagrees",
        w if 2 * w > flows.len() => "agrees",
        _ => "partly",
    };
    Claim { claim, measured, verdict }
}

/// Within-chunk mass of the best layer at the end of a hierarchy run.
fn chunk_mass(r: &JomaReport) -> f64 {
    r.layers.iter().filter_map(|l| l.within_chunk.as_ref().map(|w| w.last)).fold(0.0, f64::max)
}

/// Whether the JoMA results on the hierarchy hold across seeds: how many seeds show each shape in
/// every layer, and the spread of the within-chunk mass.
pub(super) fn seed_claim(gelu: &[JomaReport], linear: &[JomaReport]) -> Claim {
    let count =
        |runs: &[JomaReport], want: CurveShape| runs.iter().filter(|r| shapes(r).iter().all(|&s| s == want)).count();
    let (dips, falls, n) = (count(gelu, CurveShape::DipAndRebound), count(linear, CurveShape::Falling), gelu.len());
    let mass: Vec<f64> = gelu.iter().map(chunk_mass).collect();
    let mean = mass.iter().sum::<f64>() / n as f64;
    let sd = (mass.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (n.max(2) - 1) as f64).sqrt();
    let chance = gelu[0].within_chunk_chance.unwrap_or(f64::NAN);
    let above = mass.iter().filter(|&&m| m > chance).count();
    let held = [dips, falls, above];
    Claim {
        claim: "The hierarchy results hold across seeds (data and initialisation)",
        measured: format!(
            "{n} seeds: GELU dips and rebounds in every layer in {dips}, identity keeps falling in {falls}; \
             within-chunk mass {mean:.3} ± {sd:.3} (sd), above chance {chance:.3} in {above}"
        ),
        verdict: if held.iter().all(|&k| k == n) {
            "agrees"
        } else if held.iter().any(|&k| k > 0) {
            "partly (some seeds)"
        } else {
            "disagrees"
        },
    }
}

/// K-FAC-type methods reach the target in 50-75% of the first-order steps (Eschenhagen et al.).
pub(super) fn race_claim(race: Option<&serde_json::Value>) -> Claim {
    let claim = "Second-order methods reach the target loss in 50-75% of Adam's steps";
    let Some(race) = race else {
        return Claim {
            claim,
            measured: "not run: lab race --target-loss L --json > DIR/race.json".into(),
            verdict: "not run",
        };
    };
    let steps = |name: &str| -> Option<f64> {
        race["optimizers"].as_array()?.iter().find(|o| o["name"] == name)?["summary"]["steps_to_target"][0].as_f64()
    };
    let Some(adam) = steps("adam") else {
        return Claim {
            claim,
            measured: "Adam did not reach the target (or did not run)".into(),
            verdict: "inconclusive",
        };
    };
    let ratios: Vec<(String, Option<f64>)> =
        ["kfac", "cgfac"].iter().map(|n| (n.to_string(), steps(n).map(|s| s / adam))).collect();
    let measured = ratios
        .iter()
        .map(|(n, r)| {
            format!(
                "{n}: {}",
                r.map_or("did not reach the target".into(), |r| format!("{:.0}% of Adam's steps", 100.0 * r))
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let verdict = if ratios.iter().any(|(_, r)| r.is_some_and(|r| r <= 0.75)) { "agrees" } else { "disagrees" };
    Claim { claim, measured, verdict }
}

/// Left: the Brownian reference, simulated E[cos theta] against the closed form; right: the JoMA toy.
pub(super) fn plot_references(path: &Path, bm: &brownian::SimReport, toy: &joma::ToyRun) -> PlotResult {
    let root = SVGBackend::new(path, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let sim: Vec<(f64, f64)> = bm.samples.iter().map(|s| (s.sim.t, s.sim.mean_cos)).collect();
    let theory: Vec<(f64, f64)> = bm.samples.iter().map(|s| (s.sim.t, s.theory_cos)).collect();
    let bm_curves = [("simulated".to_string(), sim), ("exp(-(n-1) D t / R^2)".to_string(), theory)];
    line_panel(&panels[0], "Brownian motion on S^15(4), D = 1", "t", "E[cos theta]", &bm_curves, Some(1.0))?;
    let h: Vec<(f64, f64)> = toy.entropy.iter().enumerate().map(|(i, &h)| (i as f64, h)).collect();
    line_panel(&panels[1], "JoMA toy dynamics", "step", "entropy", &[("entropy".to_string(), h)], None)?;
    root.present()?;
    Ok(())
}
