//! What the page's science panels draw, computed from the session's probe history: the probe row's
//! tokens on the sphere at every depth (the aligned 3-D PCA, every recorded frame in the live
//! frame's basis), the attention matrices of the last frame, attention entropy per layer and head
//! over training, and the "Brownian or not?" comparison with its ghost walkers.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::science::brownian::Scheme;
use crate::science::fit::{compare_with_brownian_at, fit_diffusion, fit_diffusion_ml, FINE_RATE_DT};
use crate::science::flow_fit::compare_flow_at;
use crate::science::probe::Probe;
use crate::science::sphere;
use crate::science::stats::ks_critical;
pub use crate::session::measures::{Brownian, EntropyPoint, Flow};
use crate::session::verdicts::{self, Verdicts};

/// Tokens the page fits the flow on (a fit takes about a second natively at 32).
pub const FLOW_POINTS: usize = 32;

/// The flow comparison of the first probe row's tokens at `depth`, projected on `basis`.
pub fn flow(probe: &Probe, depth: usize, basis: &[f64], seed: u64) -> Result<Flow> {
    let cfg = probe.config();
    let (dim, row) = (cfg.d_model, cfg.context);
    let (frames, times) = probe.trajectory(depth, 0..probe.frames().len())?;
    let frames: Vec<Vec<f64>> = frames.into_iter().map(|f| f[..row * dim].to_vec()).collect();
    let step = probe.frames().last().map_or(0, |f| f.step);
    flow_of(&frames, &times, dim, (depth, step), basis, (seed, FINE_RATE_DT))
}

/// Brownian motion against the particles' attention flow for any trajectory of `frames` (each
/// (N, dim)) at `times`: over training at one depth, or through the layers of a model read once.
/// `at` is the (depth, step) it describes; the particles are projected on `basis` (none if empty);
/// the Brownian walkers draw from `walk.0` in steps of `rate * dt <= walk.1`.
pub fn flow_of(
    frames: &[Vec<f64>],
    times: &[f64],
    dim: usize,
    at: (usize, usize),
    basis: &[f64],
    walk: (u64, f64),
) -> Result<Flow> {
    let c = compare_flow_at(frames, times, dim, FLOW_POINTS, walk.0, walk.1)?;
    let mut particles = Vec::new();
    if !basis.is_empty() {
        apply(basis, dim, &c.particles_end, &mut particles);
    }
    Ok(Flow {
        depth: at.0,
        step: at.1,
        points: c.points,
        times: c.times,
        mean_cos: c.mean_cos,
        mean_inner: c.mean_inner,
        inner_start: c.inner_start,
        brownian_cos: c.brownian.mean_cos,
        brownian_inner: c.brownian.mean_inner,
        particles_cos: c.particles.mean_cos,
        particles_inner: c.particles.mean_inner,
        diffusion: c.diffusion,
        beta: c.beta,
        time_scale: c.time_scale,
        time_at_limit: c.time_at_limit,
        rmse_brownian: c.brownian.rmse,
        rmse_particles: c.particles.rmse,
        ks_brownian: c.brownian.ks_last,
        ks_particles: c.particles.ks_last,
        ks_critical: c.ks_critical,
        better: c.better.to_string(),
        particles,
    })
}

/// Everything the panels draw at one moment. The bulk arrays (`sphere`, `attention`) travel to the
/// page as typed arrays, the rest as a JS object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Panels {
    pub step: usize,
    pub layers: usize,
    pub heads: usize,
    pub context: usize,
    pub d_model: usize,
    pub vocab: usize,
    /// The probe row's tokens and their text.
    pub tokens: Vec<u32>,
    pub symbols: Vec<String>,
    /// Recorded steps of the frames in `sphere`, oldest first.
    pub steps: Vec<usize>,
    /// Per depth 0..=L: share of the second moment the live 3-D view keeps.
    pub explained: Vec<f64>,
    /// Per depth 0..=L, per frame, per token: a unit 3-vector, flattened
    /// (`((depth * frames + frame) * tokens + token) * 3`).
    #[serde(skip)]
    pub sphere: Vec<f32>,
    /// Per layer and head, the (T, T) attention of the probe row at the last frame, flattened.
    #[serde(skip)]
    pub attention: Vec<f32>,
    pub entropy: Vec<EntropyPoint>,
    /// None with fewer than three frames; the error says why no comparison could be made.
    pub brownian: Option<std::result::Result<Brownian, String>>,
    /// Brownian motion or particles: fitted once the run has ended (`Session::flow`), else None.
    pub flow: Option<std::result::Result<Flow, String>>,
    /// The claims each panel tests, answered in words.
    pub verdicts: Verdicts,
}

impl Panels {
    /// Frames of sphere points per depth.
    pub fn frames(&self) -> usize {
        self.steps.len()
    }

    /// The probe row's points at `depth` in frame `frame`, as unit 3-vectors.
    pub fn points(&self, depth: usize, frame: usize) -> Vec<[f64; 3]> {
        let n = self.context;
        let start = (depth * self.frames() + frame) * n * 3;
        self.sphere
            .get(start..start + n * 3)
            .unwrap_or(&[])
            .chunks_exact(3)
            .map(|p| [p[0] as f64, p[1] as f64, p[2] as f64])
            .collect()
    }

    /// The (T, T) attention of `layer`, `head`.
    pub fn attention_of(&self, layer: usize, head: usize) -> &[f32] {
        let tt = self.context * self.context;
        let i = layer * self.heads + head;
        self.attention.get(i * tt..(i + 1) * tt).unwrap_or(&[])
    }
}

