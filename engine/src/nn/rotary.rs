//! Rotary position embeddings (GPT-NeoX, Llama): each head's query and key turned by angles that
//! grow with the position, so `q·k` depends on how far apart two tokens are. The first `dims` of a
//! head's dimensions rotate in pairs (i, i + dims/2), transformers' `rotate_half`; the rest pass.
//!
//! `x'_i = x_i cos θ - x_{i+h} sin θ`, `x'_{i+h} = x_{i+h} cos θ + x_i sin θ`, `θ = pos · f_i`,
//! h = dims/2, with `f_i = base^(-2i/dims)` stretched as the model's `rope_scaling` says
//! (transformers' `_compute_linear_scaling_rope_parameters` and `_compute_llama3_parameters`).
//! Reading only (the lab trains with learned positions), so there is no backward.

use crate::config::arch::RopeScaling;
use crate::scalar::Scalar;

/// The frequencies `f_i` of the pairs i = 0..dims/2.
pub fn frequencies(dims: usize, base: f64, scaling: RopeScaling) -> Vec<f64> {
    let plain = (0..dims / 2).map(|i| base.powf(-2.0 * i as f64 / dims as f64));
    match scaling {
        RopeScaling::None => plain.collect(),
        RopeScaling::Linear { factor } => plain.map(|f| f / factor).collect(),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor: low,
            high_freq_factor: high,
            original_max_position_embeddings: old,
        } => plain
            .map(|f| {
                let wavelength = 2.0 * std::f64::consts::PI / f;
                if wavelength < old / high {
                    f
                } else if wavelength > old / low {
                    f / factor
                } else {
                    let smooth = (old / wavelength - low) / (high - low);
                    (1.0 - smooth) * f / factor + smooth * f
                }
            })
            .collect(),
    }
}

/// Turns `x` (N, NH * hs) in place by the frequencies `inv` of the first 2 x inv.len() dimensions
/// of each head: row n holds position `first + n % t`.
pub fn forward<S: Scalar>(x: &mut [S], t: usize, first: usize, nh: usize, hs: usize, inv: &[f64]) {
    let (half, dims) = (inv.len(), 2 * inv.len());
    for (n, row) in x.chunks_exact_mut(nh * hs).enumerate() {
        let pos = (first + n % t) as f64;
        // Angles in f64: at positions in the thousands an f32 angle would lose the small frequencies.
        let (cos, sin): (Vec<S>, Vec<S>) =
            inv.iter().map(|f| ((pos * f).cos(), (pos * f).sin())).map(|(c, s)| (S::of(c), S::of(s))).unzip();
        for head in row.chunks_exact_mut(hs) {
            let (a, b) = head[..dims].split_at_mut(half);
            for i in 0..half {
                let (x1, x2) = (a[i], b[i]);
                a[i] = x1 * cos[i] - x2 * sin[i];
                b[i] = x2 * cos[i] + x1 * sin[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rotation keeps each pair's length, and q·k depends only on the distance between positions.
    #[test]
    fn rotation_keeps_lengths_and_depends_on_relative_position() {
        let (nh, hs, dims) = (2, 6, 4);
        let q: Vec<f64> = (0..nh * hs).map(|i| (i as f64 * 0.7).sin()).collect();
        let k: Vec<f64> = (0..nh * hs).map(|i| (i as f64 * 1.3).cos()).collect();
        let at = |v: &[f64], pos: usize| {
            let mut r = v.to_vec();
            forward(&mut r, 1, pos, nh, hs, &frequencies(dims, 10_000.0, RopeScaling::None));
            r
        };
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let (q3, k1, q9, k7) = (at(&q, 3), at(&k, 1), at(&q, 9), at(&k, 7));
        assert!((dot(&q3, &k1) - dot(&q9, &k7)).abs() < 1e-12, "q·k at distance 2 from two places");
        assert!((dot(&q3, &q3) - dot(&q, &q)).abs() < 1e-12);
        // The dimensions past `dims` do not move; position 0 moves nothing.
        assert_eq!(q3[4..6], q[4..6]);
        assert_eq!(at(&q, 0), q);
        // One pair by hand: θ = 3 for pair 0 (frequency 1).
        let (c, s) = (3f64.cos(), 3f64.sin());
        assert!((q3[0] - (q[0] * c - q[2] * s)).abs() < 1e-12 && (q3[2] - (q[2] * c + q[0] * s)).abs() < 1e-12);
    }

    /// Llama 3.2's scaling (factor 32, low 1, high 4, 8192 positions, base 500000, 64 dims): the
    /// short wavelengths kept, the long ones 32 times longer, and between them the smooth mix, by
    /// hand at one pair of each.
    #[test]
    fn llama3_scaling_keeps_short_waves_stretches_long_ones_and_mixes_between() {
        let llama3 = RopeScaling::Llama3 {
            factor: 32.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        let (plain, scaled) = (frequencies(64, 500_000.0, RopeScaling::None), frequencies(64, 500_000.0, llama3));
        // Pair 0: f = 1, a wavelength of 2π, under 8192 / 4: kept.
        assert_eq!(scaled[0], 1.0);
        // Pair 31: f = 500000^(-62/64) = 3.0e-6, a wavelength of 2.1e6, over 8192: divided by 32.
        assert!((scaled[31] - 500_000f64.powf(-62.0 / 64.0) / 32.0).abs() < 1e-20);
        // Pair 14: f = 500000^(-28/64) = 0.003211, a wavelength of 1956, under 2048: kept. Pair 15:
        // f = 0.002131, a wavelength of 2948, between 2048 and 8192: smooth = (8192 / 2948 - 1) / 3
        // = 0.5928, so f (1 - 0.5928) / 32 + 0.5928 f = 0.6056 f.
        assert_eq!(scaled[14], plain[14]);
        let f = 500_000f64.powf(-30.0 / 64.0);
        assert!((f - 0.002131).abs() < 1e-6, "{f}");
        assert!((scaled[15] / f - 0.6056).abs() < 1e-4, "{}", scaled[15] / f);
        // Linear: every frequency over the factor.
        let linear = frequencies(64, 500_000.0, RopeScaling::Linear { factor: 4.0 });
        assert!(linear.iter().zip(&plain).all(|(l, p)| (l * 4.0 - p).abs() < 1e-18));
    }
}
