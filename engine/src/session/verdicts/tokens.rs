//! What one probe frame shows: every token on the sphere, attention rows that are a Markov chain,
//! softmax against its Gaussian kernel, and tokens of one kind gathering.

use super::{Agreement, Claim, Verdict};
use crate::data::kind::Kind;
use crate::science::grouping;
use crate::science::markov::{self, Validity};
use crate::science::probe::Probe;
use crate::science::sphere;

/// Do tokens of the same kind (vowel, consonant, space, ...; the sphere view's colours) gather at
/// `depth`? Over every probe row, at the first and the last frame.
pub fn grouping(probe: &Probe, symbols: &[String], depth: usize) -> Option<Verdict> {
    let (first, last) = (probe.frames().first()?, probe.frames().last()?);
    let cfg = probe.config();
    let depth = depth.min(cfg.layers);
    let kinds: Vec<Kind> =
        probe.tokens().iter().map(|&t| Kind::of(symbols.get(t as usize).map_or("", String::as_str))).collect();
    let at = |f: &crate::science::probe::Frame| {
        let u: Vec<f64> = f.sphere(cfg, depth).iter().map(|&x| x as f64).collect();
        grouping::by_kind(&u, cfg.d_model, &kinds).ok()
    };
    let (g0, g) = (at(first)?, at(last)?);
    let (gap0, gap) = (g0.same - g0.different, g.same - g.different);
    let (agreement, head) = if gap >= 0.3 && gap - gap0 >= 0.05 {
        (Agreement::Agrees, "Tokens of the same kind gather")
    } else if gap >= 0.1 && gap - gap0 >= 0.05 {
        (Agreement::Agrees, "Tokens of the same kind move a little closer together than to other kinds")
    } else if gap >= 0.1 {
        (Agreement::Partly, "Tokens of the same kind sit together, but no more than at the start")
    } else {
        (Agreement::Disagrees, "No grouping by kind")
    };
    let place = if depth == cfg.layers { "the final LayerNorm".to_string() } else { format!("layer {depth}") };
    Some(
        Verdict::new(
            Claim::Grouping,
            agreement,
            format!(
                "{head}: at {place}, tokens of the same kind (colour) have a mean cosine of {:.2} with each other and \
                 {:.2} with tokens of other kinds (at step {}: {:.2} and {:.2}).",
                g.same, g.different, first.step, g0.same, g0.different
            ),
        )
        .concluding(head),
    )
}

/// LayerNorm puts every token on the sphere of radius sqrt(d): the probe's last frame, every depth.
pub fn on_sphere(probe: &Probe) -> Option<Verdict> {
    let frame = probe.frames().last()?;
    let cfg = probe.config();
    let mut worst = 0.0f64;
    for depth in 0..=cfg.layers {
        let u: Vec<f64> = frame.sphere(cfg, depth).iter().map(|&x| x as f64).collect();
        worst = worst.max(sphere::radius_stats(&u, cfg.d_model).ok()?.max_rel_err);
    }
    // LayerNorm's eps shrinks |u| by about eps / (2 var) (|u|² = d var / (var + eps)): 1e-2 for the
    // small-variance embeddings at step 0, far less later; more than 5% is not that.
    let agrees = worst < 0.05;
    let r = (cfg.d_model as f64).sqrt();
    let head = if agrees { "On the sphere" } else { "Off the sphere" };
    Some(
        Verdict::new(
            Claim::Sphere,
            if agrees { Agreement::Agrees } else { Agreement::Disagrees },
            format!(
                "{head}: every token of the probe row is within {:.1e} (relative) of the sphere of radius √{} = \
                 {r:.2}, at every depth (LayerNorm's eps, added to each token's variance, explains the rest).",
                worst, cfg.d_model
            ),
        )
        .concluding(head),
    )
}

/// Attention is the transition matrix of a random walk: non-negative rows that sum to one.
pub fn markov_chain(probe: &Probe) -> Option<Verdict> {
    let frame = probe.frames().last()?;
    let cfg = probe.config();
    let t = cfg.context;
    let mut worst = 0.0f64;
    for l in 0..cfg.layers {
        for p in frame.attention(cfg, l).chunks_exact(t * t) {
            let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
            match markov::check(&p, t, 1e-4) {
                Validity::Ok { max_row_error } => worst = worst.max(max_row_error),
                other => {
                    let sentence = format!("Not a Markov matrix: layer {l} fails the check ({other:?}).");
                    return Some(
                        Verdict::new(Claim::Markov, Agreement::Disagrees, sentence).concluding("Not a Markov matrix"),
                    );
                }
            }
        }
    }
    Some(
        Verdict::new(
            Claim::Markov,
            Agreement::Agrees,
            format!(
                "A Markov chain: every row of every head is non-negative and sums to 1 within {worst:.1e}, so P is \
                 the transition matrix of a random walk over the positions."
            ),
        )
        .concluding("A Markov chain"),
    )
}

/// Softmax attention as a normalised Gaussian kernel (docs/science.md#softmax-as-a-gaussian-kernel): exact when queries and keys
/// lie on one sphere; for the learned heads, how far the two are (mean total variation).
pub fn kernel(probe: &Probe) -> Option<Verdict> {
    let frame = probe.frames().last()?;
    let cfg = probe.config();
    let (t, hs, c) = (cfg.context, cfg.head_size(), cfg.d_model);
    let cache = probe.cache();
    let mut tvs = Vec::new();
    for l in 0..cfg.layers {
        for h in 0..cfg.heads {
            let (q, k) = crate::science::cache::queries_keys(cfg, cache, l, 0, h).ok()?;
            let p = crate::science::cache::attention(cfg, cache, l, 0, h).ok()?;
            tvs.push(markov::kernel_distance(&p, &q, &k, t, hs, cfg.causal).ok()?.mean);
        }
    }
    // The identity itself, with Q = K = u, the probe row's points on the sphere.
    let u: Vec<f64> = frame.sphere(cfg, 0)[..t * c].iter().map(|&x| x as f64).collect();
    let pure = markov::softmax_attention(&u, &u, t, c, cfg.causal);
    let identity = markov::kernel_distance(&pure, &u, &u, t, c, cfg.causal).ok()?.mean;
    let mean = tvs.iter().sum::<f64>() / tvs.len().max(1) as f64;
    let (agreement, head) = if mean < 0.05 {
        (Agreement::Agrees, "A Gaussian kernel")
    } else if mean < 0.25 {
        (Agreement::Partly, "Near a Gaussian kernel")
    } else {
        (Agreement::Disagrees, "Far from a Gaussian kernel")
    };
    Some(
        Verdict::new(
            Claim::Kernel,
            agreement,
            format!(
                "{head}: with queries and keys on one sphere (Q = K = u) softmax attention is the row-normalised \
                 Gaussian kernel to {identity:.0e}. The learned heads differ from their Gaussian kernel by a mean \
                 total variation of {mean:.2} (0 identical, 1 disjoint): their keys do not all have the same length."
            ),
        )
        .concluding(head),
    )
}
