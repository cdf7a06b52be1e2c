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

    /// One step on the gradient `grads` times `clip` (the clipping's factor, as Adam's `step`).
    pub fn step(&mut self, params: &mut [f32], grads: &[f32], clip: f32, layout: &Layout, lr: f32) {
        for info in &layout.tensors {
            let decay = if info.is_matrix() { self.weight_decay } else { 0.0 };
            let r = info.range();
            heavy_ball(
                &mut params[r.clone()],
                &grads[r.clone()],
                clip,
                &mut self.velocity[r],
                [self.momentum, lr, decay],
            );
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
