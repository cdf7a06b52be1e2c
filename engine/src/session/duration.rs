//! How long a page run takes on the visitor's CPU, said before it starts. A run is more than its
//! steps: its schedule also validates, records probe frames and writes a sample with the probe
//! row's predictions, and for a wide model with a short context writing costs more than training
//! (each written token past a full window reads the whole window again). So the work of every
//! part of the schedule is counted (matrix-product FLOPs, and the weights a one-token pass reads)
//! and priced at [`Rates`] that [`measure`] times on the machine that will run it: the run's own
//! model taking a few steps, reading a validation batch and writing tokens. Nothing here is fitted
//! to one CPU: a page on a machine twice as slow measures rates half as high.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::memory::{head_flops, step_flops, trunk_flops};
use crate::sample::{self, SampleSpec, Vocab};
use crate::train::remote::{self, ShardPool};
use crate::Trainer;

use super::Experiment;

/// Each kind of work is timed in pieces of at least this long (a browser's clock ticks in 0.1 ms
/// or coarser), each at least one call, until two pieces in a row agree within [`AGREE`]: a
/// browser first runs wasm in its baseline compiler and swaps in optimised code while it runs (the
/// page's default step took twice as long in its first half second). A call slower than
/// [`SLOW_MS`] is timed once more at most.
const PIECE_MS: f64 = 50.0;
const AGREE: f64 = 0.15;
const SLOW_MS: f64 = 1000.0;
/// Calls a piece holds at most (a tiny model's step is a few microseconds).
const MAX_REPEATS: usize = 200;

/// What this machine does per second, measured by [`measure`] (the page shows them with its
/// estimate: `#estimate`'s `data-rates`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// A training step's matrix products, in both workers where the page has two.
    pub train_gflops: f64,
    /// Forward passes over whole rows (validation, probe frames, a window written at once).
    pub read_gflops: f64,
    /// Weights read by one-token passes: a token written reads every weight once.
    pub row_gb_per_s: f64,
    /// Making the run's data and model, which the run does again at its start.
    pub start_s: f64,
}

impl Rates {
    /// The rates of a machine `factor` times slower (the browser tests' slowed worker).
    pub fn slower(&self, factor: f64) -> Rates {
        Rates {
            train_gflops: self.train_gflops / factor,
            read_gflops: self.read_gflops / factor,
            row_gb_per_s: self.row_gb_per_s / factor,
            start_s: self.start_s * factor,
        }
    }
}

/// The prompt the schedule writes from when the experiment names none: the start of a validation
/// line of at most this many tokens (`Session::new`).
const PROMPT_TOKENS: usize = 24;

/// What a run does, counted.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Work {
    pub steps: usize,
    /// The training steps' matrix products.
    pub train_flops: f64,
    /// Forward passes over whole rows: validation, probe frames, windows read at once.
    pub read_flops: f64,
    /// Bytes of weights read by one-token passes (the tokens written into a window not yet full).
    pub row_bytes: f64,
}

impl Work {
    /// The work of `exp`'s whole schedule, from step 0 (its validation, frame and sample) to the end.
    pub fn of(exp: &Experiment) -> Work {
        let (t, m) = (&exp.train, &exp.train.model);
        let (steps, ctx) = (t.steps, m.context);
        let count = |due: &dyn Fn(usize) -> bool| (0..=steps).filter(|&s| due(s)).count() as f64;
        let every = t.eval_every;
        let evaluations = count(&|s| s == 0 || s == steps || (every > 0 && s.is_multiple_of(every)));
        // Frames at the probe's first interval: a history that fills up records fewer (an upper bound).
        let frames = count(&|s| s.is_multiple_of(exp.probe.config(steps, m).every));
        let writings = count(&|s| exp.writing.due(s, steps));
        // A forward pass over `n` tokens with every row's logits, and a window's (the head on its
        // last row only, as `Model::prefill` runs it).
        let full = |n: usize| n as f64 * (trunk_flops(m, n) + head_flops(m));
        let window = |n: usize| n as f64 * trunk_flops(m, n) + head_flops(m);
        // A prompt's characters count as its tokens: exact for a text, an upper bound for a data
        // set of longer symbols.
        let prompt = exp.writing.prompt.as_ref().map_or(PROMPT_TOKENS, |p| p.chars().count()).clamp(1, ctx);
        // Tokens after the first go one at a time until the window is full, then each reads the
        // last T tokens again (`sample::generate`).
        let later = exp.writing.tokens.saturating_sub(1);
        let rows = later.min(ctx - prompt);
        let sample = window(prompt) + (later - rows) as f64 * window(ctx);
        Work {
            steps,
            train_flops: steps as f64 * step_flops(t),
            read_flops: evaluations * (t.eval_batches * t.batch) as f64 * full(ctx)
                + frames * exp.probe.rows as f64 * full(ctx)
                + writings * (sample + full(ctx)),
            row_bytes: writings * rows as f64 * row_bytes(m),
        }
    }

