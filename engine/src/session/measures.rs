//! What the panels measure, as data: attention entropy at a recorded step, the "Brownian or not?"
//! fit and the Brownian-or-particles comparison. `panels` computes them, `verdicts` reads them.

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::science::markov;
use crate::science::probe::Frame;

/// Attention entropy of the probe rows at one recorded step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntropyPoint {
    pub step: usize,
    /// Mean row entropy (nats) per layer, over heads and queries.
    pub layers: Vec<f64>,
    /// Per layer and head (`layer * heads + head`).
    pub heads: Vec<f64>,
}

impl EntropyPoint {
    pub fn of(cfg: &ModelConfig, frame: &Frame) -> EntropyPoint {
        let (t, nh) = (cfg.context, cfg.heads);
        let mut heads = vec![0.0; cfg.layers * nh];
        for (l, per_layer) in heads.chunks_exact_mut(nh).enumerate() {
            let att = frame.attention(cfg, l);
            let rows = att.len() / (nh * t * t);
            for (i, p) in att.chunks_exact(t * t).enumerate() {
                let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
                per_layer[i % nh] += markov::row_entropy(&p, t).iter().sum::<f64>() / (t * rows) as f64;
            }
        }
        let layers = heads.chunks_exact(nh).map(|h| h.iter().sum::<f64>() / nh as f64).collect();
        EntropyPoint { step: frame.step, layers, heads }
    }
}

/// "Brownian or not?" at one depth: the tokens' motion over training against Brownian motion on
/// the sphere with the fitted D (`science::fit`), from the same start points. Every probe row's
/// tokens are pooled (the sphere view shows the first row; its walkers are the ghosts).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Brownian {
    pub depth: usize,
    /// Tokens pooled: probe rows times context.
    pub points: usize,
    /// D from the least-squares line through ln E[cos θ].
    pub diffusion: f64,
    /// D by maximum likelihood on the increments between frames, and its 95% interval.
    pub diffusion_ml: f64,
    pub diffusion_ci: [f64; 2],
    /// The KS distance's 5% critical value for `points` tokens against as many walkers.
    pub ks_critical: f64,
    /// `1 - SS_res/SS_tot` of ln E[cos]: negative when a constant explains more than the line.
    pub r_squared: f64,
    /// KS distance between the tokens' and the walkers' angles from the start, at the last frame.
    pub ks: f64,
    /// Training steps since the first frame.
    pub times: Vec<f64>,
    pub mean_cos: Vec<f64>,
    pub closed_form: Vec<f64>,
    pub walkers_cos: Vec<f64>,
    pub msd: Vec<f64>,
    pub msd_closed_form: Vec<f64>,
    pub msd_walkers: Vec<f64>,
    /// The walkers now, in the sphere view's basis (unit 3-vectors, flattened).
    pub ghosts: Vec<f32>,
}

/// Brownian motion or interacting particles (`science::flow_fit`): the first probe row's tokens at
/// one depth over every recorded frame, against Brownian motion and against the attention flow
/// started from the same points, each fitted to the same two curves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    pub depth: usize,
    /// The step of the last frame it used.
    pub step: usize,
    pub points: usize,
    /// Training steps since the first frame; the tokens' mean cosine to their start and mean
    /// pairwise inner product at those times, and each model's.
    pub times: Vec<f64>,
    pub mean_cos: Vec<f64>,
    pub mean_inner: Vec<f64>,
    /// The pairs' mean inner product at the first frame, where every model starts.
    pub inner_start: f64,
    pub brownian_cos: Vec<f64>,
    pub brownian_inner: Vec<f64>,
    pub particles_cos: Vec<f64>,
    pub particles_inner: Vec<f64>,
    pub diffusion: f64,
    /// The flow's fitted inverse temperature and model time per training step.
    pub beta: f64,
    pub time_scale: f64,
    /// The fit used all the flow time searched: the tokens keep moving where the flow has settled.
    pub time_at_limit: bool,
    pub rmse_brownian: f64,
    pub rmse_particles: f64,
    /// KS distances of the angles to the start at the last frame, and the 5% critical value. The
    /// Brownian one uses this fit's D (JSON only: the words state the diffusion fit's, one KS per
    /// comparison).
    pub ks_brownian: f64,
    pub ks_particles: f64,
    pub ks_critical: f64,
    /// "particles" or "brownian": the smaller RMSE.
    pub better: String,
    /// Where the fitted flow takes the tokens by the last frame, in the sphere view's basis (unit
    /// 3-vectors, flattened), beside the Brownian ghosts.
    pub particles: Vec<f32>,
}

/// What the tokens move through: training steps (the lab's runs) or layers (a model read once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Training,
    Depth,
}

impl Axis {
    pub(crate) fn early(self) -> &'static str {
        match self {
            Axis::Training => "early in training",
            Axis::Depth => "in the first layers",
        }
    }
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Axis::Training => "step",
            Axis::Depth => "layer",
        }
    }
}
