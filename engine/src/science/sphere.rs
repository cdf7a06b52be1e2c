//! Tokens on the sphere (docs/science.md#the-sphere). LayerNorm's normalised point `u = (x - mean) / std` has
//! norm sqrt(d) (with the engine's eps: `sqrt(d var / (var + eps))`, a hair inside). Here: how close
//! a set of points is to that sphere, how far the affine gain and bias move them off it, and a 3-D
//! view of a cloud (top principal directions, projected back onto the unit sphere) that stays
//! oriented from one frame of an animation to the next.

use nalgebra::{DMatrix, SymmetricEigen};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn check_points(points: &[f64], dim: usize) -> Result<usize> {
    if dim == 0 || points.is_empty() || !points.len().is_multiple_of(dim) {
        return Err(Error::Data(format!(
            "{} numbers are not a nonzero number of points of dimension {dim}",
            points.len()
        )));
    }
    if let Some(i) = points.iter().position(|v| !v.is_finite()) {
        return Err(Error::Data(format!("point {} has a non-finite coordinate", i / dim)));
    }
    Ok(points.len() / dim)
}

/// Norms of a set of points against the LayerNorm radius sqrt(d).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RadiusStats {
    pub count: usize,
    pub dim: usize,
    /// sqrt(dim).
    pub target: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// `max_i | |u_i| - sqrt(d) | / sqrt(d)`.
    pub max_rel_err: f64,
}

pub fn radius_stats(points: &[f64], dim: usize) -> Result<RadiusStats> {
    let count = check_points(points, dim)?;
    let target = (dim as f64).sqrt();
    let norms: Vec<f64> = points.chunks_exact(dim).map(norm).collect();
    Ok(RadiusStats {
        count,
        dim,
        target,
        mean: norms.iter().sum::<f64>() / count as f64,
        min: norms.iter().copied().fold(f64::INFINITY, f64::min),
        max: norms.iter().copied().fold(0.0, f64::max),
        max_rel_err: norms.iter().map(|r| (r - target).abs() / target).fold(0.0, f64::max),
    })
}

/// How LayerNorm's affine map `y = gain ⊙ u + bias` moves sphere points `u`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AffineDrift {
    pub mean_radius: f64,
    /// Mean and max of `| |y| - sqrt(d) | / sqrt(d)`: radial distance off the sphere, relative.
    pub mean_rel_offset: f64,
    pub max_rel_offset: f64,
    /// Mean angle (radians) between u and y: how much the map turns directions.
    pub mean_angle: f64,
}

pub fn affine_drift(u: &[f64], gain: &[f64], bias: &[f64], dim: usize) -> Result<AffineDrift> {
    let count = check_points(u, dim)?;
    if gain.len() != dim || bias.len() != dim {
        return Err(Error::Data(format!(
            "gain and bias must have {dim} entries, got {} and {}",
            gain.len(),
            bias.len()
        )));
    }
    let target = (dim as f64).sqrt();
    let (mut radius, mut offset, mut max_offset, mut angle) = (0.0, 0.0, 0.0f64, 0.0);
    let mut y = vec![0.0; dim];
    for x in u.chunks_exact(dim) {
        for j in 0..dim {
            y[j] = gain[j] * x[j] + bias[j];
        }
        let (ny, nx) = (norm(&y), norm(x));
        let rel = (ny - target).abs() / target;
        radius += ny;
        offset += rel;
        max_offset = max_offset.max(rel);
        let cos = x.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>() / (nx * ny);
        // A zero vector on either side has no direction: count it as a right angle.
        angle += if cos.is_finite() { cos.clamp(-1.0, 1.0).acos() } else { std::f64::consts::FRAC_PI_2 };
    }
    let n = count as f64;
    Ok(AffineDrift {
        mean_radius: radius / n,
        mean_rel_offset: offset / n,
        max_rel_offset: max_offset,
        mean_angle: angle / n,
    })
}

