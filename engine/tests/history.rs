//! `lab history` on checkpoint folders of a GPT-NeoX model (`tests/families/fixture.py`, one seed
//! per checkpoint, in Pythia's revision layout): every checkpoint's attention entropy per layer,
//! and its spread over the texts, against the entropy of an independent numpy forward's attention;
//! steps read from the folders' names; a copy of an earlier checkpoint found and left out.

#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

use serde_json::Value;
use support::{lab, tensors};

mod support;

const TEXTS: [&str; 2] = ["The tokens walk on the sphere.", "Attention is sparse, then dense again."];

fn fixture(dir: &Path, args: &[&str]) {
    support::fixture("families/fixture.py", dir, &[&["--family", "gpt_neox"], args].concat())
}

/// Layer by layer, the mean over heads and query positions of -sum_j P_ij ln P_ij of the
/// reference's attention `attn.{l}` (NH, T, T).
fn entropies(reference: &support::Tensors, layers: usize) -> Vec<f64> {
    (0..layers)
        .map(|l| {
            let (shape, p) = &reference[&format!("attn.{l}")];
            let rows = p.chunks_exact(shape[2]);
            let n = rows.len() as f64;
            rows.map(|row| row.iter().filter(|&&x| x > 0.0).map(|&x| -(x as f64) * (x as f64).ln()).sum::<f64>())
                .sum::<f64>()
                / n
        })
        .collect()
}

#[test]
fn the_history_of_checkpoints_is_the_reference_attention_s_entropy() {
    let root = support::scratch("history", "pythia").join("resolve");
    let seeds = [(0u64, "11"), (1000, "12"), (2000, "13")];
    for (step, seed) in seeds {
        fixture(&root.join(format!("step{step}")), &["--seed", seed]);
    }
    // Step 3000 serves step 1000's weights again, as some hub branches do.
    let copy = root.join("step3000");
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(root.join("step1000").join(f), copy.join(f)).unwrap();
    }
    let dirs: Vec<String> =
        [0, 3000, 1000, 2000].iter().map(|s| root.join(format!("step{s}")).display().to_string()).collect();
    let mut args = vec!["history"];
    for d in &dirs {
        args.extend(["--model", d.as_str()]);
    }
    for t in TEXTS {
        args.extend(["--text", t]);
    }
    let (ok, out, err) = lab(&[args.as_slice(), &["--json"]].concat());
    assert!(ok, "{err}");
    let h: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(h["steps"], serde_json::json!([0, 1000, 2000, 3000]), "steps from the folders, in order");
    assert_eq!(h["identical"], serde_json::json!([[3000, 1000]]));
    assert_eq!(h["checkpoints"][3]["same_as"], 1000);
    let layers = h["layers"].as_u64().unwrap() as usize;
    assert_eq!(layers, 3);
    for (k, (step, seed)) in seeds.iter().enumerate() {
        let dir = root.join(format!("step{step}"));
        let per_text: Vec<Vec<f64>> = TEXTS
            .iter()
            .map(|t| {
                let (ok, json, err) = lab(&["inspect", "--model", dir.to_str().unwrap(), "--text", t, "--json"]);
                assert!(ok, "{err}");
                let report: Value = serde_json::from_str(json.trim()).unwrap();
                let ids: Vec<String> = report["tokens"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
                fixture(&dir, &["--seed", seed, "--reference", &ids.join(",")]);
                entropies(&tensors(&dir.join("reference.safetensors")), layers)
            })
            .collect();
        for l in 0..layers {
            let want = (per_text[0][l] + per_text[1][l]) / 2.0;
            let spread = (per_text[0][l] - per_text[1][l]).abs();
            let got = h["entropy"][k][l].as_f64().unwrap();
            assert!((got - want).abs() < 1e-3, "step {step} layer {l}: {got} nats against {want}");
            let got_spread = h["spread"][k][l].as_f64().unwrap();
            assert!((got_spread - spread).abs() < 1e-3, "step {step} layer {l}: spread {got_spread} against {spread}");
        }
    }
    // The copy measures what its original measured, and says whose weights it has.
    assert_eq!(h["entropy"][3], h["entropy"][1]);
    let kinds = ["falls then rises", "only falls", "only rises", "neither"];
    for v in h["verdict"].as_array().unwrap() {
        assert!(kinds.contains(&v["kind"].as_str().unwrap()), "{v}");
    }
    let (ok, text, err) = lab(&args);
    assert!(ok, "{err}");
    assert!(text.contains("step 3000 has exactly step 1000's weights: it is left out of the verdicts."), "{text}");

    // A checkpoint that cannot be read (its folder renamed away during the run) stops the history
    // with its step and path named, and the checkpoints read before it are kept.
    let gone = root.join("step4000").display().to_string();
    let (ok, out, err) = lab(&[args.as_slice(), &["--model", gone.as_str(), "--json"]].concat());
    assert!(!ok && err.contains(&format!("step 4000 ({gone}):")), "{err}");
    assert!(err.contains("the history above holds the 4 checkpoints read before it"), "{err}");
    let kept: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(kept["entropy"], h["entropy"], "the readings before the failure, as the full run had them");
    let (ok, out, err) = lab(&["history", "--model", gone.as_str(), "--text", "a"]);
    assert!(!ok && out.is_empty() && err.contains(&format!("step 4000 ({gone}):")), "{err}");

    // Steps that do not match the checkpoints, or a folder without one, are refused by name.
    let (ok, _, err) = lab(&[args.as_slice(), &["--steps", "1,2"]].concat());
    assert!(!ok && err.contains("--steps gives 2 steps for 4 checkpoints"), "{err}");
    let plain = root.join("main");
    std::fs::rename(&copy, &plain).unwrap();
    let (ok, _, err) = lab(&["history", "--model", plain.to_str().unwrap(), "--text", "a"]);
    assert!(!ok && err.contains("no stepN in its path"), "{err}");
    let _ = std::fs::remove_dir_all(root.parent().unwrap());
}
