//! `lab brownian`: Brownian motion on the sphere simulated against its closed forms.

use clap::Args;
use engine::science::brownian::{self, Scheme, SimConfig};
use engine::Error;
use serde_json::json;

#[derive(Args)]
pub struct BrownianArgs {
    /// Ambient dimension n (the sphere is S^(n-1)).
    #[arg(long, default_value_t = 16)]
    pub(super) dim: usize,
    #[arg(long, default_value_t = 4.0)]
    pub(super) radius: f64,
    /// Diffusion coefficient D.
    #[arg(long, default_value_t = 1.0)]
    pub(super) diffusion: f64,
    #[arg(long, default_value_t = 0.002)]
    pub(super) dt: f64,
    #[arg(long, default_value_t = 500)]
    pub(super) steps: usize,
    #[arg(long, default_value_t = 4000)]
    pub(super) walkers: usize,
    /// em (projected Euler-Maruyama) or geodesic (exponential map).
    #[arg(long, default_value = "em")]
    pub(super) scheme: String,
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// How many evenly spaced times to record.
    #[arg(long, default_value_t = 10)]
    pub(super) records: usize,
    #[arg(long)]
    pub(super) json: bool,
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
        say!("{}", json!({"engine_version": engine::VERSION, "brownian": rep}));
        return Ok(());
    }
    say!(
        "Brownian motion on S^{} of radius {}, D = {}, {:?}, {} walkers, dt = {}: rate (n-1)D/R^2 = {:.4}",
        a.dim - 1,
        a.radius,
        a.diffusion,
        scheme,
        a.walkers,
        a.dt,
        rep.rate
    );
    say!(
        "{:>7} {:>8} {:>17} {:>8} {:>6} {:>17} {:>8}",
        "step",
        "t",
        "E[cos] (sim)",
        "theory",
        "z",
        "MSD (sim)",
        "theory"
    );
    for s in &rep.samples {
        let o = &s.sim;
        say!(
            "{:>7} {:>8.4} {:>8.4} ± {:<6.4} {:>8.4} {:>6.2} {:>8.4} ± {:<6.4} {:>8.4}",
            o.step,
            o.t,
            o.mean_cos,
            o.mean_cos_se,
            s.theory_cos,
            s.z_cos,
            o.msd,
            o.msd_se,
            s.theory_msd
        );
    }
    Ok(())
}
