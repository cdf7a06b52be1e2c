//! The training loop the CLI and the page share: one `step` at a time, so a caller can yield to a
//! browser between steps, stop on bad numbers, and checkpoint whenever it likes. The batch runs in
//! `shards` (data parallel, the same bits on any number of threads), half of them in another worker
//! where there are no threads (`remote`, the browser). A long step may stop between its pieces for
//! its caller (`interrupt`, the browser's Pause).

pub mod interrupt;
pub mod remote;
pub mod shards;

use serde::Serialize;

use crate::config::TrainConfig;
use crate::data::baseline::{BaselineLoss, Baselines};
use crate::data::{Dataset, Split};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::optim::{clip, Optimizer, StepInput};
use shards::{Shards, SHARDS};

#[derive(Clone, Copy, Debug, Serialize)]
pub struct StepReport {
    /// Steps completed, this one included.
    pub step: usize,
    pub loss: f32,
    pub lr: f32,
    /// Gradient norm before clipping.
    pub grad_norm: f32,
}

/// A step's report with the K-FAC / CG-FAC diagnostics of that step: what a backend that reports
/// steps after the fact (the GPU, a round at a time) hands over.
pub type Reported = (StepReport, Option<crate::optim::second_order::Diagnostics>);

pub struct Trainer {
    cfg: TrainConfig,
    data: Dataset,
    model: Model<f32>,
    opt: Optimizer,
    shards: Shards,
    tokens: Vec<u32>,
    targets: Vec<u32>,
    step: usize,
    /// Shards of the step begun that this worker computes (the rest: `remote`).
    own: usize,
}

impl Trainer {
    pub fn new(mut cfg: TrainConfig) -> Result<Self> {
        let data = Dataset::new(&cfg.data, cfg.model.context, cfg.seed)?;
        cfg.model.vocab = data.vocab_size();
        cfg.validate()?;
        let model = Model::new(cfg.model.clone())?;
        Ok(Self::with_model(cfg, data, model))
    }

    fn with_model(cfg: TrainConfig, data: Dataset, model: Model<f32>) -> Self {
        let n = cfg.batch * cfg.model.context;
        Trainer {
            opt: Optimizer::new(&cfg.optimizer, &model),
            // K-FAC and CG-FAC read the whole batch's cache: one shard.
            shards: Shards::new(&model, cfg.batch, if cfg.optimizer.second_order().is_some() { 1 } else { SHARDS }),
            tokens: vec![0; n],
            targets: vec![0; n],
            step: 0,
            own: 0,
            cfg,
            data,
            model,
        }
    }

    /// One optimizer step on training batch number `step`. A non-finite loss or gradient stops the
    /// step before anything changes, so the model keeps its last good state.
    pub fn step(&mut self) -> Result<StepReport> {
        self.begin(self.shards.count());
        self.compute_own()?;
        self.finish_step(None)
    }

    /// Starts a step whose last shards another worker may compute (`remote`, when `share`): draws
    /// the batch and returns that worker's task, or None when the step stays here (see `splits`).
    pub fn begin_step(&mut self, share: bool) -> Option<remote::ShardTask> {
        let count = self.shards.count();
        self.begin(if share && self.splits() { count - count / 2 } else { count });
        (self.own < count).then(|| remote::ShardTask {
            model: self.cfg.model.clone(),
            batch: self.cfg.batch,
            params: self.model.params.clone(),
            tokens: self.tokens.clone(),
            targets: self.targets.clone(),
            parts: self.own..count,
        })
    }

    /// Whether `begin_step` gives shards to another worker: when there are two or more (K-FAC and
    /// CG-FAC take one, as does a batch of one) and the step is big enough (`remote::MIN_FLOPS`)
    /// for the weights it sends and the gradient it takes back (`remote::MIN_FLOPS_PER_PARAM`;
    /// none with the whole batch's weight gradients).
    pub fn splits(&self) -> bool {
        let flops = crate::memory::step_flops(&self.cfg);
        self.shards.count() >= 2
            && flops >= remote::MIN_FLOPS
            && (self.shards.whole_weights || flops >= remote::MIN_FLOPS_PER_PARAM * self.model.num_params() as f64)
    }

    fn begin(&mut self, own: usize) {
        self.data.batch(Split::Train, self.step as u64, &mut self.tokens, &mut self.targets);
        self.own = own;
    }

    /// This worker's shards of the step begun.
    pub fn compute_own(&mut self) -> Result<()> {
        self.shards.compute(&self.model, &self.tokens, &self.targets, true, 0..self.own)
    }

