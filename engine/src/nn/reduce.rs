//! Sums and maxima in a fixed order that vectorises: term `i` goes into partial result `i % LANES`,
//! each partial in index order, then the partials pairwise. A plain left-to-right sum cannot use
//! SIMD (float addition is not associative, and the compiler keeps the order written); this order
//! can, and it is the same order on every machine, SIMD width and browser, so the bits are too.

use crate::scalar::Scalar;

/// Partial results: one AVX-512 register of f32, four of SSE or SIMD128.
pub const LANES: usize = 16;

/// `sum_i term([xs[0][i], xs[1][i], ..])` over the shortest slice, in the lane order above.
#[inline(always)]
pub fn sum_zip<T: Copy, S: Scalar, const K: usize>(xs: [&[T]; K], term: impl Fn([T; K]) -> S) -> S {
    fold(xs, S::zero(), term, |a, b| a + b)
}

/// `sum_i xs[i]`.
#[inline(always)]
pub fn sum<S: Scalar>(xs: &[S]) -> S {
    sum_zip([xs], |[x]| x)
}

/// `sum_i a[i] b[i]` over the shorter length.
#[inline(always)]
pub fn dot<S: Scalar>(a: &[S], b: &[S]) -> S {
    sum_zip([a, b], |[x, y]| x * y)
}

/// The largest entry (-inf for none); a NaN is passed over here (callers see it through the sum).
#[inline(always)]
pub fn max<S: Scalar>(xs: &[S]) -> S {
    // A select, not `S::max` (a libm call on wasm32).
    fold([xs], S::neg_infinity(), |[x]| x, |m, x| if x > m { x } else { m })
}

/// The fold itself: whole lanes are fixed-size arrays (no bounds checks inside, so the lane loop
/// becomes vector instructions), then the tail, then the lanes pairwise.
#[inline(always)]
fn fold<T: Copy, S: Scalar, const K: usize>(
    xs: [&[T]; K],
    init: S,
    term: impl Fn([T; K]) -> S,
    op: impl Fn(S, S) -> S,
) -> S {
    let n = xs.iter().map(|x| x.len()).min().unwrap_or(0);
    let mut acc = [init; LANES];
    let whole = n / LANES;
    for c in 0..whole {
        let lanes: [&[T; LANES]; K] = xs.map(|x| x[c * LANES..][..LANES].try_into().expect("a whole lane"));
        for (l, a) in acc.iter_mut().enumerate() {
            *a = op(*a, term(lanes.map(|x| x[l])));
        }
    }
    for (a, i) in acc.iter_mut().zip(whole * LANES..n) {
        *a = op(*a, term(xs.map(|x| x[i])));
    }
    // The lanes pairwise (lane i with lane i + w, halving w): vector operations too.
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] = op(acc[i], acc[i + w]);
        }
    }
    acc[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane order, written out one term at a time, and close to the exact sum.
    #[test]
    fn sums_follow_the_lane_order_and_the_exact_value() {
        for n in [0, 1, 15, 16, 17, 100, 1000] {
            let xs: Vec<f32> = (0..n).map(|i| ((i * 7919 % 997) as f32 - 498.0) * 0.013).collect();
            let mut lanes = [0.0f32; LANES];
            for (i, &x) in xs.iter().enumerate() {
                lanes[i % LANES] = std::hint::black_box(lanes[i % LANES] + x);
            }
            let mut w = LANES;
            while w > 1 {
                w /= 2;
                (0..w).for_each(|i| lanes[i] += lanes[i + w]);
            }
            let want = lanes[0];
            assert_eq!(sum(&xs).to_bits(), want.to_bits(), "n = {n}");
            let exact: f64 = xs.iter().map(|&x| x as f64).sum();
            assert!((sum(&xs) as f64 - exact).abs() < 1e-4, "n = {n}: {} vs {exact}", sum(&xs));
            let top = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(max(&xs), top);
            let d: f64 = xs.iter().map(|&x| x as f64 * x as f64).sum();
            assert!((dot(&xs, &xs) as f64 - d).abs() < 1e-4 * d.max(1.0));
        }
        assert!(max(&[1.0f32, f32::NAN, 3.0]) == 3.0 && sum(&[1.0f32, f32::NAN]).is_nan());
    }
}
