//! SOAP (Vyas et al. 2024, docs/science.md#the-race): Adam run in the eigenbasis of Shampoo's two factors.
//! For each linear layer's weight W (dout, din) with gradient G:
//!
//! ```text
//! L <- b2 L + (1 - b2) G G^T      R <- b2 R + (1 - b2) G^T G      (every step)
//! Q_L, Q_R <- eigenvectors of L, R                                 (every `precondition_interval` steps)
//! M <- b1 M + (1 - b1) G                                           (in the weights' own basis)
//! G' = Q_L^T G Q_R,  M' = Q_L^T M Q_R,  V <- b2 V + (1 - b2) G' * G'   (V lives in the rotated basis)
//! W <- W - lr (Q_L [(M'/c1) / (sqrt(V/c2) + eps)] Q_R^T + wd W)
//! ```
//!
//! Embeddings, LayerNorm gains and biases take AdamW steps with the same moments. Unlike the
//! reference code, the first step does not skip its update: it accumulates the factors, finds their
//! basis and steps in it. The eigendecompositions are f64 (nalgebra) and sorted by eigenvalue, so a
//! refreshed basis keeps V's columns in the same order where the spectrum allows.

use nalgebra::DMatrix;

use super::adam::Adam;
use super::settings::SoapConfig;
use super::{curvature, Take};
use crate::error::{Error, Result};
use crate::model::linears::LinearSpec;
use crate::model::{Grads, Model};
use crate::nn::matmul::{gemm, MatMut, MatRef};

/// One weight's Shampoo factors, their eigenbases and the rotated second moment.
struct Factors {
    /// L (dout, dout) and R (din, din).
    left: Vec<f32>,
    right: Vec<f32>,
    /// Their eigenvectors as columns, largest eigenvalue first.
    q_left: Vec<f32>,
    q_right: Vec<f32>,
    /// The first moment (dout, din) in the weights' basis; the second in the rotated one.
    m: Vec<f32>,
    v: Vec<f32>,
}

pub struct Soap {
    pub cfg: SoapConfig,
    sites: Vec<LinearSpec>,
    factors: Vec<Factors>,
    /// Tensors SOAP leaves to AdamW: embeddings, LayerNorm, biases.
    others: Vec<usize>,
    adam: Adam,
    /// Scratch: two (dout, din) matrices of the largest layer.
    rotated: Vec<f32>,
    tmp: Vec<f32>,
}

impl Soap {
    pub fn new(cfg: SoapConfig, model: &Model<f32>) -> Self {
        let sites = curvature::sites(model);
        let factors = sites
            .iter()
            .map(|s| Factors {
                left: vec![0.0; s.dout * s.dout],
                right: vec![0.0; s.din * s.din],
                q_left: identity(s.dout),
                q_right: identity(s.din),
                m: vec![0.0; s.dout * s.din],
                v: vec![0.0; s.dout * s.din],
            })
            .collect();
        let others = model.layout.tensors_except(&sites.iter().map(|s| s.w).collect::<Vec<_>>());
        let largest = sites.iter().map(|s| s.dout * s.din).max().unwrap_or(0);
        Soap {
            adam: Adam::new(cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, model.num_params()),
            cfg,
            sites,
            factors,
            others,
            rotated: vec![0.0; largest],
            tmp: vec![0.0; largest],
        }
    }

