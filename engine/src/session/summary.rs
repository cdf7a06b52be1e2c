//! A run's summary: the last line of `lab train --json` and what `spherewalk.train(config)` returns
//! in the page, field for field, so the two can be compared.

use serde::Serialize;

use crate::science::joma::{self, CurveSummary};
use crate::session::{Flow, Session};

/// The Brownian comparison's numbers at one depth (the page's panel draws the curves).
#[derive(Clone, Debug, Serialize)]
pub struct BrownianSummary {
    pub depth: usize,
    /// Tokens pooled (every probe row).
    pub points: Option<usize>,
    /// D of the least-squares line through ln E[cos θ], and by maximum likelihood on the
    /// increments with its 95% interval.
    pub diffusion: Option<f64>,
    pub diffusion_ml: Option<f64>,
    pub diffusion_ci: Option<[f64; 2]>,
    /// KS distance at the last frame and its 5% critical value.
    pub ks_critical: Option<f64>,
    pub r_squared: Option<f64>,
    pub ks: Option<f64>,
    /// Why there are no numbers (too few frames, no positive mean cosine, ...).
    pub error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub engine_version: &'static str,
    pub data: String,
    pub optimizer: &'static str,
    pub lr: f32,
    pub seed: u64,
    pub final_train_loss: Option<f32>,
    pub final_val_loss: Option<f32>,
    pub unigram_val_loss: f64,
    pub bigram_val_loss: f64,
    pub steps: usize,
    pub wall_s: f64,
    pub tokens_per_s: f64,
    pub params: usize,
    pub backend: String,
    pub vocab: usize,
    /// Probe frames kept and the interval between them, in steps.
    pub probe_frames: usize,
    pub probe_every: usize,
    /// Per depth 0..=L, the tokens' motion over training against Brownian motion.
    pub brownian: Vec<BrownianSummary>,
    /// Per layer, the shape of the probe row's mean attention entropy over training (JoMA).
    pub entropy: Vec<CurveSummary>,
    /// Brownian motion or particles at one depth, when asked for (`lab train --flow DEPTH`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<Flow>,
}

impl Summary {
    /// `wall_s` seconds spent on `steps_timed` steps (the session itself keeps no clock).
    pub fn of(s: &mut Session, wall_s: f64, steps_timed: usize) -> Summary {
        let cfg = s.experiment().train.clone();
        let layers = cfg.model.layers;
        let brownian = (0..=layers)
            .map(|depth| {
                let failed = |error: String| BrownianSummary {
                    depth,
                    points: None,
                    diffusion: None,
                    diffusion_ml: None,
                    diffusion_ci: None,
                    ks_critical: None,
                    r_squared: None,
                    ks: None,
                    error: Some(error),
                };
                match s.fitted_panels(depth).map(|p| p.brownian) {
                    Ok(Some(Ok(b))) => BrownianSummary {
                        depth,
                        points: Some(b.points),
                        diffusion: Some(b.diffusion),
                        diffusion_ml: b.diffusion_ml.is_finite().then_some(b.diffusion_ml),
                        diffusion_ci: b.diffusion_ci.iter().all(|x| x.is_finite()).then_some(b.diffusion_ci),
                        ks_critical: Some(b.ks_critical),
                        r_squared: b.r_squared.is_finite().then_some(b.r_squared),
                        ks: b.ks.is_finite().then_some(b.ks),
                        error: None,
                    },
                    Ok(Some(Err(e))) => failed(e),
                    Ok(None) => failed("fewer than three probe frames".into()),
                    Err(e) => failed(e.to_string()),
                }
            })
            .collect();
        let steps: Vec<usize> = s.entropy().iter().map(|e| e.step).collect();
        let entropy = (0..layers)
            .filter_map(|l| {
                let curve: Vec<f64> = s.entropy().iter().map(|e| e.layers[l]).collect();
                joma::summarize(&curve, Some(&steps)).ok()
            })
            .collect();
        let m = s.metrics();
        let base = s.baselines();
        Summary {
            engine_version: crate::VERSION,
            data: cfg.data.name().to_string(),
            optimizer: cfg.optimizer.name(),
            lr: cfg.lr,
            seed: cfg.seed,
            final_train_loss: m.train.last().map(|p| p.1),
            final_val_loss: m.val.last().map(|p| p.1),
            unigram_val_loss: base.unigram,
            bigram_val_loss: base.bigram,
            steps: s.step_count(),
            wall_s,
            tokens_per_s: (steps_timed * cfg.batch * cfg.model.context) as f64 / wall_s.max(1e-9),
            params: crate::memory::param_count(&cfg.model).unwrap_or(0) as usize,
            backend: s.adapter().map_or("cpu".to_string(), |a| format!("gpu ({a})")),
            vocab: cfg.model.vocab,
            probe_frames: s.probe().frames().len(),
            probe_every: s.probe().every(),
            brownian,
            entropy,
            flow: None,
        }
    }
}
