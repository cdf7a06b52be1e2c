//! The papers' claims answered in words from a session's measurements, with the numbers that make
//! them meaningful (a tolerance, a critical value). The page shows them beside the panels; the
//! words are computed here, never in the view.

use serde::{Deserialize, Serialize};

use crate::science::joma::{self, CurveShape};
use crate::science::markov::{self, Validity};
use crate::science::probe::Probe;
use crate::science::sphere;
use crate::session::panels::{Brownian, EntropyPoint};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    Agrees,
    Partly,
    Disagrees,
    /// Too few measurements yet.
    NotYet,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub agreement: Agreement,
    /// One or two sentences a class can read: the answer first, then the number behind it.
    pub sentence: String,
}

impl Verdict {
    fn new(agreement: Agreement, sentence: String) -> Self {
        Verdict { agreement, sentence }
    }
}

/// Every verdict the panels show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdicts {
    pub sphere: Option<Verdict>,
    pub markov: Option<Verdict>,
    pub kernel: Option<Verdict>,
    pub brownian: Option<Verdict>,
    /// Per layer: does the attention entropy dip and rebound?
    pub joma: Vec<Verdict>,
}

/// R² from which the straight decay of ln E[cos θ] counts as explaining the tokens' motion.
pub const GOOD_R2: f64 = 0.9;

/// Three significant digits, in scientific notation when small or large.
fn sig(x: f64) -> String {
    if x != 0.0 && !(1e-2..1e3).contains(&x.abs()) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

/// "Brownian or not?" in words: the fit's R², the KS distance against its 5% critical value, the
/// two estimates of D, and what the tokens did instead when they did not diffuse.
pub fn brownian(b: &Brownian) -> Verdict {
    let (tokens, critical) = (b.points, b.ks_critical);
    let fits = b.r_squared.is_finite() && b.r_squared >= GOOD_R2;
    let same_law = b.ks.is_finite() && b.ks <= critical;
    // A jump then a plateau: most of the fall of E[cos θ] happened in the first quarter of the time
    // (diffusion's fall is spread over all of it: a quarter of the time gives well under 80% of it).
    let end = b.times.last().copied().unwrap_or(b.mean_cos.len().saturating_sub(1) as f64);
    let quarter = match b.times.is_empty() {
        true => b.mean_cos.len() / 4,
        false => b.times.iter().position(|&t| t >= 0.25 * end).unwrap_or(0),
    };
    let early = b.mean_cos.get(quarter.max(1)).copied().unwrap_or(1.0);
    let last = b.mean_cos.last().copied().unwrap_or(1.0);
    let jumped = b.mean_cos.len() >= 3 && (1.0 - early) > 0.8 * (1.0 - last) && (1.0 - last) > 0.05;
    let fit_words = if !b.r_squared.is_finite() {
        "the fit has too few frames for an R²".to_string()
    } else if b.r_squared < 0.0 {
        format!(
            "R² = {:.2} is below 0: a flat line explains ln E[cos θ] better than diffusion's steady decay",
            b.r_squared
        )
    } else {
        format!(
            "R² = {:.2} (a straight decay of ln E[cos θ] explains {:.0}% of its variation)",
            b.r_squared,
            100.0 * b.r_squared
        )
    };
    let ks_words = format!(
        "the angles from the start differ from Brownian walkers' by KS = {:.2}, {} the 5% critical value {:.2} for {tokens} tokens",
        b.ks,
        if same_law { "within" } else { "beyond" },
        critical
    );
    let (agreement, head) = match (fits, same_law) {
        (true, true) => (Agreement::Agrees, "Brownian: the tokens spread like a diffusion".to_string()),
        (true, false) | (false, true) => (Agreement::Partly, "Partly Brownian".to_string()),
        (false, false) if jumped => (
            Agreement::Disagrees,
            "Not Brownian: the tokens move in one jump early in training and then stay put; pure diffusion \
             would keep spreading"
                .to_string(),
        ),
        (false, false) => (Agreement::Disagrees, "Not Brownian: the tokens drift or cluster".to_string()),
    };
    // The second estimate of D, from the increments: a diffusion with one D puts the line's D
    // inside its interval.
    let [lo, hi] = b.diffusion_ci;
    let ml_words = if !(b.diffusion_ml.is_finite() && lo.is_finite() && hi.is_finite()) {
        String::new()
    } else {
        let inside = (lo..=hi).contains(&b.diffusion);
        format!(
            " From the steps between snapshots, D = {} (95% interval {}-{}); the line's D = {} is {} it{}.",
            sig(b.diffusion_ml),
            sig(lo),
            sig(hi),
            sig(b.diffusion),
            if inside { "inside" } else { "outside" },
            if inside { ", as one diffusion would give" } else { ": the motion is not one diffusion" }
        )
    };
    Verdict::new(agreement, format!("{head}. {fit_words}; {ks_words}.{ml_words}"))
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
    Some(Verdict::new(
        if agrees { Agreement::Agrees } else { Agreement::Disagrees },
        format!(
            "{}: every token of the probe row is within {:.1e} (relative) of the sphere of radius √{} = {r:.2}, \
             at every depth (LayerNorm's eps, added to each token's variance, explains the rest).",
            if agrees { "On the sphere" } else { "Off the sphere" },
            worst,
            cfg.d_model
        ),
    ))
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
                    return Some(Verdict::new(
                        Agreement::Disagrees,
                        format!("Not a Markov matrix: layer {l} fails the check ({other:?})."),
                    ))
                }
            }
        }
    }
    Some(Verdict::new(
        Agreement::Agrees,
        format!(
            "A Markov chain: every row of every head is non-negative and sums to 1 within {worst:.1e}, so P is \
             the transition matrix of a random walk over the positions."
        ),
    ))
}

