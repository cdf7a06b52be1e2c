//! Probes: the model's view of one fixed batch, recorded at chosen training steps.
//!
//! A probe runs its own forward pass on a fixed probe batch (validation batch 0, or the hierarchy
//! probe batch with its true chunk ids) and keeps, per recorded step, the sphere points `u` of every
//! token at every layer (L + 1 frames, as `cache::sphere_points`) and every head's attention matrix,
//! as f32. The history lives in a byte budget: when it is full the probe keeps every other frame and
//! doubles its interval (decimation), so memory stays flat however long the run, and the kept frames
//! stay evenly spaced from step 0, which the per-phase fits rely on. A budget too small for
//! `MIN_FRAMES` frames is an error at construction.

use crate::config::ModelConfig;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::model::{Cache, Model};
use crate::science::markov;

/// The fewest frames a budget must hold: after a decimation half remain, and three training phases
/// need at least four frames (each phase shares its first frame with the previous one's last).
pub const MIN_FRAMES: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeConfig {
    /// Record at steps that are multiples of this (doubled at every decimation).
    pub every: usize,
    /// Most bytes the recorded history may take.
    pub budget_bytes: usize,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig { every: 10, budget_bytes: 64 << 20 }
    }
}

/// One recorded step.
#[derive(Clone, Debug)]
pub struct Frame {
    pub step: usize,
    /// (L + 1) blocks of (N, C).
    sphere: Vec<f32>,
    /// L blocks of (B, NH, T, T).
    attention: Vec<f32>,
}

pub struct Probe {
    cfg: ModelConfig,
    tokens: Vec<u32>,
    targets: Vec<u32>,
    chunks: Option<Vec<u32>>,
    cache: Cache<f32>,
    every: usize,
    capacity: usize,
    frames: Vec<Frame>,
}

impl Probe {
    /// A probe on `tokens`/`targets` (whole rows of `cfg.context`); `chunks` gives the true latent
    /// chunk of every position where the data knows it.
    pub fn new(
        cfg: &ModelConfig,
        tokens: Vec<u32>,
        targets: Vec<u32>,
        chunks: Option<Vec<u32>>,
        config: ProbeConfig,
    ) -> Result<Self> {
        let t = cfg.context;
        if config.every == 0 {
            return Err(Error::Config("probe interval must be positive, got 0".into()));
        }
        if t == 0 || tokens.is_empty() || !tokens.len().is_multiple_of(t) || targets.len() != tokens.len() {
            return Err(Error::Data(format!(
                "a probe batch needs whole rows of {t} tokens and as many targets, got {} and {}",
                tokens.len(),
                targets.len()
            )));
        }
        if chunks.as_ref().is_some_and(|c| c.len() != tokens.len()) {
            return Err(Error::Data("a probe batch needs one chunk id per token".into()));
        }
        let rows = tokens.len() / t;
        let per_frame = Self::frame_bytes(cfg, rows);
        let capacity = config.budget_bytes / per_frame;
        if capacity < MIN_FRAMES {
            return Err(Error::Config(format!(
                "a probe budget of {} bytes holds {capacity} frames of {per_frame} bytes; at least {MIN_FRAMES} \
                 are needed (raise the budget or probe fewer rows)",
                config.budget_bytes
            )));
        }
        Ok(Probe {
            cfg: cfg.clone(),
            cache: Cache::new(cfg, rows),
            tokens,
            targets,
            chunks,
            every: config.every,
            capacity,
            frames: Vec::with_capacity(capacity),
        })
    }

    /// A probe on the first `rows` rows of validation batch 0 of `data`, with chunk ids where the
    /// data knows them (hierarchy).
    pub fn on_validation(cfg: &ModelConfig, data: &Dataset, rows: usize, config: ProbeConfig) -> Result<Self> {
        if rows == 0 {
            return Err(Error::Config("a probe needs at least one row, got 0".into()));
        }
        let n = rows * cfg.context;
        let (mut tokens, mut targets) = (vec![0; n], vec![0; n]);
        let chunks = data.val_batch_with_chunks(0, &mut tokens, &mut targets);
        Self::new(cfg, tokens, targets, chunks, config)
    }

