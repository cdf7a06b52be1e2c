//! How well does Brownian motion explain token trajectories (docs/science.md#brownian-motion-on-the-sphere)?
//!
//! A trajectory is a list of frames, each the same N points in R^n at one "time" (layer index or
//! training step). If the points diffused on a sphere, `ln E[cos theta_t] = -rate t` with
//! `rate = (n-1) D / R^2`: we fit the line through the origin by least squares, turn its slope into an
//! effective D, and report R^2. Then we run Brownian walkers from the same start points with that D
//! and compare the angle distributions frame by frame (KS distance): drift shows up as a large
//! distance even where the mean cosine fits.
//!
//! The least-squares line weights every frame's ln E[cos] alike, so the late frames, far from the
//! origin, decide its slope. `fit_diffusion_ml` estimates D a second way, from every point's
//! increments between consecutive frames, each weighted by the information it carries, with a
//! confidence interval: if the tokens diffused with one D, the two estimates agree.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::nn::reduce::dot;
use crate::science::brownian::{Scheme, SphereBm, Walkers};
use crate::science::stats::{chi_square_quantile, ks_distance, Moments, Z_975};

#[derive(Clone, Debug, Serialize)]
pub struct DiffusionFit {
    pub dim: usize,
    /// Mean norm of all points: the radius of the sphere they are treated as living on.
    pub radius: f64,
    /// Times of frames 1.. measured from frame 0.
    pub times: Vec<f64>,
    pub mean_cos: Vec<f64>,
    pub mean_cos_se: Vec<f64>,
    /// `exp(-rate t)` at each time.
    pub fitted_cos: Vec<f64>,
    /// Frames whose mean cosine was positive (a logarithm exists) and so entered the fit.
    pub used: Vec<bool>,
    pub rate: f64,
    pub diffusion: f64,
    /// `1 - SS_res / SS_tot` of ln E[cos] (SS_tot about the mean); NaN with fewer than two usable
    /// times; negative when the line explains less than a constant would.
    pub r_squared: f64,
}

/// Cosine of the angle between each point of `a` and the same point of `b` (both (N, dim)).
pub fn cosines(a: &[f64], b: &[f64], dim: usize) -> Vec<f64> {
    a.chunks_exact(dim)
        .zip(b.chunks_exact(dim))
        .map(|(x, y)| (dot(x, y) / (dot(x, x) * dot(y, y)).sqrt()).clamp(-1.0, 1.0))
        .collect()
}

/// Angle (radians) between each point of `a` and the same point of `b`.
pub fn angles(a: &[f64], b: &[f64], dim: usize) -> Vec<f64> {
    cosines(a, b, dim).into_iter().map(f64::acos).collect()
}

/// Checks a trajectory: at least two frames of equal size, increasing times, finite nonzero points.
fn check_frames<F: AsRef<[f64]>>(frames: &[F], times: &[f64], dim: usize) -> Result<usize> {
    if dim == 0 {
        return Err(Error::Config("dimension must be positive, got 0".into()));
    }
    if frames.len() < 2 || frames.len() != times.len() {
        return Err(Error::Data(format!(
            "need at least two frames with one time each, got {} frames and {} times",
            frames.len(),
            times.len()
        )));
    }
    let len = frames[0].as_ref().len();
    if len == 0 || !len.is_multiple_of(dim) {
        return Err(Error::Data(format!(
            "frame 0 has {len} numbers: not a whole, nonzero number of points of dimension {dim}"
        )));
    }
    for (k, f) in frames.iter().enumerate() {
        let f = f.as_ref();
        if f.len() != len {
            return Err(Error::Data(format!("frame {k} has {} numbers, frame 0 has {len}", f.len())));
        }
        if let Some(i) = f.chunks_exact(dim).position(|x| !x.iter().all(|v| v.is_finite()) || dot(x, x) == 0.0) {
            return Err(Error::Data(format!("point {i} of frame {k} is zero or not finite")));
        }
    }
    if times.windows(2).any(|w| w[1] <= w[0]) || !times.iter().all(|t| t.is_finite()) {
        return Err(Error::Data(format!("times must be finite and increasing, got {times:?}")));
    }
    Ok(len / dim)
}

