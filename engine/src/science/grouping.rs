//! Do tokens of the same kind gather on the sphere? The mean cosine between tokens of one kind
//! against the mean cosine between tokens of different kinds. With unit vectors and s_k the sum of
//! kind k's, the same-kind pairs' cosines sum to Σ_k (|s_k|² - n_k) / 2 and all pairs' to
//! (|Σ_k s_k|² - n) / 2, so both means cost one pass over the tokens.

use crate::data::kind::Kind;
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Grouping {
    /// Mean cosine over pairs of tokens of the same kind, and over pairs of different kinds.
    pub same: f64,
    pub different: f64,
}

/// `points`: (N, dim) token vectors (any length: each is normalised), `kinds`: one per token.
pub fn by_kind(points: &[f64], dim: usize, kinds: &[Kind]) -> Result<Grouping> {
    if dim == 0 || points.len() != kinds.len() * dim {
        return Err(Error::Data(format!("{} values are not {} tokens of dimension {dim}", points.len(), kinds.len())));
    }
    let mut sums = vec![vec![0.0; dim]; Kind::ALL.len()];
    let mut counts = [0usize; Kind::ALL.len()];
    for (p, kind) in points.chunks_exact(dim).zip(kinds) {
        let norm = p.iter().map(|x| x * x).sum::<f64>().sqrt();
        if !(norm.is_finite() && norm > 0.0) {
            return Err(Error::Data("a token vector is zero or not finite".into()));
        }
        let k = Kind::ALL.iter().position(|a| a == kind).unwrap_or(0);
        counts[k] += 1;
        sums[k].iter_mut().zip(p).for_each(|(s, x)| *s += x / norm);
    }
    let sq = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>();
    let pairs = |n: usize| (n * n.saturating_sub(1) / 2) as f64;
    let same_pairs: f64 = counts.iter().map(|&n| pairs(n)).sum();
    let same_sum: f64 = sums.iter().zip(counts).map(|(s, n)| (sq(s) - n as f64) / 2.0).sum();
    let total: Vec<f64> = (0..dim).map(|i| sums.iter().map(|s| s[i]).sum()).collect();
    let n = kinds.len();
    let all_sum = (sq(&total) - n as f64) / 2.0;
    let different_pairs = pairs(n) - same_pairs;
    if same_pairs == 0.0 || different_pairs == 0.0 {
        return Err(Error::Data("grouping by kind needs two tokens of one kind and two kinds".into()));
    }
    Ok(Grouping { same: same_sum / same_pairs, different: (all_sum - same_sum) / different_pairs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sums_equal_the_pairwise_means() {
        // Five tokens in 3-D, of two kinds, not normalised: the direct pairwise means.
        let points = [1.0, 0.2, 0.0, 2.0, 0.1, 0.3, -0.5, 1.0, 0.2, 0.0, -3.0, 1.0, 0.7, 0.7, 0.7];
        let kinds = [Kind::Vowel, Kind::Vowel, Kind::Consonant, Kind::Consonant, Kind::Vowel];
        let unit: Vec<Vec<f64>> = points
            .chunks(3)
            .map(|p| {
                let n = p.iter().map(|x| x * x).sum::<f64>().sqrt();
                p.iter().map(|x| x / n).collect()
            })
            .collect();
        let (mut same, mut diff) = (Vec::new(), Vec::new());
        for i in 0..5 {
            for j in i + 1..5 {
                let c: f64 = unit[i].iter().zip(&unit[j]).map(|(a, b)| a * b).sum();
                if kinds[i] == kinds[j] {
                    same.push(c)
                } else {
                    diff.push(c)
                }
            }
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let g = by_kind(&points, 3, &kinds).unwrap();
        assert!((g.same - mean(&same)).abs() < 1e-12 && (g.different - mean(&diff)).abs() < 1e-12, "{g:?}");
        assert!(by_kind(&points, 3, &kinds[..4]).is_err());
        assert!(by_kind(&points[..6], 3, &[Kind::Vowel, Kind::Consonant]).is_err());
    }
}
