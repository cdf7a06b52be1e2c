//! Every model family the lab opens, end to end through `lab`: a small random-weight GPT-NeoX
//! (Pythia's layout, F16 with its mask buffers), Llama (grouped-query, tied head) and Qwen2 (q/k/v
//! biases, BF16, transformers 5's `rope_parameters`) in Hugging Face's exact files with a
//! tokenizer.json of their kind (`tests/families/fixture.py`), read by `lab inspect --dump` and
//! compared with an independent numpy forward of each family (the same script), on the CPU and on
//! the GPU (lavapipe); written by
//! `lab sample --model`; and each field the engine cannot run refused by name. Needs python3 with
//! numpy (as `tests/gpt2.rs`).

#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{lab, tensors};

mod support;

const TEXT: &str = "the heat in the tea and the stars";

/// TEXT's ids from each fixture tokenizer, worked out by hand from its vocabulary and merges.
/// Byte-level BPE (GPT-NeoX, Qwen2): the ids 0-255 are the bytes, then the merges
/// `Ġ t` (256), `h e`, `Ġt he`, `i n`, `Ġ a`, `a n`, `e r`, `o n`, `Ġ s` (264), each word
/// (" heat") merged alone. Metaspace BPE with byte fallback (Llama): `<unk> <s> </s>` 0-2, the
/// bytes `<0x00>`-`<0xFF>` 3-258, then `▁` 259, e t h a o n i r s, `▁t` 269, `he`, `▁the` 271,
/// `in`, `▁a` 273, `an`, `er`; the text is one word ("▁the▁heat▁in…"), and "d", not in the
/// vocabulary, falls back to its byte (0x64: 103).
fn known_ids(family: &str) -> Vec<u64> {
    match family {
        "llama" => vec![
            271, 259, 270, 263, 261, 259, 272, 271, 269, 260, 263, 273, 265, 103, 271, 259, 268, 261, 263, 267, 268,
        ],
        _ => vec![116, 257, 32, 257, 97, 116, 32, 259, 258, 256, 101, 97, 260, 110, 100, 258, 264, 116, 97, 114, 115],
    }
}

fn scratch(name: &str) -> PathBuf {
    support::scratch("family", name)
}

fn fixture(dir: &Path, family: &str, reference: Option<&str>) {
    let mut args = vec!["--family", family];
    args.extend(reference.map(|ids| ["--reference", ids]).into_iter().flatten());
    support::fixture("families/fixture.py", dir, &args)
}

