//! Count-based baselines on the same split as the model: what a model that ignores all context
//! (unigram) or all but the previous token (bigram) would score. A transformer must beat both.

use crate::data::{Dataset, Split};
use crate::nn::loss::IGNORE;

/// Add-one (Laplace) smoothing, so unseen pairs cost a finite amount.
const ALPHA: f64 = 1.0;

pub struct Baselines {
    v: usize,
    unigram: Vec<f64>,
    bigram: Vec<f64>,
    prev_counts: Vec<f64>,
    total: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BaselineLoss {
    pub unigram: f64,
    pub bigram: f64,
}

impl Baselines {
    pub fn fit(data: &Dataset) -> Self {
        let v = data.vocab_size();
        let mut b =
            Baselines { v, unigram: vec![0.0; v], bigram: vec![0.0; v * v], prev_counts: vec![0.0; v], total: 0.0 };
        for (prev, next) in data.train_pairs(2048) {
            b.unigram[next as usize] += 1.0;
            b.bigram[prev as usize * v + next as usize] += 1.0;
            b.prev_counts[prev as usize] += 1.0;
            b.total += 1.0;
        }
        b
    }

    /// Mean negative log-likelihood of the validation batches `0..batches` (as the model's eval).
    pub fn val_loss(&self, data: &Dataset, batches: usize, batch: usize, context: usize) -> BaselineLoss {
        let v = self.v as f64;
        let (mut tok, mut tgt) = (vec![0; batch * context], vec![0; batch * context]);
        let (mut uni, mut bi, mut n) = (0.0, 0.0, 0.0);
        for i in 0..batches {
            data.batch(Split::Val, i as u64, &mut tok, &mut tgt);
            for (&prev, &next) in tok.iter().zip(&tgt).filter(|p| *p.1 != IGNORE) {
                let (p, x) = (prev as usize, next as usize);
                uni -= ((self.unigram[x] + ALPHA) / (self.total + ALPHA * v)).ln();
                bi -= ((self.bigram[p * self.v + x] + ALPHA) / (self.prev_counts[p] + ALPHA * v)).ln();
                n += 1.0;
            }
        }
        BaselineLoss { unigram: uni / n, bigram: bi / n }
    }
}
