//! Real transformers in the lab: the GPT-2 family opened from Hugging Face's files (`config.json`,
//! `model.safetensors` and the tokenizer's files), read with the model's own tokenizer, and seen
//! through the lab's lenses.
//!
//! - `hf_config`: `config.json`, checked: what the engine runs exactly, or a refusal naming why.
//! - `weights`: `model.safetensors` into the engine's layout (Conv1D transposed, `c_attn` split,
//!   the head tied to the token embedding).
//! - `tokenizer`: the model's own tokenizer, from `tokenizer.json` (or GPT-2's `vocab.json` and
//!   `merges.txt`) through Hugging Face's `tokenizers`.
//! - `inspect`: a text through the model, measured at every layer and head.
//! - `view`: the same reading as the page's panels draw it (sphere, attention) with verdicts.
//!
//! GPT-2 is the engine's own architecture (Pre-LN, tanh GELU, LayerNorm eps 1e-5, learned
//! positions), so the loaded model runs through the same `Model::forward` the lab trains with, or
//! on the GPU through the trainer's forward ops (`gpu::reader`).

pub mod hf_config;
pub mod inspect;
pub mod tokenizer;
pub mod view;
pub mod weights;

pub use hf_config::HfConfig;
pub use inspect::{inspect, Inspection};
pub use tokenizer::{Tokenizer, TokenizerFiles};

use crate::error::{Error, Result};
use crate::memory;
use crate::model::Model;

/// A loaded model: its weights in the engine's layout and the tokenizer that reads for it.
#[derive(Debug)]
pub struct Pretrained {
    /// Where it came from (a folder, a file, a hub id), for the reports.
    pub name: String,
    pub model: Model<f32>,
    pub tokenizer: Tokenizer,
}

/// The files a model opens from, as bytes.
#[derive(Clone, Copy, Debug)]
pub struct ModelFiles<'a> {
    pub config: &'a [u8],
    pub weights: &'a [u8],
    /// None: GPT-2's vocabulary built into the native lab (the browser needs the files).
    pub tokenizer: Option<TokenizerFiles<'a>>,
}

impl Pretrained {
    /// Opens a model from its files' bytes (what the page fetches or the visitor picks). The
    /// memory budget decides before the weights are allocated.
    pub fn from_files(name: &str, files: ModelFiles, budget: u64) -> Result<Pretrained> {
        let cfg = Self::check(files.config, files.weights.len() as u64, budget)?;
        let tokenizer = match files.tokenizer {
            Some(f) => Tokenizer::from_files(f)?,
            None => builtin_tokenizer()?,
        };
        if tokenizer.vocab_size() > cfg.vocab {
            return Err(Error::Data(format!(
                "the tokenizer has {} tokens but the model's embedding has {}: they are not of one model",
                tokenizer.vocab_size(),
                cfg.vocab
            )));
        }
        let (layout, params) = weights::read(&cfg, files.weights)?;
        Ok(Pretrained { name: name.to_string(), model: Model { cfg, layout, params }, tokenizer })
    }

    /// The model `config_json` describes, if it is one the engine runs and its weights with a file
    /// of `file_bytes` fit `budget`: what opening it checks before anything is allocated.
    pub fn check(config_json: &[u8], file_bytes: u64, budget: u64) -> Result<crate::config::ModelConfig> {
        let cfg = HfConfig::parse(config_json)?.model_config()?;
        memory::check_open(&cfg, file_bytes, budget)?;
        Ok(cfg)
    }

    /// Opens `path`: a folder holding `config.json`, `model.safetensors` and the tokenizer's files
    /// (`tokenizer.json`, or `vocab.json` and `merges.txt`; a GPT-2 without them is read with the
    /// lab's copy of GPT-2's vocabulary), or a `.safetensors` file with those beside it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path, budget: u64) -> Result<Pretrained> {
        let (dir, file) = if path.is_dir() {
            (path.to_path_buf(), path.join("model.safetensors"))
        } else {
            (path.parent().map_or_else(|| ".".into(), |p| p.to_path_buf()), path.to_path_buf())
        };
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        if matches!(ext, "bin" | "pt" | "pth" | "ckpt") {
            return Err(Error::Checkpoint(format!(
                "{} is a PyTorch pickle; the lab reads only model.safetensors (the hub has it beside the .bin), \
                 which cannot run code when it is opened",
                file.display()
            )));
        }
        let read = |p: &std::path::Path, what: &str| {
            std::fs::read(p).map_err(|e| Error::Checkpoint(format!("cannot read {what} at {}: {e}", p.display())))
        };
        let config = read(&dir.join("config.json"), "the model's config.json")?;
        // The budget is checked on the file's size before its bytes are read.
        Self::check(&config, std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0), budget)?;
        let (json, vocab, merges) = (dir.join("tokenizer.json"), dir.join("vocab.json"), dir.join("merges.txt"));
        let tokenizer = if json.is_file() {
            Some((read(&json, "tokenizer.json")?, Vec::new()))
        } else if vocab.is_file() && merges.is_file() {
            Some((read(&vocab, "vocab.json")?, read(&merges, "merges.txt")?))
        } else {
            None
        };
        let tokenizer = tokenizer.as_ref().map(|(a, b)| {
            if b.is_empty() {
                TokenizerFiles::Json(a)
            } else {
                TokenizerFiles::VocabMerges { vocab: a, merges: b }
            }
        });
        let weights = read(&file, "model.safetensors")?;
        Self::from_files(
            &path.display().to_string(),
            ModelFiles { config: &config, weights: &weights, tokenizer },
            budget,
        )
    }
}

/// The tokenizer of a model whose files have none: GPT-2's, which only the native lab carries.
fn builtin_tokenizer() -> Result<Tokenizer> {
    #[cfg(not(target_arch = "wasm32"))]
    return Ok(Tokenizer::gpt2());
    #[cfg(target_arch = "wasm32")]
    Err(Error::Data(
        "the model's tokenizer is missing: open its tokenizer.json (or GPT-2's vocab.json and merges.txt) with it"
            .into(),
    ))
}
