//! K-FAC and CG-FAC (docs/science.md#second-order-optimizers) as one optimizer: every linear layer's gradient `[dW | db]` is
//! preconditioned by its Kronecker-factored curvature (K-FAC: explicit damped inverses; CG-FAC:
//! conjugate gradient on `(A ⊗ G + lambda I) x = grad`), the step is KL-clipped, and the remaining
//! tensors (embeddings, LayerNorm) take AdamW steps.

use multiversion::multiversion;
use serde::Serialize;

use super::adam::Adam;
use super::cg::{self, CgOutcome, CgWork};
use super::curvature::{self, Site};
use super::kfac;
use super::kronecker::{self, Operands, Product, Scratch};
use super::{StepInput, Take};
// The configuration lives with the other configurations; re-exported here where it is used.
pub use super::settings::{Fisher, Method, SecondOrderConfig};
use crate::error::{Error, Result};
use crate::model::{pair_mut, Grads, Model};
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::rng::{rng, Stream};

#[derive(Clone, Debug, Serialize)]
pub struct LayerDiagnostics {
    pub name: String,
    pub cg: CgOutcome,
    pub fell_back: bool,
}

/// What the last step did, for the CLI and the page.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Diagnostics {
    pub layers: Vec<LayerDiagnostics>,
    pub fallbacks_this_step: usize,
    pub fallbacks_total: u64,
    pub damping: f32,
    /// KL-clip scale nu applied to the preconditioned step.
    pub kl_scale: f32,
    /// Wall time of the preconditioning (native only).
    pub precond_ms: Option<f64>,
}

