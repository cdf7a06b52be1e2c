//! The papers' claims answered in words from a session's measurements, with the numbers that make
//! them meaningful (a tolerance, a critical value). The page shows them beside the panels; the
//! words are computed here, never in the view.

use serde::{Deserialize, Serialize};

use crate::data::kind::Kind;
use crate::science::grouping;
use crate::science::joma::{self, CurveShape};
use crate::science::markov::{self, Validity};
use crate::science::probe::Probe;
use crate::science::sphere;
use crate::session::measures::{Axis, Brownian, EntropyPoint, Flow};

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
    /// Final for this run: it will not change again. An unsettled verdict says "so far" and the
    /// page shows it as provisional, never as a final agrees or disagrees.
    #[serde(default)]
    pub settled: bool,
}

impl Verdict {
    pub fn new(agreement: Agreement, sentence: String) -> Self {
        Verdict { agreement, sentence, settled: false }
    }

    /// Settled when the run has ended (`step >= total`); before, the sentence opens with how far
    /// the run is, because more steps can turn the answer.
    pub fn settle(&mut self, step: usize, total: usize) {
        self.settled = step >= total;
        if !self.settled && self.agreement != Agreement::NotYet {
            self.sentence = format!("So far (step {step} of {total}): {}", self.sentence);
        }
    }
}

/// Every verdict the panels show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdicts {
    pub sphere: Option<Verdict>,
    pub markov: Option<Verdict>,
    pub kernel: Option<Verdict>,
    pub brownian: Option<Verdict>,
    /// Brownian motion or the particles' attention flow: fitted once the run has ended.
    pub flow: Option<Verdict>,
    /// Do tokens of the same kind gather (what the class sees in the sphere view)?
    pub grouping: Option<Verdict>,
    /// Per layer: does the attention entropy dip and rebound?
    pub joma: Vec<Verdict>,
}

impl Verdicts {
    /// Marks what is final at `step` of `total`. The sphere and Markov checks are identities that
    /// hold frame by frame, final once measured; every other verdict answers a question about the
    /// whole run, which later steps can turn (a JoMA rebound at step 240, a diffusion fit that
    /// settles at step 76), so it is final only when the run has ended.
    pub fn settle(&mut self, step: usize, total: usize) {
        for v in [&mut self.sphere, &mut self.markov].into_iter().flatten() {
            v.settled = true;
        }
        let open = [&mut self.kernel, &mut self.brownian, &mut self.flow, &mut self.grouping];
        for v in open.into_iter().flatten().chain(self.joma.iter_mut()) {
            v.settle(step, total);
        }
    }
}

/// R² from which the straight decay of ln E[cos θ] counts as explaining the tokens' motion.
pub const GOOD_R2: f64 = 0.9;
/// Below this R² the decay is not a diffusion's whatever the KS distance says (a KS test over a few
/// dozen tokens cannot tell laws apart well): never "partly Brownian" with R² = -5.
pub const ROUGH_R2: f64 = 0.5;

