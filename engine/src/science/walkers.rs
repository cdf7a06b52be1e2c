//! Discrete random walkers on the attention chain (docs/science.md#attention-as-a-markov-chain): a walker on token i at layer l
//! jumps to token j with probability P_l[i, j]; layer after layer it traces a path of tokens, and so
//! a path of points on the sphere. Its distribution after l layers must equal `e_i P_1 ... P_l`.

use rand::Rng;
use serde::Serialize;

use super::markov::{self, Validity};
use crate::error::{Error, Result};
use crate::rng::{rng, Stream};

/// Paths kept in a report (the rest only count towards the distributions).
const KEPT_PATHS: usize = 16;

#[derive(Clone, Debug, Serialize)]
pub struct WalkReport {
    pub start: usize,
    pub walkers: usize,
    /// After each layer: the share of walkers on each token, and the exact `e_start P_1 ... P_l`.
    pub empirical: Vec<Vec<f64>>,
    pub exact: Vec<Vec<f64>>,
    /// Per layer, the largest |empirical - exact| over tokens.
    pub max_abs_error: Vec<f64>,
    /// The token paths of the first walkers (start included).
    pub paths: Vec<Vec<usize>>,
    /// Per layer, the mean squared chord distance on the sphere from the start point, when points
    /// were given (the discrete counterpart of Brownian motion's MSD).
    pub msd: Option<Vec<f64>>,
}

/// Walks `walkers` walkers from token `start` through `chains` (one row-stochastic T x T matrix per
/// layer). `points`, if given, holds per layer l = 0..=L the (T, d) sphere points: a walker that
/// landed on token j after layer l sits at `points[l + 1][j]`.
pub fn walk(
    chains: &[Vec<f64>],
    t: usize,
    start: usize,
    walkers: usize,
    points: Option<(&[Vec<f64>], usize)>,
    seed: u64,
) -> Result<WalkReport> {
    if walkers == 0 || start >= t {
        return Err(Error::Config(format!("need at least one walker and a start token below {t}")));
    }
    for (l, p) in chains.iter().enumerate() {
        let v = markov::check(p, t, 1e-4);
        if !matches!(v, Validity::Ok { .. }) {
            return Err(Error::Config(format!("attention of layer {l} is not a Markov chain: {v:?}")));
        }
    }
    if let Some((pts, d)) = points {
        if pts.len() != chains.len() + 1 || pts.iter().any(|p| p.len() != t * d) {
            return Err(Error::Config(format!("need {} frames of {t} x {d} sphere points", chains.len() + 1)));
        }
    }
    let mut r = rng(seed, Stream::Walkers, start as u64);
    let mut at = vec![start; walkers];
    let mut paths: Vec<Vec<usize>> = (0..walkers.min(KEPT_PATHS)).map(|_| vec![start]).collect();
    let mut exact = vec![0.0; t];
    exact[start] = 1.0;
    let mut report = WalkReport {
        start,
        walkers,
        empirical: Vec::new(),
        exact: Vec::new(),
        max_abs_error: Vec::new(),
        paths: Vec::new(),
        msd: points.map(|_| Vec::new()),
    };
    for (l, p) in chains.iter().enumerate() {
        for (w, pos) in at.iter_mut().enumerate() {
            *pos = sample_row(&p[*pos * t..(*pos + 1) * t], r.random::<f64>());
            if let Some(path) = paths.get_mut(w) {
                path.push(*pos);
            }
        }
        exact = (0..t).map(|j| (0..t).map(|i| exact[i] * p[i * t + j]).sum()).collect();
        let mut share = vec![0.0; t];
        at.iter().for_each(|&j| share[j] += 1.0);
        share.iter_mut().for_each(|s| *s /= walkers as f64);
        let err = share.iter().zip(&exact).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        if let (Some((pts, d)), Some(msd)) = (points, report.msd.as_mut()) {
            let origin = &pts[0][start * d..(start + 1) * d];
            let frame = &pts[l + 1];
            let mean = at
                .iter()
                .map(|&j| frame[j * d..(j + 1) * d].iter().zip(origin).map(|(a, b)| (a - b) * (a - b)).sum::<f64>())
                .sum::<f64>()
                / walkers as f64;
            msd.push(mean);
        }
        report.empirical.push(share);
        report.exact.push(exact.clone());
        report.max_abs_error.push(err);
    }
    report.paths = paths;
    Ok(report)
}

/// Inverse-CDF draw from one probability row with a uniform `u` in [0, 1).
fn sample_row(row: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    for (j, &p) in row.iter().enumerate() {
        acc += p;
        if u < acc {
            return j;
        }
    }
    // Round-off can leave the row sum a hair below 1: the last token with mass takes the rest.
    row.iter().rposition(|&p| p > 0.0).unwrap_or(row.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_chain(t: usize, seed: u64, causal: bool) -> Vec<f64> {
        let mut r = rng(seed, Stream::Walkers, 1000);
        let mut p = vec![0.0; t * t];
        for i in 0..t {
            let visible = if causal { i + 1 } else { t };
            let row: Vec<f64> = (0..visible).map(|_| r.random::<f64>() + 0.05).collect();
            let s: f64 = row.iter().sum();
            (0..visible).for_each(|j| p[i * t + j] = row[j] / s);
        }
        p
    }

    #[test]
    fn walker_distribution_matches_the_product_of_the_chains() {
        let t = 6;
        let chains: Vec<_> = (0..3).map(|l| random_chain(t, l, false)).collect();
        let n = 40_000;
        let rep = walk(&chains, t, 2, n, None, 5).unwrap();
        for (emp, ex) in rep.empirical.iter().zip(&rep.exact) {
            for (a, b) in emp.iter().zip(ex) {
                let se = (b * (1.0 - b) / n as f64).sqrt().max(1e-9);
                assert!((a - b).abs() < 4.0 * se + 1e-12, "{a} vs {b} (se {se})");
            }
            assert!((ex.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
        assert_eq!(rep.paths.len(), KEPT_PATHS);
        assert!(rep.paths.iter().all(|p| p.len() == 4 && p[0] == 2));
    }

    #[test]
    fn causal_walkers_only_move_back_and_identity_chains_stay() {
        let t = 5;
        let chains: Vec<_> = (0..4).map(|l| random_chain(t, l + 10, true)).collect();
        let rep = walk(&chains, t, 4, 500, None, 1).unwrap();
        assert!(rep.paths.iter().all(|p| p.windows(2).all(|w| w[1] <= w[0])));
        let eye: Vec<f64> = (0..t * t).map(|k| if k % (t + 1) == 0 { 1.0 } else { 0.0 }).collect();
        let d = 3;
        let pts: Vec<Vec<f64>> = (0..3).map(|_| (0..t * d).map(|k| k as f64).collect()).collect();
        let rep = walk(&[eye.clone(), eye], t, 3, 100, Some((&pts, d)), 1).unwrap();
        assert_eq!(rep.empirical[1][3], 1.0);
        assert_eq!(rep.msd.unwrap(), vec![0.0, 0.0]);
    }

    #[test]
    fn broken_chains_and_bad_requests_are_errors() {
        let mut p = random_chain(4, 3, false);
        p[5] = f64::NAN;
        assert!(walk(&[p], 4, 0, 10, None, 0).unwrap_err().to_string().contains("not a Markov chain"));
        assert!(walk(&[random_chain(4, 3, false)], 4, 4, 10, None, 0).is_err());
        assert!(walk(&[random_chain(4, 3, false)], 4, 0, 0, None, 0).is_err());
    }
}
