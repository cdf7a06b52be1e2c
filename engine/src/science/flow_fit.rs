//! Brownian diffusion or interacting particles: which explains the tokens' motion better?
//!
//! Both models start from the first frame's points (as unit vectors) and predict two curves over
//! the later frames: the mean cosine of each point to where it started, and the mean inner product
//! of pairs (how clustered the points are). Independent Brownian motions with rate r = (n-1) D / R^2
//! give the closed forms `E cos = e^(-r t)` and `E <x_i, x_j> = <x_i(0), x_j(0)> e^(-2 r t)` (each
//! mean point shrinks by e^(-r t)): points spread and the pairs decorrelate. The attention flow
//! (`particles`, docs/science.md#interacting-particles) at inverse temperature beta, run for model time `s = scale t`,
//! pulls the points together. Each model's parameters (r; beta and scale) minimise the same sum of
//! squared errors over both curves; the model with the smaller root-mean-square error fits better,
//! and each model's angle distribution at the last frame is compared with the points' by the KS
//! distance.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::nn::reduce::dot;
use crate::science::brownian::{Scheme, SphereBm, Walkers};
use crate::science::fit::cosines;
use crate::science::fit::FINE_RATE_DT;
use crate::science::particles::{rk4_step, Particles};
use crate::science::stats::{ks_critical, ks_distance};

/// The CLI fits the flow on at most this many points (the first ones); each simulation costs
/// O(points^2 dim) per step, so the page uses fewer.
pub const MAX_POINTS: usize = 64;
/// Inverse temperatures searched (log-spaced grid, then refined).
pub const BETA_RANGE: (f64, f64) = (0.25, 32.0);
/// The longest model time the flow is run for.
const MAX_MODEL_TIME: f64 = 24.0;

