//! BERT from Hugging Face's files (transformers' `modeling_bert`, `BertForMaskedLM`): the
//! Brownian paper's model. Post-LN blocks, `h = LN(x + attn(x))`, `x' = LN(h + mlp(h))`, after an
//! embedding that is normalised too (words + positions + token type); attention both ways; exact
//! GELU; the masked-LM head `LN(gelu(dense x))` read against the word embeddings, with a bias.
//!
//! The engine's layout keeps a norm in front of each block, so BERT's norms move by one: block i's
//! first norm is the embedding's (i = 0) or block i - 1's last, its second the one after
//! attention, the final norm the last block's. The text is one segment: token type 0's vector is
//! added to every position's. Tensor names start with `bert.`; the pooler, the next-sentence head
//! and `position_ids` are skipped. Checkpoints converted from Google's TensorFlow files name the
//! norms' gain and bias `gamma` and `beta`; both are read.

use super::{check_sizes, Fields, MAX_LAYERS, MAX_POSITIONS, MAX_WIDTH};
use crate::config::{Activation, Arch, ModelConfig, NormKind, Positions};
use crate::error::{Error, Result};
use crate::model::params::Layout;
use crate::pretrained::weights::{put, refuse as refuse_file, Stored};

const FAMILY: &str = "BERT";

/// The engine's description of a BERT `config.json` (transformers' `BertConfig` defaults for
/// missing fields); a decoder, cross-attention or relative positions are refused by name.
pub fn config(text: &[u8]) -> Result<ModelConfig> {
    let f = Fields::parse(text)?;
    let refuse = |why: String| Err(Error::Config(format!("config.json: {why}")));
    let (c, heads) = (f.usize("hidden_size", 768)?, f.usize("num_attention_heads", 12)?);
    let (layers, d_ff) = (f.usize("num_hidden_layers", 12)?, f.usize("intermediate_size", 3072)?);
    let (vocab, context) = (f.usize("vocab_size", 30522)?, f.usize("max_position_embeddings", 512)?);
    check_sizes(&[
        ("hidden_size", c, MAX_WIDTH),
        ("num_attention_heads", heads, MAX_WIDTH),
        ("num_hidden_layers", layers, MAX_LAYERS),
        ("intermediate_size", d_ff, 8 * MAX_WIDTH),
        ("max_position_embeddings", context, MAX_POSITIONS),
        ("vocab_size", vocab, 1 << 20),
        ("type_vocab_size", f.usize("type_vocab_size", 2)?, 1 << 10),
    ])?;
    if !c.is_multiple_of(heads) {
        return refuse(format!("num_attention_heads = {heads} does not divide hidden_size = {c}"));
    }
    let activation = match f.string("hidden_act", "gelu")?.as_str() {
        "gelu" => Activation::GeluExact,
        "gelu_new" | "gelu_pytorch_tanh" => Activation::Gelu,
        "relu" => Activation::Relu,
        other => {
            return refuse(format!("hidden_act \"{other}\" is not one the engine computes (gelu, gelu_new, relu)"))
        }
    };
    let positions = f.string("position_embedding_type", "absolute")?;
    if positions != "absolute" {
        return refuse(format!(
            "position_embedding_type is \"{positions}\"; the engine adds learned absolute positions only"
        ));
    }
    for field in ["is_decoder", "add_cross_attention"] {
        if f.bool(field, false)? {
            return refuse(format!("{field} is true; the lab reads BERT as an encoder that attends both ways"));
        }
    }
    let arch = Arch {
        norm: NormKind::LayerNorm,
        norm_eps: f.f64("layer_norm_eps", 1e-12)?,
        positions: Positions::Learned,
        tied_head: f.bool("tie_word_embeddings", true)?,
        post_norm: true,
        head_transform: true,
        ..Arch::default()
    };
    Ok(ModelConfig { vocab, d_model: c, heads, layers, d_ff, context, activation, causal: false, seed: 0, arch })
}

/// Tensors a BERT file may hold that the masked-LM reading does not use.
fn skipped(name: &str) -> bool {
    name.starts_with("pooler.")
        || name.starts_with("cls.seq_relationship.")
        || name == "embeddings.position_ids"
        // A stored copy of the tied head and its bias (the bias is `cls.predictions.bias`).
        || name == "cls.predictions.decoder.bias"
}

