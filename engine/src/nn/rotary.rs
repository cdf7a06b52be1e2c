//! Rotary position embeddings (GPT-NeoX, Llama): each head's query and key turned by angles that
//! grow with the position, so `q·k` depends on how far apart two tokens are. The first `dims` of a
//! head's dimensions rotate in pairs (i, i + dims/2), transformers' `rotate_half`; the rest pass.
//!
//! `x'_i = x_i cos θ - x_{i+h} sin θ`, `x'_{i+h} = x_{i+h} cos θ + x_i sin θ`, `θ = pos · base^(-2i/dims)`,
//! h = dims/2. Reading only (the lab trains with learned positions), so there is no backward.

use crate::scalar::Scalar;

/// Turns `x` (N, NH * hs) in place: row n holds position `first + n % t`.
pub fn forward<S: Scalar>(x: &mut [S], t: usize, first: usize, nh: usize, hs: usize, dims: usize, base: f64) {
    let half = dims / 2;
    let inv: Vec<f64> = (0..half).map(|i| base.powf(-2.0 * i as f64 / dims as f64)).collect();
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
            forward(&mut r, 1, pos, nh, hs, dims, 10_000.0);
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
}
