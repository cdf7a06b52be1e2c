//! Benchmarks `lab bench` prints: training-step time at three sizes and matmul GFLOP/s. Native only.

use std::time::Instant;

use rand::Rng;
use serde::Serialize;

use crate::config::{ModelConfig, OptimizerConfig};
use crate::error::Result;
use crate::model::{Cache, Grads, Model};
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::optim::{Optimizer, StepInput};
use crate::rng::{rng, Stream};
use crate::train::shards::{Shards, SHARDS};

/// Vocabulary of the benchmark models (as in bench/pytorch_reference.py).
pub const VOCAB: usize = 64;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Size {
    pub name: &'static str,
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub context: usize,
    pub batch: usize,
}

pub const SIZES: [Size; 3] = [
    Size { name: "tiny", d_model: 32, layers: 1, heads: 2, context: 32, batch: 8 },
    Size { name: "small", d_model: 64, layers: 2, heads: 4, context: 64, batch: 16 },
    Size { name: "medium", d_model: 128, layers: 4, heads: 4, context: 128, batch: 16 },
];

#[derive(Clone, Debug, Serialize)]
pub struct StepRow {
    pub size: &'static str,
    pub optimizer: String,
    pub params: usize,
    pub ms_per_step: f64,
    pub tokens_per_s: f64,
    /// Threads the step's shards ran on (`train::shards`).
    pub threads: usize,
    /// This step time over Adam's on one thread at the same size, measured in the same run.
    pub vs_adam: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatmulRow {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub gflops: f64,
}

pub fn model_config(s: &Size) -> ModelConfig {
    ModelConfig { vocab: VOCAB, ..ModelConfig::sized(s.d_model, s.layers, s.heads, s.context) }
}

/// Median time of a full training step (forward, backward, clip, optimizer) over `iters` steps,
/// run as the trainer runs it: in data-parallel shards on `threads` threads.
pub fn step_time(s: &Size, opt: &OptimizerConfig, iters: usize, threads: usize) -> Result<StepRow> {
    let cfg = model_config(s);
    let mut model = Model::<f32>::new(cfg.clone())?;
    let mut shards = Shards::new(&model, s.batch, if opt.second_order().is_some() { 1 } else { SHARDS });
    shards.set_threads(threads);
    let mut optimizer = Optimizer::new(opt, &model);
    let mut r = rng(0, Stream::TrainBatch, 0);
    let n = s.batch * s.context;
    let tokens: Vec<u32> = (0..n).map(|_| r.random_range(0..VOCAB as u32)).collect();
    let targets: Vec<u32> = (0..n).map(|_| r.random_range(0..VOCAB as u32)).collect();
    let mut times = Vec::with_capacity(iters);
    for i in 0..iters + 2 {
        let start = Instant::now();
        shards.forward_backward(&model, &tokens, &targets)?;
        // As `Trainer::finish_step` clips.
        let clip = crate::optim::clip::factor(shards.grad_norm(), 1.0);
        let clip = optimizer.take_clip(shards.grads_mut(), clip);
        optimizer.step(
            &mut model,
            StepInput {
                grads: shards.grads(),
                cache: shards.cache(),
                lr: 1e-3,
                factor: 1.0,
                clip,
                threads: shards.threads(),
            },
        )?;
        if i >= 2 {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    Ok(StepRow {
        size: s.name,
        optimizer: opt.name().into(),
        params: model.num_params(),
        ms_per_step: median * 1e3,
        tokens_per_s: n as f64 / median,
        threads: shards.threads(),
        vs_adam: f64::NAN,
    })
}

/// Step times of `optimizers` at `sizes` on one thread, then of the first-order ones among Adam
/// and Muon on `threads`, each with the ratio to Adam on one thread at that size (NaN without it).
pub fn step_table(iters: usize, threads: usize, sizes: &[Size], optimizers: &[&str]) -> Result<Vec<StepRow>> {
    let mut rows = Vec::new();
    for s in sizes {
        let first = rows.len();
        for name in optimizers {
            rows.push(step_time(s, &OptimizerConfig::named(name)?, iters, 1)?);
        }
        if threads > 1 {
            for name in optimizers.iter().filter(|n| ["adam", "muon"].contains(n)) {
                rows.push(step_time(s, &OptimizerConfig::named(name)?, iters, threads)?);
            }
        }
        let adam = rows[first..].iter().find(|r| r.optimizer == "adam").map_or(f64::NAN, |r| r.ms_per_step);
        rows[first..].iter_mut().for_each(|r| r.vs_adam = r.ms_per_step / adam);
    }
    Ok(rows)
}

/// The size called `name`.
pub fn size(name: &str) -> Result<Size> {
    let names: Vec<_> = SIZES.iter().map(|s| s.name).collect();
    SIZES
        .iter()
        .find(|s| s.name == name)
        .copied()
        .ok_or_else(|| crate::error::Error::Config(format!("no bench size `{name}` (sizes: {})", names.join(", "))))
}

/// GFLOP/s of `C = A B` for row-major f32 matrices, best of a few runs.
pub fn matmul_gflops(m: usize, k: usize, n: usize) -> MatmulRow {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut c = vec![0.0f32; m * n];
    let flops = 2.0 * (m * k * n) as f64;
    let reps = ((2e9 / flops) as usize).clamp(1, 200);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..reps {
            gemm(1.0, MatRef::new(&a, m, k), MatRef::new(&b, k, n), 0.0, MatMut::new(&mut c, m, n));
        }
        best = best.min(start.elapsed().as_secs_f64() / reps as f64);
    }
    MatmulRow { m, k, n, gflops: flops / best / 1e9 }
}

/// The matmul shapes the lab's models use, plus squares.
pub const MATMUL_SHAPES: [(usize, usize, usize); 5] =
    [(1024, 64, 192), (1024, 256, 64), (2048, 128, 512), (256, 256, 256), (512, 512, 512)];

/// Training-step time with and without probes (`lab bench`'s probe row).
#[derive(Clone, Debug, Serialize)]
pub struct ProbeOverhead {
    pub size: &'static str,
    pub ms_no_probe: f64,
    pub ms_probe_every_1: f64,
    pub ms_probe_every_10: f64,
    /// With probes over without; the goal is under 1.2 every 10 steps.
    pub ratio_every_1: f64,
    pub ratio_every_10: f64,
}

/// Mean Adam step time over `iters` steps at size `s`: no probe, a probe (4 rows, recorded into a
/// 64 MiB history) every step, and every 10 steps. Means, not medians: a probe every 10 steps costs
/// on one step in ten.
pub fn probe_overhead(s: &Size, iters: usize) -> Result<ProbeOverhead> {
    use crate::science::probe::{Probe, ProbeConfig};
    let cfg = model_config(s);
    let mut r = rng(0, Stream::TrainBatch, 0);
    let n = s.batch * s.context;
    let tokens: Vec<u32> = (0..n).map(|_| r.random_range(0..VOCAB as u32)).collect();
    let targets: Vec<u32> = (0..n).map(|_| r.random_range(0..VOCAB as u32)).collect();
    let rows = 4.min(s.batch) * s.context;
    let time = |every: Option<usize>| -> Result<f64> {
        let mut model = Model::<f32>::new(cfg.clone())?;
        let mut cache = Cache::new(&cfg, s.batch);
        let mut grads = Grads::new(&model, s.batch);
        let mut optimizer = Optimizer::new(&OptimizerConfig::adam(), &model);
        let mut probe = match every {
            Some(e) => Some(Probe::new(
                &cfg,
                tokens[..rows].to_vec(),
                targets[..rows].to_vec(),
                None,
                ProbeConfig { every: e, ..ProbeConfig::default() },
            )?),
            None => None,
        };
        let start = Instant::now();
        for step in 0..iters {
            model.forward(&mut cache, &tokens, &targets)?;
            model.backward(&cache, &mut grads);
            crate::optim::clip::clip(&mut grads.data, 1.0);
            optimizer.step(
                &mut model,
                StepInput { grads: &grads, cache: &cache, lr: 1e-3, factor: 1.0, clip: 1.0, threads: 1 },
            )?;
            if let Some(p) = probe.as_mut() {
                p.record(step, &model)?;
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1e3 / iters.max(1) as f64)
    };
    let (none, one, ten) = (time(None)?, time(Some(1))?, time(Some(10))?);
    Ok(ProbeOverhead {
        size: s.name,
        ms_no_probe: none,
        ms_probe_every_1: one,
        ms_probe_every_10: ten,
        ratio_every_1: one / none,
        ratio_every_10: ten / none,
    })
}
