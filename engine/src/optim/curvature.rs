//! The linear layers K-FAC and CG-FAC precondition, and what each one needs from a step: its input
//! `a~ = [a, 1]` (bias folded in) and its per-token output gradient `g`.
//!
//! Which tokens are the samples: the loss is the mean over the M scored tokens (M = N = B*T on
//! text; fewer on copy, reverse, sort and modadd, whose prompts are not scored). Every one of the N
//! positions enters A = (1/N) sum a~ a~^T, since every position's input reaches the layer, and
//! the N output gradients enter G, but G = (1/M) sum g g^T is normalised by the number of loss
//! terms, with g = M dy the gradient of the summed loss: on the head, G is then exactly the
//! empirical Fisher's (1/M) sum over scored tokens of (p - y)(p - y)^T, and a fixed damping means
//! the same on every data set. (Unscored positions still get gradient in the layers below the head,
//! through attention; their g enters G there.)

use crate::model::linears::{linears, LinearId, LinearSpec};
use crate::model::{Cache, Grads, Model};

/// One linear layer `y = W a + b`, W (dout, din), as `model::architecture` lists it.
pub type Site = LinearSpec;

impl LinearSpec {
    /// Columns of the folded input `a~ = [a, 1]` and of the combined gradient `[dW | db]`.
    pub fn din1(&self) -> usize {
        self.din + 1
    }

    /// The layer's input rows (N, din) from the forward cache.
    pub fn input<'a>(&self, c: &'a Cache<f32>) -> &'a [f32] {
        match self.id {
            LinearId::Block(i, r) => c.slot(i, r.input()),
            LinearId::Head => &c.lnf_out,
        }
    }

    /// Gradient of the mean loss with respect to the layer's output rows (N, dout).
    pub fn out_grad<'a>(&self, g: &'a Grads<f32>) -> &'a [f32] {
        match self.id {
            LinearId::Block(i, r) => g.blocks[i].of(r),
            LinearId::Head => &g.dlogits,
        }
    }
}

/// Every linear layer of the model: Q, K, V, O, both MLP layers per block, and the head.
pub fn sites(model: &Model<f32>) -> Vec<Site> {
    linears(&model.layout)
}

/// Copies `a` (N, din) into `a1` (N, din + 1) with a trailing column of ones.
pub fn fold_bias(a1: &mut [f32], a: &[f32], din: usize) {
    for (dst, src) in a1.chunks_exact_mut(din + 1).zip(a.chunks_exact(din)) {
        dst[..din].copy_from_slice(src);
        dst[din] = 1.0;
    }
}

/// Per-token output gradients of the summed loss: the mean loss's gradient times the M scored
/// tokens, so `grad_W = (1/M) g^T a~`.
pub fn per_token(g: &mut [f32], dy: &[f32], scored: usize) {
    let s = scored as f32;
    g.iter_mut().zip(dy).for_each(|(o, &d)| *o = d * s);
}

/// `[dW | db]` (dout, din + 1) from the flat gradient buffer.
pub fn combined_grad(out: &mut [f32], model: &Model<f32>, grads: &[f32], site: &Site) {
    let (dw, db) = (model.layout.of(grads, site.w), model.layout.of(grads, site.b));
    for (o, row) in out.chunks_exact_mut(site.din1()).enumerate() {
        row[..site.din].copy_from_slice(&dw[o * site.din..(o + 1) * site.din]);
        row[site.din] = db[o];
    }
}

/// Labels drawn from the model's predictive distribution `probs` (N, V) at every scored position of
/// `targets` (`IGNORE` kept), for the sampled Fisher.
pub fn sampled_targets(out: &mut [u32], probs: &[f32], targets: &[u32], v: usize, rng: &mut crate::rng::Rng) {
    use rand::Rng;
    for ((o, &t), p) in out.iter_mut().zip(targets).zip(probs.chunks_exact(v)) {
        *o = if t == crate::nn::loss::IGNORE {
            t
        } else {
            let (u, mut acc) = (rng.random::<f32>(), 0.0f32);
            // The first label whose cumulative probability passes u (the last one if rounding
            // leaves the sum just under 1).
            p.iter()
                .position(|&q| {
                    acc += q;
                    acc > u
                })
                .unwrap_or(v - 1) as u32
        };
    }
}
