//! JoMA's prediction (docs/science.md#joma-sparse-then-dense): with a nonlinear MLP, attention entropy first falls (attention
//! locks onto the most salient tokens) and then rises again (less salient tokens join in).
//!
//! The paper's toy dynamics shows it in ten numbers: `dv/dt = eta (mu - v) ⊙ softmax(v^2 / T)`, with
//! v starting at 0 and mu sorted uniform in [1, 4]. The largest mu_i win the softmax first (entropy
//! falls); once they have converged their weights stop growing while the others catch up (it rises).
//! `summarize` describes any entropy curve the same way, so measured per-layer curves compare to it.

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rng::{rng, Stream};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToyConfig {
    pub dim: usize,
    pub eta: f64,
    pub temperature: f64,
    pub steps: usize,
    pub mu_low: f64,
    pub mu_high: f64,
    pub seed: u64,
}

impl Default for ToyConfig {
    /// The paper's setting.
    fn default() -> Self {
        ToyConfig { dim: 10, eta: 0.02, temperature: 3.0, steps: 5000, mu_low: 1.0, mu_high: 4.0, seed: 0 }
    }
}

impl ToyConfig {
    pub fn validate(&self) -> Result<()> {
        let ok = self.dim >= 2
            && self.steps >= 1
            && self.eta.is_finite()
            && self.eta > 0.0
            && self.temperature.is_finite()
            && self.temperature > 0.0
            && self.mu_low.is_finite()
            && self.mu_high.is_finite()
            && self.mu_low < self.mu_high;
        if ok {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "toy dynamics needs dim >= 2, steps >= 1, positive eta and temperature and \
                 mu_low < mu_high, got {self:?}"
            )))
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ToyRun {
    pub config: ToyConfig,
    pub mu: Vec<f64>,
    /// Entropy of softmax(v^2 / T) at steps 0..=steps.
    pub entropy: Vec<f64>,
    pub v_final: Vec<f64>,
    pub summary: CurveSummary,
}

/// `softmax(v^2 / T)` and its entropy (natural log; exact, the weights never underflow here).
pub fn attention(v: &[f64], temperature: f64) -> (Vec<f64>, f64) {
    let z: Vec<f64> = v.iter().map(|x| x * x / temperature).collect();
    let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut p: Vec<f64> = z.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= sum);
    let h = -p.iter().filter(|&&x| x > 0.0).map(|x| x * x.ln()).sum::<f64>();
    (p, h)
}

/// Runs the toy dynamics with Euler steps of size 1 (eta is the step size), as in the paper.
pub fn toy(cfg: &ToyConfig) -> Result<ToyRun> {
    cfg.validate()?;
    let mut r = rng(cfg.seed, Stream::Joma, 0);
    let mut mu: Vec<f64> = (0..cfg.dim).map(|_| r.random_range(cfg.mu_low..cfg.mu_high)).collect();
    mu.sort_by(f64::total_cmp);
    let mut v = vec![0.0; cfg.dim];
    let mut entropy = Vec::with_capacity(cfg.steps + 1);
    for step in 0..=cfg.steps {
        let (p, h) = attention(&v, cfg.temperature);
        entropy.push(h);
        if step < cfg.steps {
            for ((vi, mi), pi) in v.iter_mut().zip(&mu).zip(&p) {
                *vi += cfg.eta * (mi - *vi) * pi;
            }
        }
    }
    let summary = summarize(&entropy, None)?;
    Ok(ToyRun { config: cfg.clone(), mu, entropy, v_final: v, summary })
}

/// Minimum change (nats) that counts as a fall or a rise in `CurveShape`.
pub const SHAPE_TOL: f64 = 0.05;

/// The page's JoMA preset (the browser's default model on the hierarchy data, GELU): the learning
/// rate and steps at which layer 1's entropy dips and rebounds on each of seeds 0, 1 and 2, and the
/// identity MLP's rebounds less (engine/tests/joma_preset.rs measures it; the preset's story says it).
pub const PRESET_LR: f32 = 0.03;
pub const PRESET_STEPS: usize = 600;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CurveShape {
    /// Falls by more than SHAPE_TOL, then rises again by more than SHAPE_TOL: JoMA, nonlinear MLP.
    DipAndRebound,
    /// Falls and stays near its minimum: JoMA, linear MLP.
    Falling,
    Rising,
    Flat,
}

/// The shape of an entropy curve: where it starts, its lowest point, where it ends.
#[derive(Clone, Debug, Serialize)]
pub struct CurveSummary {
    pub initial: f64,
    pub min: f64,
    /// Step of the minimum (the index, unless steps were given).
    pub min_step: usize,
    #[serde(rename = "final")]
    pub last: f64,
    /// `initial - min`.
    pub drop: f64,
    /// `final - min`.
    pub rebound: f64,
    pub shape: CurveShape,
}

