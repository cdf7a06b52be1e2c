//! Shards of a step computed by another worker: the browser has no threads for `shards` to use, so
//! the page's training worker gives half of each step's shards to a second worker (a second core).
//! That worker runs the same shards with the same code on the same weights, so its gradients have
//! the bits this worker's would have had, and the step is the same with or without it.
//!
//! The step: [`Trainer::begin_step`](super::Trainer::begin_step) draws the batch and returns the
//! [`ShardTask`]; the caller hands it to its [`ShardPool`] (the work starts there at once), computes
//! its own shards with `compute_own`, awaits the pool and ends the step with `finish_step`. Without
//! the other worker's result `finish_step` computes those shards itself.

use std::future::Future;
use std::ops::Range;
use std::pin::Pin;

use super::interrupt::Interrupt;
use super::shards::{ShardOut, Shards, SHARDS};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::train::{StepReport, Trainer};

/// Steps smaller than this (matrix-product FLOPs, `memory::step_flops`) stay in one worker: the
/// weights and gradients crossing between workers cost more than half the step saves. Measured in
/// headless Chromium on 2 cores: d32 L1 T32 B8 (24 MFLOP) 4.7 ms alone, 5.3 ms with a second worker;
/// d32 L2 T32 B8 (46 MFLOP) 9.0 -> 6.6 ms; d64 L2 T64 B16 (0.73 GFLOP) 88 -> 50 ms.
pub const MIN_FLOPS: f64 = 30e6;

/// Steps with fewer FLOPs than this per parameter (about 6 per parameter per token) stay in one
/// worker too, unless their weights' gradients are taken over the whole batch's rows
/// (`Shards::whole_weights`): such a step sends the weights and takes a gradient back, copies that
/// grow with the parameters while the work saved grows with the tokens. Measured in headless
/// Chromium on 2 cores, one worker against two, each shard's gradient summed: d1024 L1 T16 B2 (190
/// a parameter) 180-237 against 221-233 ms, d512 L1 T16 B4 (390) 86 against 87, d1024 L1 T16 B8
/// (770) 538 against 539; d512 L1 T32 B4 (780) 138 -> 112 and d256 L2 T32 B4 (790) 63 -> 53. With
/// the whole batch's weight gradients the other worker sends back its rows, not a gradient, and the
/// split pays at fewer FLOPs a parameter (2026-12-07, two rounds): d1024 T16 B4 (380) 199-207 ms in
/// one worker, 152-171 in two; d512 T16 B4 45-50, 39-42; d1024 T16 B2 95-110 and 100-102.
pub const MIN_FLOPS_PER_PARAM: f64 = 400.0;

/// What another worker needs for shards `parts` of a step: the model, the weights and the batch.
#[derive(Clone, Debug)]
pub struct ShardTask {
    pub model: ModelConfig,
    pub batch: usize,
    pub params: Vec<f32>,
    pub tokens: Vec<u32>,
    pub targets: Vec<u32>,
    pub parts: Range<usize>,
}

/// The other worker's answer: its shards, or why there are none.
pub type ShardFuture = Pin<Box<dyn Future<Output = std::result::Result<Vec<ShardOut>, String>>>>;

/// Somewhere a step's shards can be computed beside this worker.
pub trait ShardPool {
    /// Sends `task` off (the work starts now, before the future is polled); None when the pool
    /// cannot take work at the moment (still starting), so the caller computes the shards itself.
    fn start(&self, task: ShardTask) -> Option<ShardFuture>;
}

