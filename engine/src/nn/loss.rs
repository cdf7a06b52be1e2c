//! Softmax cross-entropy over the vocabulary, mean over the targets that count.

use multiversion::multiversion;

use crate::nn::reduce;
use crate::scalar::Scalar;

/// Target value that takes no part in the loss (prompts of algorithmic tasks, padding).
pub const IGNORE: u32 = u32::MAX;

/// Targets that count in the mean loss (all but `IGNORE`).
pub fn scored(targets: &[u32]) -> usize {
    targets.iter().filter(|&&t| t != IGNORE).count()
}

/// Turns `logits` (N, V) into probabilities in place; returns (mean loss, number of counted targets).
pub fn forward<S: Scalar>(logits: &mut [S], targets: &[u32], v: usize) -> (S, usize) {
    logits.chunks_exact_mut(v).for_each(softmax_in_place);
    let (mut total, mut count) = (S::zero(), 0);
    add_nll(&mut total, &mut count, logits, targets, v);
    (mean(total, count), count)
}

/// Adds `-ln p[target]` of every counted row of `probs` (N, V) to `total`, in row order, and counts
/// them: the data-parallel shards sum theirs in shard order, so the batch's loss has the same bits
/// however it was cut.
pub fn add_nll<S: Scalar>(total: &mut S, count: &mut usize, probs: &[S], targets: &[u32], v: usize) {
    for p in target_probs(probs, targets, v) {
        add_nll_of(total, p);
        *count += 1;
    }
}

/// The probability every counted row of `probs` (N, V) gives its target, in row order: what a
/// shard computed in another worker sends for the batch's loss.
pub fn target_probs<'a, S: Scalar>(probs: &'a [S], targets: &'a [u32], v: usize) -> impl Iterator<Item = S> + 'a {
    probs.chunks_exact(v).zip(targets).filter(|(_, &t)| t != IGNORE).map(|(row, &t)| row[t as usize])
}

/// Adds one counted row's `-ln p` to `total` (the one operation [`add_nll`] repeats).
pub fn add_nll_of<S: Scalar>(total: &mut S, p: S) {
    *total -= p.ln();
}

/// `total / count`, 0 for no counted targets.
pub fn mean<S: Scalar>(total: S, count: usize) -> S {
    if count > 0 {
        total / S::of(count as f64)
    } else {
        S::zero()
    }
}

/// Sets `dlogits` = (p - onehot) / count on counted rows, 0 elsewhere.
pub fn backward<S: Scalar>(dlogits: &mut [S], probs: &[S], targets: &[u32], count: usize, v: usize) {
    let scale = S::one() / S::of(count.max(1) as f64);
    for ((d, p), &tgt) in dlogits.chunks_exact_mut(v).zip(probs.chunks_exact(v)).zip(targets) {
        if tgt == IGNORE {
            d.fill(S::zero());
            continue;
        }
        for (dd, &pp) in d.iter_mut().zip(p) {
            *dd = pp * scale;
        }
        d[tgt as usize] -= scale;
    }
}

/// Numerically stable softmax of one row (multiversioned as `activation::forward`; the max and
/// the sum in `reduce`'s order: the same bits with every SIMD width).
#[multiversion(targets = "simd")]
pub fn softmax_in_place<S: Scalar>(row: &mut [S]) {
    // NaN is passed over by the max and reaches the sum through the exp.
    let max = reduce::max(row);
    row.iter_mut().for_each(|x| *x = (*x - max).exp_fast());
    // One division a row: a vector division per lane's width cost a fifth of the softmax.
    let inv = S::one() / reduce::sum(row);
    row.iter_mut().for_each(|x| *x *= inv);
}
