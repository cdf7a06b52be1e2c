//! `lab brownian` and `lab joma`: the science layer's reference processes on the command line.

use clap::Args;
use engine::science::brownian::{self, Scheme, SimConfig};
use engine::science::joma::{self, ToyConfig};
use engine::Error;
use serde_json::json;

#[derive(Args)]
pub struct BrownianArgs {
    /// Ambient dimension n (the sphere is S^(n-1)).
    #[arg(long, default_value_t = 16)]
    dim: usize,
    #[arg(long, default_value_t = 4.0)]
    radius: f64,
    /// Diffusion coefficient D.
    #[arg(long, default_value_t = 1.0)]
    diffusion: f64,
    #[arg(long, default_value_t = 0.002)]
    dt: f64,
    #[arg(long, default_value_t = 500)]
    steps: usize,
    #[arg(long, default_value_t = 4000)]
    walkers: usize,
    /// em (projected Euler-Maruyama) or geodesic (exponential map).
    #[arg(long, default_value = "em")]
    scheme: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many evenly spaced times to record.
    #[arg(long, default_value_t = 10)]
    records: usize,
    #[arg(long)]
    json: bool,
}

/// Simulated E[cos theta] and chord MSD against the closed forms, with standard errors.
pub fn run_brownian(a: BrownianArgs) -> Result<(), Error> {
    let scheme: Scheme = a.scheme.parse()?;
    let cfg = SimConfig {
        dim: a.dim,
        radius: a.radius,
        diffusion: a.diffusion,
        dt: a.dt,
        steps: a.steps,
        walkers: a.walkers,
        scheme,
        seed: a.seed,
        record: brownian::even_steps(a.steps, a.records),
    };
    let rep = brownian::simulate(&cfg)?;
    if a.json {
        println!("{}", json!({"engine_version": engine::VERSION, "brownian": rep}));
        return Ok(());
    }
    println!(
        "Brownian motion on S^{} of radius {}, D = {}, {:?}, {} walkers, dt = {}: rate (n-1)D/R^2 = {:.4}",
        a.dim - 1,
        a.radius,
        a.diffusion,
        scheme,
        a.walkers,
        a.dt,
        rep.rate
    );
    println!(
        "{:>7} {:>8} {:>17} {:>8} {:>6} {:>17} {:>8}",
        "step", "t", "E[cos] (sim)", "theory", "z", "MSD (sim)", "theory"
    );
    for s in &rep.samples {
        let o = &s.sim;
        println!(
            "{:>7} {:>8.4} {:>8.4} ± {:<6.4} {:>8.4} {:>6.2} {:>8.4} ± {:<6.4} {:>8.4}",
            o.step, o.t, o.mean_cos, o.mean_cos_se, s.theory_cos, s.z_cos, o.msd, o.msd_se, s.theory_msd
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct JomaArgs {
    /// JoMA's toy dynamics dv/dt = eta (mu - v) * softmax(v^2/T) (the only mode so far).
    #[arg(long)]
    toy: bool,
    /// Draw of mu.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Keep every this many steps of the entropy curve in the output.
    #[arg(long, default_value_t = 50)]
    every: usize,
    #[arg(long)]
    json: bool,
}

/// The toy's entropy curve: its summary (initial, minimum and when, final, rebound) and the curve.
pub fn run_joma(a: JomaArgs) -> Result<(), Error> {
    if !a.toy {
        return Err(Error::Config(
            "lab joma needs --toy: only JoMA's toy dynamics is available on the command line".into(),
        ));
    }
    let run = joma::toy(&ToyConfig { seed: a.seed, ..ToyConfig::default() })?;
    let every = a.every.max(1);
    let last = run.entropy.len() - 1;
    let curve: Vec<(usize, f64)> =
        run.entropy.iter().copied().enumerate().filter(|(s, _)| s % every == 0 || *s == last).collect();
    if a.json {
        let curve: Vec<_> = curve.iter().map(|(s, h)| json!({"step": s, "entropy": h})).collect();
        println!(
            "{}",
            json!({"engine_version": engine::VERSION, "config": run.config, "mu": run.mu,
                   "summary": run.summary, "curve": curve})
        );
        return Ok(());
    }
    let s = &run.summary;
    let mu: Vec<String> = run.mu.iter().map(|m| format!("{m:.3}")).collect();
    println!("JoMA toy dynamics, seed {}: mu = [{}]", a.seed, mu.join(", "));
    println!(
        "entropy {:.4} -> min {:.4} at step {} -> final {:.4} (rebound {:.4}, {:?})",
        s.initial, s.min, s.min_step, s.last, s.rebound, s.shape
    );
    let coarse = (500 / every).max(1);
    for (step, h) in curve.iter().step_by(coarse) {
        println!("{step:>6} {h:>8.4}");
    }
    Ok(())
}
