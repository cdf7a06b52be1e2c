//! GPT-2 from Hugging Face's files: `config.json` (`GPT2Config`), checked, and `model.safetensors`
//! into the engine's layout. GPT-2 is the engine's own block (Pre-LN, tanh GELU, LayerNorm eps
//! 1e-5, learned positions) with its head tied to the token embedding. Hugging Face keeps GPT-2's
//! `Conv1D` layers as (in, out) and the attention's queries, keys and values fused in one `c_attn`
//! of (C, 3C); the engine's linear layers are (out, in), one per projection. Names come with or
//! without the `transformer.` prefix; the causal mask buffers (`attn.bias`, `attn.masked_bias`)
//! and a stored copy of the tied head are skipped.

use serde::Deserialize;

use crate::config::{Activation, Arch, ModelConfig};
use crate::error::{Error, Result};
use crate::model::params::Layout;
use crate::nn::layer_norm::EPS;
use crate::pretrained::tokenizer::GPT2_VOCAB;
use crate::pretrained::weights::{put, refuse, transpose_into, Stored};

const FAMILY: &str = "GPT-2";

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
use super::{MAX_LAYERS, MAX_WIDTH};
const MAX_POSITIONS: usize = 1 << 15;

impl HfConfig {
    /// Reads `config.json`'s text.
    pub fn parse(json: &[u8]) -> Result<HfConfig> {
        serde_json::from_slice(crate::pretrained::files::json_text(json, "config.json")?)
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
            arch: Arch::gpt2(),
        })
    }
}

/// Tensors a GPT-2 file may hold that the engine does not read: the attention's causal mask
/// buffers, and the head, which is the token embedding.
fn skipped(name: &str) -> bool {
    name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")
}

