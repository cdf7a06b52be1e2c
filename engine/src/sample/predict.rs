//! Which next tokens are easy and which are hard: for every position of a text, what the model
//! gives the token that actually comes next, its loss, and the candidates it preferred.

use serde::{Deserialize, Serialize};

use super::choice::{self, Choice};
use super::codec::Codec;
use super::generate::{top, TOP};
use crate::error::Result;
use crate::model::Model;
use crate::nn::loss::IGNORE;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// The token that comes next, and the probability the model gave it.
    pub text: String,
    pub p: f64,
    /// `-ln p`, in nats.
    pub loss: f64,
    pub top: Vec<(String, f64)>,
}

/// For `tokens` (at most T), the prediction made after each of them of the token that follows
/// (`tokens[i + 1]`, and `next` after the last: none when it is `IGNORE`).
pub fn predictions(model: &Model<f32>, vocab: &dyn Codec, tokens: &[u32], next: u32) -> Result<Vec<Prediction>> {
    let logits = model.logits_full(tokens)?;
    let choice = Choice::default();
    let targets = tokens[1..].iter().chain([&next]).filter(|&&t| t != IGNORE);
    Ok(logits
        .iter()
        .zip(targets)
        .map(|(row, &target)| {
            let p = choice::probability(row, target);
            Prediction { text: vocab.text(target), p, loss: -p.ln(), top: top(vocab, &choice.best(row, TOP), TOP) }
        })
        .collect())
}