/// A norm's gain and bias, under transformers' names or TensorFlow's (`gamma`, `beta`).
fn norm(st: &mut Stored, at: &str, c: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    let mut get = |new: &str, old: &str| {
        let old = format!("{at}.{old}");
        match st.shape(&old) {
            Some(_) => st.get(&old, &[c], FAMILY),
            None => st.get(&format!("{at}.{new}"), &[c], FAMILY),
        }
    };
    Ok((get("weight", "gamma")?, get("bias", "beta")?))
}

/// The weights of `cfg` from `model.safetensors`.
pub fn weights(cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
    let mut st = Stored::open(bytes, "bert.")?;
    let (v, c, f, t) = (cfg.vocab, cfg.d_model, cfg.d_ff, cfg.context);
    let layout = Layout::new(cfg);
    let Some(transform) = layout.transform else {
        return refuse_file("a BERT layout without its masked-LM head");
    };
    if st.shape("cls.predictions.bias").is_none() {
        return refuse_file(
            "this BERT has no masked-LM head (cls.predictions): the lab reads BertForMaskedLM or BertForPreTraining \
             checkpoints, such as google-bert/bert-base-uncased",
        );
    }
    let mut params = vec![0f32; layout.total];
    let p = &mut params;
    put(&layout, p, layout.wte, &st.get("embeddings.word_embeddings.weight", &[v, c], FAMILY)?);
    // One segment: token type 0's vector joins every position's.
    let types = st.shape("embeddings.token_type_embeddings.weight").map_or(1, |s| s[0]);
    let segment = st.get("embeddings.token_type_embeddings.weight", &[types, c], FAMILY)?;
    let mut positions = st.get("embeddings.position_embeddings.weight", &[t, c], FAMILY)?;
    positions.chunks_exact_mut(c).for_each(|row| row.iter_mut().zip(&segment[..c]).for_each(|(x, &s)| *x += s));
    put(&layout, p, layout.wpe, &positions);
    // The norm in front of block i: the embedding's, then block i - 1's last; the final norm is
    // the last block's.
    let mut before = "embeddings.LayerNorm".to_string();
    for (l, ids) in layout.blocks.iter().enumerate() {
        let name = |s: &str| format!("encoder.layer.{l}.{s}");
        let (g, b) = norm(&mut st, &before, c)?;
        put(&layout, p, ids.ln1_w, &g);
        put(&layout, p, ids.ln1_b, &b);
        let (g, b) = norm(&mut st, &name("attention.output.LayerNorm"), c)?;
        put(&layout, p, ids.ln2_w, &g);
        put(&layout, p, ids.ln2_b, &b);
        let linears = [
            ("attention.self.query", ids.q_w, ids.q_b, c, c),
            ("attention.self.key", ids.k_w, ids.k_b, c, c),
            ("attention.self.value", ids.v_w, ids.v_b, c, c),
            ("attention.output.dense", ids.o_w, ids.o_b, c, c),
            ("intermediate.dense", ids.fc_w, ids.fc_b, c, f),
            ("output.dense", ids.proj_w, ids.proj_b, f, c),
        ];
        for (n, wid, bid, din, dout) in linears {
            put(&layout, p, wid, &st.get(&name(&format!("{n}.weight")), &[dout, din], FAMILY)?);
            put(&layout, p, bid, &st.get(&name(&format!("{n}.bias")), &[dout], FAMILY)?);
        }
        before = name("output.LayerNorm");
    }
    let (g, b) = norm(&mut st, &before, c)?;
    put(&layout, p, layout.lnf_w, &g);
    put(&layout, p, layout.lnf_b, &b);
    put(&layout, p, transform.w, &st.get("cls.predictions.transform.dense.weight", &[c, c], FAMILY)?);
    put(&layout, p, transform.b, &st.get("cls.predictions.transform.dense.bias", &[c], FAMILY)?);
    let (g, b) = norm(&mut st, "cls.predictions.transform.LayerNorm", c)?;
    put(&layout, p, transform.ln_w, &g);
    put(&layout, p, transform.ln_b, &b);
    put(&layout, p, layout.head_b, &st.get("cls.predictions.bias", &[v], FAMILY)?);
    if !layout.is_tied() {
        put(&layout, p, layout.head_w, &st.get("cls.predictions.decoder.weight", &[v, c], FAMILY)?);
    }
    st.all_read(
        |n| skipped(n) || (layout.is_tied() && n == "cls.predictions.decoder.weight"),
        &format!("BERT with {} layers", cfg.layers),
    )?;
    Ok((layout, params))
}
