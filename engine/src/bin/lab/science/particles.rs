//! `lab particles`: tokens as interacting particles on the sphere (Geshkovski et al.), their
//! clustering over time.

use clap::Args;
use engine::science::particles::{self, Particles, Start};
use engine::Error;
use serde_json::json;

#[derive(Args)]
pub struct ParticlesArgs {
    /// Number of particles n.
    #[arg(long, default_value_t = 32)]
    pub(super) tokens: usize,
    /// Ambient dimension d (the sphere is S^(d-1)).
    #[arg(long, default_value_t = 8)]
    pub(super) dim: usize,
    /// Inverse temperature beta (sqrt(d) for the lab's attention on LayerNorm outputs).
    #[arg(long, default_value_t = 1.0)]
    pub(super) beta: f64,
    /// Time to integrate for.
    #[arg(long, default_value_t = 20.0)]
    pub(super) time: f64,
    /// Step of the integrator (RK4), or of the layer map with --layers.
    #[arg(long, default_value_t = 0.01)]
    pub(super) dt: f64,
    /// Start every pair at this inner product (needs --dim > --tokens) instead of at random.
    #[arg(long, allow_negative_numbers = true)]
    pub(super) equiangular: Option<f64>,
    /// Random start in the hemisphere x_0 > 0 instead of on the whole sphere.
    #[arg(long)]
    pub(super) hemisphere: bool,
    /// The discrete layer map x <- normalize(x + dt attention(x)) instead of the continuous flow.
    #[arg(long)]
    pub(super) layers: bool,
    /// Time between recorded points (default: a twentieth of --time).
    #[arg(long)]
    pub(super) record: Option<f64>,
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// One JSON object per recorded time.
    #[arg(long)]
    pub(super) json: bool,
}

/// Integrates the attention flow and prints how clustered the particles are over time.
pub fn run_particles(a: ParticlesArgs) -> Result<(), Error> {
    let start = match (a.equiangular, a.hemisphere) {
        (Some(_), true) => return Err(Error::Config("give --equiangular or --hemisphere, not both".into())),
        (Some(rho), false) => Start::Equiangular(rho),
        (None, true) => Start::Hemisphere,
        (None, false) => Start::Uniform,
    };
    let mut p = Particles::new(a.tokens, a.dim, start, a.seed)?;
    let record = a.record.unwrap_or(a.time / 20.0);
    let rec = particles::simulate(&mut p, a.beta, a.time, a.dt, record, a.layers)?;
    if a.json {
        for c in &rec {
            say!("{}", json!(c));
        }
        return Ok(());
    }
    let how = if a.layers { "layer map" } else { "flow (RK4)" };
    say!(
        "{} particles on S^{}, beta = {}, {how}, dt = {}, start {start:?}, seed {}",
        a.tokens,
        a.dim - 1,
        a.beta,
        a.dt,
        a.seed
    );
    say!("{:>8} {:>11} {:>11} {:>11} {:>12} {:>9}", "t", "mean <x,y>", "min", "max", "pairs >.999", "clusters");
    for c in &rec {
        say!(
            "{:>8.3} {:>11.6} {:>11.6} {:>11.6} {:>12.4} {:>9}",
            c.t,
            c.mean_inner,
            c.min_inner,
            c.max_inner,
            c.clustered,
            c.clusters
        );
    }
    Ok(())
}
