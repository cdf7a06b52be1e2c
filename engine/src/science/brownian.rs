//! Brownian motion on the sphere S^{n-1}(R) with diffusion coefficient D (docs/science.md#brownian-motion-on-the-sphere): the closed
//! forms, and two simulators whose walkers the lab compares with the closed forms and with tokens.
//!
//! The ambient space is R^n (`dim` = n), so the sphere has n - 1 dimensions. With
//! `rate = (n-1) D / R^2`:
//! - `E[cos theta_t] = exp(-rate t)`, theta_t the angle between X_0 and X_t;
//! - chord MSD `E|X_t - X_0|^2 = 2 R^2 (1 - exp(-rate t))`;
//! - harmonic l: `E[P_l(cos theta_t)] = exp(-l (l+n-2) D t / R^2)`, P_l the Gegenbauer polynomial
//!   normalised to P_l(1) = 1 (l = 1 is the cosine).

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::nn::reduce::dot;
use crate::rng::{rng, Rng, Stream};
use crate::science::stats::Moments;

/// Largest `walkers * dim` the simulators hold (per position array: 32 MiB of f64), so a typo in
/// the walker count is an error instead of an out-of-memory crash in a browser tab.
pub const MAX_STATE_FLOATS: usize = 1 << 22;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Scheme {
    /// Projected Euler-Maruyama: step in the tangent plane, then rescale back to radius R.
    #[serde(rename = "em")]
    EulerMaruyama,
    /// Geodesic random walk: follow the great circle along a Gaussian tangent step (exponential map).
    #[serde(rename = "geodesic")]
    Geodesic,
}

impl std::str::FromStr for Scheme {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "em" | "euler-maruyama" => Ok(Scheme::EulerMaruyama),
            "geodesic" | "exp" => Ok(Scheme::Geodesic),
            _ => Err(Error::Config(format!("unknown scheme {s:?}; use em or geodesic"))),
        }
    }
}

/// The process: sphere S^{dim-1} of `radius` in R^dim, diffusion coefficient `diffusion`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SphereBm {
    pub dim: usize,
    pub radius: f64,
    pub diffusion: f64,
}

impl SphereBm {
    pub fn validate(&self) -> Result<()> {
        if self.dim < 2 {
            return Err(Error::Config(format!(
                "dimension must be at least 2 (the sphere S^(n-1) lives in R^n), got {}",
                self.dim
            )));
        }
        positive("radius", self.radius)?;
        positive("diffusion", self.diffusion)
    }

    /// Decay rate of E[cos theta]: `(n-1) D / R^2`.
    pub fn rate(&self) -> f64 {
        (self.dim as f64 - 1.0) * self.diffusion / (self.radius * self.radius)
    }

    pub fn mean_cos(&self, t: f64) -> f64 {
        (-self.rate() * t).exp()
    }

    pub fn chord_msd(&self, t: f64) -> f64 {
        2.0 * self.radius * self.radius * (1.0 - self.mean_cos(t))
    }

    /// `E[P_l(cos theta_t)] = exp(-l (l + n - 2) D t / R^2)`: harmonic l is an eigenfunction of the
    /// Laplace-Beltrami operator with eigenvalue -l (l + n - 2) / R^2.
    pub fn harmonic_decay(&self, l: usize, t: f64) -> f64 {
        let l = l as f64;
        (-l * (l + self.dim as f64 - 2.0) * self.diffusion * t / (self.radius * self.radius)).exp()
    }
}

fn positive(name: &str, x: f64) -> Result<()> {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(Error::Config(format!("{name} must be a positive number, got {x}")))
    }
}

/// Gegenbauer polynomial of degree `l` for R^n normalised to `P_l(1) = 1` (Legendre for n = 3,
/// Chebyshev for n = 2), by the three-term recurrence
/// `(l + n - 2) P_{l+1} = (2l + n - 2) x P_l - l P_{l-1}`.
pub fn harmonic(l: usize, n: usize, x: f64) -> f64 {
    let n = n as f64;
    let (mut prev, mut cur) = (1.0, x);
    if l == 0 {
        return prev;
    }
    for k in 1..l {
        let k = k as f64;
        let next = ((2.0 * k + n - 2.0) * x * cur - k * prev) / (k + n - 2.0);
        (prev, cur) = (cur, next);
    }
    cur
}

