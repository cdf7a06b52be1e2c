//! The whole training step on the GPU: forward, backward, gradient clip and AdamW, SGD or CG-FAC, mirroring
//! `crate::train::Trainer` with the model of `crate::model` (same data, same initialisation, same
//! flat parameter layout). Parameters, activations, gradients and optimizer state stay on the GPU,
//! and a step reads nothing back: it appends its loss, squared gradient norm (and CG-FAC's
//! scalars) to a ring of [`READ_EVERY`] records on the GPU, which [`GpuTrainer::flush`] reads in one
//! go. A non-finite gradient skips the update on the device (every update kernel checks), so the
//! host learns of it at the next read without having waited for each step. An evaluation reads
//! only its loss.
//! [`GpuTrainer::snapshot`] and [`GpuTrainer::restore`] move the whole state (weights, optimizer
//! state, step) to and from the CPU's `Snapshot`, so either backend can continue the other's run.
//!
//! The step is a fixed list of ops built once; only the token batch and the step values
//! (learning rate, bias corrections) are written before each submission.

use std::collections::HashMap;

use super::adamw::step_values;
use super::cgfac::CgFac;
use super::muon::GpuMuon;
use super::{GpuContext, GpuError, Op, Result, Tensor};
use crate::checkpoint::Snapshot;
use crate::config::{ModelConfig, TrainConfig};
use crate::data::{Dataset, Split};
use crate::error::Error;
use crate::model::architecture::Slot;
use crate::model::check_batch;
use crate::nn::loss;
use crate::optim::second_order::Diagnostics;
use crate::train::{Reported, StepReport};

mod build;

/// Steps whose records wait on the GPU before [`GpuTrainer::step`] reads them in one readback.
pub const READ_EVERY: usize = 10;

/// A submitted step whose record is still on the GPU.
struct Pending {
    /// Steps completed before it.
    step: usize,
    lr: f32,
    /// The optimizer's update counters before it (see `Update::counters`).
    counters: [u64; 2],
}

/// Backward scratch shared by all blocks (the CPU's `Grads` work buffers).
struct Scratch {
    dlogits: Tensor,
    dresid: Tensor,
    dln: Tensor,
    dattn_y: Tensor,
    dfc_act: Tensor,
    d_fc: Tensor,
    datt: Tensor,
    dq: Tensor,
    dk: Tensor,
    dv: Tensor,
}

impl Scratch {
    /// Where the gradient with respect to slot `s` is kept. The residual stream's is one buffer
    /// (`dresid`) that the LayerNorms' backward passes add into: that is the residual's backward.
    fn grad(&self, s: Slot) -> &Tensor {
        match s {
            Slot::X | Slot::H | Slot::Next => &self.dresid,
            Slot::Ln1Out | Slot::Ln2Out => &self.dln,
            Slot::Q => &self.dq,
            Slot::K => &self.dk,
            Slot::V => &self.dv,
            Slot::AttnY => &self.dattn_y,
            Slot::FcPre => &self.d_fc,
            Slot::FcAct => &self.dfc_act,
        }
    }
}

/// The optimizer's state on the GPU, named as the CPU's `Optimizer::state` names it.
enum Update {
    Adam {
        beta1: f32,
        beta2: f32,
        m: Tensor,
        v: Tensor,
        /// Updates taken so far (for bias correction), as `optim::adam::Adam::t`.
        t: u64,
    },
    Sgd {
        velocity: Tensor,
    },
    CgFac(Box<CgFac>),
    Muon(Box<GpuMuon>),
}

pub struct GpuTrainer {
    ctx: GpuContext,
    cfg: TrainConfig,
    data: Dataset,
    update: Update,
    tokens: Vec<u32>,
    targets: Vec<u32>,
    step: usize,
    g_tokens: Tensor,
    g_targets: Tensor,
    params: Tensor,
    grads: Tensor,
    scratch_resid: Tensor,
    step_values: Tensor,
    ops: Vec<Op>,
    /// `ops[..forward]` is the forward pass up to the mean loss in `stats[0]`.
    forward: usize,
    /// Adds `stats[0]` into `eval_sum[0]`, after each validation batch's forward pass.
    eval_add: Op,
    eval_sum: Tensor,
    /// `READ_EVERY` step records of `record_len` values: loss, squared gradient norm, CG-FAC's
    /// scalars. Cleared before the first step of each round; `record_ops[i]` adds step `i`'s.
    ring: Tensor,
    record_len: usize,
    record_ops: Vec<Vec<Op>>,
    pending: Vec<Pending>,
}

