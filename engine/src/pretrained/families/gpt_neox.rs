//! GPT-NeoX (Pythia) from Hugging Face's files (transformers' `modeling_gpt_neox`): Pre-LN blocks
//! whose attention and MLP read the same input in parallel (`x + attn(ln1 x) + mlp(ln2 x)`),
//! rotary positions on the first `rotary_pct` of each head's dimensions, exact GELU, biases on
//! every linear layer, and a head of its own (`embed_out`). The attention's queries, keys and
//! values are fused in `query_key_value` (3C, C), laid out per head as [q, k, v] blocks of the
//! head size. Tensor names start with `gpt_neox.`; the causal-mask buffers and `inv_freq` are
//! skipped.

use super::{check_sizes, rope, Fields, MAX_LAYERS, MAX_POSITIONS, MAX_WIDTH};
use crate::config::{Activation, Arch, Mlp, ModelConfig, NormKind, Positions};
use crate::error::{Error, Result};
use crate::model::params::Layout;
use crate::pretrained::weights::{put, Stored};

const FAMILY: &str = "GPT-NeoX";

/// The engine's description of a GPT-NeoX `config.json` (transformers' `GPTNeoXConfig` defaults
/// for missing fields).
pub fn config(text: &[u8]) -> Result<ModelConfig> {
    let f = Fields::parse(text)?;
    let refuse = |why: String| Err(Error::Config(format!("config.json: {why}")));
    let (c, heads) = (f.usize("hidden_size", 6144)?, f.usize("num_attention_heads", 64)?);
    let (layers, d_ff) = (f.usize("num_hidden_layers", 44)?, f.usize("intermediate_size", 24576)?);
    let (vocab, context) = (f.usize("vocab_size", 50432)?, f.usize("max_position_embeddings", 2048)?);
    check_sizes(&[
        ("hidden_size", c, MAX_WIDTH),
        ("num_attention_heads", heads, MAX_WIDTH),
        ("num_hidden_layers", layers, MAX_LAYERS),
        ("intermediate_size", d_ff, 8 * MAX_WIDTH),
        ("max_position_embeddings", context, MAX_POSITIONS),
        ("vocab_size", vocab, 1 << 20),
    ])?;
    if !c.is_multiple_of(heads) {
        return refuse(format!("num_attention_heads = {heads} does not divide hidden_size = {c}"));
    }
    let activation = match f.string("hidden_act", "gelu")?.as_str() {
        "gelu" => Activation::GeluExact,
        "gelu_new" | "gelu_fast" | "gelu_pytorch_tanh" => Activation::Gelu,
        "relu" => Activation::Relu,
        other => {
            return refuse(format!("hidden_act \"{other}\" is not one the engine computes (gelu, gelu_new, relu)"))
        }
    };
    if !f.bool("attention_bias", true)? {
        // The engine's layout keeps every bias: zeros would do, but no Pythia is configured so.
        return refuse("attention_bias is false; GPT-NeoX models the lab reads keep their attention biases".into());
    }
    let factor = f.0.get("rope_parameters").and_then(|p| p.get("partial_rotary_factor")).and_then(|x| x.as_f64());
    let pct = match factor {
        Some(x) => x,
        None => f.f64("rotary_pct", f.f64("partial_rotary_factor", 0.25)?)?,
    };
    let hs = c / heads;
    let dims = (hs as f64 * pct) as usize;
    if !(pct > 0.0 && pct <= 1.0) || dims < 2 {
        return refuse(format!("rotary_pct = {pct} turns no pair of a head's {hs} dimensions"));
    }
    let (base, scaling) = rope(&f.0, "rotary_emb_base", 10_000.0)?;
    let arch = Arch {
        norm: NormKind::LayerNorm,
        norm_eps: f.f64("layer_norm_eps", 1e-5)?,
        positions: Positions::Rotary { dims: dims - dims % 2, base, scaling },
        mlp: Mlp::Plain,
        kv_heads: 0,
        parallel_residual: f.bool("use_parallel_residual", true)?,
        tied_head: f.bool("tie_word_embeddings", false)?,
        ..Arch::default()
    };
    Ok(ModelConfig { vocab, d_model: c, heads, layers, d_ff, context, activation, causal: true, seed: 0, arch })
}

