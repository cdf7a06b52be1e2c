//! BERT, the Brownian paper's model, end to end through `lab`: a small random-weight
//! BertForMaskedLM in Hugging Face's exact files with a WordPiece tokenizer.json
//! (`tests/families/bert.py`), read by `lab inspect --dump` and compared with an independent numpy
//! forward (the same script, written from transformers' modeling_bert) on the CPU and the GPU
//! (lavapipe); its lenses (every token on the sphere after each block's LayerNorm, each head's
//! walk both ways with its stationary distribution, the candidates at [MASK]); and what it cannot
//! do refused by name. Needs python3 with numpy (as `tests/families.rs`).

#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

use serde_json::Value;
use support::{lab, tensors, Tensors};

mod support;

const TEXT: &str = "The cats sat on the [MASK].";

fn fixture(dir: &Path, args: &[&str]) {
    support::fixture("families/bert.py", dir, args)
}

/// Largest difference against the reference's largest value, per tensor.
fn assert_close(ours: &Tensors, reference: &Tensors, what: &str) {
    for (name, (shape, want)) in reference {
        let (our_shape, got) = &ours[name];
        assert_eq!(our_shape, shape, "{what} {name}");
        let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
        let err = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(err <= 1e-4 * scale, "{what} {name}: max error {err:e} against a largest value of {scale}");
    }
}

