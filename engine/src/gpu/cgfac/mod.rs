//! CG-FAC on the GPU: the GPU twin of `optim::second_order` (method CG-FAC), `optim::cg::solve` and
//! `optim::kronecker::apply` with any of its three products. `Factors` keeps A and G; the
//! matrix-free products keep each layer's batch instead (a~ = [a, 1] and g = N dy, stored after the
//! layer's backward) and run as thin matmuls.
//!
//! Every linear layer's state lives in three packed tensors: `factors` (A and G), `vecs` (the
//! gradient `[dW | db]`, CG's x, r, p, Ap and the momentum) and `sc` (CG's scalars per layer, the
//! KL-clip globals and the reduction partials). The scalars never leave the GPU inside a step: each
//! CG kernel reads its layer's status first, so running `max_iters` fixed iterations reproduces the
//! CPU loop's early exit without a readback; the trainer copies them into its ring of step records,
//! read every few steps, and the diagnostics come from there.
//!
//! `layout` says where everything lives, `solver` records the kernels, this file is the optimizer.

mod layout;
mod solver;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

use super::adamw::{step_values, AdamW, Hyper, State as AdamState};
use super::matmul::Matmul;
use super::{GpuContext, GpuError, Op, Result, Tensor};
use crate::model::linears::LinearId;
use crate::model::Model;
use crate::optim::cg::CgOutcome;
use crate::optim::second_order::{Diagnostics, LayerDiagnostics, SecondOrderConfig};
use crate::optim::{curvature, Take};
use layout::*;
use solver::Solver;

/// Factor updates to record before op `at` of the trainer's step (where the layer's output
/// gradient is still in its scratch buffer): on the first update and later ones.
struct FactorOps {
    at: usize,
    first: Vec<Op>,
    later: Vec<Op>,
}

/// The CG-FAC optimizer's state and ops on the GPU, named as `SecondOrder::state` names them.
pub struct CgFac {
    pub cfg: SecondOrderConfig,
    solver: Solver,
    factor_ops: Vec<FactorOps>,
    /// The matrix-free products' batch stores, each run every step before op `.0`.
    batch_ops: Vec<(usize, Vec<Op>)>,
    /// Gradient gathers and CG starts, the CG iterations, and fallback, KL-clip and updates.
    init: Vec<Op>,
    iteration: Vec<Op>,
    finish: Vec<Op>,
    adam_m: Tensor,
    adam_v: Tensor,
    /// [adam lr, 1 - beta1^t, 1 - beta2^t] for the tensors outside the linear layers.
    adam_step: Tensor,
    adam_t: u64,
    /// Second-order steps taken (decides the factor refreshes), as `SecondOrder::t`.
    t: u64,
    fallbacks_total: u64,
    tokens: usize,
    /// Scored tokens per batch: the factors' and products' M (see `optim::curvature`).
    pub scored: usize,
    /// Which linear layer each of the solver's layers is (`curvature::sites` order).
    sites: Vec<LinearId>,
    pub diag: Diagnostics,
}

/// AdamW's constants for the other tensors, as `SecondOrder::new` sets them.
const ADAM_BETAS: (f32, f32, f32) = (0.9, 0.99, 1e-8);

impl CgFac {
    /// Any of the three products; the matrix-free ones store each layer's batch (see [`Batch`]).
    pub fn new(
        ctx: &GpuContext,
        cfg: SecondOrderConfig,
        model: &Model<f32>,
        tokens: usize,
        scored: usize,
        sum_sq: &Tensor,
    ) -> Result<Self> {
        let l = &model.layout;
        let sites = curvature::sites(model);
        let shapes: Vec<_> = sites
            .iter()
            .map(|s| (s.name.clone(), s.din, s.dout, l.tensors[s.w].offset, l.tensors[s.b].offset))
            .collect();
        let total = l.total;
        let solver = Solver::new(ctx, &shapes, sum_sq, cfg.product, tokens, scored)?;
        Ok(CgFac {
            solver,
            diag: Diagnostics { damping: cfg.damping, ..Diagnostics::default() },
            cfg,
            factor_ops: Vec::new(),
            batch_ops: Vec::new(),
            init: Vec::new(),
            iteration: Vec::new(),
            finish: Vec::new(),
            adam_m: ctx.tensor("cg_adam_m", total)?,
            adam_v: ctx.tensor("cg_adam_v", total)?,
            adam_step: ctx.tensor("cg_adam_step", 3)?,
            adam_t: 0,
            t: 0,
            fallbacks_total: 0,
            tokens,
            scored,
            sites: sites.iter().map(|s| s.id).collect(),
        })
    }

