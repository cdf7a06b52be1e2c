//! Ito's lemma by Monte Carlo (docs/science.md#ito-calculus): for f(B) = |B|^2 with B a Brownian motion in R^n,
//! `d f = 2 B.dB + n dt`. Summing the exact increments of a discretised path,
//! `|B_t|^2 = sum 2 B_k.dB_k + sum |dB_k|^2` (no approximation: it telescopes), and
//! - the martingale part `sum 2 B.dB` has mean 0: it only adds noise;
//! - the second-order part `sum |dB|^2` has mean n t and a spread that vanishes as dt -> 0
//!   (variance 2 n t dt): it is the whole mean, which ordinary calculus would miss.

use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rng::{rng, Stream};
use crate::science::stats::Moments;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ItoConfig {
    pub dim: usize,
    pub dt: f64,
    pub steps: usize,
    pub paths: usize,
    pub seed: u64,
}

/// A Monte-Carlo mean with its standard error and the sample standard deviation across paths.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Estimate {
    pub mean: f64,
    pub se: f64,
    pub sd: f64,
}

impl From<Moments> for Estimate {
    fn from(m: Moments) -> Self {
        Estimate { mean: m.mean(), se: m.se(), sd: m.sd() }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ItoReport {
    pub config: ItoConfig,
    pub t: f64,
    /// `n t`: the mean of |B_t|^2.
    pub theory: f64,
    /// |B_t|^2.
    pub f: Estimate,
    /// `sum 2 B.dB`.
    pub martingale: Estimate,
    /// `sum |dB|^2`.
    pub second_order: Estimate,
    /// `sqrt(2 n t dt)`: the spread of the second-order part across paths.
    pub second_order_sd_theory: f64,
    /// Largest |f - martingale - second_order| over paths (rounding only).
    pub max_identity_error: f64,
}

pub fn run(cfg: &ItoConfig) -> Result<ItoReport> {
    if cfg.dim == 0 || cfg.steps == 0 || cfg.paths < 2 || !(cfg.dt.is_finite() && cfg.dt > 0.0) {
        return Err(Error::Config(format!(
            "Ito demo needs dim >= 1, steps >= 1, paths >= 2 and a positive dt, got {cfg:?}"
        )));
    }
    let mut r = rng(cfg.seed, Stream::Ito, 0);
    let sqrt_dt = cfg.dt.sqrt();
    let (mut f, mut mart, mut second) = (Moments::default(), Moments::default(), Moments::default());
    let mut max_identity_error = 0.0f64;
    let mut b = vec![0.0; cfg.dim];
    for _ in 0..cfg.paths {
        b.fill(0.0);
        let (mut m, mut q) = (0.0, 0.0);
        for _ in 0..cfg.steps {
            for bi in b.iter_mut() {
                let z: f64 = StandardNormal.sample(&mut r);
                let db = sqrt_dt * z;
                m += 2.0 * *bi * db;
                q += db * db;
                *bi += db;
            }
        }
        let fb: f64 = b.iter().map(|x| x * x).sum();
        max_identity_error = max_identity_error.max((fb - m - q).abs());
        f.push(fb);
        mart.push(m);
        second.push(q);
    }
    let t = cfg.steps as f64 * cfg.dt;
    Ok(ItoReport {
        config: cfg.clone(),
        t,
        theory: cfg.dim as f64 * t,
        f: f.into(),
        martingale: mart.into(),
        second_order: second.into(),
        second_order_sd_theory: (2.0 * cfg.dim as f64 * t * cfg.dt).sqrt(),
        max_identity_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_order_term_is_the_whole_mean() {
        let cfg = ItoConfig { dim: 3, dt: 0.01, steps: 100, paths: 20_000, seed: 1 };
        let rep = run(&cfg).unwrap();
        // E|B_t|^2 = n t; the dt term has that mean, the 2 B.dB term averages to 0.
        assert!((rep.f.mean - 3.0).abs() < 4.0 * rep.f.se, "{:?}", rep.f);
        assert!(rep.martingale.mean.abs() < 4.0 * rep.martingale.se, "{:?}", rep.martingale);
        assert!((rep.second_order.mean - 3.0).abs() < 4.0 * rep.second_order.se, "{:?}", rep.second_order);
        // |B_t|^2 / t is chi-squared with n degrees of freedom: sd sqrt(2n) t.
        assert!((rep.f.sd / 6f64.sqrt() - 1.0).abs() < 0.05, "{:?}", rep.f);
        // The martingale part carries the noise; the second-order part is nearly deterministic.
        assert!((rep.second_order.sd / rep.second_order_sd_theory - 1.0).abs() < 0.05);
        assert!(rep.second_order.sd < 0.2 * rep.martingale.sd);
    }

    #[test]
    fn bad_settings_are_errors() {
        let ok = ItoConfig { dim: 2, dt: 0.1, steps: 10, paths: 10, seed: 0 };
        assert!(run(&ok).is_ok());
        for bad in [
            ItoConfig { dim: 0, ..ok.clone() },
            ItoConfig { dt: -0.1, ..ok.clone() },
            ItoConfig { steps: 0, ..ok.clone() },
            ItoConfig { paths: 1, ..ok.clone() },
        ] {
            assert!(run(&bad).is_err());
        }
    }
}