    /// One step at learning rate `lr`. A gradient whose squares do not sum to a finite number is
    /// an error that changes nothing; otherwise every factor stays finite (each is a running
    /// average of Gram matrices bounded by that sum) and every step succeeds.
    pub fn step(&mut self, model: &mut Model<f32>, grads: &Grads<f32>, lr: f32) -> Result<()> {
        for s in &self.sites {
            if !model.layout.of(&grads.data, s.w).iter().map(|g| g * g).sum::<f32>().is_finite() {
                let what = format!("SOAP gradient of {}", s.name);
                return Err(Error::NonFinite { what, step: self.adam.t as usize });
            }
        }
        let (b1, b2, eps, wd) = (self.cfg.beta1, self.cfg.beta2, self.cfg.eps, self.cfg.weight_decay);
        let t = self.adam.t + 1;
        let refresh = t == 1 || (t - 1).is_multiple_of(self.cfg.precondition_interval as u64);
        for (s, f) in self.sites.iter().zip(&mut self.factors) {
            let g = MatRef::new(model.layout.of(&grads.data, s.w), s.dout, s.din);
            gemm(1.0 - b2, g, g.t(), b2, MatMut::new(&mut f.left, s.dout, s.dout));
            gemm(1.0 - b2, g.t(), g, b2, MatMut::new(&mut f.right, s.din, s.din));
            if refresh {
                eigenbasis(&mut f.q_left, &f.left, s.dout);
                eigenbasis(&mut f.q_right, &f.right, s.din);
            }
        }
        self.adam.t = t;
        let c1 = 1.0 - b1.powi(t as i32);
        let c2 = 1.0 - b2.powi(t as i32);
        for (s, f) in self.sites.iter().zip(&mut self.factors) {
            let (rows, cols) = (s.dout, s.din);
            let g = model.layout.of(&grads.data, s.w);
            f.m.iter_mut().zip(g).for_each(|(m, &g)| *m = b1 * *m + (1.0 - b1) * g);
            let (rot, tmp) = (&mut self.rotated[..rows * cols], &mut self.tmp[..rows * cols]);
            // V from the rotated gradient, then N' = M' / sqrt(V) in `rot`.
            rotate_in(rot, tmp, g, &f.q_left, &f.q_right, rows, cols);
            f.v.iter_mut().zip(rot.iter()).for_each(|(v, &r)| *v = b2 * *v + (1.0 - b2) * r * r);
            rotate_in(rot, tmp, &f.m, &f.q_left, &f.q_right, rows, cols);
            rot.iter_mut().zip(&f.v).for_each(|(n, &v)| *n = (*n / c1) / ((v / c2).sqrt() + eps));
            // N = Q_L N' Q_R^T into `rot`.
            gemm(
                1.0,
                MatRef::new(&f.q_left, rows, rows),
                MatRef::new(rot, rows, cols),
                0.0,
                MatMut::new(tmp, rows, cols),
            );
            let qr = MatRef::new(&f.q_right, cols, cols);
            gemm(1.0, MatRef::new(tmp, rows, cols), qr.t(), 0.0, MatMut::new(rot, rows, cols));
            let w = model.layout.of_mut(&mut model.params, s.w);
            w.iter_mut().zip(rot.iter()).for_each(|(p, &n)| *p -= lr * (n + wd * *p));
        }
        self.adam.update_tensors(&mut model.params, &grads.data, &model.layout, &self.others, lr, wd);
        Ok(())
    }

    /// Named state tensors: AdamW's, and per layer the factors, bases and moments.
    pub fn state(&self) -> Vec<(String, Vec<f32>)> {
        let mut out = vec![
            ("adam.m".to_string(), self.adam.m.clone()),
            ("adam.v".to_string(), self.adam.v.clone()),
            ("adam.t".to_string(), vec![self.adam.t as f32]),
        ];
        for (s, f) in self.sites.iter().zip(&self.factors) {
            for (part, x) in
                [("L", &f.left), ("R", &f.right), ("QL", &f.q_left), ("QR", &f.q_right), ("m", &f.m), ("v", &f.v)]
            {
                out.push((format!("soap.{}.{part}", s.name), x.clone()));
            }
        }
        out
    }

