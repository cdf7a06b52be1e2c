//! GPT-2's weights from Hugging Face's `model.safetensors` into the engine's flat buffer
//! (`Layout::tied`). Hugging Face keeps GPT-2's `Conv1D` layers as (in, out) and the attention's
//! queries, keys and values fused in one `c_attn` of (C, 3C); the engine's linear layers are
//! (out, in), one per projection. Names come with or without the `transformer.` prefix; the causal
//! mask buffers (`attn.bias`, `attn.masked_bias`) and a stored copy of the tied head are skipped.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::model::params::Layout;

use super::files;

fn refuse<T>(why: impl std::fmt::Display) -> Result<T> {
    Err(Error::Checkpoint(format!("model.safetensors: {why}")))
}

/// What the first bytes say the file is, when it is not safetensors.
fn not_safetensors(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [b'P', b'K', 3, 4, ..] => Some("a zip archive: a PyTorch pickle (pytorch_model.bin)"),
        [0x80, 2..=5, ..] => Some("a Python pickle (an old pytorch_model.bin)"),
        [] => Some("empty"),
        _ => None,
    }
}

fn open(bytes: &[u8]) -> Result<SafeTensors<'_>> {
    if let Some(what) = not_safetensors(bytes) {
        return refuse(format!(
            "the file is {what}; the lab reads only safetensors (model.safetensors on the model's hub page), which \
             cannot run code when it is opened"
        ));
    }
    files::check_len(files::safetensors_len(bytes)?, bytes.len() as u64)?;
    SafeTensors::deserialize(bytes).or_else(|e| refuse(format!("not a safetensors file ({e})")))
}

/// One stored tensor as f32, checked against the shape GPT-2 gives it.
fn floats(st: &SafeTensors<'_>, names: &HashMap<String, String>, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
    let Some(stored) = names.get(name) else {
        return refuse(format!("tensor {name} is missing (a GPT-2 checkpoint has it, with or without `transformer.`)"));
    };
    let t = st.tensor(stored).or_else(refuse)?;
    if t.shape() != shape {
        return refuse(format!("tensor {stored} has shape {:?}, but config.json makes it {shape:?}", t.shape()));
    }
    let data = t.data();
    let out: Vec<f32> = match t.dtype() {
        Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
        other => return refuse(format!("tensor {stored} is {other:?}; the lab reads F32, F16 and BF16")),
    };
    // A NaN or an infinity would spread through every reading as NaN probabilities.
    if let Some((i, x)) = out.iter().enumerate().find(|(_, x)| !x.is_finite()) {
        return refuse(format!("tensor {stored} holds {x} at element {i}: a weight must be a finite number"));
    }
    Ok(out)
}

/// Writes the (in, out) matrix `src`'s columns `cols` as the engine's (out, in) `dst`.
fn transpose_into(dst: &mut [f32], src: &[f32], din: usize, dout_all: usize, cols: std::ops::Range<usize>) {
    let dout = cols.len();
    for o in 0..dout {
        for i in 0..din {
            dst[o * din + i] = src[i * dout_all + cols.start + o];
        }
    }
}

/// Tensors a GPT-2 file may hold that the engine does not read: the attention's causal mask
/// buffers, and the head, which is the token embedding.
fn skipped(name: &str) -> bool {
    name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")
}

