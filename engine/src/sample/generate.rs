//! Autoregressive writing: the prompt through the key/value cache, then one token at a time, each
//! drawn as `choice` says from a seeded stream, with its probability and the best candidates.
//!
//! The window is the last T tokens (nanoGPT's crop): the prompt is run at once (`prefill`), then
//! while the window grows each token costs one token's work; once it is full, every new token
//! shifts every position (the positions are learned, absolute), and the window is run again, as
//! the uncached path does for every token.

use serde::{Deserialize, Serialize};

use super::choice::Choice;
use super::codec::Codec;
use crate::error::{Error, Result};
use crate::model::{KvCache, Model};
use crate::rng::{rng, Stream};

/// Most tokens one sample may ask for.
pub const MAX_TOKENS: usize = 10_000;
/// Most samples one request may ask for.
pub const MAX_SAMPLES: usize = 100;
/// Candidates reported with every token.
pub const TOP: usize = 5;

/// What to write: `lab sample`'s flags, `spherewalk.sample`'s argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SampleSpec {
    /// Text to continue; empty starts from the first token of the training data.
    pub prompt: String,
    /// New tokens per sample.
    pub tokens: usize,
    pub temperature: f64,
    pub top_k: usize,
    pub top_p: f64,
    /// Sample i draws from seed `seed + i`.
    pub seed: u64,
    pub samples: usize,
}

impl Default for SampleSpec {
    fn default() -> Self {
        SampleSpec { prompt: String::new(), tokens: 100, temperature: 1.0, top_k: 0, top_p: 1.0, seed: 0, samples: 1 }
    }
}

impl SampleSpec {
    pub fn choice(&self) -> Choice {
        Choice { temperature: self.temperature, top_k: self.top_k, top_p: self.top_p }
    }

    pub fn validate(&self) -> Result<()> {
        if !(1..=MAX_TOKENS).contains(&self.tokens) {
            return Err(Error::Config(format!("tokens must be from 1 to {MAX_TOKENS}, got {}", self.tokens)));
        }
        if !(1..=MAX_SAMPLES).contains(&self.samples) {
            return Err(Error::Config(format!("samples must be from 1 to {MAX_SAMPLES}, got {}", self.samples)));
        }
        self.choice().validate()
    }
}

/// One token written: its text, the probability it was drawn with (after temperature, top-k and
/// top-p; at temperature 0 the model's own), and the best candidates of the same distribution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub token: u32,
    pub text: String,
    pub p: f64,
    pub top: Vec<(String, f64)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The prompt as the model read it (its last T tokens).
    pub prompt: String,
    pub seed: u64,
    /// The continuation.
    pub text: String,
    pub tokens: Vec<u32>,
    pub steps: Vec<Step>,
}

/// The candidates' texts and probabilities, best first.
pub fn top(vocab: &dyn Codec, dist: &[(u32, f64)], n: usize) -> Vec<(String, f64)> {
    dist.iter().take(n).map(|&(t, p)| (vocab.text(t), p)).collect()
}

/// `spec.samples` samples of the prompt; sample i draws from seed `spec.seed + i`.
pub fn generate(model: &Model<f32>, vocab: &dyn Codec, spec: &SampleSpec) -> Result<Vec<Sample>> {
    spec.validate()?;
    let mut prompt = vocab.encode(&spec.prompt)?;
    if prompt.is_empty() {
        prompt.push(vocab.start());
    }
    let t = model.cfg.context;
    let prompt = prompt.split_off(prompt.len().saturating_sub(t));
    let mut kv = KvCache::new(&model.cfg, prompt.len() + spec.tokens);
    (0..spec.samples as u64)
        .map(|i| {
            let seed = spec.seed.wrapping_add(i);
            write(model, vocab, &mut kv, &prompt, spec, seed)
        })
        .collect()
}

fn write(
    model: &Model<f32>,
    vocab: &dyn Codec,
    kv: &mut KvCache<f32>,
    prompt: &[u32],
    spec: &SampleSpec,
    seed: u64,
) -> Result<Sample> {
    let choice = spec.choice();
    let mut r = rng(seed, Stream::Sample, 0);
    let mut window = prompt.to_vec();
    let mut logits = run(model, kv, &window)?;
    let (mut tokens, mut steps) = (Vec::with_capacity(spec.tokens), Vec::with_capacity(spec.tokens));
    for n in 0..spec.tokens {
        let dist = candidates(&choice, &logits);
        let (token, p) = dist[choice.pick(&dist, &mut r)];
        tokens.push(token);
        steps.push(Step { token, text: vocab.text(token), p, top: top(vocab, &dist, TOP) });
        if n + 1 == spec.tokens {
            break;
        }
        window.push(token);
        logits = if kv.is_full() {
            window.remove(0);
            run(model, kv, &window)?
        } else {
            model.forward_next(kv, token)?.to_vec()
        };
    }
    Ok(Sample { prompt: vocab.decode(prompt), seed, text: vocab.decode(&tokens), tokens, steps })
}

/// The candidates a token is drawn from and shown with: greedy draws the best, so it needs the
/// shown ones only.
fn candidates(choice: &Choice, logits: &[f32]) -> Vec<(u32, f64)> {
    choice.best(logits, if choice.temperature == 0.0 { TOP } else { usize::MAX })
}

/// A fresh cache holding `window`; the logits after its last token.
fn run(model: &Model<f32>, kv: &mut KvCache<f32>, window: &[u32]) -> Result<Vec<f32>> {
    Ok(model.prefill(kv, window)?.to_vec())
}

/// The same writing without the cache: the full forward pass over the window for every token (the
/// reference the benchmark sets beside the cached path). Greedy only needs the argmax, so this
/// returns the tokens.
pub fn generate_uncached(
    model: &Model<f32>,
    prompt: &[u32],
    tokens: usize,
    choice: Choice,
    seed: u64,
) -> Result<Vec<u32>> {
    let t = model.cfg.context;
    let mut window = prompt[prompt.len().saturating_sub(t)..].to_vec();
    let mut r = rng(seed, Stream::Sample, 0);
    let mut out = Vec::with_capacity(tokens);
    for _ in 0..tokens {
        let logits = model.logits_full(&window)?.pop().expect("one row a token");
        let dist = candidates(&choice, &logits);
        let token = dist[choice.pick(&dist, &mut r)].0;
        out.push(token);
        window.push(token);
        if window.len() > t {
            window.remove(0);
        }
    }
    Ok(out)
}
