//! When the validation loss stops following the training loss: the model has begun to learn its
//! training text by heart rather than the language (overfitting). The loss chart says so in words.

use serde::{Deserialize, Serialize};

use super::Metrics;

/// A rise of the validation loss over its best smaller than this (nats) is taken for noise.
pub const MARGIN: f32 = 0.03;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Overfitting {
    /// The evaluation with the lowest validation loss.
    pub best_step: usize,
    pub best_val: f32,
    /// The last evaluation, and the training loss near it.
    pub step: usize,
    pub val: f32,
    pub train: f32,
    pub text: String,
}

/// Mean training loss of the steps in `(from, to]`.
fn train_mean(m: &Metrics, from: usize, to: usize) -> Option<f32> {
    let pts: Vec<f32> = m.train.iter().filter(|p| p.0 > from && p.0 <= to).map(|p| p.1).collect();
    (!pts.is_empty()).then(|| pts.iter().sum::<f32>() / pts.len() as f32)
}

impl Metrics {
    /// Overfitting, if the last validation loss is above its best by more than [`MARGIN`] while the
    /// training loss went on falling since the best; None otherwise.
    pub fn overfitting(&self) -> Option<Overfitting> {
        let (&(step, val), rest) = self.val.split_last()?;
        let &(best_step, best_val) = rest.iter().min_by(|a, b| a.1.total_cmp(&b.1))?;
        if val <= best_val + MARGIN {
            return None;
        }
        // The training loss over the interval before each of the two evaluations.
        let width = rest.last().map_or(step, |p| step - p.0).max(1);
        let then = train_mean(self, best_step.saturating_sub(width), best_step)?;
        let now = train_mean(self, step.saturating_sub(width), step)?;
        if now >= then {
            return None;
        }
        let text = format!(
            "Since step {best_step} the validation loss has risen from {best_val:.3} to {val:.3} while the training loss \
             fell from {then:.3} to {now:.3}: the model is learning its training text by heart (overfitting) rather \
             than the language."
        );
        Some(Overfitting { best_step, best_val, step, val, train: now, text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(val: &[(usize, f32)]) -> Metrics {
        let train = (1..=300).map(|s| (s, 3.0 - s as f32 / 150.0)).collect();
        Metrics { train, val: val.to_vec(), diagnostics: Vec::new() }
    }

    #[test]
    fn a_rising_validation_loss_under_a_falling_training_loss_is_overfitting() {
        let m = metrics(&[(0, 3.0), (100, 2.0), (200, 1.8), (300, 1.9)]);
        let o = m.overfitting().expect("overfitting");
        assert_eq!((o.best_step, o.step), (200, 300));
        assert!(o.text.contains("step 200") && o.text.contains("1.800") && o.text.contains("1.900"), "{}", o.text);
        assert!(metrics(&[(0, 3.0), (100, 2.0), (200, 1.8), (300, 1.82)]).overfitting().is_none(), "within noise");
        assert!(metrics(&[(0, 3.0), (100, 2.0), (200, 1.8), (300, 1.7)]).overfitting().is_none(), "still falling");
        assert!(metrics(&[(300, 1.7)]).overfitting().is_none(), "one point");
    }
}