/// A 3-D view of a point cloud: its top three principal directions (of the second moment about the
/// origin, not the mean: the sphere is centred at the origin, and directions from it are what the
/// view shows), each point projected on them and rescaled to the unit sphere.
#[derive(Clone, Debug, Serialize)]
pub struct Projection3 {
    pub dim: usize,
    /// (3, dim) row-major unit vectors; pass them to the next frame's call as `previous`.
    pub components: Vec<f64>,
    /// Fraction of the second moment along each component.
    pub explained: [f64; 3],
    /// One unit vector per point (the origin for a point orthogonal to all three directions).
    pub points: Vec<[f64; 3]>,
}

/// Projects `points` (N, dim) to the unit sphere in 3-D. With `previous` (the last frame's
/// components), directions are matched to the previous ones (order and sign) so an animation does
/// not jump when eigenvalues cross or an eigenvector's arbitrary sign changes; without it, each
/// direction's largest-magnitude entry is made positive.
pub fn project3(points: &[f64], dim: usize, previous: Option<&[f64]>) -> Result<Projection3> {
    let count = check_points(points, dim)?;
    if dim < 3 {
        return Err(Error::Data(format!("a 3-D view needs dimension at least 3, got {dim}")));
    }
    if previous.is_some_and(|p| p.len() != 3 * dim) {
        return Err(Error::Data(format!("previous components must be 3 x {dim} numbers")));
    }
    let x = DMatrix::from_row_slice(count, dim, points);
    let found = fewer_points(&x).or_else(|| many_points(&x));
    let (mut comps, mut values, trace) = match found {
        Some(found) => found,
        None => {
            let moment = x.transpose() * &x / count as f64;
            let trace = moment.trace();
            let eig = SymmetricEigen::new(moment);
            let mut order: Vec<usize> = (0..dim).collect();
            order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
            let comps: Vec<Vec<f64>> =
                order[..3].iter().map(|&i| eig.eigenvectors.column(i).iter().copied().collect()).collect();
            (comps, order[..3].iter().map(|&i| eig.eigenvalues[i]).collect(), trace)
        }
    };
    match previous {
        Some(prev) => align(&mut comps, &mut values, prev, dim),
        None => {
            for c in comps.iter_mut() {
                let big = c.iter().copied().fold(0.0, |m: f64, v| if v.abs() > m.abs() { v } else { m });
                if big < 0.0 {
                    c.iter_mut().for_each(|v| *v = -*v);
                }
            }
        }
    }
    let projected = points
        .chunks_exact(dim)
        .map(|p| {
            let mut y = [0.0; 3];
            for (yi, c) in y.iter_mut().zip(&comps) {
                *yi = c.iter().zip(p).map(|(a, b)| a * b).sum();
            }
            let n = norm(&y);
            if n > 0.0 {
                y.iter_mut().for_each(|v| *v /= n);
            }
            y
        })
        .collect();
    let frac = |v: f64| if trace > 0.0 { v / trace } else { 0.0 };
    Ok(Projection3 {
        dim,
        components: comps.concat(),
        explained: [frac(values[0]), frac(values[1]), frac(values[2])],
        points: projected,
    })
}

/// The top three directions of the second moment `X^T X / N` from the N x N Gram matrix `X X^T / N`
/// when there are fewer points than dimensions (GPT-2: 64 tokens in 768 dimensions): the same
/// eigenvalues, and the directions `X^T u` normalised, at N^3 rather than dim^3. None when fewer
/// than three directions carry any of the moment (then any orthonormal completion would do, and
/// the dim x dim decomposition gives one).
#[allow(clippy::type_complexity)]
fn fewer_points(x: &DMatrix<f64>) -> Option<(Vec<Vec<f64>>, Vec<f64>, f64)> {
    let (count, dim) = x.shape();
    if count >= dim || count < 3 {
        return None;
    }
    let gram = x * x.transpose() / count as f64;
    let trace = gram.trace();
    let eig = SymmetricEigen::new(gram);
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
    let mut comps = Vec::with_capacity(3);
    for &i in &order[..3] {
        let value = eig.eigenvalues[i];
        if value.is_nan() || value <= 1e-12 * trace.max(f64::MIN_POSITIVE) {
            return None;
        }
        let v = x.transpose() * eig.eigenvectors.column(i);
        let n = v.norm();
        comps.push(v.iter().map(|a| a / n).collect::<Vec<f64>>());
    }
    Some((comps, order[..3].iter().map(|&i| eig.eigenvalues[i]).collect(), trace))
}