/// Summarises a curve (e.g. one layer's mean attention entropy over training). `steps` labels the
/// points (e.g. training steps of each evaluation); by default they are 0, 1, 2, ...
pub fn summarize(values: &[f64], steps: Option<&[usize]>) -> Result<CurveSummary> {
    if values.is_empty() {
        return Err(Error::Data("an empty curve has no shape".into()));
    }
    if let Some(i) = values.iter().position(|x| !x.is_finite()) {
        return Err(Error::Data(format!("curve value {i} is {}; not summarised", values[i])));
    }
    if let Some(s) = steps {
        if s.len() != values.len() {
            return Err(Error::Data(format!("{} values but {} step labels", values.len(), s.len())));
        }
    }
    // First index of the minimum, so a flat bottom reports when it was reached.
    let (argmin, &min) =
        values.iter().enumerate().fold((0, &values[0]), |best, (i, x)| if *x < *best.1 { (i, x) } else { best });
    let (initial, last) = (values[0], values[values.len() - 1]);
    let (drop, rebound) = (initial - min, last - min);
    let shape = if drop > SHAPE_TOL && rebound > SHAPE_TOL {
        CurveShape::DipAndRebound
    } else if drop > SHAPE_TOL {
        CurveShape::Falling
    } else if last - initial > SHAPE_TOL {
        CurveShape::Rising
    } else {
        CurveShape::Flat
    };
    Ok(CurveSummary { initial, min, min_step: steps.map_or(argmin, |s| s[argmin]), last, drop, rebound, shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toy_entropy_dips_and_rebounds_for_three_seeds() {
        for seed in [0, 1, 2] {
            let run = toy(&ToyConfig { seed, ..ToyConfig::default() }).unwrap();
            let s = &run.summary;
            assert_eq!(run.entropy.len(), 5001);
            assert!(run.mu.windows(2).all(|w| w[0] <= w[1]));
            assert!(run.mu.iter().all(|&m| (1.0..4.0).contains(&m)));
            assert!((s.initial - 10f64.ln()).abs() < 1e-12, "seed {seed}: {s:?}");
            assert!((0.9..=1.5).contains(&s.min), "seed {seed}: {s:?}");
            assert!((500..=1200).contains(&s.min_step), "seed {seed}: {s:?}");
            assert!(s.rebound > 0.2, "seed {seed}: {s:?}");
            assert_eq!(s.shape, CurveShape::DipAndRebound);
            // v moves toward mu and never past it (each step takes a fraction eta p_i < 1 of the gap).
            assert!(run.v_final.iter().zip(&run.mu).all(|(v, m)| *v > 0.0 && v <= m));
        }
    }

    #[test]
    fn attention_entropy_matches_direct_computation() {
        let (p, h) = attention(&[0.0; 4], 3.0);
        assert!(p.iter().all(|x| (x - 0.25).abs() < 1e-15));
        assert!((h - 4f64.ln()).abs() < 1e-15);
        // Two weights e^{1/3} and 1: p = (e^{1/3}, 1) / (e^{1/3} + 1).
        let (p, h) = attention(&[1.0, 0.0], 3.0);
        let a = (1.0f64 / 3.0).exp() / ((1.0f64 / 3.0).exp() + 1.0);
        assert!((p[0] - a).abs() < 1e-15);
        let direct = -(a * a.ln() + (1.0 - a) * (1.0 - a).ln());
        assert!((h - direct).abs() < 1e-15);
    }

    #[test]
    fn summaries_classify_curve_shapes() {
        let s = summarize(&[2.5, 2.0, 1.55, 1.8, 2.21], Some(&[0, 1000, 2000, 30000, 58000])).unwrap();
        assert_eq!((s.min, s.min_step, s.last), (1.55, 2000, 2.21));
        assert!((s.drop - 0.95).abs() < 1e-12 && (s.rebound - 0.66).abs() < 1e-12);
        assert_eq!(s.shape, CurveShape::DipAndRebound);
        let falling = summarize(&[2.0, 1.5, 1.2, 1.19], None).unwrap();
        assert_eq!((falling.shape, falling.min_step), (CurveShape::Falling, 3));
        assert_eq!(summarize(&[1.0, 1.5], None).unwrap().shape, CurveShape::Rising);
        let flat = summarize(&[1.0, 0.99, 1.0, 0.99], None).unwrap();
        assert_eq!((flat.shape, flat.min_step), (CurveShape::Flat, 1));
        assert!(summarize(&[], None).is_err());
        assert!(summarize(&[1.0, f64::NAN], None).is_err());
        assert!(summarize(&[1.0, 2.0], Some(&[0])).is_err());
        assert!(toy(&ToyConfig { temperature: 0.0, ..ToyConfig::default() }).is_err());
    }
}
