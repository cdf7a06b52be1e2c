//! One attention matrix as a Markov transition matrix (docs/science.md#attention-as-a-markov-chain and #softmax-as-a-gaussian-kernel).
//!
//! `P = softmax(Q K^T / sqrt(d) + mask)` is row-stochastic: `P_ij` is the probability that a walker
//! at token i jumps to token j. We look at its powers (k-step diffusion), its spectrum, its stationary
//! distribution, where a causal chain gets absorbed, the entropy of each row, and how far P is from
//! the row-normalised Gaussian kernel built from the same q and k. P is (T, T) row-major throughout.

use nalgebra::{DMatrix, DVector, Schur};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::nn::reduce::dot;

/// Rows of an f32 softmax sum to 1 within ~1e-6; anything beyond this is not a transition matrix.
pub const ROW_SUM_TOL: f64 = 1e-4;
/// The regulariser inside the logarithm of the entropy, as in JoMA's code.
pub const ENTROPY_EPS: f64 = 1e-8;

/// Whether a matrix may be analysed as a Markov chain; the first problem found, with where it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Validity {
    Ok {
        max_row_error: f64,
    },
    /// `len` numbers cannot be a T x T matrix (or T is 0).
    WrongShape {
        len: usize,
        t: usize,
    },
    NonFinite {
        row: usize,
        col: usize,
    },
    Negative {
        row: usize,
        col: usize,
        value: f64,
    },
    /// `row` is the row whose sum is farthest from 1.
    NotStochastic {
        row: usize,
        sum: f64,
    },
}

/// Checks entries (finite, non-negative) and row sums (within `tol` of 1).
pub fn check(p: &[f64], t: usize, tol: f64) -> Validity {
    if t == 0 || p.len() != t * t {
        return Validity::WrongShape { len: p.len(), t };
    }
    let mut worst = (0, 1.0f64);
    for (i, row) in p.chunks_exact(t).enumerate() {
        for (j, &x) in row.iter().enumerate() {
            if !x.is_finite() {
                return Validity::NonFinite { row: i, col: j };
            }
            if x < 0.0 {
                return Validity::Negative { row: i, col: j, value: x };
            }
        }
        let sum: f64 = row.iter().sum();
        if (sum - 1.0).abs() > (worst.1 - 1.0).abs() {
            worst = (i, sum);
        }
    }
    if (worst.1 - 1.0).abs() > tol {
        Validity::NotStochastic { row: worst.0, sum: worst.1 }
    } else {
        Validity::Ok { max_row_error: (worst.1 - 1.0).abs() }
    }
}

/// `check` as an error, for functions that must not analyse a broken matrix.
fn require_stochastic(p: &[f64], t: usize) -> Result<f64> {
    match check(p, t, ROW_SUM_TOL) {
        Validity::Ok { max_row_error } => Ok(max_row_error),
        Validity::WrongShape { len, t } => {
            Err(Error::Data(format!("expected a {t} x {t} attention matrix ({} numbers), got {len}", t * t)))
        }
        Validity::NonFinite { row, col } => {
            Err(Error::Data(format!("attention matrix has a non-finite entry at ({row}, {col}); not analysed")))
        }
        Validity::Negative { row, col, value } => {
            Err(Error::Data(format!("attention matrix has a negative entry {value} at ({row}, {col}); not analysed")))
        }
        Validity::NotStochastic { row, sum } => Err(Error::Data(format!(
            "attention matrix is not row-stochastic: row {row} sums to {sum} \
             (tolerance {ROW_SUM_TOL}); not analysed"
        ))),
    }
}

fn matrix(p: &[f64], t: usize) -> DMatrix<f64> {
    DMatrix::from_row_slice(t, t, p)
}

fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    m.transpose().as_slice().to_vec()
}

// The functions below take a valid T x T matrix (`check` passed): `analyse` checks first.

/// `P^k` (k >= 0) by repeated squaring: the transition probabilities of k steps.
pub fn power(p: &[f64], t: usize, k: u32) -> Vec<f64> {
    let (mut result, mut base, mut k) = (DMatrix::identity(t, t), matrix(p, t), k);
    while k > 0 {
        if k & 1 == 1 {
            result = &result * &base;
        }
        base = &base * &base;
        k >>= 1;
    }
    row_major(&result)
}

/// A complex eigenvalue.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Eigenvalue {
    pub re: f64,
    pub im: f64,
    pub modulus: f64,
}