impl Update {
    /// The update counters the host keeps (bias corrections, refresh schedule): AdamW's t, Muon's
    /// AdamW t, CG-FAC's second-order t and AdamW t.
    fn counters(&self) -> [u64; 2] {
        match self {
            Update::Adam { t, .. } => [*t, 0],
            Update::Muon(mu) => [mu.adam_t, 0],
            Update::CgFac(cg) => cg.counters(),
            Update::Sgd { .. } => [0, 0],
        }
    }
    fn set_counters(&mut self, c: [u64; 2]) {
        match self {
            Update::Adam { t, .. } => *t = c[0],
            Update::Muon(mu) => mu.adam_t = c[0],
            Update::CgFac(cg) => cg.set_counters(c),
            Update::Sgd { .. } => {}
        }
    }
}

impl GpuTrainer {
    /// A GPU trainer that continues exactly where `snap` stopped (a CPU checkpoint, or a GPU
    /// [`snapshot`](Self::snapshot)): weights, optimizer state and step are uploaded.
    pub fn restore(ctx: GpuContext, snap: Snapshot) -> Result<Self> {
        let mut t = GpuTrainer::new(ctx, snap.config)?;
        if snap.params.len() != t.params.len {
            return Err(Error::Checkpoint(format!(
                "checkpoint has {} parameters, its config needs {}",
                snap.params.len(),
                t.params.len
            ))
            .into());
        }
        let n = t.params.len;
        let mut state: HashMap<String, Vec<f32>> = snap.optimizer.into_iter().collect();
        let mut take = |name: &str, len: usize| -> Result<Vec<f32>> {
            let x =
                state.remove(name).ok_or_else(|| Error::Checkpoint(format!("optimizer state {name:?} is missing")))?;
            if x.len() != len {
                let msg = format!("optimizer state {name:?} has {} values, expected {len}", x.len());
                return Err(Error::Checkpoint(msg).into());
            }
            Ok(x)
        };
        match &mut t.update {
            Update::Adam { m, v, t: count, .. } => {
                t.ctx.write(m, &take("adam.m", n)?);
                t.ctx.write(v, &take("adam.v", n)?);
                *count = take("adam.t", 1)?[0] as u64;
            }
            Update::Sgd { velocity } => t.ctx.write(velocity, &take("sgd.momentum", n)?),
            Update::CgFac(cg) => cg.load_state(&t.ctx, &mut take)?,
            Update::Muon(mu) => mu.load_state(&t.ctx, &mut take)?,
        }
        t.ctx.write(&t.params, &snap.params);
        t.step = snap.step;
        Ok(t)
    }

    /// Everything a checkpoint holds, read back from the GPU: `Trainer::restore` continues from it
    /// on the CPU, `GpuTrainer::restore` on a GPU.
    pub async fn snapshot(&self) -> Result<Snapshot> {
        let optimizer = match &self.update {
            Update::Adam { m, v, t, .. } => vec![
                ("adam.m".into(), self.ctx.read_all(m).await?),
                ("adam.v".into(), self.ctx.read_all(v).await?),
                ("adam.t".into(), vec![*t as f32]),
            ],
            Update::Sgd { velocity } => vec![("sgd.momentum".into(), self.ctx.read_all(velocity).await?)],
            Update::CgFac(cg) => cg.state(&self.ctx).await?,
            Update::Muon(mu) => mu.state(&self.ctx).await?,
        };
        Ok(Snapshot { config: self.cfg.clone(), step: self.step, params: self.params().await?, optimizer })
    }

    /// One optimizer step on training batch number `step`, as `Trainer::step`, submitted without
    /// waiting for it. Every [`READ_EVERY`] steps the records are read back (see [`Self::flush`])
    /// and their reports pushed onto `out`.
    pub async fn step(&mut self, out: &mut Vec<Reported>) -> Result<()> {
        self.submit()?;
        if self.pending.len() == READ_EVERY {
            self.flush(out).await?;
        }
        Ok(())
    }

    /// One step whose report is read back at once: for callers that compare every step.
    pub async fn step_read(&mut self) -> Result<Reported> {
        self.submit()?;
        let mut out = Vec::new();
        self.flush(&mut out).await?;
        Ok(out.pop().expect("one step was pending"))
    }

