//! Llama (SmolLM2, TinyLlama) and Qwen2 from Hugging Face's files (transformers'
//! `modeling_llama`, `modeling_qwen2`): RMSNorm before attention and the MLP, rotary positions on
//! the whole head, a gated MLP `down(silu(gate x) * up x)`, and grouped-query attention (groups of
//! query heads share a key/value head: the engine stores each group's rows once per query head,
//! exactly as transformers' `repeat_kv` reads them). Qwen2 is Llama with biases on q, k and v.
//! Tensor names start with `model.`; the head is `lm_head`, unless tied to the embedding.

use super::{check_sizes, rope, Fields, MAX_LAYERS, MAX_POSITIONS, MAX_WIDTH};
use crate::config::{Activation, Arch, Mlp, ModelConfig, NormKind, Positions};
use crate::error::{Error, Result};
use crate::model::params::Layout;
use crate::pretrained::weights::{put, repeat_kv, repeat_kv_bias, Stored};

const FAMILY: &str = "Llama";

/// The engine's description of a Llama or Qwen2 `config.json` (transformers' defaults for missing
/// fields); what it cannot run exactly (scaled rotary angles, sliding windows, a head size other
/// than the width over the heads) is refused by name.
pub fn config(text: &[u8], qwen2: bool) -> Result<ModelConfig> {
    let f = Fields::parse(text)?;
    let refuse = |why: String| Err(Error::Config(format!("config.json: {why}")));
    let (c, heads) = (f.usize("hidden_size", 4096)?, f.usize("num_attention_heads", 32)?);
    let kv_heads = f.usize("num_key_value_heads", heads)?;
    let layers = f.usize("num_hidden_layers", 32)?;
    let d_ff = f.usize("intermediate_size", if qwen2 { 22016 } else { 11008 })?;
    let vocab = f.usize("vocab_size", if qwen2 { 151_936 } else { 32_000 })?;
    let context = f.usize("max_position_embeddings", if qwen2 { 32_768 } else { 2048 })?;
    check_sizes(&[
        ("hidden_size", c, MAX_WIDTH),
        ("num_attention_heads", heads, MAX_WIDTH),
        ("num_key_value_heads", kv_heads, MAX_WIDTH),
        ("num_hidden_layers", layers, MAX_LAYERS),
        ("intermediate_size", d_ff, 8 * MAX_WIDTH),
        ("max_position_embeddings", context, MAX_POSITIONS),
        ("vocab_size", vocab, 1 << 20),
    ])?;
    if !c.is_multiple_of(heads) {
        return refuse(format!("num_attention_heads = {heads} does not divide hidden_size = {c}"));
    }
    if f.has("head_dim") && f.usize("head_dim", 0)? != c / heads {
        return refuse(format!(
            "head_dim = {} is not hidden_size / num_attention_heads = {}; the engine's heads split the width",
            f.usize("head_dim", 0)?,
            c / heads
        ));
    }
    if !heads.is_multiple_of(kv_heads) {
        return refuse(format!("num_key_value_heads = {kv_heads} does not divide num_attention_heads = {heads}"));
    }
    let activation = match f.string("hidden_act", "silu")?.as_str() {
        "silu" | "swish" => Activation::Silu,
        other => return refuse(format!("hidden_act \"{other}\" is not one the engine computes in a gated MLP (silu)")),
    };
    if f.bool("use_sliding_window", false)? {
        return refuse("use_sliding_window is true; the engine's attention sees every earlier token".into());
    }
    for field in ["num_experts", "num_local_experts"] {
        if f.usize(field, 0)? > 0 {
            return refuse(format!("{field} is set: a mixture of experts, which the engine does not run"));
        }
    }
    if f.f64("pretraining_tp", 1.0)? != 1.0 {
        return refuse("pretraining_tp is not 1".into());
    }
    let (base, scaling) = rope(&f.0, "rope_theta", 10_000.0)?;
    let arch = Arch {
        norm: NormKind::RmsNorm,
        norm_eps: f.f64("rms_norm_eps", 1e-6)?,
        positions: Positions::Rotary { dims: c / heads, base, scaling },
        mlp: Mlp::Gated,
        kv_heads,
        parallel_residual: false,
        tied_head: f.bool("tie_word_embeddings", false)?,
        ..Arch::default()
    };
    Ok(ModelConfig { vocab, d_model: c, heads, layers, d_ff, context, activation, causal: true, seed: 0, arch })
}