/// The share of `points`' second moment (N, dim) along `components` (3, dim) of unit length,
/// orthogonal: what a view in those directions keeps of these points' spread.
pub fn share_along(points: &[f64], dim: usize, components: &[f64]) -> f64 {
    let (mut along, mut all) = (0.0, 0.0);
    for p in points.chunks_exact(dim) {
        all += p.iter().map(|v| v * v).sum::<f64>();
        along +=
            components.chunks_exact(dim).map(|c| c.iter().zip(p).map(|(a, b)| a * b).sum::<f64>().powi(2)).sum::<f64>();
    }
    if all > 0.0 {
        along / all
    } else {
        0.0
    }
}

/// Above this dimension, with more points than dimensions, the top three directions come from
/// `many_points`: the dim x dim decomposition costs dim^3 (0.3 s natively at GPT-2's 768, a second
/// in a tab, for one view of every depth together).
const ITERATE_ABOVE: usize = 256;

/// The top three eigenpairs of the second moment `X^T X / N` by subspace iteration on eight
/// directions with a Rayleigh-Ritz step each round, when there are more points than dimensions
/// and more than `ITERATE_ABOVE` of those: converged when the three values change by under 1e-12
/// relatively (tested against the full decomposition). None where the full decomposition is the
/// better way (fewer dimensions, or no convergence in 500 rounds).
fn many_points(x: &DMatrix<f64>) -> Option<(Vec<Vec<f64>>, Vec<f64>, f64)> {
    let (count, dim) = x.shape();
    if count <= dim || dim <= ITERATE_ABOVE {
        return None;
    }
    const K: usize = 8;
    let trace = x.iter().map(|v| v * v).sum::<f64>() / count as f64;
    // A fixed start touching every dimension: the same view for the same points, every time.
    let start =
        DMatrix::from_fn(dim, K, |i, j| ((i * 31 + j * 17) % 23) as f64 - 11.0 + if i % K == j { 40.0 } else { 0.0 });
    let mut q = start.qr().q();
    let mut last = [f64::INFINITY; 3];
    for _ in 0..500 {
        let xq = x * &q;
        let small = xq.transpose() * &xq / count as f64;
        let eig = SymmetricEigen::new(small);
        let mut order: Vec<usize> = (0..K).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        let values = [0, 1, 2].map(|i| eig.eigenvalues[order[i]]);
        let steady = values.iter().zip(&last).all(|(v, l)| (v - l).abs() <= 1e-12 * v.abs().max(f64::MIN_POSITIVE));
        if steady {
            let ritz = &q * &eig.eigenvectors;
            let comps = order[..3]
                .iter()
                .map(|&i| {
                    let c = ritz.column(i);
                    let n = c.norm();
                    c.iter().map(|v| v / n).collect()
                })
                .collect();
            return Some((comps, values.to_vec(), trace));
        }
        last = values;
        q = (x.transpose() * xq).qr().q();
    }
    None
}