/// Projects raw (N, dim) points on `components` ((3, dim) row-major), onto the unit sphere.
fn apply(components: &[f64], dim: usize, points: &[f64], out: &mut Vec<f32>) {
    for p in points.chunks_exact(dim) {
        let mut y = [0.0; 3];
        for (yi, c) in y.iter_mut().zip(components.chunks_exact(dim)) {
            *yi = c.iter().zip(p).map(|(a, b)| a * b).sum();
        }
        let n = (y[0] * y[0] + y[1] * y[1] + y[2] * y[2]).sqrt();
        out.extend(y.iter().map(|v| if n > 0.0 { (v / n) as f32 } else { 0.0 }));
    }
}

/// The panels of `probe`'s history. `components` carries each depth's live basis from one call to
/// the next (so the view does not flip); `brownian_depth` is the depth the Brownian panel analyses.
pub fn panels(
    probe: &Probe,
    entropy: &[EntropyPoint],
    symbols: Vec<String>,
    components: &mut Vec<Option<Vec<f64>>>,
    brownian_depth: usize,
    seed: u64,
) -> Result<Panels> {
    let cfg = probe.config();
    let frames = probe.frames();
    let dim = cfg.d_model;
    let row = cfg.context; // the first probe row
    components.resize(cfg.layers + 1, None);
    let mut out = Panels {
        step: frames.last().map_or(0, |f| f.step),
        layers: cfg.layers,
        heads: cfg.heads,
        context: cfg.context,
        d_model: dim,
        vocab: cfg.vocab,
        tokens: probe.tokens()[..row].to_vec(),
        symbols,
        steps: frames.iter().map(|f| f.step).collect(),
        entropy: entropy.to_vec(),
        ..Panels::default()
    };
    let Some(last) = frames.last() else { return Ok(out) };
    let mut bases = Vec::with_capacity(cfg.layers + 1);
    for (depth, previous) in components.iter_mut().enumerate() {
        let live: Vec<f64> = last.sphere(cfg, depth)[..row * dim].iter().map(|&x| x as f64).collect();
        let p = sphere::project3(&live, dim, previous.as_deref())?;
        out.explained.push(p.explained.iter().sum());
        for f in frames {
            let raw: Vec<f64> = f.sphere(cfg, depth)[..row * dim].iter().map(|&x| x as f64).collect();
            apply(&p.components, dim, &raw, &mut out.sphere);
        }
        *previous = Some(p.components.clone());
        bases.push(p.components);
    }
    let tt = cfg.context * cfg.context;
    for l in 0..cfg.layers {
        // Row 0 of (rows, NH, T, T): the first NH matrices.
        out.attention.extend_from_slice(&last.attention(cfg, l)[..cfg.heads * tt]);
    }
    if frames.len() >= 3 {
        let depth = brownian_depth.min(cfg.layers);
        out.brownian = Some(brownian(probe, depth, &bases[depth], seed).map_err(|e| e.to_string()));
    }
    out.verdicts = Verdicts {
        sphere: verdicts::on_sphere(probe),
        markov: verdicts::markov_chain(probe),
        kernel: verdicts::kernel(probe),
        brownian: out.brownian.as_ref().and_then(|b| b.as_ref().ok()).map(verdicts::brownian),
        grouping: verdicts::grouping(probe, &out.symbols, brownian_depth),
        joma: verdicts::joma(entropy, cfg.activation != crate::config::Activation::Identity),
        flow: None,
    };
    Ok(out)
}

/// The Brownian comparison of the probe row's tokens at `depth` over every recorded frame.
fn brownian(probe: &Probe, depth: usize, basis: &[f64], seed: u64) -> Result<Brownian> {
    let cfg = probe.config();
    let (frames, times) = probe.trajectory(depth, 0..probe.frames().len())?;
    brownian_of(&frames, &times, cfg.d_model, depth, (basis, cfg.context), (seed, FINE_RATE_DT))
}

/// The Brownian comparison of any trajectory of `frames` (each (N, dim)) at `times`; the ghost
/// walkers of the first `ghosts.1` tokens are projected on `ghosts.0` (none if it is empty); the
/// walkers draw from `walk.0` in steps of `rate * dt <= walk.1` (`compare_with_brownian_at`).
pub fn brownian_of(
    frames: &[Vec<f64>],
    times: &[f64],
    dim: usize,
    depth: usize,
    ghosts: (&[f64], usize),
    walk: (u64, f64),
) -> Result<Brownian> {
    let fit = fit_diffusion(frames, times, dim)?;
    let ml = fit_diffusion_ml(frames, times, dim)?;
    let cmp = compare_with_brownian_at(frames, times, &fit, Scheme::EulerMaruyama, walk.0, walk.1)?;
    let process = crate::science::brownian::SphereBm { dim, radius: fit.radius, diffusion: fit.diffusion };
    let mut walkers = Vec::new();
    if !ghosts.0.is_empty() {
        apply(ghosts.0, dim, &cmp.walkers[..ghosts.1 * dim], &mut walkers);
    }
    let points = frames[0].len() / dim;
    Ok(Brownian {
        depth,
        points,
        diffusion: fit.diffusion,
        diffusion_ml: ml.diffusion,
        diffusion_ci: [ml.ci_low, ml.ci_high],
        ks_critical: ks_critical(points, points),
        r_squared: fit.r_squared,
        ks: cmp.frames.last().map_or(f64::NAN, |c| c.ks),
        msd_closed_form: fit.times.iter().map(|&t| process.chord_msd(t)).collect(),
        times: fit.times,
        mean_cos: fit.mean_cos,
        closed_form: fit.fitted_cos,
        walkers_cos: cmp.frames.iter().map(|c| c.mean_cos_walkers).collect(),
        msd: cmp.frames.iter().map(|c| c.msd_points).collect(),
        msd_walkers: cmp.frames.iter().map(|c| c.msd_walkers).collect(),
        ghosts: walkers,
    })
}
