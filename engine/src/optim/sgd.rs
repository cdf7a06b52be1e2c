//! SGD with heavy-ball momentum and decoupled weight decay on matrices.

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

    pub fn step(&mut self, params: &mut [f32], grads: &[f32], layout: &Layout, lr: f32) {
        for info in &layout.tensors {
            let decay = if info.is_matrix() { self.weight_decay } else { 0.0 };
            let r = info.range();
            for ((p, &g), v) in params[r.clone()].iter_mut().zip(&grads[r.clone()]).zip(&mut self.velocity[r]) {
                *v = self.momentum * *v + g;
                *p -= lr * (*v + decay * *p);
            }
        }
    }
}