    pub fn load_state(&mut self, take: &mut Take) -> Result<()> {
        self.adam.m = take("adam.m", self.adam.m.len())?;
        self.adam.v = take("adam.v", self.adam.v.len())?;
        self.adam.t = take("adam.t", 1)?[0] as u64;
        for (s, f) in self.sites.iter().zip(self.factors.iter_mut()) {
            for (part, x) in [
                ("L", &mut f.left),
                ("R", &mut f.right),
                ("QL", &mut f.q_left),
                ("QR", &mut f.q_right),
                ("m", &mut f.m),
                ("v", &mut f.v),
            ] {
                *x = take(&format!("soap.{}.{part}", s.name), x.len())?;
            }
        }
        Ok(())
    }
}

fn identity(n: usize) -> Vec<f32> {
    (0..n * n).map(|k| if k / n == k % n { 1.0 } else { 0.0 }).collect()
}

/// `out` = Q_L^T x Q_R for x (rows, cols); `tmp` is scratch of the same size.
fn rotate_in(out: &mut [f32], tmp: &mut [f32], x: &[f32], ql: &[f32], qr: &[f32], rows: usize, cols: usize) {
    let ql = MatRef::new(ql, rows, rows);
    gemm(1.0, ql.t(), MatRef::new(x, rows, cols), 0.0, MatMut::new(tmp, rows, cols));
    gemm(1.0, MatRef::new(tmp, rows, cols), MatRef::new(qr, cols, cols), 0.0, MatMut::new(out, rows, cols));
}

