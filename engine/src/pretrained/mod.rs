//! Real transformers in the lab: GPT-2, GPT-NeoX (Pythia), Llama, Qwen2 and BERT opened from Hugging
//! Face's files (`config.json`, `model.safetensors` and the tokenizer's files), read with the
//! model's own tokenizer, and seen through the lab's lenses.
//!
//! - `files`: what a file must be before it is read (JSON text, safetensors of the length its header
//!   says, natively a regular file of a sensible size).
//! - `families`: one file a family, mapping its `config.json` onto the engine's `Arch` and sizes
//!   (what the engine runs exactly, or a refusal naming the field) and its tensor names onto the
//!   engine's layout.
//! - `weights`: what every family shares in reading `model.safetensors` (names, shapes, F32, F16
//!   and BF16, the tensors a family skips).
//! - `torch_bin`: a `pytorch_model.bin` (torch.save's zip) rewritten as safetensors by a pickle
//!   interpreter that runs nothing, for checkpoints the hub keeps only in that form.
//! - `tokenizer`: the model's own tokenizer, from `tokenizer.json` (or GPT-2's `vocab.json` and
//!   `merges.txt`) through Hugging Face's `tokenizers`.
//!
//! Every family runs through the same `Model::forward` the lab trains with, its block described by
//! `config::Arch`; GPT-2's block is the lab's own, so it also reads on the GPU through the trainer's
//! forward ops (`gpu::reader`). The lab's lenses on them are `crate::lenses`.

pub mod families;
pub mod files;
pub mod tokenizer;
pub mod torch_bin;
pub mod weights;

pub use families::Family;
pub use tokenizer::{Tokenizer, TokenizerFiles};

use crate::error::{Error, Result};
use crate::memory;
use crate::model::Model;

