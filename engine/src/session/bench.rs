//! The engine-only benchmark that scripts run in the page's worker (`spherewalk.bench`): training
//! steps of a model of the given size on the CPU path, and one GEMM, timed by the caller's clock
//! (the engine keeps none: `performance.now()` in the browser).

use serde::{Deserialize, Serialize};

use crate::config::{DataSpec, ModelConfig, OptimizerConfig, TrainConfig};
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::memory;
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::sample::generate::{generate_uncached, MAX_TOKENS};
use crate::sample::{self, SampleSpec, Vocab};
use crate::train::remote::{self, ShardPool};
use crate::Trainer;

/// Untimed steps before the timed ones: at least `min_steps`, and more until `ms` have passed (at most
/// `max_steps`). A browser first runs wasm in its baseline compiler and swaps in optimised code for hot
/// functions from background threads: three warm-up steps timed the baseline code at the page's size
/// (8.6 ms a step over 20 steps, 4.0 over 300).
pub struct Warmup {
    pub min_steps: usize,
    pub max_steps: usize,
    pub ms: f64,
}

pub const WARMUP: Warmup = Warmup { min_steps: 3, max_steps: 2000, ms: 1000.0 };

/// What to time; every field may be left out (defaults: `lab bench`'s small size, Adam).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BenchSpec {
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub context: usize,
    pub batch: usize,
    /// Timed steps, after the untimed warm-up (`WARMUP`).
    pub steps: usize,
    pub optimizer: String,
    /// Workers a step runs in: 1, or 2 (a second worker computes half of its shards, as the page's
    /// training worker does where there is a second core); 0: as the page would.
    pub workers: usize,
    /// After the steps, time writing this many tokens (greedy, from the trained model) with the
    /// key/value cache and with the full forward pass per token; 0 writes nothing.
    pub write_tokens: usize,
}

