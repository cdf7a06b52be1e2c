//! `lab sample`: what a saved model writes.

use std::path::PathBuf;

use clap::Args;
use engine::checkpoint::Snapshot;
use engine::sample::{self, SampleSpec, Vocab};
use engine::{Error, Trainer};

#[derive(Args)]
pub struct SampleArgs {
    /// A checkpoint folder (`lab train --save`).
    #[arg(long)]
    checkpoint: PathBuf,
    /// Text to continue; empty starts from the first token of the training data.
    #[arg(long, default_value = "")]
    prompt: String,
    /// New tokens per sample (1 to 10,000).
    #[arg(long, default_value_t = 200)]
    tokens: usize,
    /// 0 picks the most likely token; 1 draws from the model's own distribution.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    temperature: f64,
    /// Draw among the k most likely tokens only (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Draw among the fewest most likely tokens whose probabilities reach p, in (0, 1].
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    top_p: f64,
    /// Sample i draws from seed + i.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Independent samples of the same prompt.
    #[arg(long, default_value_t = 1)]
    samples: usize,
    /// One JSON object per sample: text, tokens, and per token p and the top candidates.
    #[arg(long)]
    json: bool,
}

pub fn run(a: SampleArgs) -> Result<(), Error> {
    let spec = SampleSpec {
        prompt: a.prompt,
        tokens: a.tokens,
        temperature: a.temperature,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
        samples: a.samples,
    };
    // The settings first: a bad flag is refused before the checkpoint is read.
    spec.validate()?;
    let trainer = Trainer::restore(Snapshot::load(&a.checkpoint)?)?;
    let vocab = Vocab::of(trainer.data());
    for s in sample::generate(trainer.model(), &vocab, &spec)? {
        if a.json {
            println!("{}", serde_json::to_string(&s)?);
        } else {
            let mean = s.steps.iter().map(|t| t.p).sum::<f64>() / s.steps.len() as f64;
            println!("--- seed {} (mean probability of the tokens drawn {mean:.2}) ---", s.seed);
            println!("{}\u{2502}{}", s.prompt, s.text);
        }
    }
    Ok(())
}