/// Least-squares fit of `ln E[cos theta_t] = -rate t` over frames 1.. against frame 0.
pub fn fit_diffusion<F: AsRef<[f64]>>(frames: &[F], times: &[f64], dim: usize) -> Result<DiffusionFit> {
    let points = check_frames(frames, times, dim)?;
    let norms: Moments = frames.iter().flat_map(|f| f.as_ref().chunks_exact(dim).map(|x| dot(x, x).sqrt())).collect();
    let radius = norms.mean();
    let start = frames[0].as_ref();
    let (mut ts, mut mean_cos, mut mean_cos_se, mut used) = (vec![], vec![], vec![], vec![]);
    for (f, &t) in frames[1..].iter().zip(&times[1..]) {
        let m: Moments = cosines(start, f.as_ref(), dim).into_iter().collect();
        ts.push(t - times[0]);
        mean_cos.push(m.mean());
        // One point has no spread to estimate: report 0 rather than NaN.
        mean_cos_se.push(if points > 1 { m.se() } else { 0.0 });
        used.push(m.mean() > 0.0);
    }
    let pairs: Vec<(f64, f64)> =
        ts.iter().zip(&mean_cos).zip(&used).filter(|(_, &u)| u).map(|((&t, &c), _)| (t, c.ln())).collect();
    if pairs.is_empty() {
        return Err(Error::Data("the mean cosine to frame 0 is not positive at any time: no logarithm to fit".into()));
    }
    // Slope of y = -rate t through the origin: rate = -sum(t y) / sum(t^2).
    let rate = -pairs.iter().map(|(t, y)| t * y).sum::<f64>() / pairs.iter().map(|(t, _)| t * t).sum::<f64>();
    let y_mean = pairs.iter().map(|(_, y)| y).sum::<f64>() / pairs.len() as f64;
    let ss_res: f64 = pairs.iter().map(|(t, y)| (y + rate * t).powi(2)).sum();
    let ss_tot: f64 = pairs.iter().map(|(_, y)| (y - y_mean).powi(2)).sum();
    let r_squared = if pairs.len() < 2 { f64::NAN } else { 1.0 - ss_res / ss_tot };
    Ok(DiffusionFit {
        dim,
        radius,
        fitted_cos: ts.iter().map(|t| (-rate * t).exp()).collect(),
        times: ts,
        mean_cos,
        mean_cos_se,
        used,
        rate,
        diffusion: rate * radius * radius / (dim as f64 - 1.0),
        r_squared,
    })
}

/// D by maximum likelihood on increments, with its 95% confidence interval.
#[derive(Clone, Debug, Serialize)]
pub struct DiffusionMl {
    pub diffusion: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Increments pooled: points times intervals between consecutive frames.
    pub increments: usize,
}

/// D by maximum likelihood on the increments between consecutive frames. Over a short interval dt
/// Brownian motion on the sphere of radius R in R^n moves a point by a tangent step that is
/// Gaussian with variance 2 D dt in each of its n - 1 directions; with s = R theta the geodesic
/// length of an increment, the likelihood of K independent increments is maximised by
/// `D = sum_k (s_k^2 / dt_k) / (2 (n-1) K)`: each increment weighted by 1/dt_k, its information.
/// Then `2 (n-1) K D_hat / D` is chi-square with (n-1) K degrees of freedom, which gives the
/// interval. It assumes independent increments (tokens of one sequence share a model, so the
/// interval is a lower bound on the uncertainty) and steps short against the sphere (theta small:
/// for longer ones the tangent Gaussian underestimates D).
pub fn fit_diffusion_ml<F: AsRef<[f64]>>(frames: &[F], times: &[f64], dim: usize) -> Result<DiffusionMl> {
    let points = check_frames(frames, times, dim)?;
    if dim < 2 {
        return Err(Error::Config("diffusion on a sphere needs dimension at least 2".into()));
    }
    let radius: Moments = frames.iter().flat_map(|f| f.as_ref().chunks_exact(dim).map(|x| dot(x, x).sqrt())).collect();
    let r2 = radius.mean().powi(2);
    let mut sum = 0.0;
    for (pair, dt) in frames.windows(2).zip(times.windows(2).map(|w| w[1] - w[0])) {
        sum += angles(pair[0].as_ref(), pair[1].as_ref(), dim).iter().map(|th| r2 * th * th / dt).sum::<f64>();
    }
    let k = points * (frames.len() - 1);
    let nu = ((dim - 1) * k) as f64;
    let diffusion = sum / (2.0 * nu);
    Ok(DiffusionMl {
        diffusion,
        ci_low: diffusion * nu / chi_square_quantile(nu, Z_975),
        ci_high: diffusion * nu / chi_square_quantile(nu, -Z_975),
        increments: k,
    })
}

