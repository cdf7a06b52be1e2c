//! How the next token is chosen from the model's logits: temperature, then top-k, then top-p
//! (the nucleus), renormalised, and one uniform draw from the seeded stream. Computed in f64 over
//! candidates sorted best first (ties by id), so the same logits and seed pick the same token on
//! every platform.

use std::cmp::Ordering;

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::rng::Rng;
use crate::scalar::Scalar;

/// The settings of the draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// 0 picks the most likely token (greedy); 1 is the model's own distribution.
    pub temperature: f64,
    /// Keep the k most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keep the fewest most likely tokens whose probabilities reach p, in (0, 1].
    pub top_p: f64,
}

impl Default for Choice {
    fn default() -> Self {
        Choice { temperature: 1.0, top_k: 0, top_p: 1.0 }
    }
}

/// The lowest temperature above 0 (greedy).
pub const MIN_TEMPERATURE: f64 = 0.001;

impl Choice {
    pub fn validate(&self) -> Result<()> {
        // Below 0.001 the logits over the temperature overflow (1e-320 gave NaN probabilities), and
        // the writing is greedy in all but name.
        let t = self.temperature;
        if !(t.is_finite() && (t == 0.0 || (MIN_TEMPERATURE..=100.0).contains(&t))) {
            return Err(Error::Config(format!(
                "temperature must be 0 (greedy) or from {MIN_TEMPERATURE} to 100, got {t}"
            )));
        }
        if !(self.top_p.is_finite() && self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::Config(format!("top_p must be in (0, 1], got {}", self.top_p)));
        }
        Ok(())
    }

    /// The candidates (token, probability), best first and summing to 1: the model's softmax at
    /// this temperature (at temperature 0 its own, at 1), cut to top-k and to the nucleus.
    pub fn distribution<S: Scalar>(&self, logits: &[S]) -> Vec<(u32, f64)> {
        self.best(logits, usize::MAX)
    }

    /// The first `n` candidates of `distribution`, the same tokens and probabilities, without
    /// sorting the rest: greedy writing and the candidates shown need five of GPT-2's 50,257, and
    /// a full sort for every token written or read cost more than the logits' product.
    pub fn best<S: Scalar>(&self, logits: &[S], n: usize) -> Vec<(u32, f64)> {
        let t = if self.temperature > 0.0 { self.temperature } else { 1.0 };
        let mut c: Vec<(u32, f64)> =
            logits.iter().enumerate().map(|(i, &x)| (i as u32, x.to_f64().unwrap_or(f64::NAN) / t)).collect();
        let (max, mut total) = softmax_parts(c.iter().map(|x| x.1));
        let k = if self.top_k > 0 { self.top_k.min(c.len()) } else { c.len() };
        if k < c.len() {
            first(&mut c, k);
            c.truncate(k);
            total = c.iter().map(|x| weight(x.1, max)).sum();
        }
        // The nucleus is a prefix of the sorted candidates, of a length known once they are sorted.
        let sorted = if self.top_p < 1.0 { k } else { n.min(k) };
        first(&mut c, sorted);
        c.truncate(sorted);
        c.iter_mut().for_each(|x| x.1 = weight(x.1, max) / total);
        if self.top_p < 1.0 {
            let mut mass = 0.0;
            let keep = c
                .iter()
                .position(|x| {
                    mass += x.1;
                    mass >= self.top_p
                })
                .map_or(c.len(), |i| i + 1);
            c.truncate(keep);
            normalise(&mut c);
            c.truncate(n);
        }
        c
    }

    /// The index into `dist` of the token drawn: the best at temperature 0, else where a uniform
    /// draw falls among the cumulative probabilities.
    pub fn pick(&self, dist: &[(u32, f64)], rng: &mut Rng) -> usize {
        if self.temperature == 0.0 {
            return 0;
        }
        let u: f64 = rng.random();
        let mut mass = 0.0;
        for (i, x) in dist.iter().enumerate() {
            mass += x.1;
            if u < mass {
                return i;
            }
        }
        // Rounding left the sum a hair under u: the last candidate.
        dist.len() - 1
    }
}

/// The model's own probability of `token` (temperature 1, nothing cut), as `Choice::default()`'s
/// `distribution` gives it.
pub fn probability<S: Scalar>(logits: &[S], token: u32) -> f64 {
    let xs = || logits.iter().map(|x| x.to_f64().unwrap_or(f64::NAN));
    let (max, total) = softmax_parts(xs());
    xs().nth(token as usize).map_or(0.0, |x| weight(x, max) / total)
}

/// Best first, ties by id; NaN logits last. A total order (ids are distinct), so an unstable sort
/// and a selection give the same order a stable sort does.
fn order(a: &(u32, f64), b: &(u32, f64)) -> Ordering {
    b.1.partial_cmp(&a.1).unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan())).then(a.0.cmp(&b.0))
}

