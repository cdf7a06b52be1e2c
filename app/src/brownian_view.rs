//! "Brownian or not?": do the probe row's tokens move on the sphere over training like Brownian
//! motion? From the points u of one depth at successive probe snapshots, fit a diffusion coefficient
//! D (`fit_diffusion`), and run Brownian ghost walkers from the same start points with that D.

use engine::science::brownian::{Scheme, SphereBm, Walkers};
use engine::science::fit::{angles, fit_diffusion};
use engine::science::stats::ks_distance;

/// Most Brownian steps one analysis takes (the step size grows beyond).
const MAX_WALKER_STEPS: f64 = 300.0;

/// The analysis of one depth's trajectory over training.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Analysis {
    pub depth: usize,
    pub diffusion: f64,
    pub r_squared: f64,
    /// KS distance between the tokens' and the walkers' angles from the start, at the last frame.
    pub ks: f64,
    /// Training steps since the first frame.
    pub times: Vec<f64>,
    pub tokens: Vec<f64>,
    pub closed_form: Vec<f64>,
    pub simulated: Vec<f64>,
    /// Mean squared displacement |x_t - x_0|^2 from the first frame: tokens, closed form, walkers.
    pub msd_tokens: Vec<f64>,
    pub msd_closed_form: Vec<f64>,
    pub msd_simulated: Vec<f64>,
    /// The walkers now, projected as the tokens are (unit 3-vectors).
    pub ghosts: Vec<[f64; 3]>,
}

pub fn analyse(
    frames: &[&[f64]],
    steps: &[f64],
    dim: usize,
    components: &[f64],
    depth: usize,
    seed: u64,
) -> Result<Analysis, String> {
    let fit = fit_diffusion(frames, steps, dim).map_err(|e| e.to_string())?;
    if !(fit.diffusion.is_finite() && fit.diffusion > 0.0) {
        return Err(format!("the fitted D is {:.3e}: the tokens do not spread like a diffusion", fit.diffusion));
    }
    let process = SphereBm { dim, radius: fit.radius, diffusion: fit.diffusion };
    let total = fit.times.last().copied().unwrap_or(1.0);
    let dt = (2e-3 / process.rate()).max(total / MAX_WALKER_STEPS);
    let mut walkers =
        Walkers::from_points(process, frames[0], dt, Scheme::EulerMaruyama, seed).map_err(|e| e.to_string())?;
    let mut simulated = Vec::with_capacity(fit.times.len());
    let (mut msd_tokens, mut msd_closed_form, mut msd_simulated) = (vec![], vec![], vec![]);
    let mut ks = f64::NAN;
    let points = (frames[0].len() / dim).max(1) as f64;
    for (frame, &t) in frames[1..].iter().zip(&fit.times) {
        let target = (t / dt).round() as usize;
        walkers.advance(target.saturating_sub(walkers.steps()));
        let observed = walkers.observe();
        simulated.push(observed.mean_cos);
        msd_simulated.push(observed.msd);
        msd_closed_form.push(process.chord_msd(t));
        msd_tokens.push(frame.iter().zip(frames[0]).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / points);
        ks = ks_distance(&angles(frames[0], frame, dim), &walkers.angles());
    }
    let ghosts = walkers
        .positions()
        .chunks_exact(dim)
        .map(|p| {
            let mut y = [0.0; 3];
            for (yi, c) in y.iter_mut().zip(components.chunks_exact(dim)) {
                *yi = c.iter().zip(p).map(|(a, b)| a * b).sum();
            }
            let n = (y[0] * y[0] + y[1] * y[1] + y[2] * y[2]).sqrt();
            if n > 0.0 {
                y.iter_mut().for_each(|v| *v /= n);
            }
            y
        })
        .collect();
    Ok(Analysis {
        depth,
        diffusion: fit.diffusion,
        r_squared: fit.r_squared,
        ks,
        tokens: fit.mean_cos.clone(),
        closed_form: fit.fitted_cos.clone(),
        times: fit.times,
        simulated,
        msd_tokens,
        msd_closed_form,
        msd_simulated,
        ghosts,
    })
}
