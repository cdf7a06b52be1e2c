//! What the model writes while it trains: a sample of a prompt on the session's step schedule
//! (so the same link writes the same samples on a fast and a slow machine), and how well it
//! predicts every character of the probe row. The page's "The model writes" panel and
//! `lab train --sample-every` show these.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::Model;
use crate::sample::{self, Prediction, Sample, SampleSpec, Vocab};

/// Samples kept in the history.
pub const HISTORY: usize = 24;

/// When and what the session writes; `every` 0 writes nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Writing {
    /// Write at step 0, every `every` steps and at the end.
    pub every: usize,
    pub tokens: usize,
    pub temperature: f64,
    pub top_k: usize,
    pub top_p: f64,
    /// The prompt; None takes the start of a validation line.
    pub prompt: Option<String>,
}

impl Default for Writing {
    fn default() -> Self {
        Writing { every: 0, tokens: 80, temperature: 0.8, top_k: 0, top_p: 1.0, prompt: None }
    }
}

impl Writing {
    /// The request for the sample at `step`: seed `run seed + step`.
    pub fn spec(&self, prompt: &str, run_seed: u64, step: usize) -> SampleSpec {
        SampleSpec {
            prompt: prompt.to_string(),
            tokens: self.tokens,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: run_seed.wrapping_add(step as u64),
            samples: 1,
        }
    }

    pub fn due(&self, step: usize, total: usize) -> bool {
        self.every > 0 && (step.is_multiple_of(self.every) || step == total)
    }

    pub fn validate(&self) -> crate::error::Result<()> {
        if self.every > 0 {
            self.spec("", 0, 0).validate()?;
        }
        Ok(())
    }
}

/// One sample of the schedule and the probe row's predictions at the same step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Written {
    pub step: usize,
    pub sample: Sample,
    pub predictions: Vec<Prediction>,
}

/// The model's text for the writing panel: the sample of `spec` and the probe row's predictions
/// (`row`, with the token after it).
pub fn write(
    model: &Model<f32>,
    vocab: &Vocab,
    spec: &SampleSpec,
    row: &[u32],
    next: u32,
    step: usize,
) -> Result<Written> {
    let sample = sample::generate(model, vocab, spec)?.remove(0);
    let predictions = sample::predictions(model, vocab, row, next)?;
    Ok(Written { step, sample, predictions })
}