/// `q` (n, n) = the eigenvectors of the symmetric `a` as columns, largest eigenvalue first.
fn eigenbasis(q: &mut [f32], a: &[f32], n: usize) {
    let eig = DMatrix::from_fn(n, n, |i, j| a[i * n + j] as f64).symmetric_eigen();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| eig.eigenvalues[j].total_cmp(&eig.eigenvalues[i]));
    for (col, &k) in order.iter().enumerate() {
        for row in 0..n {
            q[row * n + col] = eig.eigenvectors[(row, k)] as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;

    fn model() -> (Model<f32>, Grads<f32>) {
        let cfg =
            ModelConfig { vocab: 13, d_model: 16, heads: 2, layers: 1, d_ff: 32, context: 8, ..ModelConfig::default() };
        let model = Model::<f32>::new(cfg).unwrap();
        let grads = Grads::new(&model, 2);
        (model, grads)
    }

    /// Pseudo-random values in [-0.5, 0.5), so each step's gradient differs.
    fn fill(x: &mut [f32], seed: u64) {
        for (k, v) in x.iter_mut().enumerate() {
            let h = (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed.wrapping_mul(0xD1B5_4A32_D192_ED03);
            *v = ((h >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
        }
    }

    /// With no first-moment averaging, SOAP's first step on a weight is the orthogonalisation
    /// U V^T of its gradient: the basis diagonalises G, and Adam's sign-like step on the singular
    /// values makes them all 1. Each gradient is built as U diag(1..3) V^T from random orthogonal
    /// U, V (nalgebra's QR), so the eigenvectors are well separated and the answer is known.
    #[test]
    fn the_first_step_without_momentum_is_the_orthogonalisation() {
        let (mut model, mut grads) = model();
        let orthogonal = |n: usize, seed: u64| {
            let mut x = vec![0.0f32; n * n];
            fill(&mut x, seed);
            DMatrix::from_fn(n, n, |i, j| x[i * n + j] as f64).qr().q()
        };
        let cfg = SoapConfig { beta1: 0.0, eps: 1e-3, weight_decay: 0.0, ..SoapConfig::default() };
        let mut soap = Soap::new(cfg, &model);
        let mut expected = vec![];
        for (k, s) in soap.sites.iter().enumerate() {
            let (rows, cols) = (s.dout, s.din);
            let (u, v) = (orthogonal(rows, 2 * k as u64), orthogonal(cols, 2 * k as u64 + 1));
            let r = rows.min(cols);
            let sigma = DMatrix::from_fn(r, r, |i, j| if i == j { 1.0 + 2.0 * i as f64 / r as f64 } else { 0.0 });
            let (u, v) = (u.columns(0, r).into_owned(), v.columns(0, r).into_owned());
            let g = &u * sigma * v.transpose();
            let dst = model.layout.of_mut(&mut grads.data, s.w);
            dst.iter_mut().enumerate().for_each(|(idx, x)| *x = g[(idx / cols, idx % cols)] as f32);
            expected.push(u * v.transpose());
        }
        let before = model.params.clone();
        soap.step(&mut model, &grads, 1.0).unwrap();
        for (s, uvt) in soap.sites.iter().zip(expected) {
            let (rows, cols) = (s.dout, s.din);
            let (w0, w1) = (model.layout.of(&before, s.w), model.layout.of(&model.params, s.w));
            let step = DMatrix::from_fn(rows, cols, |i, j| (w0[i * cols + j] - w1[i * cols + j]) as f64);
            let rel = (&step - &uvt).norm() / uvt.norm();
            eprintln!("{} ({rows}x{cols}): |step - U V^T| / |U V^T| = {rel:e}", s.name);
            assert!(rel < 5e-3, "{}: {rel}", s.name);
        }
    }

    #[test]
    fn a_non_finite_gradient_is_an_error_that_changes_nothing() {
        let (mut model, mut grads) = model();
        fill(&mut grads.data, 3);
        let mut soap = Soap::new(SoapConfig::default(), &model);
        soap.step(&mut model, &grads, 1e-3).unwrap();
        let head = soap.sites.last().unwrap().w;
        grads.data[model.layout.tensors[head].range().start] = f32::INFINITY;
        let (state, params) = (soap.state(), model.params.clone());
        let err = soap.step(&mut model, &grads, 1e-3).unwrap_err().to_string();
        assert!(err.contains("head") && err.contains("non-finite"), "{err}");
        assert_eq!((soap.state(), &model.params), (state, &params));
    }

    #[test]
    fn the_bases_diagonalise_the_accumulated_factors() {
        let (mut model, mut grads) = model();
        let cfg = SoapConfig { precondition_interval: 1, ..SoapConfig::default() };
        let b2 = cfg.beta2 as f64;
        let mut soap = Soap::new(cfg, &model);
        let sites = soap.sites.clone();
        let mut dense: Vec<(DMatrix<f64>, DMatrix<f64>)> =
            sites.iter().map(|s| (DMatrix::zeros(s.dout, s.dout), DMatrix::zeros(s.din, s.din))).collect();
        for step in 0..5 {
            fill(&mut grads.data, 100 + step);
            for (s, (l, r)) in sites.iter().zip(&mut dense) {
                let g = model.layout.of(&grads.data, s.w);
                let g = DMatrix::from_fn(s.dout, s.din, |i, j| g[i * s.din + j] as f64);
                *l = &*l * b2 + &g * g.transpose() * (1.0 - b2);
                *r = &*r * b2 + g.transpose() * &g * (1.0 - b2);
            }
            soap.step(&mut model, &grads, 1e-3).unwrap();
        }
        for ((s, f), (l, r)) in sites.iter().zip(&soap.factors).zip(&dense) {
            for (q, a, n) in [(&f.q_left, l, s.dout), (&f.q_right, r, s.din)] {
                let q = DMatrix::from_fn(n, n, |i, j| q[i * n + j] as f64);
                let d = q.transpose() * a * &q;
                let scale = d.diagonal().amax();
                let off = (0..n * n).filter(|k| k / n != k % n).map(|k| d[(k / n, k % n)].abs()).fold(0.0, f64::max);
                let sorted = (1..n).all(|i| d[(i, i)] <= d[(i - 1, i - 1)] + 1e-6 * scale);
                eprintln!("{} ({n}x{n}): off-diagonal / largest eigenvalue {:e}", s.name, off / scale);
                assert!(off < 1e-5 * scale && sorted, "{}: off-diagonal {off}, largest {scale}", s.name);
            }
        }
    }
}
