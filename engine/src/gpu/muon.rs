//! Muon on the GPU, the twin of `crate::optim::muon`: per hidden matrix the clipped momentum, its
//! direction scaled to unit Frobenius norm, five Newton-Schulz iterations as matmul ops
//! (`P = b A + c A A` with `A = X X^T`, then `X <- (P + a I) X`), and the update; AdamW for the other
//! tensors. Everything is recorded once; only the learning rates are written before each step.

use super::adamw::{AdamW, Hyper, State as AdamState};
use super::elementwise::{Elementwise, REDUCE_GROUPS};
use super::matmul::{Dims, Matmul, View};
use super::{f, grid_1d, Access, GpuContext, GpuError, Kernel, Op, Result, Tensor};
use crate::config::MuonConfig;
use crate::model::linears::LinearId;
use crate::model::Model;
use crate::optim::{curvature, Take};

/// The Newton-Schulz coefficients of `optim::muon`.
const NS: (f32, f32, f32) = (3.4445, -4.7750, 2.0315);
/// AdamW's constants for the other tensors, as `optim::muon::Muon::new` sets them.
const ADAM_BETAS: (f32, f32, f32) = (0.9, 0.99, 1e-8);

const MOMENTUM: usize = 0;
const NORMALIZE: usize = 1;
const DIAG: usize = 2;
const UPDATE: usize = 3;

/// One hidden matrix: its name, where its weight is, its shape and its momentum.
struct Matrix {
    name: String,
    off: usize,
    rows: usize,
    cols: usize,
    momentum: Tensor,
}

pub struct GpuMuon {
    pub cfg: MuonConfig,
    matrices: Vec<Matrix>,
    adam_m: Tensor,
    adam_v: Tensor,
    /// [lr] for the matrices, and [adam lr, 1 - beta1^t, 1 - beta2^t] for the rest.
    lr: Tensor,
    adam_step: Tensor,
    pub adam_t: u64,
}

/// The kernel's bindings: the fixed tensors around the direction (or P) and the iterate.
fn bind<'t>(fixed: [&'t Tensor; 6], dir: &'t Tensor, x: &'t Tensor) -> [&'t Tensor; 8] {
    let [params, grads, momentum, norm, dir_sq, lr] = fixed;
    [params, grads, momentum, dir, x, norm, dir_sq, lr]
}

