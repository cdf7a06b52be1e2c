//! LayerNorm: puts every token on the sphere of radius sqrt(C), then applies a gain and a bias.
//!
//! `u = (x - mean(x)) * rstd` with `rstd = 1 / sqrt(var(x) + eps)` (population variance), so `|u|`
//! is sqrt(C) up to `eps`; `u` is cached both for the backward pass and as "the token on the sphere".
//! RMSNorm (Llama's) is the same without the centring: `u = x / sqrt(mean(x²) + eps)`, on the same
//! sphere (`forward_as`; the lab trains with LayerNorm only, so the backward is LayerNorm's).

use multiversion::multiversion;

use crate::config::NormKind;
use crate::nn::reduce;
use crate::scalar::Scalar;

pub use crate::config::LAYER_NORM_EPS as EPS;

/// LayerNorm with GPT-2's epsilon (the lab's norm).
pub fn forward<S: Scalar>(out: &mut [S], u: &mut [S], rstd: &mut [S], inp: &[S], weight: &[S], bias: &[S], c: usize) {
    forward_as(NormKind::LayerNorm, EPS, out, u, rstd, inp, weight, bias, c)
}

/// inp (N, C) -> out (N, C) by `kind` with `eps`; caches `u` (N, C) and `rstd` (N). Multiversioned
/// as `activation::forward`: the sums keep their order, so every SIMD width gives the same bits.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets = "simd")]
pub fn forward_as<S: Scalar>(
    kind: NormKind,
    eps: f64,
    out: &mut [S],
    u: &mut [S],
    rstd: &mut [S],
    inp: &[S],
    weight: &[S],
    bias: &[S],
    c: usize,
) {
    let cs = S::of(c as f64);
    for (n, x) in inp.chunks_exact(c).enumerate() {
        let mean = match kind {
            NormKind::LayerNorm => reduce::sum(x) / cs,
            NormKind::RmsNorm => S::zero(),
        };
        let var = reduce::sum_zip([x], |[v]| (v - mean) * (v - mean)) / cs;
        let r = S::one() / (var + S::of(eps)).sqrt();
        rstd[n] = r;
        let row = n * c..(n + 1) * c;
        for (((o, uu), &v), (&w, &b)) in
            out[row.clone()].iter_mut().zip(&mut u[row]).zip(x).zip(weight.iter().zip(bias))
        {
            *uu = (v - mean) * r;
            *o = *uu * w + b;
        }
    }
}

/// Accumulates into `dinp`, `dweight`, `dbias` from `dout` (N, C) and the cached `u`, `rstd`.
#[allow(clippy::too_many_arguments)]
#[multiversion(targets = "simd")]
pub fn backward<S: Scalar>(
    dinp: &mut [S],
    dweight: &mut [S],
    dbias: &mut [S],
    dout: &[S],
    u: &[S],
    rstd: &[S],
    weight: &[S],
    c: usize,
) {
    let cs = S::of(c as f64);
    for (n, (dy, uu)) in dout.chunks_exact(c).zip(u.chunks_exact(c)).enumerate() {
        // d(loss)/d(u) = dy * weight; the mean and the projection onto u are what LN removes.
        let mean_du = reduce::dot(dy, weight) / cs;
        let mean_du_u = reduce::sum_zip([dy, weight, uu], |[d, w, u]| d * w * u) / cs;
        for j in 0..c {
            dweight[j] += dy[j] * uu[j];
            dbias[j] += dy[j];
        }
        let dx = &mut dinp[n * c..(n + 1) * c];
        for j in 0..c {
            dx[j] += rstd[n] * (dy[j] * weight[j] - mean_du - uu[j] * mean_du_u);
        }
    }
}