    /// Bytes one frame of `rows` probe rows takes (data and bookkeeping).
    /// Saturating: a link can claim sizes whose product overflows wasm32's `usize`, and the memory
    /// check that refuses them comes after this.
    pub fn frame_bytes(cfg: &ModelConfig, rows: usize) -> usize {
        let prod = |xs: &[usize]| xs.iter().fold(1usize, |acc, &x| acc.saturating_mul(x));
        let (n, t) = (rows.saturating_mul(cfg.context), cfg.context);
        let floats = prod(&[cfg.layers.saturating_add(1), n, cfg.d_model])
            .saturating_add(prod(&[cfg.layers, rows, cfg.heads, t, t]));
        floats.saturating_mul(std::mem::size_of::<f32>()).saturating_add(std::mem::size_of::<Frame>())
    }

    /// Runs the probe batch through `model` (its cache is then `cache()`); records nothing.
    pub fn observe(&mut self, model: &Model<f32>) -> Result<&Cache<f32>> {
        if model.cfg != self.cfg {
            return Err(Error::Config("the probe was built for a different model configuration".into()));
        }
        model.forward(&mut self.cache, &self.tokens, &self.targets)?;
        Ok(&self.cache)
    }

    /// Records `step` if it is due (a multiple of the current interval), decimating first when the
    /// history is full. Returns whether a frame was recorded.
    pub fn record(&mut self, step: usize, model: &Model<f32>) -> Result<bool> {
        if !step.is_multiple_of(self.every) {
            return Ok(false);
        }
        if self.frames.len() == self.capacity {
            self.decimate();
            if !step.is_multiple_of(self.every) {
                return Ok(false);
            }
        }
        self.observe(model)?;
        let c = &self.cache;
        let mut sphere = Vec::with_capacity((self.cfg.layers + 1) * c.lnf_u.len());
        c.blocks.iter().for_each(|b| sphere.extend_from_slice(&b.ln1_u));
        sphere.extend_from_slice(&c.lnf_u);
        let attention = c.blocks.iter().flat_map(|b| b.att.iter().copied()).collect();
        self.frames.push(Frame { step, sphere, attention });
        Ok(true)
    }

    /// Whether `record(step, ..)` would record (so a GPU run reads its weights back only then).
    pub fn due(&self, step: usize) -> bool {
        step.is_multiple_of(self.every)
    }

    /// Drops the frames after `step` (a run that went back to an earlier state).
    pub fn forget_after(&mut self, step: usize) {
        self.frames.retain(|f| f.step <= step);
    }