/// One frame's angles from frame 0: tokens against Brownian walkers from the same start points.
#[derive(Clone, Debug, Serialize)]
pub struct AngleComparison {
    pub t: f64,
    pub mean_angle_points: f64,
    pub mean_angle_walkers: f64,
    pub ks: f64,
    /// Mean cosine to the start point of the walkers (the points' is the fit's `mean_cos`).
    pub mean_cos_walkers: f64,
    /// Mean squared chord |x_t - x_0|^2 of the points and of the walkers.
    pub msd_points: f64,
    pub msd_walkers: f64,
}

/// `compare_with_brownian`'s answer: one comparison per later frame, and where the walkers ended.
#[derive(Clone, Debug, Serialize)]
pub struct BrownianComparison {
    pub frames: Vec<AngleComparison>,
    /// (W, dim) positions of the walkers at the last frame's time.
    pub walkers: Vec<f64>,
}

/// Most Brownian steps `compare_with_brownian` takes.
pub const MAX_STEPS: usize = 100_000;

/// `rate * dt` of `compare_with_brownian`'s steps: the integrator's bias far below sampling noise.
pub const FINE_RATE_DT: f64 = 2e-3;

/// Runs Brownian walkers with the fitted D from frame 0's points (put on the sphere of the fit's
/// radius) and compares, at each later frame's time, the distributions of angles from the start.
/// Steps keep `rate * dt <= FINE_RATE_DT` so the integrator's bias stays far below sampling noise.
pub fn compare_with_brownian<F: AsRef<[f64]>>(
    frames: &[F],
    times: &[f64],
    fit: &DiffusionFit,
    scheme: Scheme,
    seed: u64,
) -> Result<BrownianComparison> {
    compare_with_brownian_at(frames, times, fit, scheme, seed, FINE_RATE_DT)
}