/// Reorders (the permutation of three with the largest total |overlap|) and flips the new
/// components to follow the previous frame's.
fn align(comps: &mut Vec<Vec<f64>>, values: &mut Vec<f64>, prev: &[f64], dim: usize) {
    let overlap = |i: usize, c: &[f64]| -> f64 { prev[i * dim..(i + 1) * dim].iter().zip(c).map(|(a, b)| a * b).sum() };
    const PERMS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let score = |p: &[usize; 3]| (0..3).map(|i| overlap(i, &comps[p[i]]).abs()).sum::<f64>();
    let best = PERMS.iter().max_by(|a, b| score(a).total_cmp(&score(b))).expect("six permutations");
    let (c, v): (Vec<_>, Vec<_>) = best.iter().map(|&j| (comps[j].clone(), values[j])).unzip();
    *comps = c;
    *values = v;
    for (i, c) in comps.iter_mut().enumerate() {
        if overlap(i, c) < 0.0 {
            c.iter_mut().for_each(|v| *v = -*v);
        }
    }
}

/// The point a fraction `t` of the way from `a` to `b` along the shorter great circle of the unit
/// sphere (spherical linear interpolation), so an animation between two frames stays on the sphere.
/// Nearly equal points are joined by a normalised straight line (the arc is one); antipodal ones,
/// where no great circle is shortest, through a fixed perpendicular direction.
pub fn slerp(a: [f64; 3], b: [f64; 3], t: f64) -> [f64; 3] {
    let dot = (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]).clamp(-1.0, 1.0);
    let theta = dot.acos();
    let unit = |v: [f64; 3]| {
        let n = norm(&v);
        if n > 0.0 {
            [v[0] / n, v[1] / n, v[2] / n]
        } else {
            v
        }
    };
    if theta < 1e-6 {
        return unit([a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), a[2] + t * (b[2] - a[2])]);
    }
    if std::f64::consts::PI - theta < 1e-6 {
        // A half turn about any axis perpendicular to a: take the one from the smallest coordinate.
        let i = (0..3).min_by(|&i, &j| a[i].abs().total_cmp(&a[j].abs())).unwrap_or(0);
        let mut e = [0.0; 3];
        e[i] = 1.0;
        let along = a[i];
        let perp = unit([e[0] - along * a[0], e[1] - along * a[1], e[2] - along * a[2]]);
        let (s, c) = (std::f64::consts::PI * t).sin_cos();
        return [c * a[0] + s * perp[0], c * a[1] + s * perp[1], c * a[2] + s * perp[2]];
    }
    let (wa, wb) = (((1.0 - t) * theta).sin() / theta.sin(), (t * theta).sin() / theta.sin());
    unit([wa * a[0] + wb * b[0], wa * a[1] + wb * b[1], wa * a[2] + wb * b[2]])
}