/// Buffers a GPT-NeoX file may hold that are not weights.
fn skipped(name: &str) -> bool {
    name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias") || name.ends_with(".inv_freq")
}

/// The weights of `cfg` from `model.safetensors`.
pub fn weights(cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
    let mut st = Stored::open(bytes, "gpt_neox.")?;
    let (v, c, f, nh) = (cfg.vocab, cfg.d_model, cfg.d_ff, cfg.heads);
    let hs = c / nh;
    let layout = Layout::new(cfg);
    let mut params = vec![0f32; layout.total];
    let p = &mut params;
    put(&layout, p, layout.wte, &st.get("embed_in.weight", &[v, c], FAMILY)?);
    for (l, ids) in layout.blocks.iter().enumerate() {
        let name = |s: &str| format!("layers.{l}.{s}");
        put(&layout, p, ids.ln1_w, &st.get(&name("input_layernorm.weight"), &[c], FAMILY)?);
        put(&layout, p, ids.ln1_b, &st.get(&name("input_layernorm.bias"), &[c], FAMILY)?);
        put(&layout, p, ids.ln2_w, &st.get(&name("post_attention_layernorm.weight"), &[c], FAMILY)?);
        put(&layout, p, ids.ln2_b, &st.get(&name("post_attention_layernorm.bias"), &[c], FAMILY)?);
        let w = st.get(&name("attention.query_key_value.weight"), &[3 * c, c], FAMILY)?;
        let b = st.get(&name("attention.query_key_value.bias"), &[3 * c], FAMILY)?;
        // Row h·3hs + j·hs + d of the fused matrix is part j (q, k, v) of head h, dimension d.
        for (j, (wid, bid)) in [(ids.q_w, ids.q_b), (ids.k_w, ids.k_b), (ids.v_w, ids.v_b)].into_iter().enumerate() {
            let rows: Vec<usize> = (0..nh).flat_map(|h| (0..hs).map(move |d| h * 3 * hs + j * hs + d)).collect();
            let dst = layout.of_mut(p, wid);
            for (o, &r) in rows.iter().enumerate() {
                dst[o * c..(o + 1) * c].copy_from_slice(&w[r * c..(r + 1) * c]);
            }
            let bias: Vec<f32> = rows.iter().map(|&r| b[r]).collect();
            put(&layout, p, bid, &bias);
        }
        let linears = [
            ("attention.dense", ids.o_w, ids.o_b, c, c),
            ("mlp.dense_h_to_4h", ids.fc_w, ids.fc_b, c, f),
            ("mlp.dense_4h_to_h", ids.proj_w, ids.proj_b, f, c),
        ];
        for (n, wid, bid, din, dout) in linears {
            put(&layout, p, wid, &st.get(&name(&format!("{n}.weight")), &[dout, din], FAMILY)?);
            put(&layout, p, bid, &st.get(&name(&format!("{n}.bias")), &[dout], FAMILY)?);
        }
    }
    put(&layout, p, layout.lnf_w, &st.get("final_layer_norm.weight", &[c], FAMILY)?);
    put(&layout, p, layout.lnf_b, &st.get("final_layer_norm.bias", &[c], FAMILY)?);
    if !layout.is_tied() {
        put(&layout, p, layout.head_w, &st.get("embed_out.weight", &[v, c], FAMILY)?);
    }
    st.all_read(
        |n| skipped(n) || (layout.is_tied() && n == "embed_out.weight"),
        &format!("GPT-NeoX with {} layers", cfg.layers),
    )?;
    Ok((layout, params))
}
