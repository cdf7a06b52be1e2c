//! How the next token is chosen from the model's logits: temperature, then top-k, then top-p
//! (the nucleus), renormalised, and one uniform draw from the seeded stream. Computed in f64 over
//! candidates sorted best first (ties by id), so the same logits and seed pick the same token on
//! every platform.

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

impl Choice {
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0 && self.temperature <= 100.0) {
            return Err(Error::Config(format!("temperature must be from 0 (greedy) to 100, got {}", self.temperature)));
        }
        if !(self.top_p.is_finite() && self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::Config(format!("top_p must be in (0, 1], got {}", self.top_p)));
        }
        Ok(())
    }

    /// The candidates (token, probability), best first and summing to 1: the model's softmax at
    /// this temperature (at temperature 0 its own, at 1), cut to top-k and to the nucleus.
    pub fn distribution<S: Scalar>(&self, logits: &[S]) -> Vec<(u32, f64)> {
        let t = if self.temperature > 0.0 { self.temperature } else { 1.0 };
        let mut c: Vec<(u32, f64)> =
            logits.iter().enumerate().map(|(i, &x)| (i as u32, x.to_f64().unwrap_or(f64::NAN) / t)).collect();
        // NaN logits sort last and get no probability.
        c.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan())).then(a.0.cmp(&b.0)));
        let max = c.first().map_or(0.0, |x| x.1);
        c.iter_mut().for_each(|x| x.1 = if x.1.is_nan() { 0.0 } else { (x.1 - max).exp() });
        if self.top_k > 0 {
            c.truncate(self.top_k);
        }
        normalise(&mut c);
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
    fn bad_settings_are_refused() {
        for c in [
            Choice { temperature: -1.0, ..Choice::default() },
            Choice { temperature: f64::NAN, ..Choice::default() },
            Choice { top_p: 0.0, ..Choice::default() },
            Choice { top_p: 1.5, ..Choice::default() },
        ] {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
