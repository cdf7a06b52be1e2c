//! The MLP's nonlinearity: GELU (tanh form, as GPT-2), ReLU, or identity (JoMA's linear case).

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

pub fn forward<S: Scalar>(act: Activation, out: &mut [S], inp: &[S]) {
    match act {
        Activation::Identity => out.copy_from_slice(inp),
        Activation::Relu => out.iter_mut().zip(inp).for_each(|(o, &x)| *o = x.max(S::zero())),
        Activation::Gelu => {
            let (k, c, half) = (S::of(GELU_K), S::of(GELU_C), S::of(0.5));
            out.iter_mut().zip(inp).for_each(|(o, &x)| {
                *o = half * x * (S::one() + tanh(k * (x + c * x * x * x)));
            });
        }
    }
}

/// Sets `dinp` from `dout` and the cached pre-activation `inp`.
pub fn backward<S: Scalar>(act: Activation, dinp: &mut [S], dout: &[S], inp: &[S]) {
    match act {
        Activation::Identity => dinp.copy_from_slice(dout),
        Activation::Relu => {
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                *d = if x > S::zero() { g } else { S::zero() };
            }
        }
        Activation::Gelu => {
            let (k, c, half) = (S::of(GELU_K), S::of(GELU_C), S::of(0.5));
            let three = S::of(3.0);
            for ((d, &g), &x) in dinp.iter_mut().zip(dout).zip(inp) {
                let th = tanh(k * (x + c * x * x * x));
                let sech2 = S::one() - th * th;
                let local = half * (S::one() + th) + half * x * sech2 * k * (S::one() + three * c * x * x);
                *d = g * local;
            }
        }
    }
}