    /// Keeps frames 0, 2, 4, ... and doubles the interval, so the kept frames stay evenly spaced.
    fn decimate(&mut self) {
        let mut i = 0;
        self.frames.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        self.every *= 2;
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }
    /// The cache of the last forward pass (`observe` or a recording).
    pub fn cache(&self) -> &Cache<f32> {
        &self.cache
    }
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }
    /// The current interval between recorded steps.
    pub fn every(&self) -> usize {
        self.every
    }
    /// Most frames the budget holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn rows(&self) -> usize {
        self.tokens.len() / self.cfg.context
    }
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }
    pub fn chunks(&self) -> Option<&[u32]> {
        self.chunks.as_deref()
    }
    /// Bytes the history takes now.
    pub fn bytes(&self) -> usize {
        self.frames.len() * Self::frame_bytes(&self.cfg, self.rows())
    }

    /// Sphere points of `layer` (0..=L) in frames `range`, as f64, with their steps as times: a
    /// trajectory over training for `fit::fit_diffusion`.
    pub fn trajectory(&self, layer: usize, range: std::ops::Range<usize>) -> Result<(Vec<Vec<f64>>, Vec<f64>)> {
        if layer > self.cfg.layers || range.end > self.frames.len() {
            return Err(Error::Config(format!(
                "layer {layer} / frames {range:?} outside 0..={} / {} frames",
                self.cfg.layers,
                self.frames.len()
            )));
        }
        let frames = self.frames[range].iter();
        Ok(frames.map(|f| (f.sphere(&self.cfg, layer).iter().map(|&x| x as f64).collect(), f.step as f64)).unzip())
    }

    /// Mean over rows, heads and queries of the attention mass that stays inside the query's true
    /// chunk, per layer, for the last forward pass; None without chunk ids.
    pub fn within_chunk_mass(&self) -> Option<Vec<f64>> {
        let chunks = self.chunks.as_deref()?;
        let (t, tt, nh) = (self.cfg.context, self.cfg.context * self.cfg.context, self.cfg.heads);
        let per_layer = self
            .cache
            .blocks
            .iter()
            .map(|b| {
                let sum: f64 = b
                    .att
                    .chunks_exact(tt)
                    .enumerate()
                    .map(|(i, p)| {
                        let row = i / nh;
                        let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
                        within_chunk(&p, t, &chunks[row * t..(row + 1) * t]).iter().sum::<f64>()
                    })
                    .sum();
                sum / (self.rows() * nh * t) as f64
            })
            .collect();
        Some(per_layer)
    }

    /// The same measure for uniform attention under the model's mask: the level of chance.
    pub fn within_chunk_chance(&self) -> Option<f64> {
        let chunks = self.chunks.as_deref()?;
        let t = self.cfg.context;
        let uniform = markov::softmax_attention(&vec![0.0; t], &vec![0.0; t], t, 1, self.cfg.causal);
        let sum: f64 = chunks.chunks_exact(t).map(|c| within_chunk(&uniform, t, c).iter().sum::<f64>()).sum();
        Some(sum / chunks.len() as f64)
    }
}

impl Frame {
    /// Sphere points (N, C) entering `layer` (0..=L, L the final LayerNorm).
    pub fn sphere(&self, cfg: &ModelConfig, layer: usize) -> &[f32] {
        let len = self.sphere.len() / (cfg.layers + 1);
        &self.sphere[layer * len..(layer + 1) * len]
    }
    /// Attention (B, NH, T, T) of `layer` (0..L).
    pub fn attention(&self, cfg: &ModelConfig, layer: usize) -> &[f32] {
        let len = self.attention.len() / cfg.layers;
        &self.attention[layer * len..(layer + 1) * len]
    }
}