/// Ensemble averages at one time, each with its standard error over walkers.
#[derive(Clone, Debug, Serialize)]
pub struct Observation {
    pub step: usize,
    pub t: f64,
    pub mean_cos: f64,
    pub mean_cos_se: f64,
    pub msd: f64,
    pub msd_se: f64,
    /// Mean of the normalised degree-2 harmonic, a check on the whole angle law beyond its mean.
    pub mean_p2: f64,
    pub mean_p2_se: f64,
}

/// W walkers on the sphere, stored as a (W, dim) row-major array next to their start points.
pub struct Walkers {
    pub process: SphereBm,
    pub dt: f64,
    pub scheme: Scheme,
    start: Vec<f64>,
    pos: Vec<f64>,
    steps: usize,
    rng: Rng,
    xi: Vec<f64>,
}

impl Walkers {
    /// `walkers` start points drawn uniformly on the sphere (a normalised Gaussian vector).
    pub fn uniform(process: SphereBm, walkers: usize, dt: f64, scheme: Scheme, seed: u64) -> Result<Self> {
        check_size(walkers, process.dim)?;
        // Start points come from their own stream, so they do not depend on the scheme or dt.
        let mut r = rng(seed, Stream::Brownian, 1);
        let points: Vec<f64> = (0..walkers * process.dim).map(|_| StandardNormal.sample(&mut r)).collect();
        Self::from_points(process, &points, dt, scheme, seed)
    }

    /// Walkers starting at `points` (W, dim), each rescaled onto the sphere of the process's radius.
    pub fn from_points(process: SphereBm, points: &[f64], dt: f64, scheme: Scheme, seed: u64) -> Result<Self> {
        process.validate()?;
        positive("dt", dt)?;
        let n = process.dim;
        if points.is_empty() || !points.len().is_multiple_of(n) {
            return Err(Error::Config(format!(
                "start points: {} numbers do not make whole points of dimension {n}",
                points.len()
            )));
        }
        check_size(points.len() / n, n)?;
        let mut start = points.to_vec();
        for (i, x) in start.chunks_exact_mut(n).enumerate() {
            let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            if !(norm.is_finite() && norm > 0.0) {
                return Err(Error::Data(format!(
                    "start point {i} has norm {norm}: it has no direction to put on the sphere"
                )));
            }
            x.iter_mut().for_each(|v| *v *= process.radius / norm);
        }
        Ok(Walkers {
            process,
            dt,
            scheme,
            pos: start.clone(),
            start,
            steps: 0,
            rng: rng(seed, Stream::Brownian, 2),
            xi: vec![0.0; n],
        })
    }

    pub fn len(&self) -> usize {
        self.pos.len() / self.process.dim
    }

    pub fn is_empty(&self) -> bool {
        self.pos.is_empty()
    }

    /// Current positions, (W, dim).
    pub fn positions(&self) -> &[f64] {
        &self.pos
    }

    pub fn start(&self) -> &[f64] {
        &self.start
    }

    pub fn steps(&self) -> usize {
        self.steps
    }

    pub fn time(&self) -> f64 {
        self.steps as f64 * self.dt
    }

    /// One time step of length dt for every walker.
    pub fn step(&mut self) {
        let (n, r) = (self.process.dim, self.process.radius);
        let scale = (2.0 * self.process.diffusion * self.dt).sqrt();
        for x in self.pos.chunks_exact_mut(n) {
            // Gaussian step of variance 2 D dt per axis, projected onto the tangent plane at x.
            self.xi.iter_mut().for_each(|v| *v = StandardNormal.sample(&mut self.rng));
            let along = dot(x, &self.xi) / (r * r);
            for (v, &xj) in self.xi.iter_mut().zip(x.iter()) {
                *v = scale * (*v - along * xj);
            }
            match self.scheme {
                Scheme::EulerMaruyama => {
                    x.iter_mut().zip(&self.xi).for_each(|(xj, v)| *xj += v);
                }
                Scheme::Geodesic => {
                    // Exp_x(v) = cos(|v|/R) x + R sin(|v|/R) v/|v|.
                    let len = dot(&self.xi, &self.xi).sqrt();
                    if len > 0.0 {
                        let (s, c) = (len / r).sin_cos();
                        for (xj, v) in x.iter_mut().zip(&self.xi) {
                            *xj = c * *xj + r * s * v / len;
                        }
                    }
                }
            }
            // Euler-Maruyama needs this projection; for the geodesic walk it only removes rounding.
            let norm = dot(x, x).sqrt();
            x.iter_mut().for_each(|xj| *xj *= r / norm);
        }
        self.steps += 1;
    }