/// The weights of `cfg` (from `HfConfig::model_config`) read from the bytes of `model.safetensors`.
pub fn read(cfg: &ModelConfig, bytes: &[u8]) -> Result<(Layout, Vec<f32>)> {
    let st = open(bytes)?;
    let mut names = HashMap::new();
    for stored in st.names() {
        let name = stored.strip_prefix("transformer.").unwrap_or(stored);
        if names.insert(name.to_string(), stored.to_string()).is_some() {
            return refuse(format!("tensor {name} is stored twice (with and without `transformer.`)"));
        }
    }
    let (v, c, f, t) = (cfg.vocab, cfg.d_model, cfg.d_ff, cfg.context);
    let layout = Layout::tied(cfg);
    let mut expected: Vec<String> = Vec::new();
    let mut params = vec![0f32; layout.total];
    let mut get = |name: String, shape: &[usize]| {
        let out = floats(&st, &names, &name, shape);
        expected.push(name);
        out
    };
    let put = |params: &mut [f32], id: usize, data: &[f32]| layout.of_mut(params, id).copy_from_slice(data);
    put(&mut params, layout.wte, &get("wte.weight".into(), &[v, c])?);
    put(&mut params, layout.wpe, &get("wpe.weight".into(), &[t, c])?);
    for (l, ids) in layout.blocks.iter().enumerate() {
        let p = |s: &str| format!("h.{l}.{s}");
        put(&mut params, ids.ln1_w, &get(p("ln_1.weight"), &[c])?);
        put(&mut params, ids.ln1_b, &get(p("ln_1.bias"), &[c])?);
        let (w, b) = (get(p("attn.c_attn.weight"), &[c, 3 * c])?, get(p("attn.c_attn.bias"), &[3 * c])?);
        for (j, (wid, bid)) in [(ids.q_w, ids.q_b), (ids.k_w, ids.k_b), (ids.v_w, ids.v_b)].into_iter().enumerate() {
            transpose_into(layout.of_mut(&mut params, wid), &w, c, 3 * c, j * c..(j + 1) * c);
            put(&mut params, bid, &b[j * c..(j + 1) * c]);
        }
        let linears = [("attn.c_proj", ids.o_w, ids.o_b, c, c), ("mlp.c_fc", ids.fc_w, ids.fc_b, c, f)];
        for (name, wid, bid, din, dout) in linears.into_iter().chain([("mlp.c_proj", ids.proj_w, ids.proj_b, f, c)]) {
            let w = get(p(&format!("{name}.weight")), &[din, dout])?;
            transpose_into(layout.of_mut(&mut params, wid), &w, din, dout, 0..dout);
            put(&mut params, bid, &get(p(&format!("{name}.bias")), &[dout])?);
        }
        put(&mut params, ids.ln2_w, &get(p("ln_2.weight"), &[c])?);
        put(&mut params, ids.ln2_b, &get(p("ln_2.bias"), &[c])?);
    }
    put(&mut params, layout.lnf_w, &get("ln_f.weight".into(), &[c])?);
    put(&mut params, layout.lnf_b, &get("ln_f.bias".into(), &[c])?);
    if let Some(extra) = names.keys().filter(|n| !skipped(n) && !expected.contains(n)).min() {
        return refuse(format!(
            "tensor {extra} is not part of GPT-2 with {} layers (another architecture, or config.json is not this \
             file's)",
            cfg.layers
        ));
    }
    if let Some(head) = names.get("lm_head.weight") {
        let shape = st.tensor(head).or_else(refuse)?.shape().to_vec();
        if shape != [v, c] {
            return refuse(format!("tensor {head} has shape {shape:?}, but the tied head is [{v}, {c}]"));
        }
    }
    Ok((layout, params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    fn cfg() -> ModelConfig {
        ModelConfig { vocab: 5, d_model: 4, heads: 2, layers: 1, d_ff: 6, context: 3, ..ModelConfig::default() }
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
            let (layout, p) = read(&cfg(), &file(prefix, None, None)).unwrap();
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
            (b"PK\x03\x04rest of a zip".to_vec(), "PyTorch pickle"),
            (vec![0x80, 2, 0x8a, 0x0a], "Python pickle"),
            (b"not a tensor file at all".to_vec(), "not a safetensors file"),
            (file("", Some("h.0.mlp.c_fc.bias"), None), "h.0.mlp.c_fc.bias is missing"),
            (file("", None, Some(("h.1.ln_1.weight", vec![4]))), "h.1.ln_1.weight is not part of GPT-2 with 1 layers"),
            (file("", None, Some(("lm_head.weight", vec![4, 5]))), "lm_head.weight has shape [4, 5]"),
        ];
        for (bytes, want) in cases {
            let err = read(&cfg(), &bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{err} lacks {want}");
        }
        let wider = ModelConfig { d_ff: 8, ..cfg() };
        let err = read(&wider, &good).unwrap_err().to_string();
        assert!(err.contains("h.0.mlp.c_fc.weight has shape [4, 6], but config.json makes it [4, 8]"), "{err}");
        assert!(read(&cfg(), &file("", None, Some(("lm_head.weight", vec![5, 4])))).is_ok());
    }

    #[test]
    fn a_weight_that_is_not_a_finite_number_is_refused_with_its_tensor() {
        for bad in [f32::NAN, f32::INFINITY] {
            let mut bytes = file("", None, None);
            // The file's last bytes: the last element of ln_f.weight (sorted last), which GPT-2 reads.
            let n = bytes.len();
            bytes[n - 4..].copy_from_slice(&bad.to_le_bytes());
            let err = read(&cfg(), &bytes).unwrap_err().to_string();
            assert!(
                err.contains(&format!("holds {bad} at element")) && err.contains("must be a finite number"),
                "{err}"
            );
        }
    }
}