/// Per query row, the attention mass on positions of the same chunk (`chunks` has one id per
/// position; equal ids are the same chunk occurrence).
pub fn within_chunk(p: &[f64], t: usize, chunks: &[u32]) -> Vec<f64> {
    p.chunks_exact(t)
        .enumerate()
        .map(|(i, row)| row.iter().zip(chunks).filter(|(_, &c)| c == chunks[i]).map(|(x, _)| x).sum())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::science::cache;

    fn setup() -> (Model<f32>, Vec<u32>, Vec<u32>) {
        let cfg =
            ModelConfig { vocab: 11, d_model: 16, heads: 2, layers: 2, d_ff: 32, context: 8, ..ModelConfig::default() };
        let model = Model::<f32>::new(cfg).unwrap();
        let tokens: Vec<u32> = (0..24).map(|i| (i * 7 % 11) as u32).collect();
        let targets: Vec<u32> = (0..24).map(|i| (i * 5 % 11) as u32).collect();
        (model, tokens, targets)
    }

    #[test]
    fn records_equal_a_direct_forward_pass() {
        let (mut model, tokens, targets) = setup();
        let cfg = model.cfg.clone();
        let mut probe =
            Probe::new(&cfg, tokens.clone(), targets.clone(), None, ProbeConfig { every: 5, ..ProbeConfig::default() })
                .unwrap();
        assert!(probe.record(0, &model).unwrap());
        assert!(!probe.record(3, &model).unwrap());
        // A different model at step 5: the frame must follow the weights.
        model.params.iter_mut().enumerate().for_each(|(i, p)| *p += 0.01 * ((i % 13) as f32 - 6.0));
        assert!(probe.record(5, &model).unwrap());
        let mut direct = Cache::new(&cfg, 3);
        model.forward(&mut direct, &tokens, &targets).unwrap();
        let f = &probe.frames()[1];
        assert_eq!(f.step, 5);
        for l in 0..=cfg.layers {
            let want = cache::sphere_points(&cfg, &direct, l).unwrap();
            assert!(f.sphere(&cfg, l).iter().zip(&want).all(|(&a, &b)| a as f64 == b), "layer {l}");
        }
        for l in 0..cfg.layers {
            assert_eq!(f.attention(&cfg, l), &direct.blocks[l].att[..]);
        }
        assert_ne!(probe.frames()[0].sphere(&cfg, 1), f.sphere(&cfg, 1));
        let (frames, times) = probe.trajectory(2, 0..2).unwrap();
        assert_eq!((frames.len(), times), (2, vec![0.0, 5.0]));
        assert!(probe.trajectory(3, 0..2).is_err());
    }

    #[test]
    fn memory_stays_bounded_by_decimation() {
        let (model, tokens, targets) = setup();
        let per = Probe::frame_bytes(&model.cfg, 3);
        let budget = 10 * per + per / 2;
        let mut probe =
            Probe::new(&model.cfg, tokens, targets, None, ProbeConfig { every: 1, budget_bytes: budget }).unwrap();
        assert_eq!(probe.capacity(), 10);
        let mut recorded = 0;
        for step in 0..=1000 {
            recorded += probe.record(step, &model).unwrap() as usize;
            assert!(probe.frames().len() <= 10 && probe.bytes() <= budget, "step {step}");
        }
        assert!(recorded > 20, "decimation kept recording ({recorded})");
        // Evenly spaced from step 0 at the current interval, spanning most of the run.
        let steps: Vec<usize> = probe.frames().iter().map(|f| f.step).collect();
        assert!(steps.iter().enumerate().all(|(i, &s)| s == i * probe.every()), "{steps:?}");
        assert!(*steps.last().unwrap() >= 500 && steps.len() >= MIN_FRAMES / 2, "{steps:?}");
    }

    #[test]
    fn bad_probes_are_errors() {
        let (model, tokens, targets) = setup();
        let cfg = &model.cfg;
        let small = ProbeConfig { every: 1, budget_bytes: 3 * Probe::frame_bytes(cfg, 3) };
        let msg = Probe::new(cfg, tokens.clone(), targets.clone(), None, small).err().unwrap().to_string();
        assert!(msg.contains("at least 8"), "{msg}");
        let zero = ProbeConfig { every: 0, ..ProbeConfig::default() };
        assert!(Probe::new(cfg, tokens.clone(), targets.clone(), None, zero).is_err());
        assert!(Probe::new(cfg, tokens[..5].to_vec(), targets[..5].to_vec(), None, ProbeConfig::default()).is_err());
        assert!(Probe::new(cfg, tokens, targets, Some(vec![0; 3]), ProbeConfig::default()).is_err());
    }

    #[test]
    fn within_chunk_mass_counts_same_chunk_positions() {
        // Causal uniform rows over chunks [0, 0, 1, 1]: masses 1, 1, 1/3, 2/4.
        let t = 4;
        let p = markov::softmax_attention(&[0.0; 4], &[0.0; 4], t, 1, true);
        let m = within_chunk(&p, t, &[0, 0, 1, 1]);
        let want = [1.0, 1.0, 1.0 / 3.0, 0.5];
        assert!(m.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12), "{m:?}");
        let (model, tokens, targets) = setup();
        let chunks: Vec<u32> = (0..24).map(|i| i / 4).collect();
        let mut probe = Probe::new(&model.cfg, tokens, targets, Some(chunks), ProbeConfig::default()).unwrap();
        probe.observe(&model).unwrap();
        let mass = probe.within_chunk_mass().unwrap();
        assert_eq!(mass.len(), 2);
        assert!(mass.iter().all(|&m| (0.0..=1.0 + 1e-6).contains(&m)), "{mass:?}");
        let chance = probe.within_chunk_chance().unwrap();
        assert!(chance > 0.0 && chance <= 1.0);
    }
}