/// Softmax attention as a normalised Gaussian kernel (SCIENCE.md §3): exact when queries and keys
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
    let agreement = if mean < 0.05 {
        Agreement::Agrees
    } else if mean < 0.25 {
        Agreement::Partly
    } else {
        Agreement::Disagrees
    };
    Some(Verdict::new(
        agreement,
        format!(
            "With queries and keys on one sphere (Q = K = u) softmax attention is the row-normalised Gaussian \
             kernel to {identity:.0e}. The learned heads differ from their Gaussian kernel by a mean total \
             variation of {mean:.2} (0 identical, 1 disjoint): their keys do not all have the same length."
        ),
    ))
}

/// The race: the first entrant (the page's own run, second order) against the others, at the same
/// step and at the same seconds of compute. `curves`: (label, (step, loss) points, (seconds, loss)).
#[allow(clippy::type_complexity)]
pub fn race(curves: &[(String, Vec<(usize, f32)>, Vec<(f64, f32)>)]) -> Option<Verdict> {
    let [own, rival, ..] = curves else { return None };
    let steps = own.1.len().min(rival.1.len());
    if steps < 10 {
        return None;
    }
    // Mean of the last tenth of the points up to the common step: one step's loss is noisy.
    let late = |pts: &[(usize, f32)]| {
        let tail = &pts[steps - (steps / 10).max(1)..steps];
        tail.iter().map(|p| p.1 as f64).sum::<f64>() / tail.len() as f64
    };
    let (a, b) = (late(&own.1), late(&rival.1));
    let at_time = |pts: &[(f64, f32)], t: f64| pts.iter().take_while(|p| p.0 <= t).last().map(|p| p.1 as f64);
    let t = own.2.last().map(|p| p.0).unwrap_or(0.0).min(rival.2.last().map(|p| p.0).unwrap_or(0.0));
    let by_time = match (at_time(&own.2, t), at_time(&rival.2, t)) {
        (Some(x), Some(y)) if t > 0.0 => format!(
            " After {t:.1} s of compute: {} at {x:.3}, {} at {y:.3} ({}).",
            own.0,
            rival.0,
            if x < y { "ahead in time too" } else { "behind in time: its steps cost more" }
        ),
        _ => String::new(),
    };
    let ahead = a < b;
    Some(Verdict::new(
        if ahead { Agreement::Agrees } else { Agreement::Disagrees },
        format!(
            "{}: after {steps} steps {} is at loss {a:.3}, {} at {b:.3} (the mean of the last tenth).{by_time}",
            if ahead { "Fewer steps with second order" } else { "Second order is not ahead in steps" },
            own.0,
            rival.0
        ),
    ))
}