    /// Records what linear layer `id` needs from the step before op `at`: its factor updates
    /// (`Factors`, as on the CPU only then) or its batch (the others).
    pub fn track(&mut self, ctx: &GpuContext, mm: &Matmul, at: usize, id: LinearId, inp: &Tensor, dy: &Tensor) {
        let site = self.sites.iter().position(|&s| s == id).expect("every linear layer is a curvature site");
        let (s, l, n) = (&self.solver, &self.solver.layers[site], (self.tokens, self.scored));
        if s.batch.is_some() {
            self.batch_ops.push((at, s.batch_ops(ctx, l, inp, dy)));
            return;
        }
        let first = s.factor_ops(ctx, mm, l, inp, dy, n, 0.0);
        let later = s.factor_ops(ctx, mm, l, inp, dy, n, self.cfg.decay);
        self.factor_ops.push(FactorOps { at, first, later });
    }

    /// Builds the ops after the backward pass and the gradient-norm reduction into `sum_sq`.
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        &mut self,
        ctx: &GpuContext,
        mm: &Matmul,
        adam: &AdamW,
        model: &Model<f32>,
        params: &Tensor,
        grads: &Tensor,
        decay: &Tensor,
        sum_sq: &Tensor,
        clip: f32,
    ) {
        let (s, cfg) = (&self.solver, &self.cfg);
        for l in &s.layers {
            self.init.push(s.gather(ctx, l, grads, clip));
            self.init.extend(s.solve_init(ctx, mm, l, cfg));
            self.iteration.extend(s.solve_iteration(ctx, mm, l, cfg));
            self.finish.extend(s.fallback(ctx, l));
        }
        self.finish.push(s.kl(ctx, cfg.kl_clip));
        for l in &s.layers {
            self.finish.push(s.update(ctx, l, params, cfg.momentum, cfg.weight_decay));
        }
        let covered: Vec<usize> = curvature::sites(model).iter().flat_map(|s| [s.w, s.b]).collect();
        let state = AdamState { params, grads, m: &self.adam_m, v: &self.adam_v, decay, sum_sq, step: &self.adam_step };
        let (beta1, beta2, eps) = ADAM_BETAS;
        let h = Hyper { beta1, beta2, eps, max_norm: clip };
        for (_, info) in model.layout.tensors.iter().enumerate().filter(|(id, _)| !covered.contains(id)) {
            self.finish.push(adam.op_range(ctx, &state, h, info.range()));
        }
    }

    /// Submits one step after `base` (forward, backward and gradient-norm reduction) with the
    /// factor updates spliced in, `max_iters` CG iterations, then fallback, KL-clip, the momentum
    /// updates, AdamW and `record` (which copies the scalars into the trainer's ring), all in one
    /// submission: nothing is read back. A layer whose solve is done skips the rest of its
    /// iterations (each kernel reads its status), so the fixed budget gives the CPU loop's early
    /// exit. `lr` is the scheduled rate, `factor` its ratio to the base rate. The step is counted
    /// here; [`Self::read_record`] says later whether it was finite.
    pub fn submit(&mut self, ctx: &GpuContext, base: &[Op], clear: &[&Tensor], lr: f32, factor: f32, record: &[Op]) {
        let refresh = self.t.is_multiple_of(self.cfg.update_interval as u64);
        let first = self.t == 0;
        // The learning rate is the first global (LR in cgfac.wgsl).
        ctx.write(&self.solver.sc, &[lr]);
        let (beta1, beta2, _) = ADAM_BETAS;
        ctx.write(&self.adam_step, &step_values(self.cfg.adam_lr * factor, beta1, beta2, self.adam_t + 1));
        let mut ops: Vec<&Op> = Vec::new();
        for (i, op) in base.iter().enumerate() {
            for (_, bo) in self.batch_ops.iter().filter(|(at, _)| *at == i) {
                ops.extend(bo);
            }
            if refresh {
                for fo in self.factor_ops.iter().filter(|fo| fo.at == i) {
                    ops.extend(if first { &fo.first } else { &fo.later });
                }
            }
            ops.push(op);
        }
        ops.extend(&self.init);
        for _ in 0..self.cfg.max_iters {
            ops.extend(&self.iteration);
        }
        ops.extend(&self.finish);
        ops.extend(record);
        ctx.run_cleared(clear, &ops);
        self.t += 1;
        self.adam_t += 1;
    }

    /// The second-order and AdamW step counts, to set back after a step that was skipped.
    pub fn counters(&self) -> [u64; 2] {
        [self.t, self.adam_t]
    }
    pub fn set_counters(&mut self, [t, adam_t]: [u64; 2]) {
        (self.t, self.adam_t) = (t, adam_t);
    }

    /// The scalars a step leaves (CG's outcome per layer, fallbacks, KL-clip scale, the bad flag):
    /// the first `record_len` values of this tensor, copied into the ring after every step.
    pub fn scalars(&self) -> (&Tensor, usize) {
        (&self.solver.sc, GLOBALS + STRIDE * self.solver.layers.len())
    }

    /// Fills the diagnostics from one step's copied scalars; false when that step was not finite
    /// (the linear layers then kept their weights: the update kernel checks).
    pub fn read_record(&mut self, sc: &[f32]) -> bool {
        self.diag.layers = (self.solver.layers.iter())
            .map(|l| LayerDiagnostics {
                name: l.name.clone(),
                cg: CgOutcome {
                    iterations: sc[l.slot + ITERS] as usize,
                    rel_residual: sc[l.slot + REL] as f64,
                    diverged: sc[l.slot + STATUS] == DIVERGED,
                },
                fell_back: sc[l.slot + FELL] != 0.0,
            })
            .collect();
        self.diag.fallbacks_this_step = sc[FALLBACKS] as usize;
        self.diag.kl_scale = sc[NU];
        if sc[BAD] != 0.0 {
            return false;
        }
        self.fallbacks_total += self.diag.fallbacks_this_step as u64;
        self.diag.fallbacks_total = self.fallbacks_total;
        true
    }

    /// Named state tensors, as `SecondOrder::state` (CG-FAC keeps no inverses: they are zero).
    pub async fn state(&self, ctx: &GpuContext) -> Result<Vec<(String, Vec<f32>)>> {
        let (factors, vecs) = (ctx.read_all(&self.solver.factors).await?, ctx.read_all(&self.solver.vecs).await?);
        let mut out = vec![
            ("so.t".to_string(), vec![self.t as f32]),
            ("so.fallbacks".to_string(), vec![self.fallbacks_total as f32]),
            ("adam.m".to_string(), ctx.read_all(&self.adam_m).await?),
            ("adam.v".to_string(), ctx.read_all(&self.adam_v).await?),
            ("adam.t".to_string(), vec![self.adam_t as f32]),
        ];
        for l in &self.solver.layers {
            let (d1, o, n) = (l.din1(), l.dout, l.size());
            let parts: [(&str, Vec<f32>); 6] = [
                ("A", factors[l.a..l.a + d1 * d1].to_vec()),
                ("G", factors[l.g..l.g + o * o].to_vec()),
                ("A_inv", vec![0.0; d1 * d1]),
                ("G_inv", vec![0.0; o * o]),
                ("x", vecs[l.x..l.x + n].to_vec()),
                ("velocity", vecs[l.vel..l.vel + n].to_vec()),
            ];
            out.extend(parts.into_iter().map(|(what, v)| (format!("so.{}.{what}", l.name), v)));
        }
        Ok(out)
    }

    /// Uploads the state `take` yields by name and length (see [`Self::state`]).
    pub fn load_state(&mut self, ctx: &GpuContext, take: &mut Take<GpuError>) -> Result<()> {
        let total = self.adam_m.len;
        self.t = take("so.t", 1)?[0] as u64;
        self.fallbacks_total = take("so.fallbacks", 1)?[0] as u64;
        self.diag.fallbacks_total = self.fallbacks_total;
        ctx.write(&self.adam_m, &take("adam.m", total)?);
        ctx.write(&self.adam_v, &take("adam.v", total)?);
        self.adam_t = take("adam.t", 1)?[0] as u64;
        let mut factors = vec![0.0; self.solver.factors.len];
        let mut vecs = vec![0.0; self.solver.vecs.len];
        for l in &self.solver.layers {
            let (d1, o, n) = (l.din1(), l.dout, l.size());
            let name = |what: &str| format!("so.{}.{what}", l.name);
            let mut put = |dst: &mut [f32], at: usize, what: &str, len: usize| -> Result<()> {
                dst[at..at + len].copy_from_slice(&take(&name(what), len)?);
                Ok(())
            };
            put(&mut factors, l.a, "A", d1 * d1)?;
            put(&mut factors, l.g, "G", o * o)?;
            put(&mut vecs, l.x, "x", n)?;
            put(&mut vecs, l.vel, "velocity", n)?;
            // CG-FAC never fills the inverses; they are checked for size, not kept.
            take(&name("A_inv"), d1 * d1)?;
            take(&name("G_inv"), o * o)?;
        }
        ctx.write(&self.solver.factors, &factors);
        ctx.write(&self.solver.vecs, &vecs);
        Ok(())
    }
}
