//! SGD with heavy-ball momentum and decoupled weight decay on matrices.

use multiversion::multiversion;

use crate::model::params::Layout;

pub struct Sgd {
    pub momentum: f32,
    pub weight_decay: f32,
    pub velocity: Vec<f32>,
}

impl Sgd {
    pub fn new(momentum: f32, weight_decay: f32, n: usize) -> Self {
        Sgd { momentum, weight_decay, velocity: vec![0.0; n] }
    }

    /// One step on the gradient `grads` times `clip` (the clipping's factor, as Adam's `step`), a
    /// large tensor cut over `threads` (`pieces`).
    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], clip: f32, layout: &Layout, lr: f32, threads: usize) {
        for info in &layout.tensors {
            let decay = if info.is_matrix() { self.weight_decay } else { 0.0 };
            let r = info.range();
            let (p, g, v) = (&mut params[r.clone()], &grads[r.clone()], &mut self.velocity[r]);
            let args = [self.momentum, lr, decay];
            #[cfg(not(target_arch = "wasm32"))]
            if let Some(n) = super::pieces::piece_len(threads, p.len()) {
                use rayon::prelude::*;
                let runs = p.par_chunks_mut(n).zip(g.par_chunks(n)).zip(v.par_chunks_mut(n));
                runs.for_each(|((p, g), v)| heavy_ball(p, g, clip, v, args));
                continue;
            }
            heavy_ball(p, g, clip, v, args);
        }
    }
}

/// The update element by element, multiversioned as Adam's (the same bits in every version).
#[multiversion(targets = "simd")]
fn heavy_ball(params: &mut [f32], grads: &[f32], clip: f32, velocity: &mut [f32], [momentum, lr, decay]: [f32; 3]) {
    for ((p, &g), v) in params.iter_mut().zip(grads).zip(velocity) {
        *v = momentum * *v + g * clip;
        *p -= lr * (*v + decay * *p);
    }
}
