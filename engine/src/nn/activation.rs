//! The MLP's nonlinearity: GELU (tanh form, as GPT-2), ReLU, or identity (JoMA's linear case);
//! for real models also GELU with the normal CDF itself (GPT-NeoX) and SiLU (the gated MLP's).

use multiversion::multiversion;

use crate::config::Activation;
use crate::scalar::Scalar;

const GELU_K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
const GELU_C: f64 = 0.044715;

/// tanh through one `exp` (cheaper than libm's tanh, exact to float round-off; saturates cleanly).
#[inline(always)]
fn tanh<S: Scalar>(y: S) -> S {
    let two = S::of(2.0);
    S::one() - two / ((two * y).exp_fast() + S::one())
}

/// GELU of one element.
#[inline(always)]
fn gelu<S: Scalar>(x: S) -> S {
    let (k, c, half) = (S::of(GELU_K), S::of(GELU_C), S::of(0.5));
    half * x * (S::one() + tanh(k * (x + c * x * x * x)))
}

/// GELU's derivative at one element.
#[inline(always)]
fn gelu_grad<S: Scalar>(x: S) -> S {
    let (k, c, half, three) = (S::of(GELU_K), S::of(GELU_C), S::of(0.5), S::of(3.0));
    let th = tanh(k * (x + c * x * x * x));
    let sech2 = S::one() - th * th;
    half * (S::one() + th) + half * x * sech2 * k * (S::one() + three * c * x * x)
}

/// Exact GELU `x Φ(x)` (`Scalar::normal_cdf`: straight-line arithmetic in f32).
#[inline(always)]
fn gelu_exact<S: Scalar>(x: S) -> S {
    x * x.normal_cdf()
}

/// Its derivative `Φ(x) + x φ(x)`.
#[inline(always)]
fn gelu_exact_grad<S: Scalar>(x: S) -> S {
    let pdf = (S::of(-0.5) * x * x).exp_fast() * S::of(0.398_942_280_401_432_7); // 1 / sqrt(2 pi)
    x.normal_cdf() + x * pdf
}

/// `x σ(x)`.
#[inline(always)]
fn silu<S: Scalar>(x: S) -> S {
    x / (S::one() + (-x).exp_fast())
}

/// Its derivative `σ(x) (1 + x (1 - σ(x)))`.
#[inline(always)]
fn silu_grad<S: Scalar>(x: S) -> S {
    let s = S::one() / (S::one() + (-x).exp_fast());
    s * (S::one() + x * (S::one() - s))
}

/// `out = act(inp)`. Compiled for the wider SIMD sets too (AVX-512, AVX2) and chosen at run time:
/// element by element, with no fused multiply-add, so every version gives the same bits.
#[multiversion(targets = "simd")]
pub fn forward<S: Scalar>(act: Activation, out: &mut [S], inp: &[S]) {
    match act {
        Activation::Identity => out.copy_from_slice(inp),
        Activation::Relu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = x.max(S::zero())),
        Activation::Gelu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = gelu(x)),
        Activation::GeluExact => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = gelu_exact(x)),
        Activation::Silu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = silu(x)),
    }
}

/// Sets `dinp` from `dout` and the cached pre-activation `inp` (multiversioned as `forward`).
#[multiversion(targets = "simd")]
pub fn backward<S: Scalar>(act: Activation, dinp: &mut [S], dout: &[S], inp: &[S]) {
    match act {
        Activation::Identity => dinp.copy_from_slice(dout),
        Activation::Relu => {
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                *d = if x > S::zero() { g } else { S::zero() };
            }
        }
        Activation::Gelu => {
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                *d = g * gelu_grad(x);
            }
        }
        Activation::GeluExact => {
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                *d = g * gelu_exact_grad(x);
            }
        }
        Activation::Silu => {
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                *d = g * silu_grad(x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorised loops (AVX-512 on a machine that has it) give the bits of one element at a
    /// time in the baseline build: a run's numbers do not depend on the machine's SIMD width.
    #[test]
    fn the_simd_versions_give_the_bits_of_one_element_at_a_time() {
        let x: Vec<f32> = (0..4099).map(|i| (i as f32 - 2049.0) * 0.0047).chain([f32::NAN, 1e30, -1e30]).collect();
        let dy: Vec<f32> = x.iter().map(|v| 1.0 - 0.3 * v).collect();
        type Elementwise = fn(f32) -> f32;
        let one_by_one: [(Activation, Elementwise, Elementwise); 3] = [
            (Activation::Gelu, gelu, gelu_grad),
            (Activation::GeluExact, gelu_exact, gelu_exact_grad),
            (Activation::Silu, silu, silu_grad),
        ];
        for (act, f, grad) in one_by_one {
            let (mut y, mut dx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
            forward(act, &mut y, &x);
            backward(act, &mut dx, &dy, &x);
            // Bit for bit, a NaN's sign aside.
            let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
            for i in 0..x.len() {
                let xi = std::hint::black_box(x[i]);
                assert!(same(y[i], f(xi)), "{act:?} at {xi}: {} against {}", y[i], f(xi));
                assert!(same(dx[i], dy[i] * grad(xi)), "{act:?}' at {xi}");
            }
        }
    }

    /// GELU's derivative against a central difference in f64.
    #[test]
    fn gelu_grad_is_the_derivative() {
        for i in -40..=40 {
            let x = i as f64 * 0.1;
            let h = 1e-6;
            let fd = (gelu(x + h) - gelu(x - h)) / (2.0 * h);
            assert!((gelu_grad(x) - fd).abs() < 1e-8, "at {x}: {} vs {fd}", gelu_grad(x));
        }
    }

    /// Exact GELU against values of x Φ(x) from a table of the normal CDF, and both real-model
    /// activations' derivatives against central differences.
    #[test]
    fn exact_gelu_and_silu_and_their_derivatives() {
        // Φ(1) = 0.841344746, Φ(-0.5) = 0.308537539, Φ(2) = 0.977249868.
        for (x, cdf) in [(1.0f64, 0.841_344_746), (-0.5, 0.308_537_539), (2.0, 0.977_249_868)] {
            assert!((gelu_exact(x) - x * cdf).abs() < 1e-9, "GELU at {x}");
        }
        assert!((silu(2.0f64) - 2.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
        // The f32 path (straight-line Φ) against the f64 one, and its derivative against f64's.
        for i in -400..=400 {
            let x = i as f32 * 0.025;
            let (want, want_grad) = (gelu_exact(x as f64), gelu_exact_grad(x as f64));
            assert!((gelu_exact(x) as f64 - want).abs() <= 1e-6 * want.abs().max(1e-2), "f32 GELU at {x}");
            assert!((gelu_exact_grad(x) as f64 - want_grad).abs() <= 1e-6, "f32 GELU' at {x}");
        }
        for i in -40..=40 {
            let (x, h) = (i as f64 * 0.1, 1e-6);
            let fd = |f: fn(f64) -> f64| (f(x + h) - f(x - h)) / (2.0 * h);
            assert!((gelu_exact_grad(x) - fd(gelu_exact)).abs() < 1e-8, "GELU' at {x}");
            assert!((silu_grad(x) - fd(silu)).abs() < 1e-8, "SiLU' at {x}");
        }
    }
}