impl GpuMuon {
    /// The optimizer and its recorded update, to run after the gradient-norm reduction.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ctx: &GpuContext,
        cfg: MuonConfig,
        model: &Model<f32>,
        (mm, ew, adam): (&Matmul, &Elementwise, &AdamW),
        params: &Tensor,
        grads: &Tensor,
        decay: &Tensor,
        sum_sq: &Tensor,
        clip: f32,
    ) -> Result<(Self, Vec<Op>)> {
        use Access::*;
        let access = [ReadWrite, Read, ReadWrite, ReadWrite, ReadWrite, Read, Read, Read];
        let kernel = Kernel::new(
            ctx,
            "muon",
            concat!(include_str!("kernels/clip.wgsl"), include_str!("kernels/muon.wgsl")),
            &access,
            &["momentum", "normalize", "diag", "update"],
        );
        let l = &model.layout;
        let sites: Vec<_> = curvature::sites(model).into_iter().filter(|s| !matches!(s.id, LinearId::Head)).collect();
        let matrices = sites
            .iter()
            .map(|s| {
                let momentum = ctx.tensor(&format!("muon_m_{}", s.name), s.dout * s.din)?;
                Ok(Matrix { name: s.name.clone(), off: l.tensors[s.w].offset, rows: s.dout, cols: s.din, momentum })
            })
            .collect::<Result<Vec<_>>>()?;
        let largest = matrices.iter().map(|m| m.rows * m.cols).max().unwrap_or(1);
        let small = matrices.iter().map(|m| m.rows.min(m.cols)).max().unwrap_or(1);
        let z = |name: &str, len: usize| ctx.tensor(name, len);
        let (dir, x0, x1) = (z("muon_dir", largest)?, z("muon_x0", largest)?, z("muon_x1", largest)?);
        let (gram, poly) = (z("muon_gram", small * small)?, z("muon_poly", small * small)?);
        let (partials, dir_sq) = (z("muon_partials", REDUCE_GROUPS)?, z("muon_dir_sq", 1)?);
        let (lr, adam_step) = (z("muon_lr", 1)?, z("muon_adam_step", 3)?);
        let (adam_m, adam_v) = (z("muon_adam_m", l.total)?, z("muon_adam_v", l.total)?);
        let (a, b, c) = NS;
        let mut ops = Vec::new();
        for m in &matrices {
            let (n, wide) = (m.rows * m.cols, m.rows <= m.cols);
            let (r, cc) = if wide { (m.rows, m.cols) } else { (m.cols, m.rows) };
            let words = |a_word: f32| {
                [
                    n as u32,
                    m.off as u32,
                    m.rows as u32,
                    m.cols as u32,
                    f(cfg.momentum),
                    cfg.nesterov as u32,
                    f(clip),
                    f(a_word),
                    f(cfg.weight_decay),
                ]
            };
            let fixed = [params, grads, &m.momentum, sum_sq, &dir_sq, &lr];
            ops.push(kernel.op(ctx, MOMENTUM, &bind(fixed, &dir, &x0), &words(0.0), grid_1d(n)));
            ops.extend(ew.sum(ctx, &dir, n, true, &partials, &dir_sq));
            ops.push(kernel.op(ctx, NORMALIZE, &bind(fixed, &dir, &x0), &words(0.0), grid_1d(n)));
            // X (r, c), r <= c; the iterate ping-pongs between x0 and x1.
            let (mut x, mut next) = (&x0, &x1);
            let (xv, gv) = (View::rows(0, cc), View::rows(0, r));
            for _ in 0..cfg.ns_steps {
                let gram_dims = Dims::new(r, r, cc);
                ops.push(mm.op(ctx, gram_dims, 1.0, (x, xv), (x, xv.t()), 0.0, (&gram, gv)));
                ops.push(mm.op(ctx, gram_dims, 1.0, (x, xv), (x, xv.t()), 0.0, (&poly, gv)));
                ops.push(mm.op(ctx, Dims::new(r, r, r), c, (&gram, gv), (&gram, gv), b, (&poly, gv)));
                let mut diag = words(a);
                diag[0] = r as u32;
                ops.push(kernel.op(ctx, DIAG, &bind(fixed, &poly, x), &diag, grid_1d(r)));
                ops.push(mm.op(ctx, Dims::new(r, cc, r), 1.0, (&poly, gv), (x, xv), 0.0, (next, xv)));
                std::mem::swap(&mut x, &mut next);
            }
            let scale = (m.rows as f32 / m.cols as f32).max(1.0).sqrt();
            ops.push(kernel.op(ctx, UPDATE, &bind(fixed, &dir, x), &words(scale), grid_1d(n)));
        }
        let covered: Vec<usize> = sites.iter().map(|s| s.w).collect();
        let state = AdamState { params, grads, m: &adam_m, v: &adam_v, decay, sum_sq, step: &adam_step };
        let (beta1, beta2, eps) = ADAM_BETAS;
        let h = Hyper { beta1, beta2, eps, max_norm: clip };
        for (_, info) in l.tensors.iter().enumerate().filter(|(id, _)| !covered.contains(id)) {
            ops.push(adam.op_range(ctx, &state, h, info.range()));
        }
        Ok((GpuMuon { cfg, matrices, adam_m, adam_v, lr, adam_step, adam_t: 0 }, ops))
    }

    /// Writes this step's learning rates: `lr` for the matrices, AdamW's scaled by the schedule's
    /// `factor`, with the bias corrections of update `adam_t + 1`.
    pub fn write_step(&self, ctx: &GpuContext, lr: f32, factor: f32) {
        let (beta1, beta2, _) = ADAM_BETAS;
        ctx.write(&self.lr, &[lr]);
        ctx.write(
            &self.adam_step,
            &super::adamw::step_values(self.cfg.adam_lr * factor, beta1, beta2, self.adam_t + 1),
        );
    }

    /// The state under the CPU optimizer's names (`optim::muon::Muon::state`).
    pub async fn state(&self, ctx: &GpuContext) -> Result<Vec<(String, Vec<f32>)>> {
        let mut out = vec![
            ("adam.m".to_string(), ctx.read_all(&self.adam_m).await?),
            ("adam.v".to_string(), ctx.read_all(&self.adam_v).await?),
            ("adam.t".to_string(), vec![self.adam_t as f32]),
        ];
        for m in &self.matrices {
            out.push((format!("muon.{}.momentum", m.name), ctx.read_all(&m.momentum).await?));
        }
        Ok(out)
    }

    pub fn load_state(&mut self, ctx: &GpuContext, take: &mut Take<GpuError>) -> Result<()> {
        ctx.write(&self.adam_m, &take("adam.m", self.adam_m.len)?);
        ctx.write(&self.adam_v, &take("adam.v", self.adam_v.len)?);
        self.adam_t = take("adam.t", 1)?[0] as u64;
        for m in &self.matrices {
            ctx.write(&m.momentum, &take(&format!("muon.{}.momentum", m.name), m.momentum.len)?);
        }
        Ok(())
    }
}