/// `segments + 1` points along the great-circle arc from `a` to `b` (both ends included).
pub fn arc(a: [f64; 3], b: [f64; 3], segments: usize) -> Vec<[f64; 3]> {
    let n = segments.max(1);
    (0..=n).map(|i| slerp(a, b, i as f64 / n as f64)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::layer_norm;
    use crate::rng::{rng, Stream};
    use rand_distr::{Distribution, StandardNormal};

    fn gaussian(n: usize, seed: u64) -> Vec<f64> {
        let mut r = rng(seed, Stream::Brownian, 200);
        (0..n).map(|_| StandardNormal.sample(&mut r)).collect()
    }

    #[test]
    fn few_points_in_many_dimensions_give_the_full_moments_directions() {
        // 12 points in 50 dimensions: from the 12 x 12 Gram matrix, the 50 x 50 moment's top three.
        let (count, dim) = (12, 50);
        let pts: Vec<f64> = (0..count * dim)
            .map(|i| ((i * 7919 % 1009) as f64 / 1009.0 - 0.5) * (1.0 + (i % dim) as f64 / 10.0))
            .collect();
        let x = DMatrix::from_row_slice(count, dim, &pts);
        let (comps, values, trace) = fewer_points(&x).unwrap();
        let moment = x.transpose() * &x / count as f64;
        let eig = SymmetricEigen::new(moment.clone());
        let mut order: Vec<usize> = (0..dim).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        assert!((trace - moment.trace()).abs() < 1e-10);
        for (k, &i) in order[..3].iter().enumerate() {
            assert!((values[k] - eig.eigenvalues[i]).abs() < 1e-10, "eigenvalue {k}");
            let overlap: f64 = comps[k].iter().zip(eig.eigenvectors.column(i).iter()).map(|(a, b)| a * b).sum();
            assert!((overlap.abs() - 1.0).abs() < 1e-8, "direction {k}: overlap {overlap}");
        }
        // Three points with a repeat span two directions: then the full decomposition.
        let flat: Vec<f64> = pts[..dim].iter().chain(&pts[..dim]).chain(&pts[dim..2 * dim]).copied().collect();
        assert!(fewer_points(&DMatrix::from_row_slice(3, dim, &flat)).is_none());
        assert_eq!(project3(&flat, dim, None).unwrap().points.len(), 3);
    }

    #[test]
    fn many_points_in_many_dimensions_give_the_full_moments_directions() {
        // 700 points in 300 dimensions, each dimension's spread its own (a spectrum from 4 down
        // to about 1), turned by nothing: the full 300 x 300 decomposition is the reference.
        let (count, dim) = (700, 300);
        let pts: Vec<f64> = gaussian(count * dim, 3)
            .iter()
            .enumerate()
            .map(|(i, g)| g * (1.0 + 3.0 / (1.0 + (i % dim) as f64 / 4.0)))
            .collect();
        let x = DMatrix::from_row_slice(count, dim, &pts);
        let (comps, values, trace) = many_points(&x).unwrap();
        let moment = x.transpose() * &x / count as f64;
        let eig = SymmetricEigen::new(moment.clone());
        let mut order: Vec<usize> = (0..dim).collect();
        order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
        assert!((trace - moment.trace()).abs() < 1e-9 * trace);
        for (k, &i) in order[..3].iter().enumerate() {
            assert!((values[k] - eig.eigenvalues[i]).abs() < 1e-9 * values[k], "eigenvalue {k}");
            let overlap: f64 = comps[k].iter().zip(eig.eigenvectors.column(i).iter()).map(|(a, b)| a * b).sum();
            assert!((overlap.abs() - 1.0).abs() < 1e-6, "direction {k}: overlap {overlap}");
        }
        // Fewer dimensions, or fewer points: the other ways.
        assert!(many_points(&DMatrix::from_row_slice(count, 200, &pts[..count * 200])).is_none());
        assert!(many_points(&DMatrix::from_row_slice(200, dim, &pts[..200 * dim])).is_none());
    }

    #[test]
    fn layer_norm_points_sit_on_the_sphere_up_to_eps() {
        let (n, c) = (50, 64);
        // Inputs with variances from 1e-4 (eps matters) to 100 (it does not).
        let mut x = gaussian(n * c, 1);
        for (i, row) in x.chunks_exact_mut(c).enumerate() {
            let s = 10f64.powf(-2.0 + 3.0 * i as f64 / n as f64);
            row.iter_mut().for_each(|v| *v = *v * s + 3.0);
        }
        let (mut out, mut u, mut rstd) = (vec![0.0; n * c], vec![0.0; n * c], vec![0.0; n]);
        let (w, b) = (vec![1.0; c], vec![0.0; c]);
        layer_norm::forward(&mut out, &mut u, &mut rstd, &x, &w, &b, c);
        for (xi, ui) in x.chunks_exact(c).zip(u.chunks_exact(c)) {
            let mean = xi.iter().sum::<f64>() / c as f64;
            let var = xi.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
            let expected = (c as f64 * var / (var + layer_norm::EPS)).sqrt();
            assert!((norm(ui) - expected).abs() < 1e-12 * expected);
        }
        // Rows with var >= 1: within eps/2 of sqrt(d); exactly normalised points: to rounding.
        let stats = radius_stats(&u[(n - 15) * c..], c).unwrap();
        assert!(stats.max_rel_err < layer_norm::EPS / 2.0, "{stats:?}");
        assert!(stats.max <= 8.0 && stats.min > 8.0 * (1.0 - 1e-5));
        let mut exact = x.clone();
        for row in exact.chunks_exact_mut(c) {
            let mean = row.iter().sum::<f64>() / c as f64;
            row.iter_mut().for_each(|v| *v -= mean);
            let scale = (c as f64).sqrt() / norm(row);
            row.iter_mut().for_each(|v| *v *= scale);
        }
        assert!(radius_stats(&exact, c).unwrap().max_rel_err < 1e-14);
    }

    #[test]
    fn affine_drift_measures_gain_and_bias() {
        let d = 4;
        let u = [2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0];
        // Identity map: no drift.
        let id = affine_drift(&u, &[1.0; 4], &[0.0; 4], d).unwrap();
        assert!(id.mean_rel_offset.abs() < 1e-15 && id.mean_angle.abs() < 1e-7);
        // Uniform gain 1.5: radius 3 instead of 2, no turn.
        let g = affine_drift(&u, &[1.5; 4], &[0.0; 4], d).unwrap();
        assert!((g.mean_radius - 3.0).abs() < 1e-15 && (g.max_rel_offset - 0.5).abs() < 1e-15);
        // Bias (0, 2, 0, 0): y = (2, 2, 0, 0) and (0, 2, 2, 0), both 45 degrees off, radius 2 sqrt 2.
        let b = affine_drift(&u, &[1.0; 4], &[0.0, 2.0, 0.0, 0.0], d).unwrap();
        assert!((b.mean_angle - std::f64::consts::FRAC_PI_4).abs() < 1e-12);
        assert!((b.mean_rel_offset - (2f64.sqrt() - 1.0)).abs() < 1e-12);
        assert!(affine_drift(&u, &[1.0; 3], &[0.0; 4], d).is_err());
    }

    /// Points `5 z0 a0 + 3 z1 a1 + 2 z2 a2 + 0.3 z3 e_last`, z standard normal: a cloud stretched
    /// along three orthonormal `axes`, with a little noise in the last coordinate.
    fn cloud(axes: &[Vec<f64>; 3], n: usize, dim: usize, seed: u64) -> Vec<f64> {
        let z = gaussian(n * 4, seed);
        let mut pts = vec![0.0; n * dim];
        for (p, zi) in pts.chunks_exact_mut(dim).zip(z.chunks_exact(4)) {
            for (k, s) in [5.0, 3.0, 2.0].into_iter().enumerate() {
                p.iter_mut().zip(&axes[k]).for_each(|(x, a)| *x += s * zi[k] * a);
            }
            p[dim - 1] += 0.3 * zi[3];
        }
        pts
    }

    fn unit(v: Vec<f64>) -> Vec<f64> {
        let n = norm(&v);
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn projection_does_not_flip_between_nearly_equal_clouds() {
        let dim = 6;
        // The main axis nearly ties its two largest entries, 0.7 and -0.7 + delta: a tiny change of
        // the data changes which is larger, and with it the "largest entry positive" sign.
        let axis = |delta: f64| unit(vec![0.7, -0.7 + delta, 0.1, 0.0, 0.0, 0.0]);
        let (e3, e4) = (vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0], vec![0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let a = cloud(&[axis(0.01), e3.clone(), e4.clone()], 400, dim, 3);
        let b = cloud(&[axis(-0.01), e3, e4], 400, dim, 3);
        let pa = project3(&a, dim, None).unwrap();
        let pb_free = project3(&b, dim, None).unwrap();
        let pb = project3(&b, dim, Some(&pa.components)).unwrap();
        // The clouds differ by a tiny rotation, yet the frame-by-frame convention flips axis 1...
        let first = |p: &Projection3| p.points.iter().map(|y| y[0]).collect::<Vec<f64>>();
        let gap = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(gap(&first(&pa), &first(&pb_free)) > 0.5, "the test lost its flip");
        // ...while aligning with the previous frame keeps every point where it was.
        for (ya, yb) in pa.points.iter().zip(&pb.points) {
            let d: f64 = ya.iter().zip(yb).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
            assert!(d < 0.05, "point moved {d}");
        }
        // Unit sphere; sorted explained fractions (the noise in the last coordinate is small).
        assert!(pa.points.iter().all(|y| (norm(y) - 1.0).abs() < 1e-12));
        assert!(pa.explained[0] > pa.explained[1] && pa.explained[1] > pa.explained[2]);
        assert!(pa.explained.iter().sum::<f64>() > 0.95);
    }

    #[test]
    fn projection_follows_the_previous_order() {
        let dim = 5;
        let axes = [
            unit(vec![1.0, 0.0, 0.0, 0.0, 0.0]),
            unit(vec![0.0, 1.0, 0.0, 0.0, 0.0]),
            unit(vec![0.0, 0.0, 1.0, 0.0, 0.0]),
        ];
        let pts = cloud(&axes, 300, dim, 4);
        let p = project3(&pts, dim, None).unwrap();
        // Previous frame listed the same directions in reverse order, with signs flipped.
        let reversed: Vec<f64> = p.components.chunks(dim).rev().flatten().map(|v| -v).collect();
        let q = project3(&pts, dim, Some(&reversed)).unwrap();
        assert!(q.components.iter().zip(&reversed).all(|(a, b)| (a - b).abs() < 1e-12));
        assert!(q.explained[0] < q.explained[2]);
        assert!(project3(&pts[..10], 2, None).is_err());
        assert!(project3(&pts, dim, Some(&[1.0; 3])).is_err());
    }

    fn on_sphere(p: [f64; 3]) -> f64 {
        (norm(&p) - 1.0).abs()
    }

    fn angle(a: [f64; 3], b: [f64; 3]) -> f64 {
        (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]).clamp(-1.0, 1.0).acos()
    }

    #[test]
    fn slerp_stays_on_the_sphere_moves_at_constant_speed_and_ends_at_both_points() {
        let unit = |v: Vec<f64>| -> [f64; 3] {
            let n = norm(&v);
            [v[0] / n, v[1] / n, v[2] / n]
        };
        for seed in 0..20 {
            let (a, b) = (unit(gaussian(3, 2 * seed)), unit(gaussian(3, 2 * seed + 1)));
            let whole = angle(a, b);
            for (x, y) in slerp(a, b, 0.0).iter().zip(&a).chain(slerp(a, b, 1.0).iter().zip(&b)) {
                assert!((x - y).abs() < 1e-12, "the ends are the two points");
            }
            for i in 1..10 {
                let t = i as f64 / 10.0;
                let p = slerp(a, b, t);
                assert!(on_sphere(p) < 1e-12, "on the sphere at t = {t}");
                // Constant speed along the great circle: the angle travelled is t times the whole.
                assert!((angle(a, p) - t * whole).abs() < 1e-9, "angle from a at t = {t}");
                assert!((angle(p, b) - (1.0 - t) * whole).abs() < 1e-9, "angle to b at t = {t}");
            }
        }
    }

    #[test]
    fn slerp_of_equal_and_antipodal_points_is_defined_and_on_the_sphere() {
        let a = [0.6, 0.0, 0.8];
        for t in [0.0, 0.3, 1.0] {
            let p = slerp(a, a, t);
            assert!(on_sphere(p) < 1e-12 && angle(p, a) < 1e-9);
        }
        let b = [-0.6, 0.0, -0.8];
        let mid = slerp(a, b, 0.5);
        assert!(on_sphere(mid) < 1e-12);
        assert!((angle(a, mid) - std::f64::consts::FRAC_PI_2).abs() < 1e-9, "half way round is a quarter turn");
        assert!(angle(slerp(a, b, 1.0), b) < 1e-9);
        let path = arc(a, [0.0, 1.0, 0.0], 8);
        assert_eq!(path.len(), 9);
        assert!(path.iter().all(|&p| on_sphere(p) < 1e-12));
    }
}