/// `A <- keep A + (1 - keep) a~^T a~ / N` with `a~ = [a, 1]`, assembled from `a^T a` and the column
/// sums of `a`: the GEMM then runs on din (often a multiple of the SIMD width), not din + 1.
/// Multiversioned as `nn::activation::forward`.
#[multiversion(targets = "simd")]
pub(crate) fn update_a_factor(a_factor: &mut [f32], aa: &mut [f32], a: &[f32], n: usize, din: usize, keep: f32) {
    let (aa, mean) = aa[..din * din + din].split_at_mut(din * din);
    let am = MatRef::new(a, n, din);
    gemm(1.0 / n as f32, am.t(), am, 0.0, MatMut::new(aa, din, din));
    mean.fill(0.0);
    for row in a.chunks_exact(din) {
        mean.iter_mut().zip(row).for_each(|(m, &x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n as f32);
    let din1 = din + 1;
    let blend = |old: &mut f32, new: f32| *old = keep * *old + (1.0 - keep) * new;
    for i in 0..din {
        for j in 0..din {
            blend(&mut a_factor[i * din1 + j], aa[i * din + j]);
        }
        blend(&mut a_factor[i * din1 + din], mean[i]);
        blend(&mut a_factor[din * din1 + i], mean[i]);
    }
    blend(&mut a_factor[din * din1 + din], 1.0);
}

/// Momentum on the preconditioned step `x` (dout, din + 1), then `[W | b] -= scale v` with decay on
/// W only. Multiversioned as `nn::activation::forward`.
#[multiversion(targets = "simd")]
fn apply_update(w: &mut [f32], b: &mut [f32], velocity: &mut [f32], x: &[f32], mu: f32, scale: f32, decay: f32) {
    velocity.iter_mut().zip(x).for_each(|(v, &x)| *v = mu * *v + x);
    let din = w.len() / b.len().max(1);
    for ((row, w), b) in velocity.chunks_exact(din + 1).zip(w.chunks_exact_mut(din)).zip(b) {
        w.iter_mut().zip(&row[..din]).for_each(|(p, &v)| *p -= scale * v + decay * *p);
        *b -= scale * row[din];
    }
}

struct Layer {
    a: Vec<f32>,
    g: Vec<f32>,
    a_inv: Vec<f32>,
    g_inv: Vec<f32>,
    /// The preconditioned gradient (and CG's warm start).
    x: Vec<f32>,
    velocity: Vec<f32>,
}

/// What a step changes before it can still fail (a failed inverse, a non-finite KL-clip): each
/// layer's factors, inverses and preconditioned gradient, and the diagnostics. Copied before every
/// step into buffers kept between steps, so that a failed step changes nothing and a good one
/// allocates nothing.
#[derive(Default)]
struct Rollback {
    tensors: Vec<Vec<f32>>,
    layers: Vec<(CgOutcome, bool)>,
    fallbacks_this_step: usize,
}

pub struct SecondOrder {
    pub cfg: SecondOrderConfig,
    pub method: Method,
    sites: Vec<Site>,
    layers: Vec<Layer>,
    /// Tensors that are not linear-layer weights or biases.
    others: Vec<usize>,
    adam: Adam,
    t: u64,
    a1: Vec<f32>,
    g1: Vec<f32>,
    /// Scratch for the input Gram matrix (din, din) and the input means (din).
    aa: Vec<f32>,
    grad: Vec<f32>,
    scratch: Scratch<f32>,
    work: CgWork<f32>,
    /// The sampled Fisher's labels and the output gradients they give (allocated on first use).
    sampled: Vec<u32>,
    fisher_grads: Option<Grads<f32>>,
    pub diag: Diagnostics,
    rollback: Rollback,
}

impl SecondOrder {
    pub fn new(method: Method, cfg: SecondOrderConfig, model: &Model<f32>) -> Self {
        let sites = curvature::sites(model);
        let layers = sites
            .iter()
            .map(|s| Layer {
                a: vec![0.0; s.din1() * s.din1()],
                g: vec![0.0; s.dout * s.dout],
                a_inv: vec![0.0; s.din1() * s.din1()],
                g_inv: vec![0.0; s.dout * s.dout],
                x: vec![0.0; s.dout * s.din1()],
                velocity: vec![0.0; s.dout * s.din1()],
            })
            .collect();
        let others = model.layout.tensors_except(&sites.iter().flat_map(|s| [s.w, s.b]).collect::<Vec<_>>());
        let diag = Diagnostics { damping: cfg.damping, ..Diagnostics::default() };
        SecondOrder {
            adam: Adam::new(0.9, 0.99, 1e-8, cfg.weight_decay, model.num_params()),
            cfg,
            method,
            sites,
            layers,
            others,
            t: 0,
            a1: Vec::new(),
            g1: Vec::new(),
            aa: Vec::new(),
            grad: Vec::new(),
            scratch: Scratch::new(0, 0, 0),
            work: CgWork::new(0),
            sampled: Vec::new(),
            fisher_grads: None,
            diag,
            rollback: Rollback::default(),
        }
    }

    /// Buffers sized by the batch, allocated on the first step only.
    fn ensure_buffers(&mut self, n: usize) {
        let max_din1 = self.sites.iter().map(Site::din1).max().unwrap_or(1);
        let max_dout = self.sites.iter().map(|s| s.dout).max().unwrap_or(1);
        if self.a1.len() != n * max_din1 {
            self.a1 = vec![0.0; n * max_din1];
            self.g1 = vec![0.0; n * max_dout];
            self.aa = vec![0.0; max_din1 * max_din1];
            self.grad = vec![0.0; max_dout * max_din1];
            self.scratch = Scratch::new(n, max_dout, max_din1);
            self.work = CgWork::new(max_dout * max_din1);
        }
    }

    /// One step; an error (a failed inverse, a non-finite update) changes nothing.
    pub fn step(&mut self, model: &mut Model<f32>, s: StepInput) -> Result<()> {
        self.save_rollback();
        let result = self.try_step(model, s);
        if result.is_err() {
            self.restore_rollback();
        }
        result
    }

    fn rollback_tensors(layer: &Layer) -> [&Vec<f32>; 5] {
        [&layer.a, &layer.g, &layer.a_inv, &layer.g_inv, &layer.x]
    }

    fn save_rollback(&mut self) {
        let rb = &mut self.rollback;
        rb.tensors.resize_with(self.layers.len() * 5, Vec::new);
        let tensors = self.layers.iter().flat_map(Self::rollback_tensors);
        rb.tensors.iter_mut().zip(tensors).for_each(|(saved, t)| saved.clone_from(t));
        rb.layers.clear();
        rb.layers.extend(self.diag.layers.iter().map(|l| (l.cg, l.fell_back)));
        rb.fallbacks_this_step = self.diag.fallbacks_this_step;
    }

    fn restore_rollback(&mut self) {
        let rb = &self.rollback;
        let tensors = self.layers.iter_mut().flat_map(|l| [&mut l.a, &mut l.g, &mut l.a_inv, &mut l.g_inv, &mut l.x]);
        tensors.zip(&rb.tensors).for_each(|(t, saved)| t.clone_from(saved));
        self.diag.layers.truncate(rb.layers.len());
        for (l, &(cg, fell_back)) in self.diag.layers.iter_mut().zip(&rb.layers) {
            (l.cg, l.fell_back) = (cg, fell_back);
        }
        self.diag.fallbacks_this_step = rb.fallbacks_this_step;
    }

    fn try_step(&mut self, model: &mut Model<f32>, s: StepInput) -> Result<()> {
        let StepInput { grads, cache, lr, factor, .. } = s;
        #[cfg(not(target_arch = "wasm32"))]
        let start = std::time::Instant::now();
        // N positions, M scored tokens (the loss's terms; see `curvature`).
        let (n, m) = (cache.b * cache.t, cache.count.max(1));
        self.ensure_buffers(n);
        let first = self.t == 0;
        let refresh_factors = self.t.is_multiple_of(self.cfg.update_interval as u64);
        let refresh_inverse = self.t.is_multiple_of(self.cfg.inverse_interval as u64);
        let uses_factors = self.method == Method::Kfac || self.cfg.product == Product::Factors;
        let lambda = self.cfg.damping;
        // The output gradients the curvature is built from: the batch's own labels, or labels drawn
        // from the model at each scored position (one draw per step, seeded by the step: a resumed
        // run draws the same).
        if self.cfg.fisher == Fisher::Sampled {
            let g = self.fisher_grads.get_or_insert_with(|| Grads::new(model, cache.b));
            self.sampled.resize(n, 0);
            let mut r = rng(model.cfg.seed, Stream::Fisher, self.t);
            curvature::sampled_targets(&mut self.sampled, &cache.probs, &cache.targets, model.cfg.vocab, &mut r);
            model.backward_for(cache, &self.sampled, g);
        }
        let out_grads = match (&self.fisher_grads, self.cfg.fisher) {
            (Some(g), Fisher::Sampled) => g,
            _ => grads,
        };
        // Each layer's entry is written in place: its name is copied on the first step only.
        if self.diag.layers.len() != self.sites.len() {
            let entry =
                |s: &Site| LayerDiagnostics { name: s.name.clone(), cg: CgOutcome::default(), fell_back: false };
            self.diag.layers = self.sites.iter().map(entry).collect();
        }
        self.diag.fallbacks_this_step = 0;
        let mut x_dot_grad = 0.0f64;
        let layers = self.sites.iter().zip(self.layers.iter_mut()).zip(self.diag.layers.iter_mut());
        for ((site, layer), entry) in layers {
            let (din1, dout) = (site.din1(), site.dout);
            let (a1, g1, grad) = (&mut self.a1[..n * din1], &mut self.g1[..n * dout], &mut self.grad[..dout * din1]);
            curvature::fold_bias(a1, site.input(cache), site.din);
            curvature::per_token(g1, site.out_grad(out_grads), m);
            curvature::combined_grad(grad, model, &grads.data, site);
            if uses_factors && refresh_factors {
                let keep = if first { 0.0 } else { self.cfg.decay };
                update_a_factor(&mut layer.a, &mut self.aa, site.input(cache), n, site.din, keep);
                let new = (1.0 - keep) / m as f32;
                let g1m = MatRef::new(&*g1, n, dout);
                gemm(new, g1m.t(), g1m, keep, MatMut::new(&mut layer.g, dout, dout));
            }
            let mut outcome = CgOutcome::default();
            match self.method {
                Method::Kfac => {
                    if refresh_inverse {
                        let gamma = (lambda as f64).sqrt();
                        let pi = if self.cfg.pi_damping { kfac::pi(&layer.a, din1, &layer.g, dout) } else { 1.0 };
                        layer.a_inv = kfac::damped_inverse(&layer.a, din1, gamma * pi)?;
                        layer.g_inv = kfac::damped_inverse(&layer.g, dout, gamma / pi)?;
                    }
                    let tmp = &mut self.scratch.od[..dout * din1];
                    kfac::precondition(&mut layer.x, tmp, grad, &layer.g_inv, &layer.a_inv, dout, din1);
                }
                Method::CgFac => {
                    if !self.cfg.warm_start {
                        layer.x.fill(0.0);
                    }
                    let ops =
                        Operands { dout, din1, n, m, a_factor: &layer.a, g_factor: &layer.g, a_batch: a1, g_batch: g1 };
                    let (product, scratch) = (self.cfg.product, &mut self.scratch);
                    outcome = cg::solve(
                        |v, out| kronecker::apply(product, out, v, &ops, lambda, scratch),
                        grad,
                        &mut layer.x,
                        self.cfg.max_iters,
                        self.cfg.tol as f64,
                        &mut self.work,
                    );
                }
            }
            // A divergent or broken solve falls back to the plain gradient for this layer.
            let fell_back = outcome.diverged || layer.x.iter().any(|v| !v.is_finite());
            if fell_back {
                layer.x.copy_from_slice(grad);
                self.diag.fallbacks_this_step += 1;
            }
            x_dot_grad += layer.x.iter().zip(grad.iter()).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>();
            (entry.cg, entry.fell_back) = (outcome, fell_back);
        }
        // KL-clip: nu = min(1, sqrt(kappa / (lr^2 <X, grad>))).
        let kappa = self.cfg.kl_clip as f64;
        let nu = if kappa > 0.0 && x_dot_grad > 0.0 {
            (kappa / ((lr as f64).powi(2) * x_dot_grad)).sqrt().min(1.0)
        } else {
            1.0
        };
        if !nu.is_finite() || !x_dot_grad.is_finite() {
            return Err(Error::NonFinite { what: format!("{:?} update", self.method), step: self.t as usize });
        }
        self.t += 1;
        self.diag.fallbacks_total += self.diag.fallbacks_this_step as u64;
        self.diag.kl_scale = nu as f32;
        let scale = lr * nu as f32;
        for (site, layer) in self.sites.iter().zip(self.layers.iter_mut()) {
            let (w, b) = pair_mut(&model.layout, &mut model.params, site.w, site.b);
            let (mu, wd) = (self.cfg.momentum, self.cfg.weight_decay);
            apply_update(w, b, &mut layer.velocity, &layer.x, mu, scale, lr * wd);
        }
        self.adam.t += 1;
        let (adam_lr, wd) = (self.cfg.adam_lr * factor, self.cfg.weight_decay);
        self.adam.update_tensors(&mut model.params, &grads.data, &model.layout, &self.others, adam_lr, wd);
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.diag.precond_ms = Some(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(())
    }

    /// Named state tensors: everything a resumed run needs to continue bit for bit.
    pub fn state(&self) -> Vec<(String, Vec<f32>)> {
        let mut out = vec![
            ("so.t".to_string(), vec![self.t as f32]),
            ("so.fallbacks".to_string(), vec![self.diag.fallbacks_total as f32]),
            ("adam.m".to_string(), self.adam.m.clone()),
            ("adam.v".to_string(), self.adam.v.clone()),
            ("adam.t".to_string(), vec![self.adam.t as f32]),
        ];
        for (s, l) in self.sites.iter().zip(&self.layers) {
            for (what, v) in [
                ("A", &l.a),
                ("G", &l.g),
                ("A_inv", &l.a_inv),
                ("G_inv", &l.g_inv),
                ("x", &l.x),
                ("velocity", &l.velocity),
            ] {
                out.push((format!("so.{}.{what}", s.name), v.clone()));
            }
        }
        out
    }

    pub fn load_state(&mut self, take: &mut Take) -> Result<()> {
        self.t = take("so.t", 1)?[0] as u64;
        self.diag.fallbacks_total = take("so.fallbacks", 1)?[0] as u64;
        self.adam.m = take("adam.m", self.adam.m.len())?;
        self.adam.v = take("adam.v", self.adam.v.len())?;
        self.adam.t = take("adam.t", 1)?[0] as u64;
        for (s, l) in self.sites.iter().zip(self.layers.iter_mut()) {
            for (what, v) in [
                ("A", &mut l.a),
                ("G", &mut l.g),
                ("A_inv", &mut l.a_inv),
                ("G_inv", &mut l.g_inv),
                ("x", &mut l.x),
                ("velocity", &mut l.velocity),
            ] {
                *v = take(&format!("so.{}.{what}", s.name), v.len())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_factor_equals_the_folded_gram_matrix() {
        let (n, din) = (7, 3);
        let a: Vec<f32> = (0..n * din).map(|i| ((i * 13 % 9) as f32 - 4.0) / 3.0).collect();
        let mut a1 = vec![0.0; n * (din + 1)];
        curvature::fold_bias(&mut a1, &a, din);
        let mut want = vec![0.0; (din + 1) * (din + 1)];
        let m = MatRef::new(&a1, n, din + 1);
        gemm(1.0 / n as f32, m.t(), m, 0.0, MatMut::new(&mut want, din + 1, din + 1));
        let mut got = vec![5.0; (din + 1) * (din + 1)];
        let mut aa = vec![0.0; (din + 1) * (din + 1)];
        update_a_factor(&mut got, &mut aa, &a, n, din, 0.0);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
        }
        // With decay, the old value keeps its share.
        let mut blended = vec![1.0; (din + 1) * (din + 1)];
        update_a_factor(&mut blended, &mut aa, &a, n, din, 0.25);
        assert!((blended[0] - (0.25 + 0.75 * want[0])).abs() < 1e-6);
    }
}