#[test]
fn bert_reads_as_its_independent_forward_with_every_lens() {
    let dir = support::scratch("bert", "mlm");
    fixture(&dir, &[]);
    let (d, dump) = (dir.to_str().unwrap(), dir.join("dump.safetensors"));
    let args =
        ["inspect", "--model", d, "--text", TEXT, "--json", "--dump", dump.to_str().unwrap(), "--backend", "cpu"];
    let (ok, out, err) = lab(&args);
    assert!(ok, "{err}");
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    // [CLS] text [SEP], lower-cased WordPiece, as the vocabulary in tokenizer.json has them.
    let tok: Value = serde_json::from_slice(&std::fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
    let id = |t: &str| tok["model"]["vocab"][t].as_u64().unwrap();
    let want: Vec<u64> = ["[CLS]", "the", "cat", "##s", "sat", "on", "the", "[MASK]", ".", "[SEP]"].map(id).to_vec();
    let ids: Vec<u64> = r["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(ids, want);
    assert_eq!(r["family"], "BERT");
    let block = r["block"].as_str().unwrap();
    assert!(block.starts_with("Post-LN") && block.ends_with("attention both ways"), "{block}");
    assert_eq!((r["predicts"].as_str(), r["masks"].clone()), (Some("masked"), serde_json::json!([7])));

    let id_list: Vec<String> = ids.iter().map(u64::to_string).collect();
    fixture(&dir, &["--reference", &id_list.join(",")]);
    let reference = tensors(&dir.join("reference.safetensors"));
    assert_eq!(reference.len(), 2 * 3 + 2);
    assert_close(&tensors(&dump), &reference, "cpu");

    // Post-LN: after every block's LayerNorm, before its gain, each token is on the sphere.
    for l in r["layers"].as_array().unwrap() {
        let worst = l["radius"]["max_rel_err"].as_f64().unwrap();
        assert!(worst < 1e-5, "layer {}: {worst}", l["layer"]);
    }
    // Each head's stationary distribution is the left eigenvector of its attention (the
    // reference's), pi P = pi, summing to 1.
    let t = ids.len();
    for (l, layer) in r["layers"].as_array().unwrap().iter().take(3).enumerate() {
        let (_, att) = &reference[&format!("attn.{l}")];
        for (h, head) in layer["heads"].as_array().unwrap().iter().enumerate() {
            let pi: Vec<f64> = head["stationary"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
            assert_eq!(pi.len(), t);
            assert!((pi.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            let p = &att[h * t * t..(h + 1) * t * t];
            for j in 0..t {
                let moved: f64 = (0..t).map(|i| pi[i] * p[i * t + j] as f64).sum();
                assert!((moved - pi[j]).abs() < 1e-4, "layer {l} head {h}: (pi P)_{j} = {moved}, pi_{j} = {}", pi[j]);
            }
        }
    }
    // At [MASK], the candidates are the reference logits' softmax, best first.
    let (_, logits) = &reference["logits"];
    let v = logits.len() / t;
    let row: Vec<f64> = logits[7 * v..8 * v].iter().map(|&x| x as f64).collect();
    let top = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = row.iter().map(|x| (x - top).exp()).sum();
    let best = row.iter().position(|&x| x == top).unwrap();
    let vocab = tok["model"]["vocab"].as_object().unwrap();
    let best_token = vocab.iter().find(|(_, i)| i.as_u64() == Some(best as u64)).unwrap().0;
    let first = &r["next"][7][0];
    assert_eq!(first[0].as_str().unwrap().trim(), best_token);
    assert!((first[1].as_f64().unwrap() - 1.0 / z).abs() < 1e-4, "{first} against {}", 1.0 / z);

    // The text report says where the mask is and what fills it.
    let (ok, out, err) = lab(&["inspect", "--model", d, "--text", TEXT]);
    assert!(ok, "{err}");
    assert!(out.contains("At the mask (token 8) the model fills in:"), "{out}");

    // The GPU's forward (Post-LN residuals and the head's transform; lavapipe in CI) too.
    let gpu_dump = dir.join("dump-gpu.safetensors");
    let gpu =
        ["inspect", "--model", d, "--text", TEXT, "--json", "--dump", gpu_dump.to_str().unwrap(), "--backend", "gpu"];
    let (ok, _, err) = lab(&gpu);
    if !ok && err.contains("no GPU adapter") {
        eprintln!("skipped the GPU's reading, no adapter: {err}");
    } else {
        assert!(ok, "{err}");
        assert_close(&tensors(&gpu_dump), &reference, "gpu");
    }

    // Two texts compared: BERT reads both ways, so a change moves the tokens before it too; the
    // words never say a token sees only its past, nor what comes next.
    let (ok, out, err) = lab(&["inspect", "--model", d, "--text", "the cat sat", "--compare", "the cat ran", "--json"]);
    assert!(ok, "{err}");
    let c: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((c["causal"].as_bool(), c["next"][0].as_array().map(Vec::len)), (Some(false), Some(0)));
    let first = c["first_change"].as_u64().unwrap() as usize;
    assert!(first > 0);
    let moved_before = c["layers"].as_array().unwrap().iter().any(|l| {
        let angles = l["angles"].as_array().unwrap();
        let shared = c["shared"].as_array().unwrap();
        shared.iter().zip(angles).any(|(p, a)| (p[0].as_u64().unwrap() as usize) < first && a.as_f64().unwrap() > 1e-3)
    });
    assert!(moved_before, "a token before the change moves in a model that reads both ways");
    let (ok, out, err) = lab(&["inspect", "--model", d, "--text", "the cat sat", "--compare", "the cat ran"]);
    assert!(ok, "{err}");
    assert!(out.contains("(this model reads both ways, so the change reaches those before it too)"), "{out}");
    assert!(!out.contains("sees only the tokens before it") && !out.contains("leads it to expect"), "{out}");

    // BERT does not write left to right: it says so, and what to do instead.
    let (ok, _, err) = lab(&["sample", "--model", d, "--prompt", "the", "--tokens", "3"]);
    assert!(!ok && err.contains("does not write left to right") && err.contains("[MASK]"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tensorflow_names_read_alike_and_what_bert_cannot_run_is_refused() {
    // A checkpoint converted from TensorFlow names the norms gamma and beta.
    let dir = support::scratch("bert", "gamma");
    fixture(&dir, &["--gamma", "--reference", "2,5,7,4,3"]);
    let (d, dump) = (dir.to_str().unwrap(), dir.join("dump.safetensors"));
    let (ok, out, err) =
        lab(&["inspect", "--model", d, "--text", "the cat [MASK]", "--json", "--dump", dump.to_str().unwrap()]);
    assert!(ok, "{err}");
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["tokens"], serde_json::json!([2, 5, 7, 4, 3]));
    assert_close(&tensors(&dump), &tensors(&dir.join("reference.safetensors")), "gamma");
    // An empty text is refused as every family refuses it, not read as [CLS] [SEP].
    let (ok, _, err) = lab(&["inspect", "--model", d, "--text", ""]);
    assert!(!ok && err.contains("the text is empty"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    // A BertModel has no masked-LM head.
    let dir = support::scratch("bert", "base");
    fixture(&dir, &["--base"]);
    let d = dir.to_str().unwrap();
    let (ok, _, err) = lab(&["inspect", "--model", d, "--text", "the cat"]);
    assert!(!ok && err.contains("no masked-LM head (cls.predictions)"), "{err}");

    let config = dir.join("config.json");
    let original: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    for (field, value, want) in [
        ("is_decoder", Value::from(true), "is_decoder is true"),
        ("add_cross_attention", Value::from(true), "add_cross_attention is true"),
        ("position_embedding_type", Value::from("relative_key"), "position_embedding_type is \"relative_key\""),
        ("hidden_act", Value::from("gelu_python"), "hidden_act \"gelu_python\""),
    ] {
        let mut c = original.clone();
        c[field] = value;
        std::fs::write(&config, c.to_string()).unwrap();
        let (ok, _, err) = lab(&["inspect", "--model", d, "--text", "the cat"]);
        assert!(!ok && err.contains(want), "{field}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
