//! The model families the lab opens, one file each (as candle keeps one file per model): each maps
//! its `config.json` onto the engine's `ModelConfig` (an `Arch` and the sizes), refusing by name
//! whatever the engine cannot run exactly, and its tensor names onto the engine's layout.
//!
//! - `gpt2`: GPT-2 (`model_type` "gpt2": gpt2, distilgpt2, gpt2-medium/large/xl).
//! - `gpt_neox`: GPT-NeoX as Pythia configures it (rotary positions on part of each head,
//!   attention and MLP in parallel, exact GELU).
//! - `llama`: Llama (SmolLM2, TinyLlama) and Qwen2, which is Llama with biases on q, k and v
//!   (RMSNorm, rotary positions, a gated SiLU MLP, grouped-query attention).
//! - `bert`: BERT (`BertForMaskedLM`): Post-LN, attention both ways, the masked-LM head.

pub mod bert;
pub mod gpt2;
pub mod gpt_neox;
pub mod llama;

use serde::Deserialize;

use crate::config::{ModelConfig, RopeScaling};
use crate::error::{Error, Result};
use crate::model::params::Layout;

/// A family the lab opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Gpt2,
    GptNeox,
    Llama,
    Bert,
}

/// The `model_type`s each family reads.
const KNOWN: &str =
    "gpt2 (GPT-2), gpt_neox (Pythia), llama (SmolLM2, TinyLlama), qwen2 (Qwen2, Qwen2.5) or bert (BERT)";

impl Family {
    /// The family's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Gpt2 => "GPT-2",
            Family::GptNeox => "GPT-NeoX",
            Family::Llama => "Llama",
            Family::Bert => "BERT",
        }
    }

    /// The family `config.json` names, and the engine's description of its model (checked).
    pub fn of_config(json: &[u8]) -> Result<(Family, ModelConfig)> {
        #[derive(Deserialize)]
        struct Kind {
            model_type: Option<String>,
            quantization_config: Option<serde_json::Value>,
        }
        let text = super::files::json_text(json, "config.json")?;
        let kind: Kind =
            serde_json::from_slice(text).map_err(|e| Error::Config(format!("config.json cannot be read: {e}")))?;
        let refuse = |why: String| Err(Error::Config(format!("config.json: {why}")));
        if let Some(q) = kind.quantization_config.filter(|q| !q.is_null()) {
            let method = q.get("quant_method").and_then(|m| m.as_str()).unwrap_or("a quantization");
            return refuse(format!(
                "quantization_config says the weights are quantized ({method}); the engine reads them as \
                 floats (F32, F16, BF16) only"
            ));
        }
        let (family, cfg) = match kind.model_type.as_deref() {
            Some("gpt2") => (Family::Gpt2, gpt2::HfConfig::parse(text)?.model_config()?),
            Some("gpt_neox") => (Family::GptNeox, gpt_neox::config(text)?),
            Some(t @ ("llama" | "qwen2")) => (Family::Llama, llama::config(text, t == "qwen2")?),
            Some("bert") => (Family::Bert, bert::config(text)?),
            Some(other) => return refuse(format!("model_type is \"{other}\"; the lab opens {KNOWN}")),
            None => return refuse(format!("no model_type; the lab opens {KNOWN}")),
        };
        cfg.check()?;
        Ok((family, cfg))
    }

    /// The weights of `cfg` from the bytes of `model.safetensors`, in the engine's layout.
    pub fn weights(self, cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
        match self {
            Family::Gpt2 => gpt2::weights(cfg, bytes),
            Family::GptNeox => gpt_neox::weights(cfg, bytes),
            Family::Llama => llama::weights(cfg, bytes),
            Family::Bert => bert::weights(cfg, bytes),
        }
    }
}

/// Largest sizes a config may claim: above them it is a typo (the families' largest open models
/// are far below).
pub const MAX_WIDTH: usize = 1 << 14;
pub const MAX_LAYERS: usize = 256;
pub const MAX_POSITIONS: usize = 1 << 17;