/// A loaded model: its weights in the engine's layout and the tokenizer that reads for it.
#[derive(Debug)]
pub struct Pretrained {
    /// Where it came from (a folder, a file, a hub id), for the reports.
    pub name: String,
    pub family: Family,
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
        let held = torch_bin::held_while_read(files.weights.len() as u64, torch_bin::is_zip(files.weights));
        let (family, cfg) = Self::check(files.config, held, budget)?;
        let tokenizer = match files.tokenizer {
            Some(f) => Tokenizer::from_files(f)?,
            None if family == Family::Gpt2 => builtin_tokenizer()?,
            None => {
                return Err(Error::Data(format!(
                    "the model's tokenizer.json is missing: a {} model reads with its own",
                    family.name()
                )))
            }
        };
        let tokenizer = if family == Family::Bert { tokenizer.wrapping() } else { tokenizer };
        if tokenizer.vocab_size() > cfg.vocab {
            return Err(Error::Data(format!(
                "the tokenizer has {} tokens but the model's embedding has {}: they are not of one model",
                tokenizer.vocab_size(),
                cfg.vocab
            )));
        }
        // A pytorch_model.bin is read as the safetensors file it holds.
        let converted = match torch_bin::is_zip(files.weights) {
            true => Some(torch_bin::to_safetensors(files.weights)?),
            false => None,
        };
        let (layout, params) = family.weights(&cfg, converted.as_deref().unwrap_or(files.weights))?;
        Ok(Pretrained { name: name.to_string(), family, model: Model::from_parts(cfg, layout, params)?, tokenizer })
    }

    /// Refuses writing that would run past the model's context: like `transformers`, the lab does
    /// not slide a real model's window (each new token would cost a whole pass over the context).
    pub fn check_writing(&self, spec: &crate::sample::SampleSpec) -> Result<()> {
        if !self.model.cfg.causal {
            return Err(Error::Config(format!(
                "{} reads the whole text at once, attending both ways: it does not write left to right. Put {} in \
                 the text instead and read it: the candidates for each mask are what it would write there",
                self.family.name(),
                self.tokenizer.mask().map_or("a mask token".into(), |m| self.tokenizer.decode(&[m]))
            )));
        }
        let prompt = self.tokenizer.encode(&spec.prompt)?.len().max(1);
        let context = self.model.cfg.context;
        if prompt + spec.tokens > context {
            return Err(Error::Config(format!(
                "the model reads at most {context} tokens: the prompt is {prompt}, so it can write at most {} more, \
                 not {}",
                context.saturating_sub(prompt),
                spec.tokens
            )));
        }
        Ok(())
    }

    /// The model `config_json` describes, if it is one the engine runs and its weights with
    /// `file_bytes` held while its file is read (`torch_bin::held_while_read`) fit `budget`: what
    /// opening it checks before anything is allocated.
    pub fn check(config_json: &[u8], file_bytes: u64, budget: u64) -> Result<(Family, crate::config::ModelConfig)> {
        let (family, cfg) = Family::of_config(config_json)?;
        memory::check_open(&cfg, file_bytes, budget)?;
        Ok((family, cfg))
    }

    /// Opens `path`: a folder holding `config.json`, `model.safetensors` (or, without it,
    /// `pytorch_model.bin`) and the tokenizer's files (`tokenizer.json`, or `vocab.json` and
    /// `merges.txt`; a GPT-2 without them is read with the lab's copy of GPT-2's vocabulary), or
    /// the weights' file with those beside it.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &std::path::Path, budget: u64) -> Result<Pretrained> {
        use files::{read_regular, CONFIG_LIMIT, TOKENIZER_LIMIT};
        let (dir, file) = if path.is_dir() {
            (path.to_path_buf(), path.join("model.safetensors"))
        } else {
            (path.parent().map_or_else(|| ".".into(), |p| p.to_path_buf()), path.to_path_buf())
        };
        let bin = dir.join("pytorch_model.bin");
        let file = if path.is_dir() && !file.exists() && bin.exists() { bin } else { file };
        let what = file.file_name().map_or("the weights".into(), |n| n.to_string_lossy().to_string());
        let config = read_regular(&dir.join("config.json"), "the model's config.json", CONFIG_LIMIT)?;
        // Before the weights are read: a regular file, within the budget (of the length its header
        // says, for safetensors).
        let size = files::regular_len(&file, &what)?;
        let zip = files::starts_with(&file, b"PK\x03\x04")?;
        Self::check(&config, torch_bin::held_while_read(size, zip), budget)?;
        if !zip {
            files::check_len(files::described_len(&file)?, size)?;
        }
        let weights = read_regular(&file, &what, budget)?;
        let (json, vocab, merges) = (dir.join("tokenizer.json"), dir.join("vocab.json"), dir.join("merges.txt"));
        let tokenizer = if json.exists() {
            Some((read_regular(&json, "tokenizer.json", TOKENIZER_LIMIT)?, Vec::new()))
        } else if vocab.exists() && merges.exists() {
            let vocab = read_regular(&vocab, "vocab.json", TOKENIZER_LIMIT)?;
            Some((vocab, read_regular(&merges, "merges.txt", TOKENIZER_LIMIT)?))
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
        let mut opened = Self::from_files(
            &path.display().to_string(),
            ModelFiles { config: &config, weights: &weights, tokenizer },
            budget,
        )?;
        // A BF16 model writes from its weights' upper halves (`Model::keep_bf16`), copied once the
        // file is let go: the copy, two bytes of each weight the file holds in two, fits where the
        // file was (`check` counted it). A tab keeps one copy only: its memory is the limit there.
        drop(weights);
        opened.model.keep_bf16();
        Ok(opened)
    }

    /// The files `open` reads for the model at `path` (that a dump must never overwrite).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn inputs(path: &std::path::Path) -> Vec<std::path::PathBuf> {
        let dir = if path.is_dir() {
            path.to_path_buf()
        } else {
            path.parent().map_or_else(|| ".".into(), |p| p.to_path_buf())
        };
        let mut files: Vec<std::path::PathBuf> =
            ["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json", "vocab.json", "merges.txt"]
                .iter()
                .map(|f| dir.join(f))
                .collect();
        files.push(path.to_path_buf());
        files
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