/// One training step of `t` with the other worker's shards computed by `pool` (when there is one
/// and it takes the task), asking `interrupt` (when given) between this worker's pieces of it. A
/// pool that fails gives its reason as the second value; the step is then finished here, with the
/// same numbers. None: the step stopped for `interrupt` and changed nothing (a task sent off is
/// left to finish on its own; the pool takes no other until it has).
pub async fn step(
    t: &mut Trainer,
    pool: Option<&dyn ShardPool>,
    interrupt: Option<&dyn Interrupt>,
) -> (Result<Option<StepReport>>, Option<String>) {
    // Without a pool no task is made: the weights are copied only for another worker.
    let remote = match pool {
        Some(pool) => t.begin_step(true).and_then(|task| pool.start(task)),
        None => {
            t.begin_step(false);
            None
        }
    };
    let own = match interrupt {
        Some(interrupt) => t.compute_own_until(interrupt).await,
        None => t.compute_own().map(|()| true),
    };
    match own {
        Err(e) => return (Err(e), None),
        Ok(false) => return (Ok(None), None),
        Ok(true) => {}
    }
    let Some(remote) = remote else { return (t.finish_step(None).map(Some), None) };
    match remote.await {
        Ok(outs) => (t.finish_step(Some(outs)).map(Some), None),
        Err(why) => (t.finish_step(None).map(Some), Some(why)),
    }
}

/// The other worker's side: a model of the task's shape, with memory for the task's shards only.
pub struct ShardWorker {
    model: Model<f32>,
    batch: usize,
    parts: Range<usize>,
    shards: Shards,
}

impl ShardWorker {
    /// A worker for tasks like `task` (the same model, batch and shards).
    pub fn for_task(task: &ShardTask) -> Result<ShardWorker> {
        let model = Model::new(task.model.clone())?;
        let shards = Shards::with_room(&model, task.batch, SHARDS, task.parts.clone());
        Ok(ShardWorker { model, batch: task.batch, parts: task.parts.clone(), shards })
    }

    /// Whether this worker has the shape `task` needs (else make a new one).
    pub fn fits(&self, task: &ShardTask) -> bool {
        self.model.cfg == task.model && self.batch == task.batch && self.parts == task.parts
    }