/// Refuses a size outside 1..=max, naming the field.
pub fn check_sizes(sizes: &[(&str, usize, usize)]) -> Result<()> {
    for &(name, v, max) in sizes {
        if v == 0 || v > max {
            return Err(Error::Config(format!("config.json: {name} = {v} is outside 1..={max}")));
        }
    }
    Ok(())
}

/// The rotary base and scaling from transformers 5's `rope_parameters` or the older top-level
/// fields (`older` names the base's): the scalings today's small models use (`linear`, Llama 3's
/// `llama3`) read as transformers reads them, any other refused by name.
pub fn rope(v: &serde_json::Value, older: &str, default: f64) -> Result<(f64, RopeScaling)> {
    fn refuse<T>(why: String) -> Result<T> {
        Err(Error::Config(format!("config.json: {why}")))
    }
    let params = v.get("rope_parameters").filter(|p| !p.is_null());
    let mut scaling = RopeScaling::None;
    for (name, given) in [("rope_scaling", v.get("rope_scaling")), ("rope_parameters", params)] {
        let Some(given) = given.filter(|s| !s.is_null()) else { continue };
        if !given.is_object() {
            return refuse(format!("{name} is {given}, not an object with a rope_type"));
        }
        let kind = given.get("rope_type").or_else(|| given.get("type")).and_then(|t| t.as_str()).unwrap_or("default");
        let number = |field: &str| match given.get(field).and_then(serde_json::Value::as_f64) {
            Some(x) => Ok(x),
            None => refuse(format!("{name} of type \"{kind}\" needs a number {field}")),
        };
        scaling = match kind {
            "default" => scaling,
            "linear" => RopeScaling::Linear { factor: number("factor")? },
            "llama3" => RopeScaling::Llama3 {
                factor: number("factor")?,
                low_freq_factor: number("low_freq_factor")?,
                high_freq_factor: number("high_freq_factor")?,
                original_max_position_embeddings: number("original_max_position_embeddings")?,
            },
            other => {
                return refuse(format!(
                    "{name} of type \"{other}\" stretches the rotary angles in a way the engine does not compute \
                     (it computes linear and llama3)"
                ))
            }
        };
    }
    let base = match params.and_then(|p| p.get("rope_theta")).or_else(|| v.get(older)).filter(|b| !b.is_null()) {
        None => default,
        Some(b) => match b.as_f64() {
            Some(x) if x.is_finite() && x > 1.0 => x,
            _ => return refuse(format!("the rotary base {b} is not a number above 1")),
        },
    };
    Ok((base, scaling))
}

/// A `config.json` read field by field, with transformers' defaults for missing fields and the
/// field named when one has the wrong type.
pub struct Fields(pub serde_json::Value);

impl Fields {
    pub fn parse(text: &[u8]) -> Result<Fields> {
        serde_json::from_slice(text).map(Fields).map_err(|e| Error::Config(format!("config.json cannot be read: {e}")))
    }

    fn get<T: serde::de::DeserializeOwned>(&self, name: &str, default: T) -> Result<T> {
        match self.0.get(name).filter(|v| !v.is_null()) {
            None => Ok(default),
            Some(v) => serde_json::from_value(v.clone())
                .map_err(|e| Error::Config(format!("config.json: {name} is {v}, which cannot be read: {e}"))),
        }
    }
    pub fn usize(&self, name: &str, default: usize) -> Result<usize> {
        self.get(name, default)
    }
    pub fn f64(&self, name: &str, default: f64) -> Result<f64> {
        self.get(name, default)
    }
    pub fn bool(&self, name: &str, default: bool) -> Result<bool> {
        self.get(name, default)
    }
    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        self.get(name, default.to_string())
    }
    /// Present and not null.
    pub fn has(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|v| !v.is_null())
    }
}
