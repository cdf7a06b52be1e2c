//! Muon (Keller Jordan et al., docs/science.md#the-race): momentum on each hidden 2-D weight, orthogonalised
//! by five Newton-Schulz iterations, `W <- W - lr max(1, rows/cols)^0.5 X`; embeddings, gains,
//! biases and the head take AdamW steps, as in the modded-nanogpt speedruns.

use super::adam::Adam;
use super::settings::MuonConfig;
use super::{curvature, Take};
use crate::model::linears::{LinearId, LinearSpec};
use crate::model::{Grads, Model};
use crate::nn::matmul::{gemm, MatMut, MatRef};

/// The quintic's coefficients (a, b, c): chosen to push every singular value of the normalised
/// matrix into about [0.7, 1.2] in five steps, fast rather than exactly to 1.
const NS: (f32, f32, f32) = (3.4445, -4.7750, 2.0315);

/// The Newton-Schulz iterations' matrices, kept between calls: a step allocates nothing once they
/// have grown to the largest layer.
#[derive(Default)]
pub struct NewtonSchulz {
    x: Vec<f32>,
    gram: Vec<f32>,
    poly: Vec<f32>,
    next: Vec<f32>,
}

impl NewtonSchulz {
    /// `out` (rows, cols) ≈ U V^T of `g` (rows, cols), by `steps` iterations
    /// `X <- a X + b (X X^T) X + c (X X^T)^2 X` on `X = g / |g|_F`, on the transpose when rows > cols
    /// so the Gram matrix is the smaller one. Returns false (and leaves `out` zero) for a zero `g`.
    pub fn orthogonalize(&mut self, out: &mut [f32], g: &[f32], rows: usize, cols: usize, steps: usize) -> bool {
        let norm = g.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt() as f32;
        out.fill(0.0);
        if !(norm > 0.0 && norm.is_finite()) {
            return false;
        }
        // Work on X (r, c) with r <= c; `wide` says whether that is g or its transpose.
        let wide = rows <= cols;
        let (r, c) = if wide { (rows, cols) } else { (cols, rows) };
        for (v, n) in [(&mut self.x, r * c), (&mut self.gram, r * r), (&mut self.poly, r * r), (&mut self.next, r * c)]
        {
            if v.len() < n {
                v.resize(n, 0.0);
            }
        }
        let (mut x, mut next) = (&mut self.x[..r * c], &mut self.next[..r * c]);
        let (gram, poly) = (&mut self.gram[..r * r], &mut self.poly[..r * r]);
        for i in 0..rows {
            for j in 0..cols {
                let v = g[i * cols + j] / norm;
                if wide {
                    x[i * c + j] = v;
                } else {
                    x[j * c + i] = v;
                }
            }
        }
        let (a, b, cc) = NS;
        for _ in 0..steps {
            let xm = MatRef::new(x, r, c);
            gemm(1.0, xm, xm.t(), 0.0, MatMut::new(gram, r, r));
            // poly = b A + c A A
            let am = MatRef::new(gram, r, r);
            poly.copy_from_slice(gram);
            gemm(cc, am, am, b, MatMut::new(poly, r, r));
            next.copy_from_slice(x);
            gemm(1.0, MatRef::new(poly, r, r), MatRef::new(x, r, c), a, MatMut::new(next, r, c));
            std::mem::swap(&mut x, &mut next);
        }
        for i in 0..rows {
            for j in 0..cols {
                out[i * cols + j] = if wide { x[i * c + j] } else { x[j * c + i] };
            }
        }
        true
    }
}

pub struct Muon {
    pub cfg: MuonConfig,
    /// The hidden linear layers' weights (not the head), and each one's momentum.
    sites: Vec<LinearSpec>,
    momentum: Vec<Vec<f32>>,
    /// Tensors Muon leaves to AdamW: embeddings, LayerNorm, biases, the head.
    others: Vec<usize>,
    adam: Adam,
    update: Vec<f32>,
    buf: Vec<f32>,
    newton_schulz: NewtonSchulz,
}

impl Muon {
    pub fn new(cfg: MuonConfig, model: &Model<f32>) -> Self {
        let sites: Vec<LinearSpec> =
            curvature::sites(model).into_iter().filter(|s| !matches!(s.id, LinearId::Head)).collect();
        let momentum = sites.iter().map(|s| vec![0.0; s.dout * s.din]).collect();
        let others = model.layout.tensors_except(&sites.iter().map(|s| s.w).collect::<Vec<_>>());
        let largest = sites.iter().map(|s| s.dout * s.din).max().unwrap_or(0);
        Muon {
            adam: Adam::new(0.9, 0.99, 1e-8, cfg.weight_decay, model.num_params()),
            cfg,
            sites,
            momentum,
            others,
            update: vec![0.0; largest],
            buf: vec![0.0; largest],
            newton_schulz: NewtonSchulz::default(),
        }
    }

