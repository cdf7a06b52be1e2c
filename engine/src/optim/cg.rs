//! Conjugate gradient for a symmetric positive-definite operator given only as a product.

use multiversion::multiversion;
use serde::Serialize;

use crate::nn::reduce;
use crate::scalar::Scalar;

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct CgOutcome {
    pub iterations: usize,
    /// Final `|r| / |r0|`.
    pub rel_residual: f64,
    /// The operator showed non-positive curvature or produced a non-finite value.
    pub diverged: bool,
}

/// Work vectors, allocated once.
pub struct CgWork<S> {
    r: Vec<S>,
    p: Vec<S>,
    ap: Vec<S>,
}

impl<S: Scalar> CgWork<S> {
    pub fn new(len: usize) -> Self {
        CgWork { r: vec![S::zero(); len], p: vec![S::zero(); len], ap: vec![S::zero(); len] }
    }
}

/// Solves `A x = b` starting from the `x` given (zero it for a cold start). Stops after
/// `max_iters` or when `|r|^2 / |r0|^2 < tol` (the published criterion). The dot products in
/// `reduce`'s order; multiversioned as `nn::activation::forward` (the same bits everywhere).
#[multiversion(targets = "simd")]
pub fn solve<S: Scalar>(
    mut apply: impl FnMut(&[S], &mut [S]),
    b: &[S],
    x: &mut [S],
    max_iters: usize,
    tol: f64,
    work: &mut CgWork<S>,
) -> CgOutcome {
    let len = b.len();
    let (r, p, ap) = (&mut work.r[..len], &mut work.p[..len], &mut work.ap[..len]);
    apply(x, ap);
    r.iter_mut().zip(b.iter().zip(ap.iter())).for_each(|(r, (&b, &a))| *r = b - a);
    p.copy_from_slice(r);
    // |b| measures the residual when starting warm, so the criterion means the same either way.
    let r0 = reduce::dot(b, b).to_f64().unwrap_or(f64::NAN).max(f64::MIN_POSITIVE);
    let mut rr = reduce::dot(r, r);
    let mut out =
        CgOutcome { iterations: 0, rel_residual: (rr.to_f64().unwrap_or(f64::NAN) / r0).sqrt(), diverged: false };
    while out.iterations < max_iters && out.rel_residual * out.rel_residual >= tol {
        apply(p, ap);
        let pap = reduce::dot(p, ap);
        if pap.partial_cmp(&S::zero()) != Some(std::cmp::Ordering::Greater) || !pap.is_finite() {
            out.diverged = true;
            return out;
        }
        let alpha = rr / pap;
        x.iter_mut().zip(p.iter()).for_each(|(x, &p)| *x += alpha * p);
        r.iter_mut().zip(ap.iter()).for_each(|(r, &a)| *r -= alpha * a);
        let rr_new = reduce::dot(r, r);
        let beta = rr_new / rr;
        rr = rr_new;
        p.iter_mut().zip(r.iter()).for_each(|(p, &r)| *p = r + beta * *p);
        out.iterations += 1;
        out.rel_residual = (rr.to_f64().unwrap_or(f64::NAN) / r0).sqrt();
        if !out.rel_residual.is_finite() {
            out.diverged = true;
            return out;
        }
    }
    out
}