/// Three significant digits, in scientific notation when small or large.
fn sig(x: f64) -> String {
    if x != 0.0 && !(1e-2..1e3).contains(&x.abs()) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

/// "Brownian or not?" over training, in words (`brownian_over`).
pub fn brownian(b: &Brownian) -> Verdict {
    brownian_over(b, Axis::Training)
}

/// "Brownian or not?" in words: the fit's R², the KS distance against its 5% critical value, the
/// two estimates of D, and what the tokens did instead when they did not diffuse.
pub fn brownian_over(b: &Brownian, axis: Axis) -> Verdict {
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
    let rough = b.r_squared.is_finite() && b.r_squared >= ROUGH_R2;
    let (agreement, head) = match (fits, same_law) {
        (true, true) => (Agreement::Agrees, "Brownian: the tokens spread like a diffusion".to_string()),
        (true, false) => {
            (Agreement::Partly, "Partly Brownian: a diffusion's decay, not its spread of angles".to_string())
        }
        (false, true) if rough => {
            (Agreement::Partly, "Partly Brownian: a diffusion's spread of angles, a rough decay".to_string())
        }
        (false, true) if !jumped => (
            Agreement::Disagrees,
            "Not Brownian: the angles' spread is within chance, but the mean cosine does not decay like a diffusion's"
                .to_string(),
        ),
        (false, _) if jumped => (
            Agreement::Disagrees,
            format!(
                "Not Brownian: the tokens move in one jump {} and then stay put; pure diffusion would keep spreading",
                axis.early()
            ),
        ),
        (false, _) => (Agreement::Disagrees, "Not Brownian: the tokens drift or cluster".to_string()),
    };
    // The second estimate of D, from the increments: a diffusion with one D puts the line's D
    // inside its interval.
    let [lo, hi] = b.diffusion_ci;
    let ml_words = if !(b.diffusion_ml.is_finite() && lo.is_finite() && hi.is_finite()) {
        String::new()
    } else {
        let inside = (lo..=hi).contains(&b.diffusion);
        format!(
            " Is it one diffusion? D from the steps between snapshots = {} (95% interval {}-{}); D fitted to the \
             mean cosine = {} is {} it{}.",
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

/// Brownian motion or the particles' attention flow over training (`flow_over`).
pub fn flow(f: &Flow, brownian: Option<Agreement>) -> Verdict {
    flow_over(f, brownian, Axis::Training)
}

/// Brownian motion or the particles' attention flow: which model of the two comes closer, read
/// with the diffusion verdict (`brownian`), so "closer than the particles" never reads as
/// "Brownian" when the diffusion fit itself failed.
pub fn flow_over(f: &Flow, brownian: Option<Agreement>, axis: Axis) -> Verdict {
    let numbers = format!(
        "Root-mean-square error over both curves (mean cosine to the start, mean inner product of pairs) {:.3} for \
         Brownian motion (its own D = {}, fitted to both curves) against {:.3} for particles moved by attention \
         (β = {:.2}, {} flow time per {}); at the last snapshot the angles to the start differ from Brownian \
         walkers' by KS {:.2} and from the flow's by KS {:.2} (5% critical value {:.2}), over the first {} tokens.",
        f.rmse_brownian,
        sig(f.diffusion),
        f.rmse_particles,
        f.beta,
        sig(f.time_scale),
        axis.unit(),
        f.ks_brownian,
        f.ks_particles,
        f.ks_critical,
        f.points
    );
    let limit = if f.time_at_limit {
        " The flow's fit uses all the flow time it was given: the tokens move further from their start than the flow \
         takes them."
    } else {
        ""
    };
    let (agreement, head) = match (f.better == "particles", brownian) {
        (true, _) => (Agreement::Disagrees, "Particles, not Brownian motion: the attention flow comes closer"),
        (false, Some(Agreement::Agrees)) => (Agreement::Agrees, "Brownian motion, not particles"),
        (false, _) => (
            Agreement::Partly,
            "Brownian motion comes closer than the particles' flow, but neither fits well (the diffusion verdict \
             above stands)",
        ),
    };
    Verdict::new(agreement, format!("{head}. {numbers}{limit}"))
}

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
    Some(Verdict::new(
        agreement,
        format!(
            "{head}: at {place}, tokens of the same kind (colour) have a mean cosine of {:.2} with each other and {:.2} \
             with tokens of other kinds (at step {}: {:.2} and {:.2}).",
            g.same, g.different, first.step, g0.same, g0.different
        ),
    ))
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
/// step and at the same seconds of compute. `curves`: (label, (step, loss) points, (seconds, loss));
/// settled once both have trained `total` steps.
#[allow(clippy::type_complexity)]
pub fn race(curves: &[(String, Vec<(usize, f32)>, Vec<(f64, f32)>)], total: usize) -> Option<Verdict> {
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
    let mut v = Verdict::new(
        if ahead { Agreement::Agrees } else { Agreement::Disagrees },
        format!(
            "{}: after {steps} steps {} is at loss {a:.3}, {} at {b:.3} (the mean of the last tenth).{by_time}",
            if ahead { "Fewer steps with second order" } else { "Second order is not ahead in steps" },
            own.0,
            rival.0
        ),
    );
    let done = |pts: &[(usize, f32)]| pts.last().map_or(0, |p| p.0);
    v.settle(done(&own.1).min(done(&rival.1)), total);
    Some(v)
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
                (CurveShape::Falling, true) => (Agreement::Partly, "sparser and staying sparse: no rebound"),
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

/// Several layers' verdicts as one (the tour's JoMA step): the last layer's agreement, settled when
/// all are, the run's progress said once.
pub fn joined(layers: &[Verdict]) -> Option<Verdict> {
    let last = layers.last()?;
    let prefix = match layers[0].sentence.split_once("): ") {
        Some((head, _)) if head.starts_with("So far (") => format!("{head}): "),
        _ => String::new(),
    };
    let sentences: Vec<&str> = layers.iter().map(|v| v.sentence.strip_prefix(&prefix).unwrap_or(&v.sentence)).collect();
    Some(Verdict {
        agreement: last.agreement,
        sentence: format!("{prefix}{}", sentences.join(" ")),
        settled: layers.iter().all(|v| v.settled),
    })
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
            good.sentence.contains(
                "D from the steps between snapshots = 1.10e-3 (95% interval 9.00e-4-1.30e-3); D fitted to the mean \
                 cosine = 1.00e-3 is inside it"
            ),
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
        // The JoMA preset's case: R² far below 0 with a KS inside its critical value is not "partly".
        let flat = brownian(&fit(-5.02, 0.1, vec![1.0, 0.99, 0.97, 0.98, 0.9]));
        assert_eq!(flat.agreement, Agreement::Disagrees, "{}", flat.sentence);
        assert!(flat.sentence.contains("does not decay like a diffusion's"), "{}", flat.sentence);
        assert_eq!(brownian(&fit(0.6, 0.1, vec![1.0, 0.95, 0.9, 0.85])).agreement, Agreement::Partly);
    }

    #[test]
    fn only_identities_and_ended_runs_are_settled() {
        let v = |a| Some(Verdict::new(a, "x".into()));
        let mut all = Verdicts {
            sphere: v(Agreement::Agrees),
            markov: v(Agreement::Agrees),
            kernel: v(Agreement::Partly),
            brownian: v(Agreement::Disagrees),
            flow: v(Agreement::Partly),
            grouping: v(Agreement::Agrees),
            joma: vec![Verdict::new(Agreement::NotYet, "too few".into())],
        };
        let mut ended = all.clone();
        all.settle(120, 300);
        assert!(all.sphere.as_ref().unwrap().settled && all.markov.as_ref().unwrap().settled);
        for v in [&all.kernel, &all.brownian, &all.flow, &all.grouping].map(|v| v.as_ref().unwrap()) {
            assert!(!v.settled && v.sentence == "So far (step 120 of 300): x", "{v:?}");
        }
        assert!(!all.joma[0].settled && all.joma[0].sentence == "too few");
        ended.settle(300, 300);
        assert!(ended.brownian.as_ref().unwrap().settled && ended.brownian.as_ref().unwrap().sentence == "x");
    }

    #[test]
    fn the_flow_verdict_reads_with_the_diffusion_verdict() {
        let f = |better: &str| Flow { better: better.into(), points: 32, ..Flow::default() };
        assert_eq!(flow(&f("particles"), Some(Agreement::Agrees)).agreement, Agreement::Disagrees);
        assert_eq!(flow(&f("brownian"), Some(Agreement::Agrees)).agreement, Agreement::Agrees);
        // The bug report's contradiction: "Not Brownian" above "Brownian motion fits better".
        let closer = flow(&f("brownian"), Some(Agreement::Disagrees));
        assert_eq!(closer.agreement, Agreement::Partly);
        assert!(closer.sentence.contains("neither fits well"), "{}", closer.sentence);
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
        let v = race(
            &[("cgfac".into(), curve(fast), times(0.1, fast)), ("adam".into(), curve(slow), times(0.01, slow))],
            40,
        )
        .unwrap();
        assert_eq!(v.agreement, Agreement::Agrees);
        assert!(v.settled);
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
        let v = race(&[("cgfac".into(), curve(slow), vec![]), ("adam".into(), curve(fast), vec![])], 200).unwrap();
        assert_eq!(v.agreement, Agreement::Disagrees);
        assert!(!v.settled && v.sentence.starts_with("So far (step 40 of 200): Second order"), "{}", v.sentence);
        assert!(race(&[("cgfac".into(), curve(fast), vec![])], 40).is_none());
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
        let mut layers = joma(&curve(&[2.5, 2.0, 1.6, 1.9, 2.2]), true);
        layers.extend(joma(&curve(&[2.5, 2.0, 1.6, 1.6]), true));
        layers.iter_mut().for_each(|v| v.settle(40, 300));
        let one = joined(&layers).unwrap();
        assert_eq!(one.agreement, Agreement::Partly);
        assert!(!one.settled && one.sentence.matches("So far (step 40 of 300): ").count() == 1, "{}", one.sentence);
    }
}
