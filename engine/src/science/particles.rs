//! Tokens as interacting particles (Geshkovski, Letrouit, Polyanskiy and Rigollet, docs/science.md#interacting-particles):
//! n points on the unit sphere S^(d-1) moved by pure self-attention,
//! `dx_i/dt = P_{x_i}( sum_j softmax_j(beta <x_i, x_j>) x_j )` with `P_x(y) = y - <x, y> x`, and the
//! discrete layer map `x_i <- normalize(x_i + h sum_j softmax_j(beta <x_i, x_j>) x_j)`.
//!
//! The flow is integrated with classical RK4 (local error O(h^5), global O(h^4), checked against
//! the closed-form equiangular ODE in the tests), each point put back on the sphere after the step:
//! the exact flow stays on it, so this only removes the integrator's radial error.
//!
//! Clustering is measured as the authors do: the mean pairwise inner product, the fraction of pairs
//! with `<x_i, x_j> > 0.999`, and the clusters, here the groups of points joined by inner products
//! above 0.9999 (connected components).

use rand_distr::{Distribution, StandardNormal};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::nn::reduce::dot;
use crate::rng::{rng, Stream};

/// Inner product above which a pair counts as clustered.
pub const CLUSTERED: f64 = 0.999;
/// Inner product above which two points are in one cluster.
pub const SAME_CLUSTER: f64 = 0.9999;

/// n points in R^d, row-major (n, d), each of unit norm.
#[derive(Clone, Debug)]
pub struct Particles {
    pub n: usize,
    pub d: usize,
    pub x: Vec<f64>,
}

/// How the particles start.
#[derive(Clone, Copy, Debug)]
pub enum Start {
    /// Uniform on the sphere.
    Uniform,
    /// Uniform on the open hemisphere `x_0 > 0`.
    Hemisphere,
    /// Every pair at inner product rho0 (needs d > n, and rho0 in (-1/(n-1), 1)).
    Equiangular(f64),
}

fn normalize(v: &mut [f64]) {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
}

impl Particles {
    pub fn new(n: usize, d: usize, start: Start, seed: u64) -> Result<Particles> {
        if n < 2 || d < 2 {
            return Err(Error::Config(format!("particles need n >= 2 and d >= 2, got n = {n}, d = {d}")));
        }
        let mut x = vec![0.0; n * d];
        match start {
            Start::Uniform | Start::Hemisphere => {
                let mut r = rng(seed, Stream::Particles, 0);
                for row in x.chunks_exact_mut(d) {
                    row.iter_mut().for_each(|v| *v = StandardNormal.sample(&mut r));
                    normalize(row);
                    if matches!(start, Start::Hemisphere) {
                        row[0] = row[0].abs();
                    }
                }
            }
            Start::Equiangular(rho) => {
                let lowest = -1.0 / (n - 1) as f64;
                if d <= n || !(rho > lowest && rho < 1.0) {
                    return Err(Error::Config(format!(
                        "an equiangular start of {n} points needs d > n (got d = {d}) and rho0 in ({lowest:.4}, 1) \
                         (got {rho})"
                    )));
                }
                // x_i = t e_0 + s (e_(i+1) - m), m the mean of e_1..e_n: the e_(i+1) - m have inner
                // products delta_ij - 1/n, so <x_i, x_j> = t^2 - s^2/n = rho and |x_i|^2 = 1 with
                // s^2 = 1 - rho and t^2 = rho + s^2/n = ((n-1) rho + 1)/n.
                let mean = 1.0 / n as f64;
                let (s, t) = ((1.0 - rho).sqrt(), (rho + (1.0 - rho) * mean).sqrt());
                for (i, row) in x.chunks_exact_mut(d).enumerate() {
                    row[0] = t;
                    for j in 0..n {
                        row[1 + j] = s * (if i == j { 1.0 } else { 0.0 } - mean);
                    }
                }
            }
        }
        Ok(Particles { n, d, x })
    }

    fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.d..(i + 1) * self.d]
    }

    /// `<x_i, x_j>` for every pair, (n, n).
    pub fn gram(&self) -> Vec<f64> {
        let n = self.n;
        (0..n * n).map(|k| dot(self.row(k / n), self.row(k % n))).collect()
    }
}

/// The attention of every point: `y_i = sum_j softmax_j(beta <x_i, x_j>) x_j`, (n, d), as two
/// matrix products around a row softmax.
fn attend(p: &Particles, x: &[f64], beta: f64, y: &mut [f64]) {
    let (n, d) = (p.n, p.d);
    let mut w = vec![0.0; n * n];
    let xm = MatRef::new(x, n, d);
    gemm(beta, xm, xm.t(), 0.0, MatMut::new(&mut w, n, n));
    for row in w.chunks_exact_mut(n) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        row.iter_mut().for_each(|v| *v = (*v - m).exp());
        let z: f64 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= z);
    }
    gemm(1.0, MatRef::new(&w, n, n), xm, 0.0, MatMut::new(y, n, d));
}

/// The flow's velocity at `x`: the attention output projected onto each point's tangent space.
pub fn velocity(p: &Particles, x: &[f64], beta: f64, v: &mut [f64]) {
    attend(p, x, beta, v);
    let d = p.d;
    for (vi, xi) in v.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        let along = dot(vi, xi);
        vi.iter_mut().zip(xi).for_each(|(a, &b)| *a -= along * b);
    }
}

/// One RK4 step of length h of the continuous flow, then every point back onto the sphere.
pub fn rk4_step(p: &mut Particles, beta: f64, h: f64) {
    let len = p.x.len();
    let (mut k1, mut k2, mut k3, mut k4, mut tmp) =
        (vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len]);
    let shifted = |tmp: &mut Vec<f64>, k: &[f64], c: f64, x: &[f64]| {
        tmp.iter_mut().zip(x.iter().zip(k)).for_each(|(t, (&xv, &kv))| *t = xv + c * kv);
    };
    velocity(p, &p.x, beta, &mut k1);
    shifted(&mut tmp, &k1, h / 2.0, &p.x);
    velocity(p, &tmp, beta, &mut k2);
    shifted(&mut tmp, &k2, h / 2.0, &p.x);
    velocity(p, &tmp, beta, &mut k3);
    shifted(&mut tmp, &k3, h, &p.x);
    velocity(p, &tmp, beta, &mut k4);
    for (i, x) in p.x.iter_mut().enumerate() {
        *x += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
    }
    p.x.chunks_exact_mut(p.d).for_each(normalize);
}

/// One discrete attention layer with LayerNorm: `x_i <- normalize(x_i + h y_i)`.
pub fn layer_step(p: &mut Particles, beta: f64, h: f64) {
    let mut y = vec![0.0; p.x.len()];
    attend(p, &p.x, beta, &mut y);
    p.x.iter_mut().zip(&y).for_each(|(x, &yv)| *x += h * yv);
    p.x.chunks_exact_mut(p.d).for_each(normalize);
}

/// How clustered the particles are at time t.
#[derive(Clone, Debug, Serialize)]
pub struct Clustering {
    pub t: f64,
    /// Mean of `<x_i, x_j>` over the pairs i < j.
    pub mean_inner: f64,
    /// Smallest and largest pairwise inner product.
    pub min_inner: f64,
    pub max_inner: f64,
    /// Fraction of pairs with `<x_i, x_j> > 0.999`.
    pub clustered: f64,
    /// Groups of points joined by inner products above 0.9999.
    pub clusters: usize,
}