/// JoMA: with a nonlinear MLP, attention entropy first falls (sparse), then rises again (dense).
pub fn joma(entropy: &[EntropyPoint], nonlinear: bool) -> Vec<Verdict> {
    let layers = entropy.first().map_or(0, |e| e.layers.len());
    let steps: Vec<usize> = entropy.iter().map(|e| e.step).collect();
    (0..layers)
        .map(|l| {
            let curve: Vec<f64> = entropy.iter().map(|e| e.layers[l]).collect();
            if curve.len() < 3 {
                return Verdict::new(Agreement::NotYet, format!("Layer {l}: too few frames yet."));
            }
            let Ok(s) = joma::summarize(&curve, Some(&steps)) else {
                return Verdict::new(Agreement::NotYet, format!("Layer {l}: no finite entropy curve yet."));
            };
            let numbers = format!(
                "entropy {:.2} → lowest {:.2} at step {} → {:.2} nats (changes under {} nats count as flat)",
                s.initial,
                s.min,
                s.min_step,
                s.last,
                joma::SHAPE_TOL
            );
            let (agreement, words) = match (s.shape, nonlinear) {
                (CurveShape::DipAndRebound, true) => {
                    (Agreement::Agrees, "sparse, then dense again, as JoMA predicts for a nonlinear MLP")
                }
                (CurveShape::DipAndRebound, false) => (
                    Agreement::Disagrees,
                    "sparse, then dense again, although JoMA predicts that only with a nonlinear MLP",
                ),
                (CurveShape::Falling, true) => (Agreement::Partly, "sparser and staying sparse: no rebound (yet)"),
                (CurveShape::Falling, false) => {
                    (Agreement::Agrees, "sparser and staying sparse, as JoMA predicts without a nonlinearity")
                }
                (CurveShape::Rising, _) => (Agreement::Disagrees, "denser from the start: no sparse phase"),
                (CurveShape::Flat, _) => (Agreement::Disagrees, "about as dense as it started: no clear phase"),
            };
            Verdict::new(agreement, format!("Layer {l}: {words}; {numbers}."))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::science::stats::ks_critical;

    fn fit(r_squared: f64, ks: f64, mean_cos: Vec<f64>) -> Brownian {
        let times = (0..mean_cos.len()).map(|t| t as f64).collect();
        let (diffusion, diffusion_ml, diffusion_ci) = (1e-3, 1.1e-3, [0.9e-3, 1.3e-3]);
        Brownian {
            r_squared,
            ks,
            mean_cos,
            times,
            points: 32,
            ks_critical: ks_critical(32, 32),
            diffusion,
            diffusion_ml,
            diffusion_ci,
            ..Brownian::default()
        }
    }

    #[test]
    fn the_ks_critical_value_is_the_textbook_one() {
        // c(0.05) sqrt((n+m)/(nm)): 0.340 for 32 and 32, 0.043 for 2000 and 2000.
        assert!((ks_critical(32, 32) - 0.3395).abs() < 1e-3);
        assert!((ks_critical(2000, 2000) - 0.0429).abs() < 1e-3);
    }

    #[test]
    fn brownian_verdicts_follow_the_numbers() {
        let good = brownian(&fit(0.97, 0.2, vec![1.0, 0.9, 0.8, 0.7]));
        assert_eq!(good.agreement, Agreement::Agrees);
        assert!(good.sentence.starts_with("Brownian") && good.sentence.contains("within the 5% critical value 0.34"));
        assert!(
            good.sentence.contains("D = 1.10e-3 (95% interval 9.00e-4-1.30e-3); the line's D = 1.00e-3 is inside it"),
            "{}",
            good.sentence
        );
        let two =
            Brownian { diffusion_ml: 2e-4, diffusion_ci: [1.5e-4, 2.5e-4], ..fit(0.97, 0.2, vec![1.0, 0.9, 0.8, 0.7]) };
        assert!(brownian(&two).sentence.contains("is outside it: the motion is not one diffusion"));
        // The bug report's case: from 1 at the first frame a jump to cos ~0.5, flat after, R^2 < 0.
        let jump = brownian(&fit(-18.8, 0.438, vec![1.0, 0.52, 0.5, 0.5, 0.49]));
        assert_eq!(jump.agreement, Agreement::Disagrees);
        assert!(jump.sentence.contains("one jump early in training"), "{}", jump.sentence);
        assert!(jump.sentence.contains("R² = -18.80 is below 0: a flat line explains"), "{}", jump.sentence);
        assert!(jump.sentence.contains("beyond the 5% critical value"), "{}", jump.sentence);
        let drift = brownian(&fit(0.5, 0.6, vec![1.0, 0.95, 0.8, 0.5]));
        assert_eq!(drift.agreement, Agreement::Disagrees);
        assert!(!drift.sentence.contains("jump"));
        assert_eq!(brownian(&fit(0.95, 0.6, vec![0.9, 0.8, 0.7])).agreement, Agreement::Partly);
    }

    fn curve(values: &[f64]) -> Vec<EntropyPoint> {
        values
            .iter()
            .enumerate()
            .map(|(i, &h)| EntropyPoint { step: 10 * i, layers: vec![h], heads: vec![h] })
            .collect()
    }

    #[test]
    fn race_verdicts_compare_at_equal_steps_and_seconds() {
        let curve = |f: fn(usize) -> f32| (0..40).map(|s| (s + 1, f(s))).collect::<Vec<_>>();
        let times = |dt: f64, f: fn(usize) -> f32| (0..40).map(|s| ((s + 1) as f64 * dt, f(s))).collect::<Vec<_>>();
        let fast: fn(usize) -> f32 = |s| 3.0 - 0.05 * s as f32;
        let slow: fn(usize) -> f32 = |s| 3.0 - 0.02 * s as f32;
        let v =
            race(&[("cgfac".into(), curve(fast), times(0.1, fast)), ("adam".into(), curve(slow), times(0.01, slow))])
                .unwrap();
        assert_eq!(v.agreement, Agreement::Agrees);
        // Last tenth of 40 steps: steps 37..40 (indices 36..39): 3 - 0.05 * 37.5 = 1.125.
        assert!(
            v.sentence.contains("cgfac is at loss 1.125") && v.sentence.contains("adam at 2.250"),
            "{}",
            v.sentence
        );
        assert!(
            v.sentence.contains("After 0.4 s of compute") && v.sentence.contains("behind in time"),
            "{}",
            v.sentence
        );
        let v = race(&[("cgfac".into(), curve(slow), vec![]), ("adam".into(), curve(fast), vec![])]).unwrap();
        assert_eq!(v.agreement, Agreement::Disagrees);
        assert!(race(&[("cgfac".into(), curve(fast), vec![])]).is_none());
    }

    #[test]
    fn joma_verdicts_follow_the_curve_and_the_mlp() {
        let dip = curve(&[2.5, 2.0, 1.6, 1.9, 2.2]);
        let v = &joma(&dip, true)[0];
        assert_eq!(v.agreement, Agreement::Agrees);
        assert!(v.sentence.contains("lowest 1.60 at step 20"), "{}", v.sentence);
        assert_eq!(joma(&dip, false)[0].agreement, Agreement::Disagrees);
        assert_eq!(joma(&curve(&[2.5, 2.0, 1.6, 1.6]), true)[0].agreement, Agreement::Partly);
        assert_eq!(joma(&curve(&[2.5, 2.5, 2.51]), true)[0].agreement, Agreement::Disagrees);
        assert_eq!(joma(&curve(&[2.5, 2.0]), true)[0].agreement, Agreement::NotYet);
    }
}