    pub fn advance(&mut self, steps: usize) {
        (0..steps).for_each(|_| self.step());
    }

    /// Angle (radians) between each walker's start and current position.
    pub fn angles(&self) -> Vec<f64> {
        self.cosines().map(|c| c.clamp(-1.0, 1.0).acos()).collect()
    }

    fn cosines(&self) -> impl Iterator<Item = f64> + '_ {
        let (n, r2) = (self.process.dim, self.process.radius.powi(2));
        self.start.chunks_exact(n).zip(self.pos.chunks_exact(n)).map(move |(a, b)| dot(a, b) / r2)
    }

    /// E[cos theta], chord MSD and E[P_2(cos theta)] over walkers, with standard errors.
    pub fn observe(&self) -> Observation {
        let (n, r2) = (self.process.dim, self.process.radius.powi(2));
        let (mut cos, mut p2) = (Moments::default(), Moments::default());
        self.cosines().for_each(|c| {
            cos.push(c);
            p2.push(harmonic(2, n, c));
        });
        // |X_t - X_0|^2 = 2 R^2 (1 - cos theta) on the sphere, so its moments follow from cos's.
        Observation {
            step: self.steps,
            t: self.time(),
            mean_cos: cos.mean(),
            mean_cos_se: cos.se(),
            msd: 2.0 * r2 * (1.0 - cos.mean()),
            msd_se: 2.0 * r2 * cos.se(),
            mean_p2: p2.mean(),
            mean_p2_se: p2.se(),
        }
    }
}

fn check_size(walkers: usize, dim: usize) -> Result<()> {
    if walkers == 0 {
        return Err(Error::Config("walkers must be at least 1, got 0".into()));
    }
    match walkers.checked_mul(dim) {
        Some(f) if f <= MAX_STATE_FLOATS => Ok(()),
        _ => Err(Error::Config(format!(
            "{walkers} walkers x dimension {dim} exceeds the memory budget of {MAX_STATE_FLOATS} \
             numbers; use fewer walkers or a smaller dimension"
        ))),
    }
}

/// One simulation: the process, the integrator and which steps to record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimConfig {
    pub dim: usize,
    pub radius: f64,
    pub diffusion: f64,
    pub dt: f64,
    pub steps: usize,
    pub walkers: usize,
    pub scheme: Scheme,
    pub seed: u64,
    /// Steps (1..=steps) at which to record; empty means `count` evenly spaced ones.
    pub record: Vec<usize>,
}

impl SimConfig {
    pub fn process(&self) -> SphereBm {
        SphereBm { dim: self.dim, radius: self.radius, diffusion: self.diffusion }
    }
}

/// `count` recording steps spread evenly over 1..=steps (the last is always `steps`).
pub fn even_steps(steps: usize, count: usize) -> Vec<usize> {
    let count = count.clamp(1, steps.max(1));
    let mut v: Vec<usize> = (1..=count).map(|i| (i * steps).div_ceil(count)).collect();
    v.dedup();
    v
}

/// A recorded time: simulation against closed form.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    #[serde(flatten)]
    pub sim: Observation,
    pub theory_cos: f64,
    pub theory_msd: f64,
    pub theory_p2: f64,
    /// (simulated - theory) / standard error for E[cos theta].
    pub z_cos: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    pub config: SimConfig,
    pub rate: f64,
    pub samples: Vec<Sample>,
}