pub fn clustering(p: &Particles, t: f64) -> Clustering {
    let (n, g) = (p.n, p.gram());
    let pairs: Vec<f64> = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).map(|(i, j)| g[i * n + j]).collect();
    let mean_inner = pairs.iter().sum::<f64>() / pairs.len() as f64;
    let clustered = pairs.iter().filter(|&&v| v > CLUSTERED).count() as f64 / pairs.len() as f64;
    // Connected components of the graph "inner product above SAME_CLUSTER", by union-find.
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for j in i + 1..n {
            if g[i * n + j] > SAME_CLUSTER {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a] = b;
            }
        }
    }
    let clusters = (0..n).filter(|&i| root(&mut parent, i) == i).count();
    let (min_inner, max_inner) =
        pairs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
    Clustering { t, mean_inner, min_inner, max_inner, clustered, clusters }
}

/// The closed-form right-hand side for an equiangular configuration (docs/science.md#interacting-particles):
/// `d rho/dt = 2 e^(beta rho) (1 - rho) ((n-1) rho + 1) / (e^beta + (n-1) e^(beta rho))`.
pub fn equiangular_rate(rho: f64, n: usize, beta: f64) -> f64 {
    let m = (n - 1) as f64;
    // Divided through by e^(beta rho), so large beta does not overflow.
    2.0 * (1.0 - rho) * (m * rho + 1.0) / ((beta * (1.0 - rho)).exp() + m)
}

