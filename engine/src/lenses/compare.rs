//! Two texts through the same model, side by side: which tokens they share (aligned as a diff
//! aligns lines), how far each shared token's place on the sphere differs between the two at
//! every layer, each head's entropy in both, and what the model expects after each. The same
//! sentence with one word changed shows how far a change travels: in a causal model the tokens
//! before it cannot move at all, the ones after it move as the layers mix the change in.
//!
//! Shapes: Ta, Tb tokens of the two texts, C = d_model, L layers.

use serde::{Deserialize, Serialize};

use super::reading::{measure, Read};
use crate::error::{Error, Result};
use crate::pretrained::Pretrained;
use crate::science::cache as lens;

/// One layer of the comparison (0..L: the input of block `layer`; L: the final norm).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerChange {
    pub layer: usize,
    /// Per shared token (in `Comparison::shared`'s order): the angle in degrees between its two
    /// places on the sphere (after the norm, before its gain), one in each text.
    pub angles: Vec<f64>,
    /// Their mean over the shared tokens the change can reach (from `first_change` on), and the
    /// largest of all (0 when there are none).
    pub mean_angle: f64,
    pub max_angle: f64,
    /// Per head, the mean entropy of its attention rows (nats) in the first text and the second
    /// (none for the final norm).
    pub entropy: [Vec<f64>; 2],
}

impl LayerChange {
    /// The mean over heads of each text's entropy (None for the final norm, which has no heads).
    pub fn mean_entropy(&self) -> Option<[f64; 2]> {
        let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
        (!self.entropy[0].is_empty()).then(|| self.entropy.each_ref().map(mean))
    }