/// The weights of `cfg` (from `HfConfig::model_config`) read from the bytes of `model.safetensors`.
pub fn weights(cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
    let mut st = Stored::open(bytes, "transformer.")?;
    let (v, c, f, t) = (cfg.vocab, cfg.d_model, cfg.d_ff, cfg.context);
    let layout = Layout::new(cfg);
    let mut params = vec![0f32; layout.total];
    let p = &mut params;
    put(&layout, p, layout.wte, &st.get("wte.weight", &[v, c], FAMILY)?);
    put(&layout, p, layout.wpe, &st.get("wpe.weight", &[t, c], FAMILY)?);
    for (l, ids) in layout.blocks.iter().enumerate() {
        let name = |s: &str| format!("h.{l}.{s}");
        put(&layout, p, ids.ln1_w, &st.get(&name("ln_1.weight"), &[c], FAMILY)?);
        put(&layout, p, ids.ln1_b, &st.get(&name("ln_1.bias"), &[c], FAMILY)?);
        let w = st.get(&name("attn.c_attn.weight"), &[c, 3 * c], FAMILY)?;
        let b = st.get(&name("attn.c_attn.bias"), &[3 * c], FAMILY)?;
        for (j, (wid, bid)) in [(ids.q_w, ids.q_b), (ids.k_w, ids.k_b), (ids.v_w, ids.v_b)].into_iter().enumerate() {
            transpose_into(layout.of_mut(p, wid), &w, c, 3 * c, j * c..(j + 1) * c);
            put(&layout, p, bid, &b[j * c..(j + 1) * c]);
        }
        let linears = [
            ("attn.c_proj", ids.o_w, ids.o_b, c, c),
            ("mlp.c_fc", ids.fc_w, ids.fc_b, c, f),
            ("mlp.c_proj", ids.proj_w, ids.proj_b, f, c),
        ];
        for (n, wid, bid, din, dout) in linears {
            let w = st.get(&name(&format!("{n}.weight")), &[din, dout], FAMILY)?;
            transpose_into(layout.of_mut(p, wid), &w, din, dout, 0..dout);
            put(&layout, p, bid, &st.get(&name(&format!("{n}.bias")), &[dout], FAMILY)?);
        }
        put(&layout, p, ids.ln2_w, &st.get(&name("ln_2.weight"), &[c], FAMILY)?);
        put(&layout, p, ids.ln2_b, &st.get(&name("ln_2.bias"), &[c], FAMILY)?);
    }
    put(&layout, p, layout.lnf_w, &st.get("ln_f.weight", &[c], FAMILY)?);
    put(&layout, p, layout.lnf_b, &st.get("ln_f.bias", &[c], FAMILY)?);
    st.all_read(skipped, &format!("GPT-2 with {} layers", cfg.layers))?;
    if let Some(shape) = st.shape("lm_head.weight").filter(|s| s.as_slice() != [v, c]) {
        return refuse(format!("tensor lm_head.weight has shape {shape:?}, but the tied head is [{v}, {c}]"));
    }
    Ok((layout, params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;
    use safetensors::Dtype;

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

    fn cfg() -> ModelConfig {
        ModelConfig {
            vocab: 5,
            d_model: 4,
            heads: 2,
            layers: 1,
            d_ff: 6,
            context: 3,
            arch: Arch::gpt2(),
            ..ModelConfig::default()
        }
    }

    /// A GPT-2 file of `cfg()`'s sizes whose every number is its own index in the file, so each
    /// engine weight can be traced to the stored element it came from.
    fn file(prefix: &str, drop: Option<&str>, extra: Option<(&str, Vec<usize>)>) -> Vec<u8> {
        let (c, f) = (4, 6);
        let mut shapes: Vec<(String, Vec<usize>)> = vec![
            ("wte.weight".into(), vec![5, c]),
            ("wpe.weight".into(), vec![3, c]),
            ("h.0.ln_1.weight".into(), vec![c]),
            ("h.0.ln_1.bias".into(), vec![c]),
            ("h.0.attn.bias".into(), vec![1, 1, 3, 3]),
            ("h.0.attn.c_attn.weight".into(), vec![c, 3 * c]),
            ("h.0.attn.c_attn.bias".into(), vec![3 * c]),
            ("h.0.attn.c_proj.weight".into(), vec![c, c]),
            ("h.0.attn.c_proj.bias".into(), vec![c]),
            ("h.0.ln_2.weight".into(), vec![c]),
            ("h.0.ln_2.bias".into(), vec![c]),
            ("h.0.mlp.c_fc.weight".into(), vec![c, f]),
            ("h.0.mlp.c_fc.bias".into(), vec![f]),
            ("h.0.mlp.c_proj.weight".into(), vec![f, c]),
            ("h.0.mlp.c_proj.bias".into(), vec![c]),
            ("ln_f.weight".into(), vec![c]),
            ("ln_f.bias".into(), vec![c]),
        ];
        shapes.retain(|(n, _)| Some(n.as_str()) != drop);
        shapes.extend(extra.map(|(n, s)| (n.to_string(), s)));
        let data: Vec<Vec<u8>> = shapes
            .iter()
            .map(|(name, s)| {
                let tag = 1000.0 * (name.len() as f32);
                (0..s.iter().product::<usize>()).flat_map(|i| (tag + i as f32).to_le_bytes()).collect()
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = shapes
            .iter()
            .zip(&data)
            .map(|((n, s), d)| (format!("{prefix}{n}"), TensorView::new(Dtype::F32, s.clone(), d).unwrap()))
            .collect();
        safetensors::serialize(views, None).unwrap()
    }

    #[test]
    fn conv1d_weights_are_transposed_and_c_attn_split_into_q_k_v() {
        for prefix in ["", "transformer."] {
            let (layout, p) = weights(&cfg(), &file(prefix, None, None)).unwrap();
            let ids = &layout.blocks[0];
            let tag = |name: &str| 1000.0 * name.len() as f32;
            let c_attn = tag("h.0.attn.c_attn.weight");
            // Engine q_w[o][i] is c_attn[i][o]; k_w[o][i] is c_attn[i][4 + o]; v_w's is [i][8 + o].
            for (j, id) in [ids.q_w, ids.k_w, ids.v_w].into_iter().enumerate() {
                let w = layout.of(&p, id);
                for (o, i) in [(0, 0), (1, 2), (3, 1)] {
                    assert_eq!(w[o * 4 + i], c_attn + (i * 12 + j * 4 + o) as f32, "{prefix} {j} {o} {i}");
                }
            }
            assert_eq!(layout.of(&p, ids.k_b)[1], tag("h.0.attn.c_attn.bias") + 5.0);
            // fc_w is (F, C): fc_w[o][i] = c_fc[i][o] with c_fc (C, F).
            assert_eq!(layout.of(&p, ids.fc_w)[5 * 4 + 2], tag("h.0.mlp.c_fc.weight") + (2 * 6 + 5) as f32);
            assert_eq!(layout.of(&p, ids.proj_w)[3 * 6 + 4], tag("h.0.mlp.c_proj.weight") + (4 * 4 + 3) as f32);
            assert!(layout.is_tied() && layout.of(&p, layout.head_b).iter().all(|&x| x == 0.0));
            assert_eq!(layout.of(&p, layout.wpe)[7], tag("wpe.weight") + 7.0);
        }
    }

    #[test]
    fn bad_files_are_refused_with_what_is_wrong() {
        let good = file("", None, None);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (good[..good.len() - 10].to_vec(), "truncated"),
            ([good.clone(), vec![0; 7]].concat(), "7 more than"),
            (b"PK\x03\x04rest of a zip".to_vec(), "a zip archive (a PyTorch pickle"),
            (vec![0x80, 2, 0x8a, 0x0a], "Python pickle"),
            (b"not a tensor file at all".to_vec(), "not a safetensors file"),
            (file("", Some("h.0.mlp.c_fc.bias"), None), "h.0.mlp.c_fc.bias is missing"),
            (file("", None, Some(("h.1.ln_1.weight", vec![4]))), "h.1.ln_1.weight is not part of GPT-2 with 1 layers"),
            (file("", None, Some(("lm_head.weight", vec![4, 5]))), "lm_head.weight has shape [4, 5]"),
        ];
        for (bytes, want) in cases {
            let err = weights(&cfg(), &bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let wider = ModelConfig { d_ff: 8, ..cfg() };
        let err = weights(&wider, &good).unwrap_err().to_string();
        assert!(err.contains("h.0.mlp.c_fc.weight has shape [4, 6], but config.json makes it [4, 8]"), "{err}");
        assert!(weights(&cfg(), &file("", None, Some(("lm_head.weight", vec![5, 4])))).is_ok());
    }

    #[test]
    fn a_weight_that_is_not_a_finite_number_is_refused_with_its_tensor() {
        for bad in [f32::NAN, f32::INFINITY] {
            let mut bytes = file("", None, None);
            // The file's last bytes: the last element of ln_f.weight (sorted last), which GPT-2 reads.
            let n = bytes.len();
            bytes[n - 4..].copy_from_slice(&bad.to_le_bytes());
            let err = weights(&cfg(), &bytes).unwrap_err().to_string();
            assert!(
                err.contains(&format!("holds {bad} at element")) && err.contains("must be a finite number"),
                "{err}"
            );
        }
    }
}
