//! One row (a token written) against weights kept as bfloat16, the upper half of each f32. Writing
//! reads every weight once per token, so its time is the memory's: a real model stored in BF16
//! (SmolLM2, Qwen2, TinyLlama) holds nothing its f32 weights do not have in their upper halves,
//! and reading those halves alone halves the bytes with the very same values. Only weights whose
//! lower halves are all zero are kept this way ([`exact`]), so the products are of the same
//! numbers as the f32 path's, summed in a fixed order of their own (`dot`).

use multiversion::multiversion;

use crate::nn::reduce::LANES;
use crate::scalar::Scalar;

/// The weights' upper halves when every lower half is zero (the values exactly), else None.
pub fn exact(w: &[f32]) -> Option<Vec<u16>> {
    w.iter().all(|x| x.to_bits() & 0xffff == 0).then(|| w.iter().map(|x| (x.to_bits() >> 16) as u16).collect())
}

/// A bfloat16 value as the f32 it stands for.
#[inline(always)]
fn widen(w: u16) -> f32 {
    f32::from_bits(u32::from(w) << 16)
}

/// x (din) -> out (dout): `out = W x + b`, W (dout, din) as [`exact`] keeps it. Natively a layer
/// of `linear::SPLIT_ROW_WEIGHTS` or more runs its two halves of rows at once, as `linear` does.
pub fn forward<S: Scalar>(out: &mut [S], x: &[S], w: &[u16], b: &[S], din: usize) {
    #[cfg(not(target_arch = "wasm32"))]
    if w.len() >= super::linear::SPLIT_ROW_WEIGHTS {
        let cut = out.len() / 2;
        let ((o1, o2), (w1, w2), (b1, b2)) = (out.split_at_mut(cut), w.split_at(cut * din), b.split_at(cut));
        rayon::join(|| rows(o1, x, w1, b1, din), || rows(o2, x, w2, b2, din));
        return;
    }
    rows(out, x, w, b, din)
}

/// `forward` on one core.
fn rows<S: Scalar>(out: &mut [S], x: &[S], w: &[u16], b: &[S], din: usize) {
    for ((o, row), &bias) in out.iter_mut().zip(w.chunks_exact(din)).zip(b) {
        *o = bias + dot(x, row);
    }
}

/// `sum_i x[i] w[i]`: term `i` into partial `i % (4 LANES)`, each partial in index order, then the
/// partials pairwise (a fixed order: the same bits on every machine). Four registers of partials,
/// so four loads are in flight, not one add after another; multiversioned, so the widening, the
/// products and the sums are AVX2 or AVX-512 instructions where there are.
#[multiversion(targets = "simd")]
fn dot<S: Scalar>(x: &[S], w: &[u16]) -> S {
    const WIDE: usize = 4 * LANES;
    let n = x.len().min(w.len());
    let mut acc = [S::zero(); WIDE];
    let whole = n / WIDE;
    for c in 0..whole {
        let xs: &[S; WIDE] = x[c * WIDE..][..WIDE].try_into().expect("a whole block");
        let ws: &[u16; WIDE] = w[c * WIDE..][..WIDE].try_into().expect("a whole block");
        // Widened first, as whole registers: one zero-extension and one shift each.
        let wide: [u32; WIDE] = std::array::from_fn(|l| u32::from(ws[l]) << 16);
        for l in 0..WIDE {
            acc[l] += xs[l] * S::from_f32(f32::from_bits(wide[l])).unwrap_or_else(S::nan);
        }
    }
    for (a, i) in acc.iter_mut().zip(whole * WIDE..n) {
        *a += x[i] * S::from_f32(widen(w[i])).unwrap_or_else(S::nan);
    }
    let mut half = WIDE;
    while half > 1 {
        half /= 2;
        for i in 0..half {
            let later = acc[i + half];
            acc[i] += later;
        }
    }
    acc[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights of `n` values that are bfloat16 exactly (their lower halves zero).
    fn bf16_values(n: usize) -> Vec<f32> {
        (0..n).map(|i| f32::from_bits((((i * 7919 % 1000) as f32 - 500.0) * 1e-3).to_bits() & 0xffff_0000)).collect()
    }

    #[test]
    fn only_weights_that_are_bfloat16_exactly_are_kept_and_keep_their_values() {
        let w = bf16_values(100);
        let kept = exact(&w).expect("every lower half is zero");
        assert!(kept.iter().zip(&w).all(|(&k, &x)| widen(k).to_bits() == x.to_bits()));
        let mut one_more_bit = w.clone();
        one_more_bit[57] = f32::from_bits(one_more_bit[57].to_bits() | 1);
        assert!(exact(&one_more_bit).is_none());
    }

    #[test]
    fn a_row_is_the_product_with_its_bias_whole_or_in_two_halves() {
        // Under the split's size and over it, with lanes and a tail.
        for (din, dout) in [(37, 5), (576, 576), (1030, 300)] {
            let w = bf16_values(din * dout);
            let x: Vec<f32> = (0..din).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 1e-3).collect();
            let b: Vec<f32> = (0..dout).map(|i| i as f32 * 1e-2).collect();
            let mut out = vec![f32::NAN; dout];
            forward(&mut out, &x, &exact(&w).unwrap(), &b, din);
            for (j, &got) in out.iter().enumerate() {
                let want = b[j] as f64 + (0..din).map(|k| x[k] as f64 * w[j * din + k] as f64).sum::<f64>();
                assert!(
                    (got as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "({din}, {dout}) [{j}]: {got} vs {want}"
                );
            }
        }
    }
}