/// Eigenvalues of a general real matrix (real Schur form), sorted by decreasing modulus.
pub fn eigenvalues(p: &[f64], t: usize) -> Result<Vec<Eigenvalue>> {
    if t == 0 {
        return Ok(vec![]);
    }
    let schur = Schur::try_new(matrix(p, t), f64::EPSILON, 10_000 * t.max(1))
        .ok_or_else(|| Error::Data("eigenvalue iteration did not converge".into()))?;
    let mut eig: Vec<Eigenvalue> =
        schur.complex_eigenvalues().iter().map(|z| Eigenvalue { re: z.re, im: z.im, modulus: z.norm() }).collect();
    eig.sort_by(|a, b| b.modulus.total_cmp(&a.modulus));
    Ok(eig)
}

/// `1 - |lambda_2|`: how fast the chain forgets where it started (NaN for a 1 x 1 matrix).
pub fn spectral_gap(sorted: &[Eigenvalue]) -> f64 {
    sorted.get(1).map_or(f64::NAN, |e| 1.0 - e.modulus)
}

/// The stationary distribution `pi P = pi`, `sum pi = 1`, when it is unique: solves
/// `(P^T - I) pi = 0` with one equation replaced by the normalisation. None when the chain has
/// several closed classes (the system is singular) or the solution is not a distribution.
pub fn stationary(p: &[f64], t: usize) -> Option<Vec<f64>> {
    if t == 0 {
        return None;
    }
    let mut a = matrix(p, t).transpose() - DMatrix::identity(t, t);
    a.row_mut(t - 1).fill(1.0);
    let mut b = DVector::zeros(t);
    b[t - 1] = 1.0;
    let pi = a.lu().solve(&b)?;
    // Residual of pi P = pi and sign: a distribution, not just any solution.
    let residual = (matrix(p, t).transpose() * &pi - &pi).abs().sum();
    if residual > 1e-8 || pi.iter().any(|&x| !x.is_finite() || x < -1e-10) {
        return None;
    }
    Some(pi.iter().map(|x| x.max(0.0)).collect())
}

/// Mean over rows of `(P^k)_{i0}`: the probability mass a causal chain has moved to position 0
/// after k steps, for each k in `ks` (the chain is absorbed there, so this rises to 1).
pub fn mass_at_origin(p: &[f64], t: usize, ks: &[u32]) -> Vec<f64> {
    ks.iter().map(|&k| power(p, t, k).chunks_exact(t).map(|r| r[0]).sum::<f64>() / t as f64).collect()
}

/// Expected number of steps before a causal chain reaches position 0, from each position
/// (`h_0 = 0`, `h_i = 1 + sum_j P_ij h_j`; P is lower triangular, so forward substitution).
/// Infinite from a position that keeps all its mass (`P_ii = 1`); None if P is not lower triangular.
pub fn absorption_steps(p: &[f64], t: usize) -> Option<Vec<f64>> {
    let upper = (0..t).flat_map(|i| (i + 1..t).map(move |j| (i, j)));
    if upper.clone().any(|(i, j)| p[i * t + j] > 1e-12) {
        return None;
    }
    let mut h = vec![0.0; t];
    for i in 1..t {
        let row = &p[i * t..(i + 1) * t];
        let rest: f64 = (1..i).map(|j| row[j] * h[j]).sum();
        let leave = 1.0 - row[i];
        h[i] = if leave > 0.0 { (1.0 + rest) / leave } else { f64::INFINITY };
    }
    Some(h)
}

/// `H_i = -sum_j P_ij ln(P_ij + 1e-8)` for every row.
pub fn row_entropy(p: &[f64], t: usize) -> Vec<f64> {
    p.chunks_exact(t).map(|row| -row.iter().map(|&x| x * (x + ENTROPY_EPS).ln()).sum::<f64>()).collect()
}

/// Mean row entropy of uniform causal attention over T positions: `(1/T) sum_{i=1..T} ln i`.
pub fn uniform_causal_entropy(t: usize) -> f64 {
    (1..=t).map(|i| (i as f64).ln()).sum::<f64>() / t as f64
}

/// The attention matrix itself from one head's q and k ((T, d) each): softmax of `q.k / sqrt(d)`
/// over the visible positions (j <= i when causal).
pub fn softmax_attention(q: &[f64], k: &[f64], t: usize, d: usize, causal: bool) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    row_softmax(t, causal, |i, j| scale * dot(&q[i * d..(i + 1) * d], &k[j * d..(j + 1) * d]))
}

