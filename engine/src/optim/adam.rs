//! AdamW: Adam with bias correction and decoupled weight decay on matrices only.

use multiversion::multiversion;

use crate::model::params::Layout;

pub struct Adam {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    pub m: Vec<f32>,
    pub v: Vec<f32>,
    /// Updates taken so far (for bias correction).
    pub t: u64,
}

impl Adam {
    pub fn new(beta1: f32, beta2: f32, eps: f32, weight_decay: f32, n: usize) -> Self {
        Adam { beta1, beta2, eps, weight_decay, m: vec![0.0; n], v: vec![0.0; n], t: 0 }
    }

    /// One step on the gradient `grads` times `clip` (the clipping's factor, taken here as each
    /// value is read: one pass over the gradient fewer than scaling it first, the same bits), a
    /// large tensor cut over `threads` (`pieces`).
    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], clip: f32, layout: &Layout, lr: f32, threads: usize) {
        self.t += 1;
        let c1 = 1.0 - self.beta1.powi(self.t as i32);
        let c2 = 1.0 - self.beta2.powi(self.t as i32);
        let (b1, b2, eps) = (self.beta1, self.beta2, self.eps);
        for info in &layout.tensors {
            let decay = if info.is_matrix() { self.weight_decay } else { 0.0 };
            let r = info.range();
            let (p, g, m, v) = (&mut params[r.clone()], &grads[r.clone()], &mut self.m[r.clone()], &mut self.v[r]);
            let args = [b1, b2, eps, c1, c2, lr, decay];
            #[cfg(not(target_arch = "wasm32"))]
            if let Some(n) = super::pieces::piece_len(threads, p.len()) {
                use rayon::prelude::*;
                let runs = p.par_chunks_mut(n).zip(g.par_chunks(n)).zip(m.par_chunks_mut(n)).zip(v.par_chunks_mut(n));
                runs.for_each(|(((p, g), m), v)| adamw(p, g, clip, m, v, args));
                continue;
            }
            adamw(p, g, clip, m, v, args);
        }
    }

    /// The AdamW update of the tensors `ids` at step `t` (the caller counts the step), decay on
    /// matrices only: the part Muon, SOAP, K-FAC and CG-FAC leave to AdamW.
    pub fn update_tensors(
        &mut self,
        params: &mut [f32],
        grads: &[f32],
        layout: &Layout,
        ids: &[usize],
        lr: f32,
        weight_decay: f32,
    ) {
        let c1 = 1.0 - self.beta1.powi(self.t as i32);
        let c2 = 1.0 - self.beta2.powi(self.t as i32);
        for &id in ids {
            let decay = if layout.tensors[id].is_matrix() { weight_decay } else { 0.0 };
            self.update_range(params, grads, layout.tensors[id].range(), lr, decay, c1, c2);
        }
    }

    /// The AdamW update of one contiguous range (K-FAC reuses it for non-linear-layer tensors).
    #[allow(clippy::too_many_arguments)]
    pub fn update_range(
        &mut self,
        params: &mut [f32],
        grads: &[f32],
        r: std::ops::Range<usize>,
        lr: f32,
        decay: f32,
        c1: f32,
        c2: f32,
    ) {
        let (b1, b2, eps) = (self.beta1, self.beta2, self.eps);
        let (m, v) = (&mut self.m[r.clone()], &mut self.v[r.clone()]);
        adamw(&mut params[r.clone()], &grads[r], 1.0, m, v, [b1, b2, eps, c1, c2, lr, decay]);
    }
}

/// The update element by element, compiled for the wider SIMD sets too (AVX-512, AVX2) and chosen at
/// run time: its divisions and square root bound a wide model's update at SSE2's four lanes. No
/// fused multiply-add, so every version gives the same bits.
#[multiversion(targets = "simd")]
fn adamw(
    params: &mut [f32],
    grads: &[f32],
    clip: f32,
    m: &mut [f32],
    v: &mut [f32],
    [b1, b2, eps, c1, c2, lr, decay]: [f32; 7],
) {
    for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(m).zip(v) {
        let g = g * clip;
        *m = b1 * *m + (1.0 - b1) * g;
        *v = b2 * *v + (1.0 - b2) * g * g;
        let update = (*m / c1) / ((*v / c2).sqrt() + eps);
        *p -= lr * (update + decay * *p);
    }
}