    /// As `compute_own`, one pass of one shard at a time, asking `interrupt` between them (not
    /// after the last: the rest of the step is short). False when it stopped: the step begun is
    /// then abandoned, and nothing it changed is read again before the next `begin_step`.
    pub async fn compute_own_until(&mut self, interrupt: &dyn interrupt::Interrupt) -> Result<bool> {
        for s in 0..self.own {
            self.shards.compute(&self.model, &self.tokens, &self.targets, false, s..s + 1)?;
            if interrupt.stop().await {
                return Ok(false);
            }
            self.shards.backward(&self.model, s..s + 1);
            if s + 1 < self.own && interrupt.stop().await {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Ends the step begun with the other worker's shards (`None`: computes them here).
    pub fn finish_step(&mut self, remote: Option<Vec<shards::ShardOut>>) -> Result<StepReport> {
        let rest = self.own..self.shards.count();
        match remote {
            _ if rest.is_empty() => {}
            Some(outs) => self.shards.accept(rest.start, outs)?,
            None => self.shards.compute(&self.model, &self.tokens, &self.targets, true, rest)?,
        }
        let loss = self.shards.combine(&self.model, true);
        if !loss.is_finite() {
            return Err(Error::NonFinite { what: "loss".into(), step: self.step });
        }
        let grad_norm = self.shards.grad_norm();
        if !grad_norm.is_finite() {
            return Err(Error::NonFinite { what: "gradient".into(), step: self.step });
        }
        let clip = self.opt.take_clip(self.shards.grads_mut(), clip::factor(grad_norm, self.cfg.clip));
        let lr = self.cfg.schedule.lr(self.cfg.lr, self.step, self.cfg.steps);
        let step = self.step;
        let (grads, cache) = (self.shards.grads(), self.shards.cache());
        self.opt
            .step(
                &mut self.model,
                StepInput { grads, cache, lr, factor: lr / self.cfg.lr, clip, threads: self.shards.threads() },
            )
            .map_err(|e| match e {
                Error::NonFinite { what, .. } => Error::NonFinite { what, step },
                other => other,
            })?;
        self.step += 1;
        Ok(StepReport { step: self.step, loss, lr, grad_norm })
    }

    /// Mean loss over the fixed validation batches.
    pub fn evaluate(&mut self) -> Result<f32> {
        let mut total = 0.0;
        for i in 0..self.cfg.eval_batches {
            self.data.batch(Split::Val, i as u64, &mut self.tokens, &mut self.targets);
            total += self.shards.forward(&self.model, &self.tokens, &self.targets)?;
        }
        let loss = total / self.cfg.eval_batches as f32;
        if !loss.is_finite() {
            return Err(Error::NonFinite { what: "validation loss".into(), step: self.step });
        }
        Ok(loss)
    }

    /// Unigram and bigram losses on the same validation batches as `evaluate`.
    pub fn baselines(&self) -> BaselineLoss {
        Baselines::fit(&self.data).val_loss(&self.data, self.cfg.eval_batches, self.cfg.batch, self.cfg.model.context)
    }

    pub fn step_count(&self) -> usize {
        self.step
    }
    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }
    /// K-FAC / CG-FAC diagnostics of the last step.
    pub fn diagnostics(&self) -> Option<&crate::optim::second_order::Diagnostics> {
        self.opt.diagnostics()
    }
    pub fn model(&self) -> &Model<f32> {
        &self.model
    }
    pub fn data(&self) -> &Dataset {
        &self.data
    }
    /// Threads the step spreads its shards over (default: every core); the numbers do not depend
    /// on it.
    pub fn set_threads(&mut self, threads: usize) {
        self.shards.set_threads(threads);
    }
    pub fn threads(&self) -> usize {
        self.shards.threads()
    }

    /// Everything a checkpoint holds: config, step, weights, optimizer state.
    pub fn snapshot(&self) -> crate::checkpoint::Snapshot {
        crate::checkpoint::Snapshot {
            config: self.cfg.clone(),
            step: self.step,
            params: self.model.params.clone(),
            optimizer: self.opt.state(),
        }
    }

    /// A trainer that continues exactly where `snap` stopped.
    pub fn restore(snap: crate::checkpoint::Snapshot) -> Result<Self> {
        let trained_on = snap.config.model.vocab;
        let mut t = Trainer::new(snap.config)?;
        // Data of another alphabet (`lab eval --data`) changes the embedding's size: say so, rather
        // than blame the checkpoint for the parameter count that follows.
        if trained_on != 0 && t.cfg.model.vocab != trained_on {
            return Err(Error::Data(format!(
                "the data has {} symbols and the model was trained on {trained_on}: it reads only data \
                 written in its own symbols",
                t.cfg.model.vocab
            )));
        }
        if snap.params.len() != t.model.num_params() {
            return Err(Error::Checkpoint(format!(
                "checkpoint has {} parameters, its config needs {}",
                snap.params.len(),
                t.model.num_params()
            )));
        }
        t.model.params = snap.params;
        // Weights alone (the page's model file): the optimizer starts fresh.
        if !snap.optimizer.is_empty() {
            t.opt.load_state(snap.optimizer.into_iter().collect())?;
        }
        t.step = snap.step;
        Ok(t)
    }
}