impl Default for BenchSpec {
    fn default() -> Self {
        BenchSpec {
            d_model: 64,
            layers: 2,
            heads: 4,
            context: 64,
            batch: 16,
            steps: 20,
            optimizer: "adam".into(),
            workers: 0,
            write_tokens: 0,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BenchResult {
    pub ms_per_step: f64,
    /// The step's matrix-product FLOPs (`memory::step_flops`) per second.
    pub gflops: f64,
    /// One (256 x 256) by (256 x 256) f32 GEMM.
    pub gemm_gflops: f64,
    pub steps: usize,
    /// Untimed steps before them (`WARMUP`).
    pub warmup_steps: usize,
    pub params: usize,
    /// Workers the steps ran in.
    pub workers: usize,
    /// Writing speed, when `write_tokens` asked for it.
    pub writing: Option<WritingSpeed>,
}

/// Tokens written per second with the key/value cache and without it (the full forward pass over
/// the window for every token), from a one-token prompt: past the context the window slides.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WritingSpeed {
    pub tokens: usize,
    pub cached_tokens_per_s: f64,
    pub uncached_tokens_per_s: f64,
}

impl BenchSpec {
    /// The training run this spec times, checked (sizes, memory) before anything is allocated.
    pub fn config(&self) -> Result<TrainConfig> {
        if self.steps == 0 || self.steps > 10_000 {
            return Err(Error::Config(format!("bench steps must be 1 to 10000, got {}", self.steps)));
        }
        if self.write_tokens > MAX_TOKENS {
            return Err(Error::Config(format!(
                "bench write_tokens must be 0 to {MAX_TOKENS}, got {}",
                self.write_tokens
            )));
        }
        if self.workers > 2 {
            return Err(Error::Config(format!("bench workers must be 1 or 2 (0: as the page), got {}", self.workers)));
        }
        let model = ModelConfig::sized(self.d_model, self.layers, self.heads, self.context);
        let optimizer = OptimizerConfig::named(&self.optimizer)?;
        let mut cfg = TrainConfig {
            model,
            data: DataSpec::Grammar,
            lr: optimizer.default_lr(),
            optimizer,
            batch: self.batch,
            steps: self.steps + WARMUP.max_steps,
            ..TrainConfig::default()
        };
        // The vocabulary is the data's: known before any model memory is allocated.
        cfg.model.vocab = Dataset::new(&cfg.data, cfg.model.context, cfg.seed)?.vocab_size();
        cfg.validate_within(memory::DEFAULT_BUDGET, 0)?;
        Ok(cfg)
    }

    /// Times the steps and the GEMM with `now` (milliseconds); with `pool` every step gives half of
    /// its shards to that other worker (a failure of it fails the bench).
    pub async fn run(&self, now: &dyn Fn() -> f64, pool: Option<&dyn ShardPool>) -> Result<BenchResult> {
        let cfg = self.config()?;
        let mut t = Trainer::new(cfg)?;
        let step = async |t: &mut Trainer| match remote::step(t, pool, None).await {
            (_, Some(why)) => Err(Error::Config(format!("the second worker stopped: {why}"))),
            (report, None) => report.map(|_| ()),
        };
        let (warm_start, mut warmup_steps) = (now(), 0);
        while warmup_steps < WARMUP.min_steps || (warmup_steps < WARMUP.max_steps && now() - warm_start < WARMUP.ms) {
            step(&mut t).await?;
            warmup_steps += 1;
        }
        let start = now();
        for _ in 0..self.steps {
            step(&mut t).await?;
        }
        let ms_per_step = (now() - start) / self.steps as f64;
        let flops = memory::step_flops(t.config());
        let n = 256;
        let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut c = vec![0.0f32; n * n];
        let (reps, start) = (8, now());
        for _ in 0..reps {
            gemm(1.0, MatRef::new(&a, n, n), MatRef::new(&a, n, n), 0.0, MatMut::new(&mut c, n, n));
        }
        let gemm_ms = (now() - start) / reps as f64;
        let writing = match self.write_tokens {
            0 => None,
            n => Some(write_speed(&t, n, now)?),
        };
        Ok(BenchResult {
            ms_per_step,
            gflops: flops / (ms_per_step * 1e6),
            gemm_gflops: 2.0 * (n * n * n) as f64 / (gemm_ms * 1e6),
            steps: self.steps,
            warmup_steps,
            params: t.model().num_params(),
            workers: if pool.is_some() && t.splits() { 2 } else { 1 },
            writing,
        })
    }
}

/// Times greedy writing of `n` tokens through the cache and through the full forward pass, each
/// repeated until a fifth of a second has passed (a browser's clock is coarse); both write the same
/// tokens (checked, so the two are timed doing the same work).
fn write_speed(t: &Trainer, n: usize, now: &dyn Fn() -> f64) -> Result<WritingSpeed> {
    let vocab = Vocab::of(t.data());
    let spec = SampleSpec { tokens: n, temperature: 0.0, ..SampleSpec::default() };
    let timed = |write: &dyn Fn() -> Result<Vec<u32>>| -> Result<(Vec<u32>, f64)> {
        let (start, mut reps) = (now(), 0);
        let mut tokens = write()?;
        reps += 1;
        while now() - start < 200.0 {
            tokens = write()?;
            reps += 1;
        }
        Ok((tokens, reps as f64 * n as f64 * 1000.0 / (now() - start).max(1e-6)))
    };
    let (cached, cached_tokens_per_s) = timed(&|| Ok(sample::generate(t.model(), &vocab, &spec)?.remove(0).tokens))?;
    let (uncached, uncached_tokens_per_s) =
        timed(&|| generate_uncached(t.model(), &[vocab.start], n, spec.choice(), 0))?;
    if cached != uncached {
        return Err(Error::Config("the cached and uncached paths wrote different tokens".into()));
    }
    Ok(WritingSpeed { tokens: n, cached_tokens_per_s, uncached_tokens_per_s })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::session::ready;

    #[test]
    fn the_bench_times_what_it_is_asked_and_refuses_bad_sizes() {
        let clock = std::time::Instant::now();
        let now = move || clock.elapsed().as_secs_f64() * 1e3;
        let spec =
            BenchSpec { d_model: 32, layers: 1, heads: 2, context: 16, batch: 4, steps: 3, ..BenchSpec::default() };
        let r = ready(BenchSpec { write_tokens: 40, ..spec.clone() }.run(&now, None)).unwrap();
        let w = r.writing.as_ref().expect("writing timed");
        assert!(w.tokens == 40 && w.cached_tokens_per_s > 0.0 && w.uncached_tokens_per_s > 0.0, "{w:?}");
        let want = Trainer::new(spec.config().unwrap()).unwrap().model().num_params();
        assert_eq!((r.steps, r.params, r.workers), (3, want, 1));
        assert!(r.warmup_steps >= WARMUP.min_steps && r.warmup_steps <= WARMUP.max_steps, "{r:?}");
        assert!(r.ms_per_step > 0.0 && r.gflops > 0.0 && r.gemm_gflops > 0.0, "{r:?}");
        let bad = BenchSpec { heads: 5, ..spec.clone() }.config().unwrap_err().to_string();
        assert!(bad.contains("heads"), "{bad}");
        let workers = BenchSpec { workers: 3, ..spec.clone() }.config().unwrap_err().to_string();
        assert!(workers.contains("workers must be 1 or 2"), "{workers}");
        let huge =
            BenchSpec { d_model: 1024, layers: 32, heads: 16, context: 1024, batch: 256, ..spec }.config().unwrap_err();
        assert!(huge.to_string().contains("memory limit"), "{huge}");
    }
}