    /// Seconds "as fast as possible" on the machine whose `rates` these are.
    pub fn seconds(&self, rates: &Rates) -> f64 {
        rates.start_s + self.step_seconds(rates) * self.steps as f64
    }

    /// Seconds a step takes on average, its share of the validation, frames and writing included.
    pub fn step_seconds(&self, rates: &Rates) -> f64 {
        (self.train_flops / (rates.train_gflops * 1e9)
            + self.read_flops / (rates.read_gflops * 1e9)
            + self.row_bytes / (rates.row_gb_per_s * 1e9))
            / self.steps.max(1) as f64
    }
}

/// Times `exp`'s kinds of work on this machine with `now` (milliseconds), on the run's own model:
/// its data and model made, training steps (with `pool` taking half of their shards, as the run's
/// second worker will), a validation pass, and tokens written one at a time, each for at least
/// `warm_ms` (a page's first measure: its code is not yet optimised) and until it runs at a steady
/// pace. Returns the run's work (its vocabulary known once the data is) and the rates to price it
/// at. Refused, before anything is allocated, as the run itself would be.
pub async fn measure(
    exp: &Experiment,
    budget: u64,
    now: &dyn Fn() -> f64,
    pool: Option<&dyn ShardPool>,
    warm_ms: f64,
) -> Result<(Work, Rates)> {
    let mut early = exp.clone();
    early.train.model.vocab = early.train.model.vocab.max(1);
    early.validate(budget)?;
    let t0 = now();
    let mut t = Trainer::new(exp.train.clone())?;
    let start_s = (now() - t0) / 1e3;
    let mut exp = exp.clone();
    exp.train = t.config().clone();
    let work = Work::of(&exp);
    let m = &exp.train.model;

    // A step that overflows is timed all the same: the rates are what is measured here.
    let train_ms = timed(now, warm_ms, async || match remote::step(&mut t, pool, None).await {
        (Err(e), _) if !matches!(e, Error::NonFinite { .. }) => Err(e),
        _ => Ok(()),
    })
    .await?;
    let read_ms = timed(now, warm_ms, async || match t.evaluate() {
        Err(e) if !matches!(e, Error::NonFinite { .. }) => Err(e),
        _ => Ok(()),
    })
    .await?;
    // From a one-token prompt every token written is one pass of one token (the window is never full).
    let tokens = m.context.clamp(1, 16);
    let spec = SampleSpec { tokens, temperature: 0.0, ..SampleSpec::default() };
    let vocab = Vocab::of(t.data());
    let write_ms = timed(now, warm_ms, async || sample::generate(t.model(), &vocab, &spec).map(|_| ())).await?;

    let evaluation =
        (exp.train.eval_batches * exp.train.batch * m.context) as f64 * (trunk_flops(m, m.context) + head_flops(m));
    let rates = Rates {
        train_gflops: step_flops(&exp.train) / (train_ms * 1e6),
        read_gflops: evaluation / (read_ms * 1e6),
        row_gb_per_s: tokens as f64 * row_bytes(m) / (write_ms * 1e6),
        start_s,
    };
    Ok((work, rates))
}

/// Milliseconds one call of `f` takes once it runs at a steady pace: pieces of [`PIECE_MS`] until
/// two in a row agree within [`AGREE`] and `warm_ms` have passed (or a call takes [`SLOW_MS`]);
/// the faster of the last two.
async fn timed(now: &dyn Fn() -> f64, warm_ms: f64, mut f: impl AsyncFnMut() -> Result<()>) -> Result<f64> {
    let start = now();
    let mut last: Option<f64> = None;
    loop {
        let (t0, mut n) = (now(), 0);
        while n == 0 || (now() - t0 < PIECE_MS && n < MAX_REPEATS) {
            f().await?;
            n += 1;
        }
        let per = ((now() - t0) / n as f64).max(1e-6);
        let warm = now() - start >= warm_ms;
        match last {
            Some(prev) if warm && ((per / prev - 1.0).abs() <= AGREE || per >= SLOW_MS) => return Ok(per.min(prev)),
            None if per >= SLOW_MS && warm => return Ok(per),
            _ => last = Some(per),
        }
    }
}