/// The row-normalised Gaussian kernel `exp(-|q_i - k_j|^2 / (2 sqrt d))`, masked like attention.
/// Equal to `softmax_attention` exactly when all keys have the same norm.
pub fn gaussian_kernel(q: &[f64], k: &[f64], t: usize, d: usize, causal: bool) -> Vec<f64> {
    let scale = 1.0 / (2.0 * (d as f64).sqrt());
    row_softmax(t, causal, |i, j| {
        let (a, b) = (&q[i * d..(i + 1) * d], &k[j * d..(j + 1) * d]);
        -scale * a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>()
    })
}

/// Rows `softmax_j(logit(i, j))` over visible j, zero elsewhere (max subtracted for stability).
fn row_softmax(t: usize, causal: bool, logit: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut p = vec![0.0; t * t];
    for (i, row) in p.chunks_exact_mut(t).enumerate() {
        let visible = if causal { i + 1 } else { t };
        let row = &mut row[..visible];
        row.iter_mut().enumerate().for_each(|(j, x)| *x = logit(i, j));
        let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        row.iter_mut().for_each(|x| *x = (*x - max).exp());
        let sum: f64 = row.iter().sum();
        row.iter_mut().for_each(|x| *x /= sum);
    }
    p
}

/// Total-variation distance between P and the Gaussian kernel from the same q and k, per row.
#[derive(Clone, Debug, Serialize)]
pub struct KernelDistance {
    pub per_row: Vec<f64>,
    pub mean: f64,
    pub max: f64,
}

/// `TV_i = (1/2) sum_j |P_ij - G_ij|`, G the row-normalised Gaussian kernel of `gaussian_kernel`.
pub fn kernel_distance(p: &[f64], q: &[f64], k: &[f64], t: usize, d: usize, causal: bool) -> Result<KernelDistance> {
    require_stochastic(p, t)?;
    if d == 0 || q.len() != t * d || k.len() != t * d {
        return Err(Error::Data(format!("q and k must be {t} x {d}, got {} and {} numbers", q.len(), k.len())));
    }
    let g = gaussian_kernel(q, k, t, d, causal);
    let per_row: Vec<f64> = p
        .chunks_exact(t)
        .zip(g.chunks_exact(t))
        .map(|(a, b)| 0.5 * a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>())
        .collect();
    Ok(KernelDistance {
        mean: per_row.iter().sum::<f64>() / t as f64,
        max: per_row.iter().copied().fold(0.0, f64::max),
        per_row,
    })
}

/// Everything about one attention matrix as a Markov chain.
#[derive(Clone, Debug, Serialize)]
pub struct MarkovReport {
    pub t: usize,
    pub causal: bool,
    pub max_row_error: f64,
    pub eigenvalues: Vec<Eigenvalue>,
    pub spectral_gap: f64,
    /// None when not unique (e.g. several closed classes).
    pub stationary: Option<Vec<f64>>,
    pub entropy: Vec<f64>,
    pub mean_entropy: f64,
    /// Mean entropy of uniform attention with the same mask: the most spread-out it can be.
    pub uniform_entropy: f64,
    /// `(k, mean_i (P^k)_{i0})` for k in 1, 2, 4, ..., up to about T.
    pub mass_at_origin: Vec<(u32, f64)>,
    /// Causal chains only: expected steps to reach position 0 from each position.
    pub absorption_steps: Option<Vec<f64>>,
}

