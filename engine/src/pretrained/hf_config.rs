//! A Hugging Face `config.json` of the GPT-2 family (`GPT2Config`), read and checked: what the lab
//! can run exactly is accepted, anything else is refused with the field that differs.

use serde::Deserialize;

use crate::config::{Activation, ModelConfig};
use crate::error::{Error, Result};
use crate::nn::layer_norm::EPS;

use super::tokenizer::GPT2_VOCAB;

/// The fields of `GPT2Config` that change the forward pass; the rest (dropouts, generation
/// defaults, ...) do not matter for reading a text. Missing fields take `GPT2Config`'s defaults.
#[derive(Clone, Debug, Deserialize)]
pub struct HfConfig {
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub architectures: Option<Vec<String>>,
    #[serde(default = "defaults::vocab")]
    pub vocab_size: usize,
    #[serde(default = "defaults::positions")]
    pub n_positions: usize,
    #[serde(default = "defaults::embd")]
    pub n_embd: usize,
    #[serde(default = "defaults::layer")]
    pub n_layer: usize,
    #[serde(default = "defaults::head")]
    pub n_head: usize,
    /// The MLP's width; `null` means 4 * n_embd.
    #[serde(default)]
    pub n_inner: Option<usize>,
    #[serde(default = "defaults::activation")]
    pub activation_function: String,
    #[serde(default = "defaults::epsilon")]
    pub layer_norm_epsilon: f64,
    #[serde(default = "defaults::yes")]
    pub tie_word_embeddings: bool,
    #[serde(default = "defaults::yes")]
    pub scale_attn_weights: bool,
    #[serde(default)]
    pub scale_attn_by_inverse_layer_idx: bool,
}

mod defaults {
    pub fn vocab() -> usize {
        50257
    }
    pub fn positions() -> usize {
        1024
    }
    pub fn embd() -> usize {
        768
    }
    pub fn layer() -> usize {
        12
    }
    pub fn head() -> usize {
        12
    }
    pub fn activation() -> String {
        "gelu_new".into()
    }
    pub fn epsilon() -> f64 {
        1e-5
    }
    pub fn yes() -> bool {
        true
    }
}

/// Largest sizes a config may claim: above them it is a typo or not GPT-2 (gpt2-xl is 1600 wide,
/// 48 layers, 25 heads).
const MAX_WIDTH: usize = 1 << 14;
const MAX_LAYERS: usize = 256;
const MAX_POSITIONS: usize = 1 << 15;

impl HfConfig {
    /// Reads `config.json`'s text.
    pub fn parse(json: &[u8]) -> Result<HfConfig> {
        serde_json::from_slice(super::files::json_text(json, "config.json")?)
            .map_err(|e| Error::Config(format!("config.json cannot be read: {e}")))
    }

    /// Refuses what the engine would not run exactly as Hugging Face's GPT-2 does.
    pub fn validate(&self) -> Result<()> {
        let refuse = |why: String| Err(Error::Config(format!("config.json: {why}")));
        match self.model_type.as_deref() {
            Some("gpt2") => {}
            Some(other) => {
                return refuse(format!(
                    "model_type is \"{other}\"; the lab opens the GPT-2 family only (model_type \"gpt2\": gpt2, \
                     distilgpt2, gpt2-medium, gpt2-large, gpt2-xl)"
                ))
            }
            None => return refuse("no model_type; a GPT-2 config says \"model_type\": \"gpt2\"".into()),
        }
        if let Some(archs) = &self.architectures {
            if let Some(a) = archs.iter().find(|a| !matches!(a.as_str(), "GPT2LMHeadModel" | "GPT2Model")) {
                return refuse(format!("architecture {a} is not GPT-2's language model (GPT2LMHeadModel)"));
            }
        }
        if self.vocab_size != GPT2_VOCAB {
            return refuse(format!(
                "vocab_size is {}, but GPT-2's tokenizer has {GPT2_VOCAB} tokens: another vocabulary needs its own \
                 tokenizer",
                self.vocab_size
            ));
        }
        let sizes = [
            ("n_embd", self.n_embd, MAX_WIDTH),
            ("n_head", self.n_head, MAX_WIDTH),
            ("n_layer", self.n_layer, MAX_LAYERS),
            ("n_positions", self.n_positions, MAX_POSITIONS),
            ("n_inner", self.d_ff(), 8 * MAX_WIDTH),
        ];
        for (name, v, max) in sizes {
            if v == 0 || v > max {
                return refuse(format!("{name} = {v} is outside 1..={max}"));
            }
        }
        if !self.n_embd.is_multiple_of(self.n_head) {
            return refuse(format!("n_head = {} does not divide n_embd = {}", self.n_head, self.n_embd));
        }
        if self.activation().is_none() {
            return refuse(format!(
                "activation_function \"{}\" is not one the engine computes (gelu_new, gelu_pytorch_tanh, gelu_fast \
                 are GPT-2's tanh GELU; relu)",
                self.activation_function
            ));
        }
        if (self.layer_norm_epsilon - EPS).abs() > 1e-12 {
            return refuse(format!(
                "layer_norm_epsilon is {}, the engine's LayerNorm uses {EPS}",
                self.layer_norm_epsilon
            ));
        }
        if !self.tie_word_embeddings {
            return refuse("tie_word_embeddings is false; GPT-2's head is its token embedding".into());
        }
        if !self.scale_attn_weights || self.scale_attn_by_inverse_layer_idx {
            return refuse("the attention is scaled other than by 1/sqrt(head size)".into());
        }
        Ok(())
    }