/// The flow (or, with `discrete`, the layer map with step `dt`) from `p` for `time`, recording the
/// clustering at t = 0 and every `record` time units (and at the end).
pub fn simulate(
    p: &mut Particles,
    beta: f64,
    time: f64,
    dt: f64,
    record: f64,
    discrete: bool,
) -> Result<Vec<Clustering>> {
    if !(beta.is_finite() && time.is_finite() && time >= 0.0 && dt > 0.0 && dt.is_finite() && record > 0.0) {
        return Err(Error::Config(format!(
            "particles need finite beta, time >= 0, dt > 0 and a positive record interval (got beta {beta}, time \
             {time}, dt {dt}, record {record})"
        )));
    }
    let steps = (time / dt).round() as usize;
    let every = ((record / dt).round() as usize).max(1);
    let mut out = vec![clustering(p, 0.0)];
    for s in 1..=steps {
        if discrete {
            layer_step(p, beta, dt);
        } else {
            rk4_step(p, beta, dt);
        }
        if s % every == 0 || s == steps {
            out.push(clustering(p, s as f64 * dt));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scalar equiangular ODE by RK4 in f64, independently of the particle code.
    fn rho_ode(rho0: f64, n: usize, beta: f64, time: f64, h: f64) -> f64 {
        let f = |r: f64| equiangular_rate(r, n, beta);
        let mut r = rho0;
        for _ in 0..(time / h).round() as usize {
            let (k1, k2) = (f(r), f(r + h / 2.0 * f(r)));
            let k3 = f(r + h / 2.0 * k2);
            let k4 = f(r + h * k3);
            r += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4);
        }
        r
    }

    #[test]
    fn the_equiangular_start_is_equiangular() {
        for rho in [-0.15, 0.0, 0.3, 0.9] {
            let p = Particles::new(6, 9, Start::Equiangular(rho), 0).unwrap();
            let g = p.gram();
            for i in 0..6 {
                assert!((g[i * 6 + i] - 1.0).abs() < 1e-12);
                for j in (0..6).filter(|&j| j != i) {
                    assert!((g[i * 6 + j] - rho).abs() < 1e-12, "rho {rho}: {}", g[i * 6 + j]);
                }
            }
        }
        assert!(Particles::new(6, 6, Start::Equiangular(0.3), 0).is_err(), "needs d > n");
        assert!(Particles::new(6, 9, Start::Equiangular(-0.5), 0).is_err(), "below -1/(n-1)");
    }

    /// Started equiangular, the particles stay equiangular and follow the closed-form ODE.
    #[test]
    fn equiangular_particles_follow_the_closed_form_ode() {
        let (n, d, beta, rho0, time) = (5, 8, 2.0, 0.1, 3.0);
        let mut p = Particles::new(n, d, Start::Equiangular(rho0), 0).unwrap();
        let record = simulate(&mut p, beta, time, 0.01, 0.5, false).unwrap();
        for c in &record {
            let want = rho_ode(rho0, n, beta, c.t, 1e-4);
            assert!(c.max_inner - c.min_inner < 1e-10, "t {}: no longer equiangular", c.t);
            assert!((c.mean_inner - want).abs() < 1e-8, "t {}: rho {} vs the ODE's {want}", c.t, c.mean_inner);
        }
        assert!(record.last().unwrap().mean_inner > 0.9, "the particles come together");
    }

    /// RK4 is fourth order: halving the step cuts the error at a fixed time by about 16.
    #[test]
    fn the_integrator_error_falls_as_h_to_the_fourth() {
        let start = Particles::new(8, 4, Start::Uniform, 3).unwrap();
        let run = |h: f64| {
            let mut p = start.clone();
            simulate(&mut p, 1.5, 1.0, h, 1.0, false).unwrap();
            p.x
        };
        let reference = run(1.0 / 512.0);
        let err = |x: Vec<f64>| x.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        let (coarse, fine) = (err(run(0.1)), err(run(0.05)));
        let order = (coarse / fine).log2();
        assert!((3.5..4.5).contains(&order), "observed order {order} ({coarse:e} -> {fine:e})");
        assert!(fine < 1e-6, "error at h = 0.05: {fine:e}");
    }

    /// Near rho = 1 the ODE's 1 - rho decays at rate 2, whatever beta and n.
    #[test]
    fn one_minus_rho_decays_at_rate_two_near_one() {
        for (n, beta) in [(4, 1.0), (10, 4.0)] {
            let mut p = Particles::new(n, n + 2, Start::Equiangular(0.99), 0).unwrap();
            let rec = simulate(&mut p, beta, 2.0, 0.005, 1.0, false).unwrap();
            let (a, b) = (&rec[1], &rec[2]);
            let rate = -((1.0 - b.mean_inner).ln() - (1.0 - a.mean_inner).ln()) / (b.t - a.t);
            assert!((rate - 2.0).abs() < 0.02, "n {n}, beta {beta}: rate {rate}");
        }
    }

    /// Random starts in an open hemisphere collapse into one cluster (Geshkovski et al., d >= 3).
    #[test]
    fn a_hemisphere_start_clusters() {
        for seed in 0..3 {
            let mut p = Particles::new(16, 6, Start::Hemisphere, seed).unwrap();
            let rec = simulate(&mut p, 1.0, 20.0, 0.05, 5.0, false).unwrap();
            let (first, last) = (&rec[0], rec.last().unwrap());
            assert!(first.clustered < 0.05 && first.clusters > 8, "seed {seed}: starts spread, {first:?}");
            assert_eq!((last.clustered, last.clusters), (1.0, 1), "seed {seed}: ends in one cluster, {last:?}");
            assert!(
                rec.windows(2).all(|w| w[1].mean_inner >= w[0].mean_inner - 1e-12),
                "seed {seed}: mean inner product never falls"
            );
        }
    }

    /// The layer map with a small step follows the flow for a time of O(1) (its error is O(h)).
    #[test]
    fn the_layer_map_approximates_the_flow() {
        let start = Particles::new(6, 5, Start::Uniform, 7).unwrap();
        let mut flow = start.clone();
        simulate(&mut flow, 1.0, 1.0, 0.01, 1.0, false).unwrap();
        let gaps: Vec<f64> = [0.02, 0.01]
            .map(|h| {
                let mut layers = start.clone();
                simulate(&mut layers, 1.0, 1.0, h, 1.0, true).unwrap();
                layers.x.iter().zip(&flow.x).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
            })
            .to_vec();
        assert!(gaps[1] < gaps[0] * 0.6 && gaps[1] < 0.05, "{gaps:?}");
    }
}
