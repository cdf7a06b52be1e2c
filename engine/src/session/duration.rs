//! How long a page run takes on the browser's CPU, said before it starts. A run is more than its
//! steps: its schedule also validates, records probe frames and writes a sample with the probe
//! row's predictions, and for a wide model with a short context writing costs more than training
//! (each written token past a full window reads the whole window again). So the work of every
//! part of the schedule is counted (matrix-product FLOPs, and the weights a one-token pass reads)
//! and priced at rates fitted to page runs.

use crate::memory::{head_flops, trunk_flops};

use super::Experiment;

// The rates, fitted to eight sizes run "as fast as possible" in headless Chromium on this
// project's 2-core machine (`bench/page_estimate.mjs`, two rounds; every size within 6%, from the
// default d32 L2 T32 B8 400 steps at 2.3 s to d1024 L1 T64 B2 16 steps at 76 s). The engine alone
// trains at 40-46 GFLOP/s in two workers (`spherewalk.bench`); what a run does beside (the panels,
// the saves, the page's drawing) lands mostly on the forward passes' rate, which is one worker's.

/// A training step's matrix products, per second.
const TRAIN_GFLOPS: f64 = 50.0;
/// Forward passes over whole rows (validation, probe frames and their panels, a window written at
/// once), per second.
const READ_GFLOPS: f64 = 20.0;
/// A one-token pass reads every weight once, so it goes at the memory's pace.
const ROW_GB_PER_S: f64 = 9.0;
/// Each step's fixed cost (its messages, the loss curve) and the start (the data, the first save).
const STEP_OVERHEAD_S: f64 = 0.001;
const START_S: f64 = 1.3;

/// The prompt the schedule writes from when the experiment names none: the start of a validation
/// line of at most this many tokens (`Session::new`).
const PROMPT_TOKENS: usize = 24;

/// What a run does, counted.
#[derive(Clone, Copy, Debug, PartialEq)]
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
        // One token reads each weight once: as many f32 as its products have multiply-adds.
        let row_bytes = 4.0 * (trunk_flops(m, 0) + head_flops(m)) / 2.0;
        Work {
            steps,
            train_flops: steps as f64 * crate::memory::step_flops(t),
            read_flops: evaluations * (t.eval_batches * t.batch) as f64 * full(ctx)
                + frames * exp.probe.rows as f64 * full(ctx)
                + writings * (sample + full(ctx)),
            row_bytes: writings * rows as f64 * row_bytes,
        }
    }

    /// Seconds on the browser's CPU, "as fast as possible".
    pub fn page_seconds(&self) -> f64 {
        START_S
            + self.steps as f64 * STEP_OVERHEAD_S
            + self.train_flops / (TRAIN_GFLOPS * 1e9)
            + self.read_flops / (READ_GFLOPS * 1e9)
            + self.row_bytes / (ROW_GB_PER_S * 1e9)
    }

    /// Seconds a step takes on average, its share of the validation, frames and writing included.
    pub fn page_step_seconds(&self) -> f64 {
        (self.page_seconds() - START_S) / self.steps.max(1) as f64
    }
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
}
