//! The learning rate over a run: constant, or a linear warm-up then a cosine decay.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Schedule {
    Constant,
    /// Linear warmup over `warmup` steps, then cosine decay to `min_ratio * lr` at the last step.
    WarmupCosine {
        warmup: usize,
        min_ratio: f32,
    },
}

impl Schedule {
    pub fn lr(&self, base: f32, step: usize, total: usize) -> f32 {
        match *self {
            Schedule::Constant => base,
            Schedule::WarmupCosine { warmup, min_ratio } => {
                if step < warmup {
                    return base * (step + 1) as f32 / warmup as f32;
                }
                let span = total.saturating_sub(warmup).max(1) as f32;
                let progress = ((step - warmup) as f32 / span).min(1.0);
                let cos = 0.5 * (1.0 + (std::f32::consts::PI * progress).cos());
                base * (min_ratio + (1.0 - min_ratio) * cos)
            }
        }
    }

    /// Refuses what makes no schedule: a final share outside [0, 1], a warm-up longer than the run.
    pub fn validate(&self, steps: usize) -> Result<()> {
        if let Schedule::WarmupCosine { warmup, min_ratio } = *self {
            if !(min_ratio.is_finite() && (0.0..=1.0).contains(&min_ratio)) {
                return Err(Error::Config(format!(
                    "the schedule's min_ratio (the share of the learning rate left at the end) must be in [0, 1], \
                     got {min_ratio}"
                )));
            }
            // The default warm-up of 50 steps stays usable on shorter runs (`lab train --steps 10`).
            if warmup > steps.max(50) {
                return Err(Error::Config(format!(
                    "a warm-up of {warmup} steps is longer than the run of {steps} steps: the learning rate \
                     would never reach its value"
                )));
            }
        }
        Ok(())
    }
}
