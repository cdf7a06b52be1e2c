//! Global gradient-norm clipping.

use crate::nn::reduce;

/// The global L2 norm of `grads`, accumulated in f64 so large models do not lose precision (in
/// `reduce`'s order, which vectorises).
pub fn global_norm(grads: &[f32]) -> f32 {
    reduce::sum_zip([grads], |[g]| g as f64 * g as f64).sqrt() as f32
}

/// Scales `grads` so their norm is at most `max_norm` (0 = off); returns the norm before clipping.
pub fn clip(grads: &mut [f32], max_norm: f32) -> f32 {
    let norm = global_norm(grads);
    if max_norm > 0.0 && norm > max_norm {
        let s = max_norm / norm;
        grads.iter_mut().for_each(|g| *g *= s);
    }
    norm
}