/// One model's predictions at frames 1.. and how well they fit.
#[derive(Clone, Debug, Serialize)]
pub struct Prediction {
    pub mean_cos: Vec<f64>,
    pub mean_inner: Vec<f64>,
    /// Root-mean-square error over both curves.
    pub rmse: f64,
    /// KS distance between the points' and the model's angles to the start at the last frame.
    pub ks_last: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct FlowComparison {
    pub points: usize,
    /// Times of frames 1.., from frame 0.
    pub times: Vec<f64>,
    /// The points' curves at frames 1.., and the pairs' mean inner product at frame 0.
    pub mean_cos: Vec<f64>,
    pub mean_inner: Vec<f64>,
    pub inner_start: f64,
    /// Brownian: the fitted rate r and D = r R^2 / (n - 1) on the points' sphere of radius R.
    pub rate: f64,
    pub diffusion: f64,
    pub brownian: Prediction,
    /// Particles: the fitted inverse temperature and model time per unit of t.
    pub beta: f64,
    pub time_scale: f64,
    /// The time scale sits at the longest flow time searched (`MAX_MODEL_TIME` by the last
    /// frame): the tokens keep moving where the flow has settled.
    pub time_at_limit: bool,
    pub particles: Prediction,
    /// "particles" or "brownian": the smaller RMSE.
    pub better: &'static str,
    pub ks_critical: f64,
    /// (points, dim) where the fitted flow puts the points at the last frame's time, on the
    /// points' sphere, for drawing beside the Brownian walkers.
    #[serde(skip)]
    pub particles_end: Vec<f64>,
}

/// Unit vectors of the first `points` points of a frame.
fn unit(frame: &[f64], dim: usize, points: usize) -> Vec<f64> {
    let mut u = frame[..points * dim].to_vec();
    for x in u.chunks_exact_mut(dim) {
        let n = dot(x, x).sqrt();
        x.iter_mut().for_each(|v| *v /= n);
    }
    u
}

/// Mean inner product over the pairs i < j of unit vectors (n, dim): (|sum u|^2 - n) / (n (n-1)).
fn mean_pair_inner(u: &[f64], dim: usize) -> f64 {
    let n = u.len() / dim;
    let mut total = vec![0.0; dim];
    u.chunks_exact(dim).for_each(|x| total.iter_mut().zip(x).for_each(|(t, v)| *t += v));
    (dot(&total, &total) - n as f64) / (n * (n - 1)) as f64
}

/// An orthonormal basis (r, dim) of the span of the points `u` (n, dim), r <= n (modified
/// Gram-Schmidt; a point already in the span of the earlier ones adds nothing).
fn span_basis(u: &[f64], dim: usize) -> Vec<f64> {
    let mut basis: Vec<f64> = Vec::new();
    for x in u.chunks_exact(dim) {
        let mut r = x.to_vec();
        for b in basis.chunks_exact(dim) {
            let c = dot(&r, b);
            r.iter_mut().zip(b).for_each(|(v, &bv)| *v -= c * bv);
        }
        let n = dot(&r, &r).sqrt();
        if n > 1e-9 * dot(x, x).sqrt() {
            basis.extend(r.iter().map(|v| v / n));
        }
    }
    basis
}

/// The points (n, dim) in the coordinates of `basis` (r, dim): (n, r).
fn to_span(u: &[f64], basis: &[f64], dim: usize) -> Vec<f64> {
    u.chunks_exact(dim).flat_map(|x| basis.chunks_exact(dim).map(move |b| dot(x, b))).collect()
}

/// Coordinates (n, r) back to points (n, dim).
fn from_span(y: &[f64], basis: &[f64], dim: usize) -> Vec<f64> {
    let r = basis.len() / dim;
    let mut out = vec![0.0; y.len() / r * dim];
    for (o, yi) in out.chunks_exact_mut(dim).zip(y.chunks_exact(r)) {
        for (&c, b) in yi.iter().zip(basis.chunks_exact(dim)) {
            o.iter_mut().zip(b).for_each(|(v, &bv)| *v += c * bv);
        }
    }
    out
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The flow at one beta, run once: `at(s)` reads its curves by linear interpolation.
struct FlowRun {
    /// Model time between recorded points, and the integrator's step.
    h: f64,
    step: f64,
    mean_cos: Vec<f64>,
    mean_inner: Vec<f64>,
}

impl FlowRun {
    fn new(start: &[f64], dim: usize, beta: f64) -> FlowRun {
        // RK4 is stable for h |lambda| < 2.8, and the flow's Jacobian grows like beta; the curves
        // are recorded every `RECORD` of model time.
        const RECORD: f64 = 0.2;
        let h = (1.5 / beta).min(RECORD);
        let every = (RECORD / h).ceil() as usize;
        let h = RECORD / every as f64;
        let mut p = Particles { n: start.len() / dim, d: dim, x: start.to_vec() };
        let (mut mean_cos, mut mean_inner) = (vec![1.0], vec![mean_pair_inner(start, dim)]);
        for _ in 0..(MAX_MODEL_TIME / RECORD).round() as usize {
            for _ in 0..every {
                rk4_step(&mut p, beta, h);
            }
            mean_cos.push(mean(&cosines(start, &p.x, dim)));
            mean_inner.push(mean_pair_inner(&p.x, dim));
            // Clustered for good: the curves stay where they are.
            if mean_inner.last().is_some_and(|&m| m > 1.0 - 1e-9) {
                break;
            }
        }
        FlowRun { h: RECORD, step: h, mean_cos, mean_inner }
    }

    fn at(&self, s: f64) -> (f64, f64) {
        let x = s / self.h;
        let k = (x.floor() as usize).min(self.mean_cos.len() - 1);
        let next = (k + 1).min(self.mean_cos.len() - 1);
        let w = (x - k as f64).clamp(0.0, 1.0);
        let lerp = |c: &[f64]| c[k] + w * (c[next] - c[k]);
        (lerp(&self.mean_cos), lerp(&self.mean_inner))
    }
}

/// The minimum of `f` over [lo, hi] in log space: a grid of `grid` points, then `refine` steps of
/// golden-section search between the best point's neighbours (one new evaluation each).
/// Returns (argmin, min).
fn minimise_log(f: &mut dyn FnMut(f64) -> f64, lo: f64, hi: f64, grid: usize, refine: usize) -> (f64, f64) {
    let (a, b) = (lo.ln(), hi.ln());
    let xs: Vec<f64> = (0..grid).map(|k| a + (b - a) * k as f64 / (grid - 1) as f64).collect();
    let vals: Vec<f64> = xs.iter().map(|&x| f(x.exp())).collect();
    let best = (0..grid).min_by(|&i, &j| vals[i].total_cmp(&vals[j])).unwrap_or(0);
    let mut out = (xs[best].exp(), vals[best]);
    let (mut l, mut r) = (xs[best.saturating_sub(1)], xs[(best + 1).min(grid - 1)]);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let (mut m1, mut m2) = (r - g * (r - l), l + g * (r - l));
    let (mut f1, mut f2) = (f(m1.exp()), f(m2.exp()));
    for _ in 0..refine {
        if f1 < f2 {
            (r, m2, f2) = (m2, m1, f1);
            m1 = r - g * (r - l);
            f1 = f(m1.exp());
        } else {
            (l, m1, f1) = (m1, m2, f2);
            m2 = l + g * (r - l);
            f2 = f(m2.exp());
        }
    }
    for (m, v) in [(m1, f1), (m2, f2)] {
        if v < out.1 {
            out = (m.exp(), v);
        }
    }
    out
}

/// Compares the two models on a trajectory (frames of the same points in R^dim at `times`), on its
/// first `max_points` points.
pub fn compare_flow<F: AsRef<[f64]>>(
    frames: &[F],
    times: &[f64],
    dim: usize,
    max_points: usize,
    seed: u64,
) -> Result<FlowComparison> {
    compare_flow_at(frames, times, dim, max_points, seed, FINE_RATE_DT)
}

/// As `compare_flow`, its Brownian walkers in steps of `rate * dt <= rate_dt`
/// (`fit::compare_with_brownian_at`).
pub fn compare_flow_at<F: AsRef<[f64]>>(
    frames: &[F],
    times: &[f64],
    dim: usize,
    max_points: usize,
    seed: u64,
    rate_dt: f64,
) -> Result<FlowComparison> {
    if frames.len() < 2 || frames.len() != times.len() || dim < 2 {
        return Err(Error::Data(format!(
            "the flow fit needs two or more frames with one time each in dimension >= 2 (got {} frames, {} \
             times, dimension {dim})",
            frames.len(),
            times.len()
        )));
    }
    let total = frames[0].as_ref().len() / dim;
    let points = total.min(max_points);
    if points < 2 || frames.iter().any(|f| f.as_ref().len() != total * dim) {
        return Err(Error::Data("the flow fit needs frames of the same two or more points".into()));
    }
    let finite = |f: &F| f.as_ref()[..points * dim].chunks_exact(dim).all(|x| dot(x, x) > 0.0 && dot(x, x).is_finite());
    if !frames.iter().all(finite) || !times.windows(2).all(|w| w[1] > w[0] && w[1].is_finite()) {
        return Err(Error::Data("the flow fit needs nonzero finite points and increasing times".into()));
    }
    let radius =
        mean(&frames[0].as_ref()[..points * dim].chunks_exact(dim).map(|x| dot(x, x).sqrt()).collect::<Vec<_>>());
    let start = unit(frames[0].as_ref(), dim, points);
    let t: Vec<f64> = times[1..].iter().map(|&x| x - times[0]).collect();
    let later: Vec<Vec<f64>> = frames[1..].iter().map(|f| unit(f.as_ref(), dim, points)).collect();
    let mean_cos: Vec<f64> = later.iter().map(|u| mean(&cosines(&start, u, dim))).collect();
    let mean_inner: Vec<f64> = later.iter().map(|u| mean_pair_inner(u, dim)).collect();
    let inner_start = mean_pair_inner(&start, dim);
    let sse = |c: &[f64], p: &[f64]| -> f64 {
        mean_cos.iter().zip(c).chain(mean_inner.iter().zip(p)).map(|(a, b)| (a - b) * (a - b)).sum()
    };
    let rmse = |e: f64| (e / (2 * t.len()) as f64).sqrt();
    let t_last = t[t.len() - 1];
    let last_angles: Vec<f64> = cosines(&start, &later[later.len() - 1], dim).into_iter().map(f64::acos).collect();

    // Brownian: one rate, searched from "hardly moves" to "forgets its start by the first frame".
    let brownian_curves = |r: f64| -> (Vec<f64>, Vec<f64>) {
        (t.iter().map(|&x| (-r * x).exp()).collect(), t.iter().map(|&x| inner_start * (-2.0 * r * x).exp()).collect())
    };
    let (rate, b_err) = minimise_log(
        &mut |r| {
            let (c, p) = brownian_curves(r);
            sse(&c, &p)
        },
        1e-4 / t_last,
        1e2 / t[0],
        61,
        30,
    );
    let (b_cos, b_inner) = brownian_curves(rate);
    let process = SphereBm { dim, radius: 1.0, diffusion: rate / (dim as f64 - 1.0) };
    let dt = walkers_dt(rate, t_last, rate_dt);
    let mut walkers = Walkers::from_points(process, &start, dt, Scheme::Geodesic, seed)?;
    walkers.advance((t_last / dt).round() as usize);
    let brownian = Prediction {
        mean_cos: b_cos,
        mean_inner: b_inner,
        rmse: rmse(b_err),
        ks_last: ks_distance(&last_angles, &walkers.angles()),
    };

    // Particles: for each beta one run of the flow; the best time scale by interpolation on it.
    let best_scale = |run: &FlowRun| -> (f64, f64) {
        // A run that clustered early stays where it ended, so every run covers MAX_MODEL_TIME.
        let hi = MAX_MODEL_TIME / t_last;
        minimise_log(
            &mut |scale| {
                let (c, p): (Vec<f64>, Vec<f64>) = t.iter().map(|&x| run.at(scale * x)).unzip();
                sse(&c, &p)
            },
            hi * 1e-4,
            hi,
            61,
            30,
        )
    };
    // Every velocity of the flow is a combination of the points, so it never leaves their span:
    // it runs, exactly, in coordinates of that span (32 dimensions, not GPT-2's 768).
    let basis = span_basis(&start, dim);
    let (coords, rank) = (to_span(&start, &basis, dim), basis.len() / dim);
    let mut fitted = |beta: f64| best_scale(&FlowRun::new(&coords, rank, beta)).1;
    let (beta, _) = minimise_log(&mut fitted, BETA_RANGE.0, BETA_RANGE.1, 8, 6);
    let run = FlowRun::new(&coords, rank, beta);
    let (time_scale, p_err) = best_scale(&run);
    let (p_cos, p_inner): (Vec<f64>, Vec<f64>) = t.iter().map(|&x| run.at(time_scale * x)).unzip();
    // The points themselves at the last frame, by one more run to exactly that model time.
    let mut end = Particles { n: points, d: rank, x: coords };
    let s_last = time_scale * t_last;
    let steps = (s_last / run.step).ceil().max(1.0);
    for _ in 0..steps as usize {
        rk4_step(&mut end, beta, s_last / steps);
    }
    let end = from_span(&end.x, &basis, dim);
    let end_angles: Vec<f64> = cosines(&start, &end, dim).into_iter().map(f64::acos).collect();
    let particles = Prediction {
        mean_cos: p_cos,
        mean_inner: p_inner,
        rmse: rmse(p_err),
        ks_last: ks_distance(&last_angles, &end_angles),
    };
    Ok(FlowComparison {
        points,
        times: t,
        mean_cos,
        mean_inner,
        inner_start,
        rate,
        diffusion: rate * radius * radius / (dim as f64 - 1.0),
        better: if particles.rmse < brownian.rmse { "particles" } else { "brownian" },
        brownian,
        beta,
        time_scale,
        time_at_limit: time_scale * t_last > 0.99 * MAX_MODEL_TIME,
        particles,
        ks_critical: ks_critical(points, points),
        particles_end: end.iter().map(|v| v * radius).collect(),
    })
}

/// The walkers' step: small against the rate, and a whole number of them up to the last frame.
fn walkers_dt(rate: f64, t_last: f64, rate_dt: f64) -> f64 {
    (rate_dt / rate).min(t_last / 50.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::science::particles::Start;

    /// `count` frames, each from one call of `next`.
    fn frames_of(mut next: impl FnMut() -> Vec<f64>, count: usize) -> Vec<Vec<f64>> {
        (0..count).map(|_| next()).collect()
    }

    /// Points that really are particles under the flow (beta 4, model time 0.4 per frame, on a
    /// sphere of radius 3) are fitted by the flow almost exactly, with beta and the time scale
    /// recovered, and far better than by Brownian motion.
    #[test]
    fn particles_moved_by_the_flow_are_recognised() {
        let (dim, beta, scale) = (8, 4.0, 0.4);
        let mut p = Particles::new(24, dim, Start::Uniform, 3).unwrap();
        let frames = frames_of(
            || {
                let out = p.x.iter().map(|v| 3.0 * v).collect();
                for _ in 0..40 {
                    rk4_step(&mut p, beta, scale / 40.0);
                }
                out
            },
            6,
        );
        let times: Vec<f64> = (0..6).map(|k| k as f64).collect();
        let c = compare_flow(&frames, &times, dim, MAX_POINTS, 1).unwrap();
        eprintln!(
            "beta {:.3} (4), scale {:.4} (0.4), rmse particles {:.2e}, brownian {:.2e}, KS {:.3} / {:.3}",
            c.beta, c.time_scale, c.particles.rmse, c.brownian.rmse, c.particles.ks_last, c.brownian.ks_last
        );
        assert_eq!(c.better, "particles");
        assert!((c.beta / beta - 1.0).abs() < 0.05 && (c.time_scale / scale - 1.0).abs() < 0.05, "{c:?}");
        assert!(c.particles.rmse < 1e-3 && c.brownian.rmse > 10.0 * c.particles.rmse, "{c:?}");
        assert!(c.particles.ks_last < 0.1, "the flow's angles are the points' ({})", c.particles.ks_last);
        let radius = c.particles_end.chunks_exact(dim).map(|x| dot(x, x).sqrt()).sum::<f64>() / 24.0;
        assert!((radius - 3.0).abs() < 1e-9);
        // The end points are where the flow took the points.
        let last = &frames[5];
        let gap = c.particles_end.iter().zip(last).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(gap < 0.05, "end points {gap} from the last frame");
    }

    /// Independent Brownian walkers (an independent simulator, D = 0.05 on S^15 of radius 4) are
    /// fitted better by Brownian motion, whose D comes back within 10%, than by the flow.
    #[test]
    fn diffusing_points_are_recognised() {
        let (dim, d) = (16, 0.05);
        let process = SphereBm { dim, radius: 4.0, diffusion: d };
        let mut w = Walkers::uniform(process, 64, 0.002, Scheme::EulerMaruyama, 9).unwrap();
        let frames = frames_of(
            || {
                let out = w.positions().to_vec();
                w.advance(500);
                out
            },
            6,
        );
        let times: Vec<f64> = (0..6).map(|k| k as f64).collect();
        let c = compare_flow(&frames, &times, dim, MAX_POINTS, 1).unwrap();
        eprintln!(
            "D {:.4} (0.05), rmse brownian {:.2e}, particles {:.2e} (beta {:.2}), KS {:.3} / {:.3} (critical {:.3})",
            c.diffusion,
            c.brownian.rmse,
            c.particles.rmse,
            c.beta,
            c.brownian.ks_last,
            c.particles.ks_last,
            c.ks_critical
        );
        assert_eq!(c.better, "brownian");
        assert!((c.diffusion / d - 1.0).abs() < 0.1, "D {}", c.diffusion);
        assert!(c.brownian.ks_last < c.ks_critical);
    }

    #[test]
    fn the_flow_in_its_points_span_is_the_flow_in_full() {
        // 6 points in 40 dimensions: the same curves and end points from 6 coordinates.
        let p = Particles::new(6, 40, Start::Uniform, 3).unwrap();
        let basis = span_basis(&p.x, 40);
        assert_eq!(basis.len(), 6 * 40);
        let coords = to_span(&p.x, &basis, 40);
        let (full, small) = (FlowRun::new(&p.x, 40, 2.0), FlowRun::new(&coords, 6, 2.0));
        for s in [0.1, 1.0, 3.7] {
            let (a, b) = (full.at(s), small.at(s));
            assert!((a.0 - b.0).abs() < 1e-10 && (a.1 - b.1).abs() < 1e-10, "{a:?} {b:?} at {s}");
        }
        let (mut x, mut y) = (p.clone(), Particles { n: 6, d: 6, x: coords });
        for _ in 0..50 {
            rk4_step(&mut x, 2.0, 0.05);
            rk4_step(&mut y, 2.0, 0.05);
        }
        let back = from_span(&y.x, &basis, 40);
        assert!(back.iter().zip(&x.x).all(|(a, b)| (a - b).abs() < 1e-10));
        // A point in the span of the others adds no direction.
        let mut twice = p.x.clone();
        twice.extend_from_slice(&p.x[..40]);
        assert_eq!(span_basis(&twice, 40).len(), 6 * 40);
    }

    #[test]
    fn bad_trajectories_are_refused() {
        let one = vec![vec![1.0, 0.0, 0.0, 1.0]];
        assert!(compare_flow(&one, &[0.0], 2, 8, 0).is_err());
        let two = vec![vec![1.0, 0.0, 0.0, 1.0], vec![0.0, 0.0, 0.0, 1.0]];
        assert!(compare_flow(&two, &[0.0, 1.0], 2, 8, 0).unwrap_err().to_string().contains("nonzero"));
        let two = vec![vec![1.0, 0.0, 0.0, 1.0], vec![0.0, 1.0, 1.0, 0.0]];
        assert!(compare_flow(&two, &[1.0, 1.0], 2, 8, 0).is_err());
    }
}