    fn d_ff(&self) -> usize {
        self.n_inner.unwrap_or(4 * self.n_embd)
    }

    fn activation(&self) -> Option<Activation> {
        match self.activation_function.as_str() {
            // All three are 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the engine's GELU.
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Some(Activation::Gelu),
            "relu" => Some(Activation::Relu),
            _ => None,
        }
    }

    /// The engine's description of this model (checked first).
    pub fn model_config(&self) -> Result<ModelConfig> {
        self.validate()?;
        Ok(ModelConfig {
            vocab: self.vocab_size,
            d_model: self.n_embd,
            heads: self.n_head,
            layers: self.n_layer,
            d_ff: self.d_ff(),
            context: self.n_positions,
            activation: self.activation().expect("validated"),
            causal: true,
            seed: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // gpt2's config.json as the hub serves it (openai-community/gpt2), fields that matter here.
    const GPT2: &str = r#"{"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
        "n_layer": 12, "n_positions": 1024, "vocab_size": 50257, "resid_pdrop": 0.1}"#;

    #[test]
    fn gpt2_small_medium_and_distil_read_as_the_engine_model() {
        let m = HfConfig::parse(GPT2.as_bytes()).unwrap().model_config().unwrap();
        assert_eq!((m.d_model, m.heads, m.layers, m.d_ff, m.context, m.vocab), (768, 12, 12, 3072, 1024, 50257));
        let medium = GPT2.replace("\"n_embd\": 768", "\"n_embd\": 1024").replace("\"n_head\": 12", "\"n_head\": 16");
        let medium = medium.replace("\"n_layer\": 12", "\"n_layer\": 24");
        let m = HfConfig::parse(medium.as_bytes()).unwrap().model_config().unwrap();
        assert_eq!((m.d_model, m.heads, m.layers, m.d_ff), (1024, 16, 24, 4096));
        let distil = GPT2.replace("\"n_layer\": 12", "\"n_layer\": 6");
        assert_eq!(HfConfig::parse(distil.as_bytes()).unwrap().model_config().unwrap().layers, 6);
    }

    #[test]
    fn a_byte_order_mark_is_read_past() {
        let m = HfConfig::parse(format!("\u{feff}{GPT2}").as_bytes()).unwrap().model_config().unwrap();
        assert_eq!(m.d_model, 768);
    }

    #[test]
    fn other_models_are_refused_by_name() {
        let cases = [
            (GPT2.replace("\"gpt2\"", "\"bert\""), "model_type is \"bert\""),
            (GPT2.replace("GPT2LMHeadModel", "GPT2ForSequenceClassification"), "GPT2ForSequenceClassification"),
            (GPT2.replace("50257", "50304"), "vocab_size is 50304"),
            (GPT2.replace("gelu_new", "gelu"), "activation_function \"gelu\""),
            (GPT2.replace("1e-05", "1e-06"), "layer_norm_epsilon"),
            (GPT2.replace("\"n_head\": 12", "\"n_head\": 7"), "does not divide"),
            (GPT2.replace("\"n_layer\": 12", "\"n_layer\": 0"), "n_layer = 0"),
            ("{\"n_embd\": ".to_string(), "cannot be read"),
            ("<html><body>Sign in</body></html>".to_string(), "config.json is an HTML page"),
        ];
        for (json, want) in cases {
            let err = HfConfig::parse(json.as_bytes()).and_then(|c| c.model_config()).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
    }
}