pub fn simulate(cfg: &SimConfig) -> Result<SimReport> {
    let process = cfg.process();
    process.validate()?;
    positive("dt", cfg.dt)?;
    if cfg.steps == 0 {
        return Err(Error::Config("steps must be at least 1, got 0".into()));
    }
    let record = if cfg.record.is_empty() {
        even_steps(cfg.steps, 10)
    } else {
        let mut r = cfg.record.clone();
        r.sort_unstable();
        r.dedup();
        r
    };
    if let Some(&bad) = record.iter().find(|&&s| s == 0 || s > cfg.steps) {
        return Err(Error::Config(format!("recording step {bad} is outside 1..={}", cfg.steps)));
    }
    let mut w = Walkers::uniform(process, cfg.walkers, cfg.dt, cfg.scheme, cfg.seed)?;
    let mut samples = Vec::with_capacity(record.len());
    for &s in &record {
        w.advance(s - w.steps());
        let sim = w.observe();
        let t = sim.t;
        samples.push(Sample {
            theory_cos: process.mean_cos(t),
            theory_msd: process.chord_msd(t),
            theory_p2: process.harmonic_decay(2, t),
            z_cos: (sim.mean_cos - process.mean_cos(t)) / sim.mean_cos_se,
            sim,
        });
    }
    Ok(SimReport { config: SimConfig { record, ..cfg.clone() }, rate: process.rate(), samples })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dim: usize, radius: f64, diffusion: f64, dt: f64, steps: usize) -> SimConfig {
        SimConfig {
            dim,
            radius,
            diffusion,
            dt,
            steps,
            walkers: 4000,
            scheme: Scheme::EulerMaruyama,
            seed: 7,
            record: vec![],
        }
    }

    /// Every recorded E[cos], MSD and E[P_2] lies within 4 standard errors of the closed form.
    fn assert_matches_theory(rep: &SimReport) {
        for s in &rep.samples {
            let o = &s.sim;
            let what = format!("{:?} n={} t={:.3}", rep.config.scheme, rep.config.dim, o.t);
            assert!(
                (o.mean_cos - s.theory_cos).abs() < 4.0 * o.mean_cos_se,
                "{what}: E[cos] {} vs {} (se {})",
                o.mean_cos,
                s.theory_cos,
                o.mean_cos_se
            );
            assert!(
                (o.msd - s.theory_msd).abs() < 4.0 * o.msd_se,
                "{what}: MSD {} vs {} (se {})",
                o.msd,
                s.theory_msd,
                o.msd_se
            );
            assert!(
                (o.mean_p2 - s.theory_p2).abs() < 4.0 * o.mean_p2_se,
                "{what}: E[P2] {} vs {} (se {})",
                o.mean_p2,
                s.theory_p2,
                o.mean_p2_se
            );
        }
    }

    #[test]
    fn reference_check_of_science_md() {
        // docs/science.md#brownian-motion-on-the-sphere, its reference check: n=16, R=4, D=1, dt=0.002, 4000 walkers; theory 0.8290 / 0.6258 / 0.3916.
        let mut cfg = config(16, 4.0, 1.0, 0.002, 500);
        cfg.record = vec![100, 250, 500];
        for scheme in [Scheme::EulerMaruyama, Scheme::Geodesic] {
            cfg.scheme = scheme;
            let rep = simulate(&cfg).unwrap();
            let theory: Vec<f64> = rep.samples.iter().map(|s| s.theory_cos).collect();
            for (th, want) in theory.iter().zip([0.8290, 0.6258, 0.3916]) {
                assert!((th - want).abs() < 5e-5, "closed form {th} vs {want}");
            }
            for s in &rep.samples {
                assert!(s.sim.mean_cos_se > 5e-4 && s.sim.mean_cos_se < 5e-3);
            }
            assert_matches_theory(&rep);
        }
    }

    #[test]
    fn both_schemes_match_closed_forms_at_several_sizes() {
        // (n, R, D, dt, steps): low and high dimension, token-like R = sqrt(n), slow and fast D.
        let cases = [
            (3, 1.0, 0.5, 0.001, 1500),
            (8, 2.0, 0.25, 0.002, 800),
            (64, 8.0, 1.0, 0.002, 600),
            (32, 32f64.sqrt(), 0.3, 0.005, 500),
        ];
        for (n, r, d, dt, steps) in cases {
            for scheme in [Scheme::EulerMaruyama, Scheme::Geodesic] {
                let mut cfg = config(n, r, d, dt, steps);
                cfg.scheme = scheme;
                cfg.record = even_steps(steps, 4);
                assert_matches_theory(&simulate(&cfg).unwrap());
            }
        }
    }

    #[test]
    fn closed_forms_have_the_right_limits() {
        let p = SphereBm { dim: 16, radius: 4.0, diffusion: 1.0 };
        assert_eq!(p.mean_cos(0.0), 1.0);
        // Short times: MSD ~ 2 (n-1) D t; long times: 2 R^2.
        let t = 1e-6;
        assert!((p.chord_msd(t) / (2.0 * 15.0 * t) - 1.0).abs() < 1e-5);
        assert!((p.chord_msd(1e3) - 32.0).abs() < 1e-9);
        // Harmonic 1 is the cosine itself.
        assert!((p.harmonic_decay(1, 0.7) - p.mean_cos(0.7)).abs() < 1e-15);
    }

    #[test]
    fn harmonics_are_the_known_polynomials() {
        for x in [-0.9, -0.3, 0.0, 0.4, 1.0] {
            // Legendre (n = 3), Chebyshev (n = 2), and P_2 = (n x^2 - 1)/(n - 1) in general.
            assert!((harmonic(2, 3, x) - (3.0 * x * x - 1.0) / 2.0).abs() < 1e-14);
            assert!((harmonic(3, 3, x) - (5.0 * x.powi(3) - 3.0 * x) / 2.0).abs() < 1e-14);
            assert!((harmonic(3, 2, x) - (4.0 * x.powi(3) - 3.0 * x)).abs() < 1e-14);
            assert!((harmonic(2, 16, x) - (16.0 * x * x - 1.0) / 15.0).abs() < 1e-14);
            assert_eq!(harmonic(0, 7, x), 1.0);
            assert_eq!(harmonic(1, 7, x), x);
        }
        assert!((harmonic(5, 10, 1.0) - 1.0).abs() < 1e-14);
    }

    #[test]
    fn walkers_stay_on_the_sphere_and_start_where_asked() {
        let p = SphereBm { dim: 5, radius: 3.0, diffusion: 2.0 };
        let start = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 1.0];
        for scheme in [Scheme::EulerMaruyama, Scheme::Geodesic] {
            let mut w = Walkers::from_points(p, &start, 0.01, scheme, 3).unwrap();
            assert_eq!(&w.start()[..5], &[3.0, 0.0, 0.0, 0.0, 0.0]);
            assert_eq!(&w.start()[5..], &[0.0, 2.0, 2.0, 0.0, 1.0]);
            w.advance(200);
            for x in w.positions().chunks_exact(5) {
                assert!((dot(x, x).sqrt() - 3.0).abs() < 1e-12);
            }
            assert_eq!(w.steps(), 200);
            assert!((w.time() - 2.0).abs() < 1e-12);
        }
    }

    #[test]
    fn invalid_inputs_are_clear_errors() {
        let mut bad = vec![];
        let base = config(16, 4.0, 1.0, 0.002, 10);
        let mut c = base.clone();
        c.dim = 0;
        bad.push((c, "dimension"));
        let mut c = base.clone();
        c.dim = 1;
        bad.push((c, "dimension"));
        let mut c = base.clone();
        c.radius = -1.0;
        bad.push((c, "radius"));
        let mut c = base.clone();
        c.diffusion = 0.0;
        bad.push((c, "diffusion"));
        let mut c = base.clone();
        c.dt = f64::NAN;
        bad.push((c, "dt"));
        let mut c = base.clone();
        c.steps = 0;
        bad.push((c, "steps"));
        let mut c = base.clone();
        c.walkers = 0;
        bad.push((c, "walkers"));
        let mut c = base.clone();
        c.walkers = 1 << 20;
        c.dim = 64;
        bad.push((c, "memory budget"));
        let mut c = base.clone();
        c.record = vec![11];
        bad.push((c, "outside"));
        for (c, word) in bad {
            let msg = simulate(&c).unwrap_err().to_string();
            assert!(msg.contains(word), "{msg:?} should mention {word:?}");
        }
        let p = base.process();
        let zero = [0.0; 16];
        assert!(Walkers::from_points(p, &zero, 0.1, Scheme::Geodesic, 0).is_err());
        assert!(Walkers::from_points(p, &zero[..15], 0.1, Scheme::Geodesic, 0).is_err());
        assert!("rk4".parse::<Scheme>().is_err());
        assert_eq!("geodesic".parse::<Scheme>().unwrap(), Scheme::Geodesic);
    }

    #[test]
    fn even_steps_end_at_the_last_step() {
        assert_eq!(even_steps(500, 10)[..3], [50, 100, 150]);
        assert_eq!(*even_steps(500, 10).last().unwrap(), 500);
        assert_eq!(even_steps(3, 10), vec![1, 2, 3]);
        assert_eq!(even_steps(7, 2), vec![4, 7]);
    }
}