    /// One step at learning rate `lr` for the matrices (the schedule's `factor` scales AdamW's).
    pub fn step(&mut self, model: &mut Model<f32>, grads: &Grads<f32>, lr: f32, factor: f32) {
        let (mu, wd) = (self.cfg.momentum, self.cfg.weight_decay);
        for (s, m) in self.sites.iter().zip(self.momentum.iter_mut()) {
            let (rows, cols) = (s.dout, s.din);
            let g = model.layout.of(&grads.data, s.w);
            m.iter_mut().zip(g).for_each(|(m, &g)| *m = mu * *m + g);
            // Nesterov: orthogonalise g + mu m instead of m.
            let dir = &mut self.buf[..rows * cols];
            if self.cfg.nesterov {
                dir.iter_mut().zip(g.iter().zip(m.iter())).for_each(|(d, (&g, &m))| *d = g + mu * m);
            } else {
                dir.copy_from_slice(m);
            }
            let x = &mut self.update[..rows * cols];
            self.newton_schulz.orthogonalize(x, dir, rows, cols, self.cfg.ns_steps);
            let scale = lr * (rows as f32 / cols as f32).max(1.0).sqrt();
            let w = model.layout.of_mut(&mut model.params, s.w);
            w.iter_mut().zip(x.iter()).for_each(|(p, &u)| *p -= scale * u + lr * wd * *p);
        }
        self.adam.t += 1;
        self.adam.update_tensors(
            &mut model.params,
            &grads.data,
            &model.layout,
            &self.others,
            self.cfg.adam_lr * factor,
            wd,
        );
    }

    /// Named state tensors: the momenta and AdamW's state.
    pub fn state(&self) -> Vec<(String, Vec<f32>)> {
        let mut out = vec![
            ("adam.m".to_string(), self.adam.m.clone()),
            ("adam.v".to_string(), self.adam.v.clone()),
            ("adam.t".to_string(), vec![self.adam.t as f32]),
        ];
        out.extend(
            self.sites.iter().zip(&self.momentum).map(|(s, m)| (format!("muon.{}.momentum", s.name), m.clone())),
        );
        out
    }

    pub fn load_state(&mut self, take: &mut Take) -> crate::error::Result<()> {
        self.adam.m = take("adam.m", self.adam.m.len())?;
        self.adam.v = take("adam.v", self.adam.v.len())?;
        self.adam.t = take("adam.t", 1)?[0] as u64;
        for (s, m) in self.sites.iter().zip(self.momentum.iter_mut()) {
            *m = take(&format!("muon.{}.momentum", s.name), m.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DMatrix;

    /// Newton-Schulz against the SVD: the output has the input's singular vectors, U^T X V is
    /// diagonal, and its singular values sit in the quintic's band around 1 (the exact
    /// orthogonalisation U V^T has them all at 1).
    #[test]
    fn newton_schulz_orthogonalises_like_the_svd() {
        for (rows, cols, seed) in [(8, 20, 1u64), (20, 8, 2), (12, 12, 3)] {
            let g: Vec<f32> = (0..rows * cols)
                .map(|k| {
                    let h =
                        (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed.wrapping_mul(0xD1B5_4A32_D192_ED03);
                    ((h >> 40) as f32 / (1u64 << 24) as f32) - 0.5
                })
                .collect();
            let mut x = vec![0.0; rows * cols];
            assert!(NewtonSchulz::default().orthogonalize(&mut x, &g, rows, cols, 5));
            let gm = DMatrix::from_fn(rows, cols, |i, j| g[i * cols + j] as f64);
            let svd = gm.svd(true, true);
            let (u, vt) = (svd.u.unwrap(), svd.v_t.unwrap());
            let xm = DMatrix::from_fn(rows, cols, |i, j| x[i * cols + j] as f64);
            let core = u.transpose() * &xm * vt.transpose();
            let k = rows.min(cols);
            let (mut off, mut diag) = (0.0f64, vec![]);
            for i in 0..k {
                for j in 0..k {
                    if i == j {
                        diag.push(core[(i, j)]);
                    } else {
                        off = off.max(core[(i, j)].abs());
                    }
                }
            }
            let (lo, hi) = diag.iter().fold((f64::INFINITY, 0.0f64), |(a, b), &d| (a.min(d), b.max(d)));
            let cond = svd.singular_values.max() / svd.singular_values.min();
            eprintln!(
                "{rows}x{cols} (condition {cond:.1}): singular values of X in [{lo:.3}, {hi:.3}], off-diagonal {off:e}"
            );
            assert!(off < 1e-4, "{rows}x{cols}: X does not share G's singular vectors ({off})");
            assert!(lo > 0.5 && hi < 1.3, "{rows}x{cols}: singular values in [{lo}, {hi}]");
            // The exact orthogonalisation U V^T is within the band's distance.
            let uvt = u.columns(0, k) * vt.rows(0, k);
            let rel = (&xm - &uvt).norm() / uvt.norm();
            assert!(rel < 0.35, "{rows}x{cols}: |X - U V^T| / |U V^T| = {rel}");
        }
        let mut x = vec![1.0; 6];
        assert!(!NewtonSchulz::default().orthogonalize(&mut x, &[0.0; 6], 2, 3, 5), "a zero gradient has no direction");
        assert!(x.iter().all(|&v| v == 0.0));
    }
}
