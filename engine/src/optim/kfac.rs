//! K-FAC's preconditioner for one layer: `X = (G + sqrt(l)/pi I)^-1 grad (A + pi sqrt(l) I)^-1`
//! with the inverses of the small factors from a Cholesky factorisation (nalgebra), refreshed
//! every k steps; `pi` balances the damping between the factors (1 without the correction).

use nalgebra::DMatrix;

use crate::error::{Error, Result};
use crate::nn::matmul::{gemm, MatMut, MatRef};

/// `(m + shift I)^-1` of a symmetric positive semi-definite `dim x dim` matrix, row-major.
pub fn damped_inverse(m: &[f32], dim: usize, shift: f64) -> Result<Vec<f32>> {
    let mut dense = DMatrix::<f64>::from_fn(dim, dim, |i, j| m[i * dim + j] as f64);
    for i in 0..dim {
        dense[(i, i)] += shift;
    }
    let inv = dense
        .cholesky()
        .ok_or_else(|| Error::NonFinite {
            what: format!("K-FAC factor ({dim}x{dim}) is not positive definite"),
            step: 0,
        })?
        .inverse();
    Ok((0..dim * dim).map(|k| inv[(k / dim, k % dim)] as f32).collect())
}

/// Martens and Grosse's `pi = sqrt((tr A / dim A) / (tr G / dim G))` for factors A (da, da) and
/// G (dg, dg); 1 when a trace is not positive (a factor not formed yet).
pub fn pi(a: &[f32], da: usize, g: &[f32], dg: usize) -> f64 {
    let mean_diag = |m: &[f32], d: usize| (0..d).map(|i| m[i * d + i] as f64).sum::<f64>() / d as f64;
    let p = (mean_diag(a, da) / mean_diag(g, dg)).sqrt();
    if p.is_finite() && p > 0.0 {
        p
    } else {
        1.0
    }
}

/// `out = g_inv grad a_inv` for grad (dout, din1); `tmp` is (dout, din1).
pub fn precondition(
    out: &mut [f32],
    tmp: &mut [f32],
    grad: &[f32],
    g_inv: &[f32],
    a_inv: &[f32],
    dout: usize,
    din1: usize,
) {
    gemm(1.0, MatRef::new(g_inv, dout, dout), MatRef::new(grad, dout, din1), 0.0, MatMut::new(tmp, dout, din1));
    gemm(1.0, MatRef::new(&*tmp, dout, din1), MatRef::new(a_inv, din1, din1), 0.0, MatMut::new(out, dout, din1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damped_inverse_matches_dense_inverse() {
        let dim = 6;
        // A random symmetric PSD matrix B B^T / dim.
        let b: Vec<f32> = (0..dim * dim).map(|i| ((i * 37 % 11) as f32 - 5.0) / 5.0).collect();
        let mut m = vec![0.0f32; dim * dim];
        gemm(
            1.0 / dim as f32,
            MatRef::new(&b, dim, dim),
            MatRef::new(&b, dim, dim).t(),
            0.0,
            MatMut::new(&mut m, dim, dim),
        );
        let inv = damped_inverse(&m, dim, 0.1).unwrap();
        let dense = DMatrix::<f64>::from_fn(dim, dim, |i, j| m[i * dim + j] as f64 + if i == j { 0.1 } else { 0.0 });
        let want = dense.try_inverse().unwrap();
        for i in 0..dim {
            for j in 0..dim {
                assert!((inv[i * dim + j] as f64 - want[(i, j)]).abs() < 1e-4 * want.abs().max(), "({i},{j})");
            }
        }
    }
}
