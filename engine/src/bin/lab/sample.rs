//! `lab sample`: what a saved model, or a real one (GPT-2 from Hugging Face's files), writes.

use std::path::PathBuf;

use clap::Args;
use engine::checkpoint::Snapshot;
use engine::pretrained::Pretrained;
use engine::sample::{self, Sample, SampleSpec, Vocab};
use engine::{Error, Trainer};

use crate::inspect::budget;

#[derive(Args)]
pub struct SampleArgs {
    /// A checkpoint folder (`lab train --save`).
    #[arg(long, required_unless_present = "model", conflicts_with = "model")]
    checkpoint: Option<PathBuf>,
    /// A model folder in Hugging Face's layout (config.json, the weights, tokenizer.json), as `lab
    /// inspect --model`: GPT-2, GPT-NeoX (Pythia), Llama (SmolLM2, TinyLlama) or Qwen2.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Refuse to open a model of more than this many MiB (default 16 GiB).
    #[arg(long, requires = "model")]
    memory_limit_mib: Option<u64>,
    /// Text to continue; empty starts from the first token of the training data (GPT-2: from
    /// <|endoftext|>).
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
    let samples: Vec<Sample> = match (&a.checkpoint, &a.model) {
        (Some(dir), _) => {
            let trainer = Trainer::restore(Snapshot::load(dir)?)?;
            sample::generate(trainer.model(), &Vocab::of(trainer.data()), &spec)?
        }
        (None, Some(path)) => {
            let m = Pretrained::open(path, budget(a.memory_limit_mib))?;
            m.check_writing(&spec)?;
            sample::generate(&m.model, &m.tokenizer, &spec)?
        }
        (None, None) => return Err(Error::Config("give --checkpoint or --model".into())),
    };
    for s in samples {
        if a.json {
            say!("{}", serde_json::to_string(&s)?);
        } else {
            let mean = s.steps.iter().map(|t| t.p).sum::<f64>() / s.steps.len() as f64;
            say!("--- seed {} (mean probability of the tokens drawn {mean:.2}) ---", s.seed);
            say!("{}\u{2502}{}", s.prompt, s.text);
        }
    }
    Ok(())
}