    /// Steps submitted whose records have not been read.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn submit(&mut self) -> Result<()> {
        let step = self.step;
        self.data.batch(Split::Train, step as u64, &mut self.tokens, &mut self.targets);
        check_batch(self.tokens.len(), self.cfg.model.vocab, &self.tokens, &self.targets)?;
        if let Update::CgFac(cg) = &self.update {
            let scored = loss::scored(&self.targets);
            if scored != cg.scored {
                let msg = format!(
                    "CG-FAC on the GPU needs the same number of scored tokens in every batch: batch {step} has \
                     {scored}, the first had {}; use --backend cpu",
                    cg.scored
                );
                return Err(Error::Data(msg).into());
            }
        }
        let lr = self.cfg.schedule.lr(self.cfg.lr, step, self.cfg.steps);
        self.ctx.write(&self.g_tokens, &self.tokens);
        self.ctx.write(&self.g_targets, &self.targets);
        let (slot, counters) = (self.pending.len(), self.update.counters());
        let mut clear = vec![&self.grads, &self.scratch_resid];
        if slot == 0 {
            clear.push(&self.ring);
        }
        let record = &self.record_ops[slot];
        match &mut self.update {
            Update::CgFac(cg) => cg.submit(&self.ctx, &self.ops, &clear, lr, lr / self.cfg.lr, record),
            update => {
                let values = match update {
                    Update::Adam { beta1, beta2, t, .. } => {
                        *t += 1;
                        step_values(lr, *beta1, *beta2, *t)
                    }
                    Update::Muon(mu) => {
                        mu.write_step(&self.ctx, lr, lr / self.cfg.lr);
                        mu.adam_t += 1;
                        [lr, 0.0, 0.0]
                    }
                    _ => [lr, 0.0, 0.0],
                };
                self.ctx.write(&self.step_values, &values);
                let ops: Vec<&Op> = self.ops.iter().chain(record).collect();
                self.ctx.run_cleared(&clear, &ops);
            }
        }
        // Counted now; a step found non-finite when its record is read ends the run there.
        self.step += 1;
        self.pending.push(Pending { step, lr, counters });
        Ok(())
    }

    /// Reads the records of the steps submitted since the last read, in one readback, and pushes
    /// their reports onto `out`. The first non-finite one (loss, gradient, or a CG-FAC update) is
    /// `Error::NonFinite` with its step, and the step count goes back to it. The device skipped
    /// its update, so when it was the last step submitted (as with [`Self::step_read`]) the state
    /// is that of the last good step; steps submitted after it ran on, so then go on from a
    /// snapshot taken before it (as the session's runner does).
    pub async fn flush(&mut self, out: &mut Vec<Reported>) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let w = self.record_len;
        let records = self.ctx.read::<f32>(&self.ring, 0, self.pending.len() * w).await?;
        for (p, rec) in std::mem::take(&mut self.pending).into_iter().zip(records.chunks(w)) {
            let (loss, grad_norm) = (rec[0], rec[1].sqrt());
            let (diag, applied) = match &mut self.update {
                Update::CgFac(cg) => {
                    let ok = cg.read_record(&rec[2..]);
                    (Some(cg.diag.clone()), ok)
                }
                _ => (None, true),
            };
            let bad = [("loss", loss), ("gradient", grad_norm)].into_iter().find(|(_, x)| !x.is_finite());
            let what = bad.map(|(what, _)| what).or((!applied).then_some("CgFac update"));
            if let Some(what) = what {
                // The device skipped this update: the counts go back to before it.
                self.step = p.step;
                self.update.set_counters(p.counters);
                return Err(GpuError::Engine(Error::NonFinite { what: what.into(), step: p.step }));
            }
            out.push((StepReport { step: p.step + 1, loss, lr: p.lr, grad_norm }, diag));
        }
        Ok(())
    }

    /// Mean loss over the fixed validation batches, as `Trainer::evaluate`: the losses are summed
    /// on the GPU and read back once.
    pub async fn evaluate(&mut self) -> Result<f32> {
        let batches = self.cfg.eval_batches;
        let mut ops: Vec<&Op> = self.ops[..self.forward].iter().collect();
        ops.push(&self.eval_add);
        for i in 0..batches {
            self.data.batch(Split::Val, i as u64, &mut self.tokens, &mut self.targets);
            self.ctx.write(&self.g_tokens, &self.tokens);
            self.ctx.write(&self.g_targets, &self.targets);
            // Each batch is its own submission, so the token writes land between them.
            let clear: &[&Tensor] = if i == 0 { &[&self.eval_sum] } else { &[] };
            self.ctx.run_cleared(clear, &ops);
        }
        let loss = self.ctx.read::<f32>(&self.eval_sum, 0, 1).await?[0] / batches as f32;
        if !loss.is_finite() {
            return Err(Error::NonFinite { what: "validation loss".into(), step: self.step }.into());
        }
        Ok(loss)
    }

    /// The current weights, laid out as `Model::params`.
    pub async fn params(&self) -> Result<Vec<f32>> {
        self.ctx.read_all(&self.params).await
    }

    pub fn model_config(&self) -> &ModelConfig {
        &self.cfg.model
    }
    pub fn step_count(&self) -> usize {
        self.step
    }
    /// CG-FAC's diagnostics of the last step read back (iterations, residuals, fallbacks, KL-clip
    /// scale).
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        match &self.update {
            Update::CgFac(cg) => Some(&cg.diag),
            _ => None,
        }
    }
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