    /// The head whose entropy changes most from the first text to the second, and by how much
    /// (second minus first, nats).
    pub fn most_changed_head(&self) -> Option<(usize, f64)> {
        let [a, b] = &self.entropy;
        a.iter().zip(b).map(|(x, y)| y - x).enumerate().max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub model: String,
    /// Each text's tokens, as the tokenizer cut them.
    pub pieces: [Vec<String>; 2],
    /// The pairs (i, j) of the same token at i in the first text and j in the second: the longest
    /// common subsequence of the two token lists.
    pub shared: Vec<(usize, usize)>,
    /// The first position where the two texts' tokens differ (the shorter's length when one is
    /// the other's beginning). Before it both texts are the same: a causal model's tokens there
    /// see the same past, so their angles are 0.
    pub first_change: usize,
    pub layers: Vec<LayerChange>,
    /// After each text's last token, the model's best candidates with their probabilities (empty
    /// for a model that reads both ways: it does not write).
    pub next: [Vec<(String, f64)>; 2],
    /// Whether a token sees only the tokens before it (GPT-2 and the other causal families; BERT
    /// reads both ways, so a change reaches every token).
    pub causal: bool,
}

/// The longest common subsequence of `a` and `b` as index pairs, in order (the classic table:
/// Ta x Tb cells, at most the context squared).
pub fn aligned<T: PartialEq>(a: &[T], b: &[T]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    // best[i][j]: the LCS length of a[i..] and b[j..].
    let mut best = vec![0u32; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            best[at(i, j)] =
                if a[i] == b[j] { best[at(i + 1, j + 1)] + 1 } else { best[at(i + 1, j)].max(best[at(i, j + 1)]) };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            (i, j) = (i + 1, j + 1);
        } else if best[at(i + 1, j)] >= best[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// The angle in degrees between two vectors (0 when either is zero).
fn angle(x: &[f64], y: &[f64]) -> f64 {
    let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    let norms = x.iter().map(|v| v * v).sum::<f64>().sqrt() * y.iter().map(|v| v * v).sum::<f64>().sqrt();
    match norms > 0.0 {
        true => (dot / norms).clamp(-1.0, 1.0).acos().to_degrees(),
        false => 0.0,
    }
}

/// The forward passes `a` and `b` of two texts through `p`, compared layer by layer.
pub fn compare(p: &Pretrained, a: &Read, b: &Read) -> Result<Comparison> {
    let cfg = &p.model.cfg;
    let c = cfg.d_model;
    let (ia, ib) = (measure(p, a)?, measure(p, b)?);
    let shared = aligned(&a.ids, &b.ids);
    let first_change = a.ids.iter().zip(&b.ids).take_while(|(x, y)| x == y).count();
    let mut layers = Vec::with_capacity(cfg.layers + 1);
    for (la, lb) in ia.layers.iter().zip(&ib.layers) {
        let l = la.layer;
        let (ua, ub) = (lens::sphere_points(cfg, &a.cache, l)?, lens::sphere_points(cfg, &b.cache, l)?);
        let angles: Vec<f64> =
            shared.iter().map(|&(i, j)| angle(&ua[i * c..(i + 1) * c], &ub[j * c..(j + 1) * c])).collect();
        // Where the change can reach: after it for a causal model, everywhere for one that reads both ways.
        let reached: Vec<f64> = shared
            .iter()
            .zip(&angles)
            .filter(|((i, _), _)| !cfg.causal || *i >= first_change)
            .map(|(_, &x)| x)
            .collect();
        let mean_angle = reached.iter().sum::<f64>() / reached.len().max(1) as f64;
        let max_angle = angles.iter().copied().fold(0.0, f64::max);
        let entropy = [la, lb].map(|x| x.heads.iter().map(|h| h.entropy).collect());
        layers.push(LayerChange { layer: l, angles, mean_angle, max_angle, entropy });
    }
    let last = |i: &super::Inspection| match cfg.causal {
        true => i.next.last().cloned().ok_or_else(|| Error::Data("an empty text".into())),
        false => Ok(Vec::new()),
    };
    Ok(Comparison {
        model: p.name.clone(),
        causal: cfg.causal,
        next: [last(&ia)?, last(&ib)?],
        pieces: [ia.pieces, ib.pieces],
        shared,
        first_change,
        layers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alignment_is_the_longest_common_subsequence() {
        // One word changed: everything else pairs up, in order.
        assert_eq!(aligned(&[1, 2, 3, 4], &[1, 9, 3, 4]), vec![(0, 0), (2, 2), (3, 3)]);
        // A word inserted shifts the pairs after it.
        assert_eq!(aligned(&[1, 2, 3], &[1, 7, 2, 3]), vec![(0, 0), (1, 2), (2, 3)]);
        assert_eq!(aligned::<u32>(&[], &[1]), vec![]);
        // Checked against every subsequence of a small case: the longest has length 4.
        let (a, b) = ([1, 3, 2, 4, 1, 3], [3, 1, 2, 1, 4, 3]);
        let pairs = aligned(&a, &b);
        assert_eq!(pairs.len(), brute_lcs(&a, &b));
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        assert!(pairs.iter().all(|&(i, j)| a[i] == b[j]));
    }

    /// The LCS length by trying every subsequence of `a` (2^n of them).
    fn brute_lcs(a: &[u32], b: &[u32]) -> usize {
        let is_sub = |s: &[u32]| {
            let mut it = b.iter();
            s.iter().all(|x| it.any(|y| y == x))
        };
        (0u32..1 << a.len())
            .map(|mask| (0..a.len()).filter(|i| mask >> i & 1 == 1).map(|i| a[i]).collect::<Vec<_>>())
            .filter(|s| is_sub(s))
            .map(|s| s.len())
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn angles_are_the_textbook_ones() {
        assert!((angle(&[1.0, 0.0], &[0.0, 2.0]) - 90.0).abs() < 1e-12);
        assert!((angle(&[1.0, 1.0], &[1.0, 0.0]) - 45.0).abs() < 1e-12);
        assert!((angle(&[1.0, 0.0], &[-3.0, 0.0]) - 180.0).abs() < 1e-12);
        assert_eq!(angle(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }
}
