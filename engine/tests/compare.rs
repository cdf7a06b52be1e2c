//! Two texts through one model (`lab inspect --compare`), against an independent numpy forward
//! of GPT-2 (`tests/gpt2/fixture.py`): every shared token's angle between its two places on the
//! sphere at every depth, from the reference's own hidden states; the tokens before the change in
//! place; each head's entropy as each text's own reading has it.

#![cfg(not(target_arch = "wasm32"))]

use serde_json::Value;
use support::{lab, tensors};

mod support;

const FIRST: &str = "The Brownian motion in the transformer model: a random walk on the sphere.";
const SECOND: &str = "The Brownian motion in the transformer model: a random dance on the sphere.";

fn json(args: &[&str]) -> Value {
    let (ok, out, err) = lab(args);
    assert!(ok, "{args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap()
}

/// The angle in degrees between two rows after centring: LayerNorm's point on the sphere is the
/// centred row scaled, so its direction is the centred row's.
fn angle(x: &[f32], y: &[f32]) -> f64 {
    let centred = |v: &[f32]| {
        let mean = v.iter().map(|&a| a as f64).sum::<f64>() / v.len() as f64;
        v.iter().map(|&a| a as f64 - mean).collect::<Vec<f64>>()
    };
    let (x, y) = (centred(x), centred(y));
    let dot: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    let n = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    (dot / (n(&x) * n(&y))).clamp(-1.0, 1.0).acos().to_degrees()
}

#[test]
fn two_texts_compare_as_the_reference_forward_has_them() {
    let dir = support::scratch("compare", "gpt2");
    support::fixture("gpt2/fixture.py", &dir, &[]);
    let d = dir.to_str().unwrap();
    let c = json(&["inspect", "--model", d, "--text", FIRST, "--compare", SECOND, "--json"]);
    let reports = [FIRST, SECOND].map(|t| json(&["inspect", "--model", d, "--text", t, "--json"]));
    let references = reports.each_ref().map(|r| {
        let ids: Vec<String> = r["tokens"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
        support::fixture("gpt2/fixture.py", &dir, &["--reference", &ids.join(",")]);
        tensors(&dir.join("reference.safetensors"))
    });
    let pieces = |r: &Value| r["pieces"].as_array().unwrap().clone();
    assert_eq!(c["pieces"][0].as_array().unwrap(), &pieces(&reports[0]));
    assert_eq!(c["pieces"][1].as_array().unwrap(), &pieces(&reports[1]));
    // One word differs: " walk" against " dance", at the same place; every other token is shared.
    let first = c["first_change"].as_u64().unwrap() as usize;
    assert_eq!(c["pieces"][0][first], " walk");
    assert_eq!(c["pieces"][1][first], " dance");
    let shared: Vec<(usize, usize)> = c["shared"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap() as usize))
        .collect();
    let n = pieces(&reports[0]).len();
    assert_eq!(shared, (0..n).filter(|&i| i != first).map(|i| (i, i)).collect::<Vec<_>>());
    let layers = c["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 13);
    let mut moved = 0.0f64;
    for (l, layer) in layers.iter().enumerate() {
        let [(_, a), (shape, b)] = references.each_ref().map(|r| &r[&format!("hidden.{l}")]);
        let width = shape[1];
        let angles = layer["angles"].as_array().unwrap();
        for (k, &(i, j)) in shared.iter().enumerate() {
            let want = angle(&a[i * width..(i + 1) * width], &b[j * width..(j + 1) * width]);
            let got = angles[k].as_f64().unwrap();
            assert!((got - want).abs() < 0.05, "layer {l}, token {i}: {got} degrees against {want}");
            // Before the change both texts are the same: a causal model cannot move those tokens.
            if i < first {
                assert!(got < 1e-3, "layer {l}, token {i} moved {got} degrees before the change");
            } else {
                moved = moved.max(got);
            }
        }
        if l < 12 {
            for (t, report) in reports.iter().enumerate() {
                let want: Vec<f64> = report["layers"][l]["heads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["entropy"].as_f64().unwrap())
                    .collect();
                let got: Vec<f64> =
                    layer["entropy"][t].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
                assert_eq!(got, want, "layer {l}, text {t}");
            }
        }
    }
    // The token after the changed word sees it: it moves.
    assert!(moved > 0.1, "the tokens after the change moved at most {moved} degrees");
    for t in 0..2 {
        assert_eq!(c["next"][t], *reports[t]["next"].as_array().unwrap().last().unwrap());
    }
    // The words say where the texts part, with the same pieces.
    let (ok, text, err) = lab(&["inspect", "--model", d, "--text", FIRST, "--compare", SECOND]);
    assert!(ok, "{err}");
    assert!(text.contains(&format!("The texts part at token {}: \" walk\" against \" dance\".", first + 1)), "{text}");
    assert!(text.contains(&format!("The {first} tokens before it stay at exactly the same place")), "{text}");

    // Both passes are held at once: a limit that holds one reading of the long text but not two
    // refuses the comparison, with the limit named.
    let long = "word ".repeat(100);
    let p = engine::pretrained::Pretrained::open(&dir, u64::MAX).unwrap();
    let t = p.tokenizer.encode(&long).unwrap().len();
    let (weights, pass) =
        (engine::memory::weight_bytes(&p.model.cfg).unwrap(), engine::memory::read_bytes(&p.model.cfg, t).unwrap());
    let mib = (weights + pass + pass / 2).div_ceil(1 << 20).to_string();
    let (ok, _, err) = lab(&["inspect", "--model", d, "--text", &long, "--json", "--memory-limit-mib", &mib]);
    assert!(ok, "one reading fits in {mib} MiB: {err}");
    let (ok, _, err) = lab(&["inspect", "--model", d, "--text", &long, "--compare", &long, "--memory-limit-mib", &mib]);
    assert!(!ok && err.contains("over the memory limit"), "two readings do not fit in {mib} MiB: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