/// As `compare_with_brownian`, with steps of `rate * dt <= rate_dt`. GPT-2's tokens live in 768
/// dimensions: at 1e-2 the walkers' bias in E[cos θ] is about half a percent, still below the
/// sampling noise of tens of tokens, and a text's depth fit takes a tenth of a second, not seconds.
pub fn compare_with_brownian_at<F: AsRef<[f64]>>(
    frames: &[F],
    times: &[f64],
    fit: &DiffusionFit,
    scheme: Scheme,
    seed: u64,
    rate_dt: f64,
) -> Result<BrownianComparison> {
    let dim = fit.dim;
    check_frames(frames, times, dim)?;
    if dim < 2 {
        return Err(Error::Config("Brownian motion on a sphere needs dimension at least 2".into()));
    }
    if !(fit.diffusion.is_finite() && fit.diffusion > 0.0) {
        return Err(Error::Data(format!(
            "the fitted diffusion coefficient is {}: the points do not spread like a diffusion",
            fit.diffusion
        )));
    }
    let process = SphereBm { dim, radius: fit.radius, diffusion: fit.diffusion };
    // Small enough for the integrator and for the closest frames; frames are reached in whole
    // steps (rounded), and a budget keeps wildly uneven times from running forever.
    let min_gap = times.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
    let dt = (rate_dt / process.rate()).min(min_gap);
    let total = ((times[times.len() - 1] - times[0]) / dt).round();
    if total > MAX_STEPS as f64 {
        return Err(Error::Config(format!(
            "reaching every frame would take {total} Brownian steps (budget {MAX_STEPS}); \
             use more evenly spaced times"
        )));
    }
    let start = frames[0].as_ref();
    let mut w = Walkers::from_points(process, start, dt, scheme, seed)?;
    let mut out = Vec::with_capacity(frames.len() - 1);
    for (f, &t) in frames[1..].iter().zip(&times[1..]) {
        let elapsed = t - times[0];
        let target = (elapsed / dt).round() as usize;
        w.advance(target.saturating_sub(w.steps()));
        let a = angles(start, f.as_ref(), dim);
        let b = w.angles();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let observed = w.observe();
        let msd_points =
            f.as_ref().iter().zip(start).map(|(x, y)| (x - y) * (x - y)).sum::<f64>() / (start.len() / dim) as f64;
        out.push(AngleComparison {
            t: elapsed,
            mean_angle_points: mean(&a),
            mean_angle_walkers: mean(&b),
            ks: ks_distance(&a, &b),
            mean_cos_walkers: observed.mean_cos,
            msd_points,
            msd_walkers: observed.msd,
        });
    }
    Ok(BrownianComparison { frames: out, walkers: w.positions().to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames of walkers diffusing with D from uniform start points, recorded every `every` steps.
    fn diffusing_frames(d: f64, walkers: usize, every: usize, count: usize) -> Vec<Vec<f64>> {
        let p = SphereBm { dim: 16, radius: 4.0, diffusion: d };
        let mut w = Walkers::uniform(p, walkers, 0.002, Scheme::EulerMaruyama, 11).unwrap();
        let mut frames = vec![w.positions().to_vec()];
        for _ in 1..count {
            w.advance(every);
            frames.push(w.positions().to_vec());
        }
        frames
    }

    #[test]
    fn fit_recovers_the_diffusion_coefficient() {
        // D = 0.5 on S^15(4), frames every 0.1 up to t = 0.8.
        let frames = diffusing_frames(0.5, 3000, 50, 9);
        let times: Vec<f64> = (0..9).map(|k| 0.1 * k as f64).collect();
        let fit = fit_diffusion(&frames, &times, 16).unwrap();
        assert!((fit.radius - 4.0).abs() < 1e-12);
        assert!((fit.diffusion - 0.5).abs() < 0.02, "fitted D {} vs 0.5", fit.diffusion);
        assert!(fit.r_squared > 0.995, "R^2 {}", fit.r_squared);
        assert!(fit.used.iter().all(|&u| u));
        for (c, f) in fit.mean_cos.iter().zip(&fit.fitted_cos) {
            assert!((c - f).abs() < 0.02);
        }
    }

    #[test]
    fn fitted_walkers_match_diffusing_points_but_not_drifting_ones() {
        let times: Vec<f64> = (0..5).map(|k| 0.2 * k as f64).collect();
        // Points that really diffuse: KS distances stay at the level of sampling noise
        // (5% critical value for two samples of 2000 is 1.36 sqrt(2/2000) = 0.043).
        let frames = diffusing_frames(0.5, 2000, 100, 5);
        let fit = fit_diffusion(&frames, &times, 16).unwrap();
        let cmp = compare_with_brownian(&frames, &times, &fit, Scheme::Geodesic, 5).unwrap();
        assert_eq!(cmp.frames.len(), 4);
        assert_eq!(cmp.walkers.len(), frames[0].len());
        for (c, want) in cmp.frames.iter().zip(&fit.fitted_cos) {
            assert!(
                (c.mean_cos_walkers - want).abs() < 0.03,
                "walkers' mean cosine {} vs closed form {want}",
                c.mean_cos_walkers
            );
            // Same law, same mean squared chord (2 R^2 (1 - E cos)), within sampling noise.
            assert!((c.msd_walkers / c.msd_points - 1.0).abs() < 0.1, "MSD {} vs {}", c.msd_walkers, c.msd_points);
        }
        for c in &cmp.frames {
            assert!(c.ks < 0.06, "diffusing points: KS {} at t {}", c.ks, c.t);
        }
        // Points that all rotate rigidly by the same angle: every token has the same angle, so the
        // mean cosine still decays but the angle law is a spike, far from Brownian.
        let start = &frames[0];
        let rotated: Vec<Vec<f64>> = times
            .iter()
            .map(|t| {
                let phi = 0.8 * t;
                let mut f = start.clone();
                for x in f.chunks_exact_mut(16) {
                    // Rotate in every coordinate pair (2i, 2i+1) by phi.
                    for pair in x.chunks_exact_mut(2) {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = phi.cos() * a - phi.sin() * b;
                        pair[1] = phi.sin() * a + phi.cos() * b;
                    }
                }
                f
            })
            .collect();
        let fit = fit_diffusion(&rotated, &times, 16).unwrap();
        let cmp = compare_with_brownian(&rotated, &times, &fit, Scheme::Geodesic, 5).unwrap();
        for c in &cmp.frames {
            assert!(c.ks > 0.3, "rigid rotation: KS {} at t {}", c.ks, c.t);
        }
    }

    /// On simulated Brownian motion with a known D the interval holds the truth about 95% of the
    /// time (here 20 independent runs: at least 17 must cover it, a 1-in-200 event otherwise), and
    /// the estimate agrees with the least-squares fit.
    #[test]
    fn the_ml_interval_covers_the_true_diffusion() {
        let p = SphereBm { dim: 16, radius: 4.0, diffusion: 0.5 };
        let times: Vec<f64> = (0..11).map(|k| 0.01 * k as f64).collect();
        let mut covered = 0;
        for seed in 0..20 {
            let mut w = Walkers::uniform(p, 64, 0.0005, Scheme::Geodesic, 100 + seed).unwrap();
            let mut frames = vec![w.positions().to_vec()];
            for _ in 1..times.len() {
                w.advance(20);
                frames.push(w.positions().to_vec());
            }
            let ml = fit_diffusion_ml(&frames, &times, 16).unwrap();
            assert_eq!(ml.increments, 64 * 10);
            assert!(ml.ci_low < ml.diffusion && ml.diffusion < ml.ci_high);
            // 9600 degrees of freedom: the interval is about ±2.8%.
            assert!((ml.ci_high - ml.ci_low) / ml.diffusion < 0.06, "{ml:?}");
            covered += usize::from(ml.ci_low <= 0.5 && 0.5 <= ml.ci_high);
            let lsq = fit_diffusion(&frames, &times, 16).unwrap();
            assert!((lsq.diffusion - ml.diffusion).abs() < 0.1 * ml.diffusion, "{} vs {}", lsq.diffusion, ml.diffusion);
        }
        assert!(covered >= 17, "the 95% interval covered D in {covered} of 20 runs");
    }

    /// Points that jump once and then stay put: the increments after the jump are zero, so the ML
    /// estimate falls well outside the least-squares one, which the jump's depth sets alone.
    #[test]
    fn a_jump_then_a_plateau_splits_the_two_estimates() {
        // 50 points on a circle of S^2, each turning by pi/3 at t = 1 and then not moving.
        let at = |phase: f64| -> Vec<f64> {
            (0..50).flat_map(|i| [(0.1 * i as f64 + phase).cos(), (0.1 * i as f64 + phase).sin(), 0.0]).collect()
        };
        let third = std::f64::consts::PI / 3.0;
        let frames = vec![at(0.0), at(third), at(third), at(third), at(third)];
        let times = [0.0, 1.0, 2.0, 3.0, 4.0];
        let ml = fit_diffusion_ml(&frames, &times, 3).unwrap();
        // Each point: one increment of pi/3 over dt = 1 and three of 0: D = (pi/3)^2 / (2 * 2 * 4).
        let want = third.powi(2) / 16.0;
        assert!((ml.diffusion - want).abs() < 1e-9, "{} vs {want}", ml.diffusion);
        let lsq = fit_diffusion(&frames, &times, 3).unwrap();
        assert!(lsq.diffusion > ml.ci_high, "least squares {} inside the ML interval {ml:?}", lsq.diffusion);
    }

    #[test]
    fn r_squared_is_low_when_the_log_is_not_a_line() {
        // Cosines 0.9, 0.9, 0.9, 0.9 at t = 1..4: ln E[cos] is flat, the line through 0 is not.
        let start: Vec<f64> = vec![1.0, 0.0];
        let c: f64 = 0.9;
        let moved = vec![c, (1.0 - c * c).sqrt()];
        let frames = vec![start, moved.clone(), moved.clone(), moved.clone(), moved];
        let fit = fit_diffusion(&frames, &[0.0, 1.0, 2.0, 3.0, 4.0], 2).unwrap();
        // Slope by hand: -sum(t ln c)/sum(t^2) = -ln(0.9) * 10 / 30.
        assert!((fit.rate + c.ln() / 3.0).abs() < 1e-12);
        assert!(fit.r_squared < 0.0);
    }

    #[test]
    fn bad_trajectories_are_errors() {
        let f = vec![vec![1.0, 0.0], vec![0.0, 1.0]];
        assert!(fit_diffusion(&f, &[0.0], 2).is_err());
        assert!(fit_diffusion(&f, &[1.0, 1.0], 2).is_err());
        assert!(fit_diffusion(&f, &[0.0, 1.0], 3).is_err());
        assert!(fit_diffusion(&[vec![1.0, 0.0], vec![0.0, 0.0]], &[0.0, 1.0], 2).is_err());
        // Perpendicular at t = 1: mean cosine 0, nothing to take the log of.
        let msg = fit_diffusion(&f, &[0.0, 1.0], 2).unwrap_err().to_string();
        assert!(msg.contains("not positive"), "{msg}");
    }
}