#[test]
fn each_family_reads_as_its_independent_forward() {
    for (family, layers, block) in [
        ("gpt_neox", 3, "LayerNorm, rotary positions on 4 dims (base 10000), parallel attention and MLP"),
        ("llama", 3, "RMSNorm, rotary positions on 16 dims (base 100000), gated MLP, 4 query heads share 2"),
        ("qwen2", 2, "RMSNorm, rotary positions on 16 dims (base 1000000), gated MLP, 4 query heads share 1"),
    ] {
        let dir = scratch(family);
        fixture(&dir, family, None);
        let (d, dump) = (dir.to_str().unwrap(), dir.join("dump.safetensors"));
        let args =
            ["inspect", "--model", d, "--text", TEXT, "--json", "--dump", dump.to_str().unwrap(), "--backend", "cpu"];
        let (ok, out, err) = lab(&args);
        assert!(ok, "{family}: {err}");
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(report["n_layer"], layers, "{family}");
        assert!(report["block"].as_str().unwrap().starts_with(block), "{family}: {}", report["block"]);
        // The sphere lens names the norm it measures.
        assert_eq!(report["norm"], if family == "gpt_neox" { "LayerNorm" } else { "RMSNorm" }, "{family}");
        let pieces: String = report["pieces"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(pieces.trim_start(), TEXT, "{family}: the tokenizer's pieces give the text back");
        let known: Vec<u64> = report["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert_eq!(known, known_ids(family), "{family}: the ids worked out by hand");
        let ids: Vec<String> = known.iter().map(u64::to_string).collect();
        fixture(&dir, family, Some(&ids.join(",")));
        let reference = tensors(&dir.join("reference.safetensors"));
        assert_eq!(reference.len(), 2 * layers + 2);
        // The GPU's forward (RMSNorm, rotary, gated and parallel kernels; lavapipe in CI) too.
        let gpu_dump = dir.join("dump-gpu.safetensors");
        let gpu = [
            "inspect",
            "--model",
            d,
            "--text",
            TEXT,
            "--json",
            "--dump",
            gpu_dump.to_str().unwrap(),
            "--backend",
            "gpu",
        ];
        let (ok, out, err) = lab(&gpu);
        let on_gpu = if !ok && err.contains("no GPU adapter") {
            eprintln!("skipped the GPU's reading, no adapter: {err}");
            None
        } else {
            assert!(ok, "{family} on the GPU: {err}");
            let report: Value = serde_json::from_str(out.trim()).unwrap();
            assert!(report["on"].as_str().unwrap().starts_with("WebGPU"), "{}", report["on"]);
            Some(tensors(&gpu_dump))
        };
        for (backend, ours) in [("cpu", Some(tensors(&dump))), ("gpu", on_gpu)] {
            let Some(ours) = ours else { continue };
            for (name, (shape, want)) in &reference {
                let (our_shape, got) = &ours[name];
                assert_eq!(our_shape, shape, "{family} {name}");
                let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
                let err = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    err <= 1e-4 * scale,
                    "{family} {backend} {name}: max error {err:e} against a largest value of {scale}"
                );
            }
        }
        // Writing through the key/value cache, greedy, opened from the files (BF16 copies where the
        // family's file is BF16): it writes every token asked. That the cached pass gives the full
        // pass's logits is `tests/writing.rs`'s.
        let (ok, out, err) =
            lab(&["sample", "--model", d, "--prompt", "the", "--tokens", "12", "--temperature", "0", "--json"]);
        assert!(ok, "{family}: {err}");
        let sample: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(sample["tokens"].as_array().map(Vec::len), Some(12), "{family}: {sample}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn what_the_engine_cannot_run_is_refused_by_name() {
    let dir = scratch("refused");
    let cases: [(&str, &str, Value, &str); 15] = [
        (
            "llama",
            "rope_scaling",
            serde_json::json!({"rope_type": "dynamic", "factor": 2.0}),
            "rope_scaling of type \"dynamic\" stretches the rotary angles in a way the engine does not compute",
        ),
        ("llama", "rope_scaling", Value::from(8), "rope_scaling is 8, not an object with a rope_type"),
        ("llama", "rope_scaling", Value::from("llama3"), "rope_scaling is \"llama3\", not an object"),
        (
            "llama",
            "rope_scaling",
            serde_json::json!({"rope_type": "llama3", "factor": 8.0}),
            "rope_scaling of type \"llama3\" needs a number low_freq_factor",
        ),
        ("llama", "rope_theta", Value::from(0), "the rotary base 0 is not a number above 1"),
        ("llama", "rope_theta", Value::from(-10000.0), "the rotary base -10000.0 is not a number above 1"),
        ("llama", "rope_theta", Value::from("10000"), "the rotary base \"10000\" is not a number above 1"),
        (
            "qwen2",
            "rope_parameters",
            serde_json::json!({"rope_type": "default", "rope_theta": 0}),
            "the rotary base 0 is not a number above 1",
        ),
        (
            "qwen2",
            "quantization_config",
            serde_json::json!({"quant_method": "gptq", "bits": 4}),
            "the weights are quantized (gptq)",
        ),
        ("qwen2", "use_sliding_window", Value::Bool(true), "use_sliding_window is true"),
        ("llama", "hidden_act", Value::from("gelu"), "hidden_act \"gelu\""),
        ("llama", "head_dim", Value::from(32), "head_dim = 32"),
        ("llama", "num_key_value_heads", Value::from(3), "num_key_value_heads = 3 does not divide"),
        ("gpt_neox", "model_type", Value::from("roberta"), "model_type is \"roberta\"; the lab opens"),
        ("gpt_neox", "hidden_act", Value::from("gelu_python"), "hidden_act \"gelu_python\""),
    ];
    for (family, field, value, want) in cases {
        fixture(&dir, family, None);
        let path = dir.join("config.json");
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        config[field] = value;
        std::fs::write(&path, config.to_string()).unwrap();
        let (ok, _, err) = lab(&["inspect", "--model", dir.to_str().unwrap(), "--text", TEXT]);
        assert!(!ok && err.contains(want), "{family} {field}: {err}");
    }
    // A family without its tokenizer.json is not read with GPT-2's.
    fixture(&dir, "llama", None);
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();
    let (ok, _, err) = lab(&["inspect", "--model", dir.to_str().unwrap(), "--text", TEXT]);
    assert!(!ok && err.contains("tokenizer.json"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Llama 3's and the linear scaling of the rotary angles read as transformers computes them: the
/// fixture's numpy forward (`--rope-scaling`, an original length of 64 positions, so that the
/// text's 21 reach the kept, the stretched and the mixed frequencies of llama3), within 1e-4.
#[test]
fn stretched_rotary_angles_read_as_their_independent_forward() {
    for scaling in ["llama3", "linear"] {
        let dir = scratch(&format!("rope-{scaling}"));
        let ids: Vec<String> = known_ids("llama").iter().map(u64::to_string).collect();
        let args = ["--family", "llama", "--rope-scaling", scaling, "--reference", &ids.join(",")];
        support::fixture("families/fixture.py", &dir, &args);
        let (d, dump) = (dir.to_str().unwrap(), dir.join("dump.safetensors"));
        let (ok, out, err) =
            lab(&["inspect", "--model", d, "--text", TEXT, "--json", "--dump", dump.to_str().unwrap()]);
        assert!(ok, "{scaling}: {err}");
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        assert!(report["block"].as_str().unwrap().contains(&format!("({scaling})")), "{}", report["block"]);
        let (reference, ours) = (tensors(&dir.join("reference.safetensors")), tensors(&dump));
        for (name, (_, want)) in &reference {
            let got = &ours[name].1;
            let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
            let err = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(err <= 1e-4 * scale, "{scaling} {name}: max error {err:e} against a largest value of {scale}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_text_the_page_cannot_draw_is_refused_before_it_is_read() {
    // Llama's fixture with a context of 8192 positions: 3 layers of 4 heads. 5,000 tokens are a pass
    // of 3 x 4 x 5000^2 floats of attention (1.2 GB) that fits the page's 3 GiB, but the page draws
    // every head's attention twice more (its panels, and the message to the page): 3.6 GB.
    let dir = scratch("long-context");
    fixture(&dir, "llama", None);
    let config = dir.join("config.json");
    let mut c: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    c["max_position_embeddings"] = 8192.into();
    std::fs::write(&config, c.to_string()).unwrap();
    let budget = 3 << 30;
    let p = engine::pretrained::Pretrained::open(&dir, budget).unwrap();
    // "x" is no merge of the fixture's tokenizer: a token each, after Llama's <s>.
    let text = "x".repeat(5000);
    let t = engine::lenses::tokens(&p, &text).unwrap().len();
    assert_eq!(t, 5001);
    let attention = 3 * 4 * (t * t) as u64 * 4;
    assert!(attention < budget && 3 * attention > budget);
    assert!(engine::lenses::tokens_within(&p, &text, budget).is_ok(), "the pass alone fits");
    let e = engine::lenses::tokens_to_draw(&p, &text, budget).unwrap_err().to_string();
    assert!(e.contains(&format!("reading {t} tokens here needs about")), "{e}");
    assert!(e.contains("every head's attention drawn") && e.contains("or read it with `lab inspect`"), "{e}");
    assert!(engine::lenses::tokens_to_draw(&p, TEXT, budget).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