    /// Computes the task's shards, as the trainer that sent it would have (its weights become the
    /// model's: no copy of them here).
    pub fn run(&mut self, task: ShardTask) -> Result<Vec<ShardOut>> {
        if !self.fits(&task) || task.params.len() != self.model.params.len() || task.parts.end > self.shards.count() {
            return Err(Error::Config("a shard task for another model".into()));
        }
        self.model.params = task.params;
        self.shards.compute(&self.model, &task.tokens, &task.targets, true, task.parts.clone())?;
        Ok(self.shards.outs(task.parts.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{OptimizerConfig, TrainConfig};

    fn config(optimizer: OptimizerConfig) -> TrainConfig {
        let mut cfg = TrainConfig::browser_default();
        // 91 MFLOP a step: past MIN_FLOPS.
        cfg.model = ModelConfig { d_model: 32, heads: 4, layers: 2, d_ff: 128, context: 32, ..cfg.model };
        cfg.batch = 16;
        cfg.steps = 6;
        cfg.optimizer = optimizer;
        cfg
    }

    /// A wide model reading few tokens (96 a step, 580 FLOPs a parameter): its weights' gradients
    /// are taken over the whole batch's rows (`Shards::whole_weights`), so the other worker sends
    /// its rows back instead of their gradients.
    fn wide(optimizer: OptimizerConfig) -> TrainConfig {
        let mut cfg = config(optimizer);
        cfg.model = ModelConfig { d_model: 256, heads: 4, layers: 1, d_ff: 1024, context: 16, ..cfg.model };
        cfg.batch = 6;
        cfg
    }

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn shards_from_another_worker_give_the_same_step_to_the_bit() {
        for (cfg, whole) in [(config(OptimizerConfig::adam()), false), (wide(OptimizerConfig::adam()), true)] {
            from_another_worker(cfg, whole);
        }
    }

    fn from_another_worker(cfg: TrainConfig, whole_weights: bool) {
        let (mut alone, mut split) = (Trainer::new(cfg.clone()).unwrap(), Trainer::new(cfg).unwrap());
        assert_eq!(split.shards.whole_weights, whole_weights);
        let mut helper: Option<ShardWorker> = None;
        for _ in 0..3 {
            let a = alone.step().unwrap();
            let task = split.begin_step(true).expect("four shards: two for the other worker");
            assert_eq!(task.parts, 2..4);
            let worker = match helper.take() {
                Some(w) if w.fits(&task) => w,
                _ => ShardWorker::for_task(&task).unwrap(),
            };
            let helper = helper.insert(worker);
            let outs = helper.run(task).unwrap();
            assert_eq!(outs.iter().all(|o| !o.rows.is_empty()), whole_weights, "rows sent back");
            split.compute_own().unwrap();
            let b = split.finish_step(Some(outs)).unwrap();
            assert_eq!(
                (a.step, a.loss.to_bits(), a.grad_norm.to_bits()),
                (b.step, b.loss.to_bits(), b.grad_norm.to_bits())
            );
        }
        assert_eq!(bits(&alone.model().params), bits(&split.model().params));
        assert_eq!(alone.evaluate().unwrap().to_bits(), split.evaluate().unwrap().to_bits());
    }

    /// Stops at its `at`-th question (counting from 1), then never again.
    struct StopAt {
        at: usize,
        asked: std::cell::Cell<usize>,
    }

    impl Interrupt for StopAt {
        fn stop(&self) -> Pin<Box<dyn Future<Output = bool> + '_>> {
            self.asked.set(self.asked.get() + 1);
            Box::pin(std::future::ready(self.asked.get() == self.at))
        }
    }

    /// The value of a future that is ready at its first poll (these steps await nothing else).
    fn now<T>(f: impl Future<Output = T>) -> T {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::pin::pin!(f).poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the step waited"),
        }
    }

    #[test]
    fn a_step_stopped_between_any_two_pieces_changes_nothing_and_is_redone_to_the_bit() {
        let cfg = config(OptimizerConfig::adam());
        let mut alone = Trainer::new(cfg.clone()).unwrap();
        let expected: Vec<_> = (0..3).map(|_| alone.step().unwrap()).collect();
        // Four shards, two of them here with another worker: a forward and a backward pass each,
        // asked after every pass but the last.
        for (pool, questions) in [(None, 7), (Some(Inline), 3)] {
            let pool = pool.as_ref().map(|p| p as &dyn ShardPool);
            for at in 1..=questions {
                let mut t = Trainer::new(cfg.clone()).unwrap();
                for (i, e) in expected.iter().enumerate() {
                    // The second step stops at question `at`, then is asked again.
                    let stops = StopAt { at: if i == 1 { at } else { 0 }, asked: Default::default() };
                    if i == 1 {
                        let before = bits(&t.model().params);
                        let (report, failed) = now(step(&mut t, pool, Some(&stops)));
                        assert!(report.unwrap().is_none() && failed.is_none(), "stopped at question {at}");
                        assert_eq!(stops.asked.get(), at);
                        assert_eq!(
                            (t.step_count(), bits(&t.model().params)),
                            (1, before),
                            "a stopped step changes nothing"
                        );
                    }
                    let got = now(step(&mut t, pool, Some(&stops))).0.unwrap().expect("asked past its stop");
                    assert_eq!((got.step, got.loss.to_bits()), (e.step, e.loss.to_bits()));
                    assert_eq!(stops.asked.get(), if i == 1 { at + questions } else { questions });
                }
                assert_eq!(bits(&t.model().params), bits(&alone.model().params), "stop at {at}");
            }
        }
    }

    /// Another worker computing its task at once, in this thread.
    struct Inline;

    impl ShardPool for Inline {
        fn start(&self, task: ShardTask) -> Option<ShardFuture> {
            let outs = ShardWorker::for_task(&task).and_then(|mut w| w.run(task)).map_err(|e| e.to_string());
            Some(Box::pin(std::future::ready(outs)))
        }
    }

    #[test]
    fn a_step_without_the_other_workers_shards_computes_them_itself() {
        let cfg = config(OptimizerConfig::adam());
        let (mut alone, mut split) = (Trainer::new(cfg.clone()).unwrap(), Trainer::new(cfg).unwrap());
        for _ in 0..3 {
            let a = alone.step().unwrap();
            split.begin_step(true).unwrap();
            split.compute_own().unwrap();
            assert_eq!(a.loss.to_bits(), split.finish_step(None).unwrap().loss.to_bits());
        }
        assert_eq!(bits(&alone.model().params), bits(&split.model().params));
    }

    #[test]
    fn bad_remote_shards_are_refused_and_one_shard_or_small_steps_give_no_task() {
        let mut t = Trainer::new(config(OptimizerConfig::adam())).unwrap();
        let task = t.begin_step(true).unwrap();
        let mut good = ShardWorker::for_task(&task).unwrap().run(task.clone()).unwrap();
        t.compute_own().unwrap();
        good[0].grads.pop();
        assert!(t.finish_step(Some(good)).is_err(), "a gradient of the wrong length");
        assert!(t.finish_step(Some(vec![])).is_err(), "too few shards");
        assert_eq!(t.step_count(), 0, "a refused step changes nothing");
        let mut w = Trainer::new(wide(OptimizerConfig::adam())).unwrap();
        let wide_task = w.begin_step(true).unwrap();
        let mut rows = ShardWorker::for_task(&wide_task).unwrap().run(wide_task).unwrap();
        w.compute_own().unwrap();
        rows[1].rows.pop();
        assert!(w.finish_step(Some(rows)).is_err() && w.step_count() == 0, "rows of the wrong length");
        let other = ShardTask { model: ModelConfig { d_model: 16, ..task.model.clone() }, ..task.clone() };
        assert!(ShardWorker::for_task(&other).unwrap().run(task.clone()).is_err(), "a task for another model");
        let half = ShardTask { parts: 3..4, ..task.clone() };
        assert!(ShardWorker::for_task(&half).unwrap().run(task).is_err(), "a task for other shards");
        // K-FAC reads the whole batch's cache: one shard, nothing to give away.
        let mut kfac = Trainer::new(config(OptimizerConfig::named("kfac").unwrap())).unwrap();
        assert!(kfac.begin_step(true).is_none());
        // A step this small costs more to send than to compute.
        let mut cfg = config(OptimizerConfig::adam());
        cfg.batch = 4;
        assert!(crate::memory::step_flops(&cfg) < MIN_FLOPS);
        let mut small = Trainer::new(cfg).unwrap();
        assert!(!small.splits() && small.begin_step(true).is_none());
        // Each shard's gradient summed, under 400 FLOPs a parameter: the weights and the gradient cost
        // more to send than half the step saves.
        let mut cfg = config(OptimizerConfig::adam());
        cfg.model = ModelConfig { d_model: 64, heads: 4, layers: 2, d_ff: 256, context: 16, ..cfg.model };
        cfg.batch = 4;
        let (flops, few) = (crate::memory::step_flops(&cfg), Trainer::new(cfg.clone()).unwrap());
        assert!(!few.shards.whole_weights && flops >= MIN_FLOPS, "{flops}");
        assert!(flops < MIN_FLOPS_PER_PARAM * few.model().num_params() as f64 && !few.splits());
        cfg.model.context = 64;
        assert!(Trainer::new(cfg).unwrap().splits(), "the same model reading 4 times as many tokens");
        // A wide model reading as few tokens takes its weights' gradients over the whole batch: the
        // other worker sends back rows, not a gradient, and the split pays.
        let mut cfg = config(OptimizerConfig::adam());
        cfg.model = ModelConfig { d_model: 256, heads: 4, layers: 1, d_ff: 1024, context: 8, ..cfg.model };
        cfg.batch = 4;
        let wide = Trainer::new(cfg.clone()).unwrap();
        assert!(wide.shards.whole_weights && wide.splits());
    }
}