/// The weights of `cfg` (from `config`) from `model.safetensors`; a bias the file has is read
/// (Qwen2's on q, k and v; Llama's with `attention_bias`), one it lacks is zero (the layout keeps
/// every bias).
pub fn weights(cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
    let mut st = Stored::open(bytes, "model.")?;
    let (v, c, f, nh) = (cfg.vocab, cfg.d_model, cfg.d_ff, cfg.heads);
    let (hs, nkv) = (c / nh, cfg.arch.kv_heads_of(nh));
    let kvd = nkv * hs;
    let layout = Layout::new(cfg);
    let mut params = vec![0f32; layout.total];
    let p = &mut params;
    put(&layout, p, layout.wte, &st.get("embed_tokens.weight", &[v, c], FAMILY)?);
    for (l, ids) in layout.blocks.iter().enumerate() {
        let name = |s: &str| format!("layers.{l}.{s}");
        put(&layout, p, ids.ln1_w, &st.get(&name("input_layernorm.weight"), &[c], FAMILY)?);
        put(&layout, p, ids.ln2_w, &st.get(&name("post_attention_layernorm.weight"), &[c], FAMILY)?);
        let Some((gw, gb)) = ids.gate else {
            return Err(Error::Config("a Llama block's MLP is gated: its layout needs a gate".into()));
        };
        let linears = [
            ("self_attn.q_proj", ids.q_w, ids.q_b, c, c, false),
            ("self_attn.k_proj", ids.k_w, ids.k_b, c, kvd, true),
            ("self_attn.v_proj", ids.v_w, ids.v_b, c, kvd, true),
            ("self_attn.o_proj", ids.o_w, ids.o_b, c, c, false),
            ("mlp.gate_proj", gw, gb, c, f, false),
            ("mlp.up_proj", ids.fc_w, ids.fc_b, c, f, false),
            ("mlp.down_proj", ids.proj_w, ids.proj_b, f, c, false),
        ];
        for (n, wid, bid, din, dout, shared) in linears {
            let w = st.get(&name(&format!("{n}.weight")), &[dout, din], FAMILY)?;
            put(&layout, p, wid, &if shared { repeat_kv(&w, nh, nkv, hs, c) } else { w });
            let bias = name(&format!("{n}.bias"));
            if st.shape(&bias).is_some() {
                let b = st.get(&bias, &[dout], FAMILY)?;
                put(&layout, p, bid, &if shared { repeat_kv_bias(&b, nh, nkv, hs) } else { b });
            }
        }
    }
    put(&layout, p, layout.lnf_w, &st.get("norm.weight", &[c], FAMILY)?);
    if !layout.is_tied() {
        put(&layout, p, layout.head_w, &st.get("lm_head.weight", &[v, c], FAMILY)?);
    } else if let Some(shape) = st.shape("lm_head.weight").filter(|s| s.as_slice() != [v, c]) {
        return Err(Error::Checkpoint(format!(
            "model.safetensors: tensor lm_head.weight has shape {shape:?}, but the tied head is [{v}, {c}]"
        )));
    }
    let skipped = |n: &str| n.ends_with(".inv_freq") || (layout.is_tied() && n == "lm_head.weight");
    st.all_read(skipped, &format!("{FAMILY} with {} layers", cfg.layers))?;
    Ok((layout, params))
}