/// Bytes of weights one token reads: as many f32 as its products have multiply-adds.
fn row_bytes(m: &crate::ModelConfig) -> f64 {
    4.0 * (trunk_flops(m, 0) + head_flops(m)) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ModelConfig, TrainConfig};
    use crate::session::Writing;

    /// The forward FLOPs of `n` rows of `m`'s full context with their logits.
    fn forward_flops(m: &ModelConfig, n: usize) -> f64 {
        (n * m.context) as f64 * (trunk_flops(m, m.context) + head_flops(m))
    }

    fn wide() -> Experiment {
        let mut t = TrainConfig::browser_default();
        t.model = ModelConfig { d_model: 1024, heads: 8, layers: 1, context: 16, d_ff: 4096, vocab: 64, ..t.model };
        (t.steps, t.batch, t.eval_every) = (16, 2, 1);
        let mut exp = Experiment::new(t);
        exp.writing = Writing { every: 1, ..Writing::default() };
        exp
    }

    #[test]
    fn the_schedule_is_counted_as_the_session_runs_it() {
        // 16 steps validated and written at every step and at step 0: 17 of each; 16 frames of
        // one row and step 0's. Each sample's prompt (16 tokens, the whole window) is read at
        // once, then its 79 later tokens each read the last 16 again; its predictions read the
        // probe row.
        let exp = wide();
        let (t, m) = (&exp.train, &exp.train.model);
        let w = Work::of(&exp);
        let window = 16.0 * trunk_flops(m, 16) + head_flops(m);
        let sample = 80.0 * window + forward_flops(m, 1);
        let eval = t.eval_batches as f64 * forward_flops(m, t.batch);
        let want = 17.0 * eval + 17.0 * forward_flops(m, 1) + 17.0 * sample;
        assert!((w.read_flops / want - 1.0).abs() < 1e-12, "{} vs {want}", w.read_flops);
        assert_eq!(w.row_bytes, 0.0, "the window is full from the prompt on");
        assert_eq!(w.train_flops, 16.0 * crate::memory::step_flops(t));
        // Writing is most of this run.
        assert!(17.0 * sample > w.train_flops);
    }

    #[test]
    fn tokens_written_into_a_window_not_yet_full_read_the_weights_once_each() {
        let mut exp = wide();
        exp.train.model.context = 128;
        exp.writing.prompt = Some("ten chars.".into());
        let m = &exp.train.model;
        let w = Work::of(&exp);
        // 79 tokens after the first fit in the 118 positions left: one row each.
        let weights = m.layers * (4 * 1024 * 1024 + 2 * 1024 * 4096) + 1024 * 64;
        assert!((w.row_bytes / (17.0 * 79.0 * 4.0 * weights as f64) - 1.0).abs() < 1e-12);
    }

    /// Natively only: the wasm tests have no clock of their own (`Instant` is the browser's there).
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn the_rates_are_measured_on_the_runs_own_model_and_price_its_schedule() {
        let clock = std::time::Instant::now();
        let now = move || clock.elapsed().as_secs_f64() * 1e3;
        let mut exp = Experiment::new(TrainConfig::browser_default());
        exp.writing = Writing { every: 20, ..Writing::default() };
        let (work, rates) =
            crate::session::ready(measure(&exp, crate::memory::DEFAULT_BUDGET, &now, None, 0.0)).unwrap();
        // The work is the schedule's with the data's own vocabulary, known only once it is made.
        let mut real = exp.clone();
        real.train.model.vocab = Trainer::new(exp.train.clone()).unwrap().config().model.vocab;
        assert_eq!(work, Work::of(&real));
        for r in [rates.train_gflops, rates.read_gflops, rates.row_gb_per_s, rates.start_s] {
            assert!(r.is_finite() && r > 0.0, "{rates:?}");
        }
        // Priced by parts: a machine twice as slow takes twice as long for every part.
        let (t, slow) = (work.seconds(&rates), work.seconds(&rates.slower(2.0)));
        assert!((slow / t - 2.0).abs() < 1e-9, "{t} s, then {slow} s");
        let parts = work.train_flops / (rates.train_gflops * 1e9)
            + work.read_flops / (rates.read_gflops * 1e9)
            + work.row_bytes / (rates.row_gb_per_s * 1e9);
        assert!((t - rates.start_s - parts).abs() < 1e-9 * t);
        // A size beyond the memory limit is refused before anything is allocated, as the run is.
        let mut huge = exp.clone();
        huge.train.model = ModelConfig::sized(1024, 32, 16, 1024);
        huge.train.batch = 256;
        let e = crate::session::ready(measure(&huge, crate::memory::DEFAULT_BUDGET, &now, None, 0.0)).unwrap_err();
        assert!(e.to_string().contains("memory limit"), "{e}");
    }
}