/// Analyses P (T x T), or says why it will not: non-finite, negative, or not row-stochastic.
pub fn analyse(p: &[f64], t: usize, causal: bool) -> Result<MarkovReport> {
    let max_row_error = require_stochastic(p, t)?;
    let eig = eigenvalues(p, t)?;
    let entropy = row_entropy(p, t);
    let ks: Vec<u32> =
        std::iter::successors(Some(1u32), |k| Some(k * 2)).take_while(|&k| k as usize <= 2 * t.max(1)).collect();
    Ok(MarkovReport {
        t,
        causal,
        max_row_error,
        spectral_gap: spectral_gap(&eig),
        eigenvalues: eig,
        stationary: stationary(p, t),
        mean_entropy: entropy.iter().sum::<f64>() / t as f64,
        entropy,
        uniform_entropy: if causal { uniform_causal_entropy(t) } else { (t as f64).ln() },
        mass_at_origin: ks.iter().copied().zip(mass_at_origin(p, t, &ks)).collect(),
        absorption_steps: if causal { absorption_steps(p, t) } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{rng, Stream};
    use rand_distr::{Distribution, StandardNormal};

    fn gaussian(n: usize, seed: u64) -> Vec<f64> {
        let mut r = rng(seed, Stream::Brownian, 100);
        (0..n).map(|_| StandardNormal.sample(&mut r)).collect()
    }

    fn uniform_causal(t: usize) -> Vec<f64> {
        let mut p = vec![0.0; t * t];
        for i in 0..t {
            p[i * t..i * t + i + 1].fill(1.0 / (i + 1) as f64);
        }
        p
    }

    #[test]
    fn every_power_is_row_stochastic() {
        let (t, d) = (12, 8);
        let (q, k) = (gaussian(t * d, 1), gaussian(t * d, 2));
        for causal in [true, false] {
            let p = softmax_attention(&q, &k, t, d, causal);
            for power_k in [0, 1, 2, 3, 7, 20, 64] {
                let pk = power(&p, t, power_k);
                assert!(
                    matches!(check(&pk, t, 1e-12), Validity::Ok { .. }),
                    "P^{power_k} causal={causal}: {:?}",
                    check(&pk, t, 1e-12)
                );
            }
            // P^3 by repeated squaring equals P P P by hand.
            let (m, p3) = (matrix(&p, t), power(&p, t, 3));
            let direct = row_major(&(&m * &m * &m));
            assert!(p3.iter().zip(&direct).all(|(a, b)| (a - b).abs() < 1e-14));
        }
    }

    #[test]
    fn causal_chain_ends_at_position_zero() {
        let (t, d) = (10, 4);
        let p = softmax_attention(&gaussian(t * d, 3), &gaussian(t * d, 4), t, d, true);
        let mass = mass_at_origin(&p, t, &[1, 4, 16, 64, 256]);
        assert!(mass.windows(2).all(|w| w[1] >= w[0] - 1e-12), "{mass:?}");
        assert!(mass[4] > 0.999, "{mass:?}");
        let pi = stationary(&p, t).unwrap();
        assert!((pi[0] - 1.0).abs() < 1e-9 && pi[1..].iter().all(|x| x.abs() < 1e-9));
        // Uniform causal attention: h_i = 1 + (1 + 1/2 + ... + 1/i), derived by hand from
        // i h_i = (i + 1) + sum_{j<i} h_j.
        let h = absorption_steps(&uniform_causal(t), t).unwrap();
        for (i, hi) in h.iter().enumerate().skip(1) {
            let harmonic: f64 = (1..=i).map(|j| 1.0 / j as f64).sum();
            assert!((hi - (1.0 + harmonic)).abs() < 1e-12, "h_{i} = {hi}");
        }
        assert!(absorption_steps(&softmax_attention(&[0.0; 4], &[0.0; 4], 2, 2, false), 2).is_none());
    }

    #[test]
    fn two_state_chain_has_its_closed_forms() {
        // [[1-a, a], [b, 1-b]]: eigenvalues 1 and 1-a-b, stationary (b, a)/(a+b).
        let (a, b) = (0.3, 0.1);
        let p = [1.0 - a, a, b, 1.0 - b];
        let eig = eigenvalues(&p, 2).unwrap();
        assert!((eig[0].re - 1.0).abs() < 1e-12 && (eig[1].re - (1.0 - a - b)).abs() < 1e-12);
        assert!((spectral_gap(&eig) - (a + b)).abs() < 1e-12);
        let pi = stationary(&p, 2).unwrap();
        assert!((pi[0] - b / (a + b)).abs() < 1e-12 && (pi[1] - a / (a + b)).abs() < 1e-12);
    }

    #[test]
    fn complex_spectrum_and_reversible_stationary_distribution() {
        // A 3-cycle: eigenvalues are the cube roots of unity, gap 0, stationary uniform.
        let cycle = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0];
        let eig = eigenvalues(&cycle, 3).unwrap();
        assert!(eig.iter().all(|e| (e.modulus - 1.0).abs() < 1e-12));
        let imag: Vec<f64> = eig.iter().map(|e| e.im.abs()).collect();
        assert!(imag.iter().filter(|&&x| (x - 0.75f64.sqrt()).abs() < 1e-12).count() == 2);
        assert!(spectral_gap(&eig).abs() < 1e-12);
        let pi = stationary(&cycle, 3).unwrap();
        assert!(pi.iter().all(|x| (x - 1.0 / 3.0).abs() < 1e-12));
        // Bidirectional self-attention with Q = K is a reversible chain on a symmetric kernel W:
        // pi_i is proportional to the row sums of W = exp(u_i.u_j / sqrt(d)).
        let (t, d) = (9, 6);
        let u = gaussian(t * d, 5);
        let p = softmax_attention(&u, &u, t, d, false);
        let w: Vec<f64> = (0..t)
            .map(|i| {
                (0..t).map(|j| (dot(&u[i * d..(i + 1) * d], &u[j * d..(j + 1) * d]) / 6f64.sqrt()).exp()).sum::<f64>()
            })
            .collect();
        let total: f64 = w.iter().sum();
        let pi = stationary(&p, t).unwrap();
        for (a, b) in pi.iter().zip(&w) {
            assert!((a - b / total).abs() < 1e-12);
        }
        // A reversible chain has a real spectrum, with lambda_1 = 1.
        let eig = eigenvalues(&p, t).unwrap();
        assert!(eig.iter().all(|e| e.im.abs() < 1e-10));
        assert!((eig[0].re - 1.0).abs() < 1e-12);
        assert!(spectral_gap(&eig) > 0.0 && spectral_gap(&eig) < 1.0);
        // Two closed classes: no unique stationary distribution.
        assert!(stationary(&[1.0, 0.0, 0.0, 1.0], 2).is_none());
    }

    #[test]
    fn gaussian_kernel_identity_on_the_sphere() {
        // Q = K = u with |u| = sqrt(d): every key has the same norm, so P is the Gaussian kernel.
        let (t, d) = (16, 8);
        let mut u = gaussian(t * d, 6);
        for x in u.chunks_exact_mut(d) {
            let norm = dot(x, x).sqrt();
            x.iter_mut().for_each(|v| *v *= (d as f64).sqrt() / norm);
        }
        for causal in [true, false] {
            let p = softmax_attention(&u, &u, t, d, causal);
            let tv = kernel_distance(&p, &u, &u, t, d, causal).unwrap();
            assert!(tv.max < 1e-6, "causal={causal}: TV {}", tv.max);
        }
        // Learned-projection-like q and k with unequal key norms break it.
        let (q, k) = (gaussian(t * d, 7), gaussian(t * d, 8));
        let p = softmax_attention(&q, &k, t, d, false);
        let tv = kernel_distance(&p, &q, &k, t, d, false).unwrap();
        assert!(tv.mean > 0.05, "TV {}", tv.mean);
    }

    #[test]
    fn uniform_causal_entropy_reference() {
        assert!((uniform_causal_entropy(35) - 2.6325).abs() < 5e-4);
        let t = 35;
        let h = row_entropy(&uniform_causal(t), t);
        let mean = h.iter().sum::<f64>() / t as f64;
        assert!((mean - uniform_causal_entropy(t)).abs() < 1e-5);
        // Row i of uniform causal attention has entropy ln(i + 1); a one-hot row has 0.
        assert!((h[9] - 10f64.ln()).abs() < 1e-6);
        assert!(h[0].abs() < 1e-7);
        let rep = analyse(&uniform_causal(t), t, true).unwrap();
        assert!((rep.mean_entropy - rep.uniform_entropy).abs() < 1e-5);
    }

    #[test]
    fn broken_matrices_are_reported_not_analysed() {
        let t = 4;
        let mut p = uniform_causal(t);
        p[6] = f64::NAN;
        assert_eq!(check(&p, t, ROW_SUM_TOL), Validity::NonFinite { row: 1, col: 2 });
        let msg = analyse(&p, t, true).unwrap_err().to_string();
        assert!(msg.contains("non-finite") && msg.contains("(1, 2)"), "{msg}");
        let mut p = uniform_causal(t);
        p[t * 2] += 0.01;
        p[t * 3] += 0.2;
        assert!(matches!(
            check(&p, t, ROW_SUM_TOL),
            Validity::NotStochastic { row: 3, sum } if (sum - 1.2).abs() < 1e-12
        ));
        let msg = analyse(&p, t, true).unwrap_err().to_string();
        assert!(msg.contains("not row-stochastic") && msg.contains("row 3"), "{msg}");
        let mut p = uniform_causal(t);
        p[0] = -1.0;
        assert!(matches!(check(&p, t, 1.0), Validity::Negative { row: 0, .. }));
        assert!(analyse(&[1.0; 5], 2, false).is_err());
        assert_eq!(check(&[], 0, 1.0), Validity::WrongShape { len: 0, t: 0 });
        let q = [1.0; 8];
        assert!(kernel_distance(&[f64::NAN; 4], &q, &q, 2, 4, false).is_err());
    }
}