/// Puts the best `m` candidates first, in order.
fn first(c: &mut [(u32, f64)], m: usize) {
    if m == 0 {
        return;
    }
    if m < c.len() {
        c.select_nth_unstable_by(m - 1, order);
    }
    c[..m].sort_unstable_by(order);
}

/// The largest logit and the softmax's denominator, summed in id order.
fn softmax_parts(xs: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let max = xs.clone().filter(|x| !x.is_nan()).fold(f64::NEG_INFINITY, f64::max);
    (max, xs.map(|x| weight(x, max)).sum())
}

/// A logit's unnormalised probability; a NaN logit gets none.
fn weight(x: f64, max: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        (x - max).exp()
    }
}

fn normalise(c: &mut [(u32, f64)]) {
    let total: f64 = c.iter().map(|x| x.1).sum();
    c.iter_mut().for_each(|x| x.1 /= total);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_and_nucleus_cut_and_renormalise() {
        // softmax of ln([0.5, 0.2, 0.2, 0.1]) is those probabilities.
        let logits: Vec<f32> = [0.5f32, 0.2, 0.2, 0.1].iter().map(|p| p.ln()).collect();
        let all = Choice::default().distribution(&logits);
        assert_eq!(all.iter().map(|x| x.0).collect::<Vec<_>>(), vec![0, 1, 2, 3], "ties by id");
        assert!((all[0].1 - 0.5).abs() < 1e-6 && (all[3].1 - 0.1).abs() < 1e-6);
        let k2 = Choice { top_k: 2, ..Choice::default() }.distribution(&logits);
        assert_eq!(k2.len(), 2);
        assert!((k2[0].1 - 0.5 / 0.7).abs() < 1e-6);
        let p = Choice { top_p: 0.6, ..Choice::default() }.distribution(&logits);
        assert_eq!(p.len(), 2, "0.5 < 0.6 <= 0.7");
        let p1 = Choice { top_p: 0.3, ..Choice::default() }.distribution(&logits);
        assert_eq!((p1.len(), p1[0].1), (1, 1.0));
        let cold = Choice { temperature: 0.5, ..Choice::default() }.distribution(&logits);
        assert!((cold[0].1 - 0.25 / (0.25 + 0.04 + 0.04 + 0.01)).abs() < 1e-6, "p^2 renormalised");
    }

    #[test]
    fn the_best_few_are_the_sorted_distributions_first_and_match_a_full_sort() {
        // Ties, a NaN and -inf among 300 logits.
        let mut logits: Vec<f32> = (0..300).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.05).collect();
        logits[7] = f32::NAN;
        logits[11] = f32::NEG_INFINITY;
        for c in [
            Choice::default(),
            Choice { temperature: 0.0, ..Choice::default() },
            Choice { temperature: 0.7, top_k: 40, ..Choice::default() },
            Choice { top_p: 0.5, ..Choice::default() },
            Choice { temperature: 1.3, top_k: 250, top_p: 0.9 },
            Choice { top_k: 1000, ..Choice::default() },
        ] {
            // The reference: every candidate stably sorted by its scaled logit, ties by id.
            let t = if c.temperature > 0.0 { c.temperature } else { 1.0 };
            let mut want: Vec<(u32, f64)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, x as f64 / t)).collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            want.rotate_left(1); // NaN (the largest in total order) goes last.
            let max = want[0].1;
            want.iter_mut().for_each(|x| x.1 = if x.1.is_nan() { 0.0 } else { (x.1 - max).exp() });
            want.truncate(if c.top_k > 0 { c.top_k } else { want.len() });
            normalise(&mut want);
            if c.top_p < 1.0 {
                let mut mass = 0.0;
                let keep = want.iter().take_while(|x| {
                    let under = mass < c.top_p;
                    mass += x.1;
                    under
                });
                let keep = keep.count();
                want.truncate(keep);
                normalise(&mut want);
            }
            let all = c.distribution(&logits);
            assert_eq!(all.len(), want.len(), "{c:?}");
            for (a, w) in all.iter().zip(&want) {
                assert!(a.0 == w.0 && (a.1 - w.1).abs() < 1e-12, "{c:?}: {a:?} against {w:?}");
            }
            for n in [0, 1, 5, 40, 299, 300, 1000] {
                assert_eq!(c.best(&logits, n), all[..n.min(all.len())], "{c:?}, n {n}");
            }
        }
        let own = Choice::default().distribution(&logits);
        for token in [0u32, 7, 11, 150, 299] {
            let p = own.iter().find(|x| x.0 == token).map_or(0.0, |x| x.1);
            assert_eq!(probability(&logits, token), p, "token {token}");
        }
    }

    #[test]
    fn bad_settings_are_refused() {
        for c in [
            Choice { temperature: -1.0, ..Choice::default() },
            Choice { temperature: f64::NAN, ..Choice::default() },
            Choice { temperature: 1e-320, ..Choice::default() },
            Choice { temperature: 1e-4, ..Choice::default() },
            Choice { top_p: 0.0, ..Choice::default() },
            Choice { top_p: 1.5, ..Choice::default() },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
