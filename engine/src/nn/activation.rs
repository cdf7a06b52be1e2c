//! The MLP's nonlinearity: GELU (tanh form, as GPT-2), ReLU, or identity (JoMA's linear case).

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

/// `out = act(inp)`. Compiled for the wider SIMD sets too (AVX-512, AVX2) and chosen at run time:
/// element by element, with no fused multiply-add, so every version gives the same bits.
#[multiversion(targets = "simd")]
pub fn forward<S: Scalar>(act: Activation, out: &mut [S], inp: &[S]) {
    match act {
        Activation::Identity => out.copy_from_slice(inp),
        Activation::Relu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = x.max(S::zero())),
        Activation::Gelu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = gelu(x)),
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
        let (mut y, mut dx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        forward(Activation::Gelu, &mut y, &x);
        backward(Activation::Gelu, &mut dx, &dy, &x);
        for i in 0..x.len() {
            let xi = std::hint::black_box(x[i]);
            assert_eq!(y[i].to_bits(), gelu(xi).to_bits(), "GELU at {xi}");
            assert_eq!(dx[i].to_bits(), (dy[i] * gelu_grad(xi)).to_bits(), "GELU' at {xi}");
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
}
