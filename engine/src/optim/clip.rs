//! Global gradient-norm clipping.
//!
//! The norm is summed in f64 block by block (`BLOCK` values each, in `reduce`'s order), then the
//! blocks in order: the same order whether one pass computes it here or `train::shards` computes it
//! block by block while it sums the shards' gradients (one pass over the gradient fewer).

use multiversion::multiversion;

use crate::nn::reduce;

/// Values per block of the norm's sum.
pub const BLOCK: usize = 1024;

/// The sum of squares of one block, in f64 so large models do not lose precision. Multiversioned as
/// `nn::activation::forward`: the same bits in every version.
#[multiversion(targets = "simd")]
pub fn block_squares(block: &[f32]) -> f64 {
    reduce::sum_zip([block], |[g]| g as f64 * g as f64)
}

/// The norm from the blocks' sums of squares, in block order.
pub fn norm_of(squares: impl Iterator<Item = f64>) -> f32 {
    squares.sum::<f64>().sqrt() as f32
}

/// The global L2 norm of `grads`.
pub fn global_norm(grads: &[f32]) -> f32 {
    norm_of(grads.chunks(BLOCK).map(block_squares))
}

/// The factor that brings a gradient of norm `norm` to at most `max_norm` (0 = off): 1 within it.
pub fn factor(norm: f32, max_norm: f32) -> f32 {
    if max_norm > 0.0 && norm > max_norm {
        max_norm / norm
    } else {
        1.0
    }
}

/// Scales `grads` so their norm is at most `max_norm` (0 = off); returns the norm before clipping.
pub fn clip(grads: &mut [f32], max_norm: f32) -> f32 {
    let norm = global_norm(grads);
    scale(grads, factor(norm, max_norm));
    norm
}

/// `grads *= s` (nothing to do for 1).
#[multiversion(targets = "simd")]
pub fn scale(grads: &mut [f32], s: f32) {
    if s != 1.0 {
        grads.iter_mut().for_each(|g| *g *= s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_norm_is_the_f64_norm_and_clipping_brings_it_to_the_limit() {
        for n in [0, 1, 17, BLOCK, 3 * BLOCK + 5] {
            let mut g: Vec<f32> = (0..n).map(|i| ((i * 7919 % 997) as f32 - 498.0) * 0.013).collect();
            let exact = g.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
            let norm = global_norm(&g);
            assert!((norm as f64 - exact).abs() <= 1e-6 * exact, "{n}: {norm} vs {exact}");
            let clipped = clip(&mut g, 1.0);
            assert_eq!(clipped.to_bits(), norm.to_bits());
            let after = global_norm(&g);
            assert!(if norm > 1.0 { (after - 1.0).abs() < 1e-5 } else { after == norm }, "{n}: {after}");
        }
        assert_eq!((factor(4.0, 2.0), factor(1.0, 2.0), factor(4.0, 0.0)), (0.5, 1.0, 1.0));
    }
}
