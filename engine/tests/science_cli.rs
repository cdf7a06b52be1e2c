//! `lab brownian` and `lab joma` end to end: the JSON carries simulation and closed form side by side
//! with real values, and bad input exits non-zero with a message.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("lab runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn brownian_json_matches_the_reference_check() {
    // docs/science.md#brownian-motion-on-the-sphere: n=16, R=4, D=1, dt=0.002, 4000 walkers, t up to 1.
    let (ok, stdout, stderr) = lab(&["brownian", "--dim", "16", "--radius", "4", "--steps", "500", "--json"]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let samples = v["brownian"]["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 10);
    for s in samples {
        let (sim, theory, se) =
            (s["mean_cos"].as_f64().unwrap(), s["theory_cos"].as_f64().unwrap(), s["mean_cos_se"].as_f64().unwrap());
        assert!((sim - theory).abs() < 4.0 * se, "{s}");
        let (msd, msd_theory) = (s["msd"].as_f64().unwrap(), s["theory_msd"].as_f64().unwrap());
        assert!((msd - msd_theory).abs() < 4.0 * s["msd_se"].as_f64().unwrap(), "{s}");
    }
    let last = &samples[9];
    assert_eq!(last["step"], 500);
    assert!((last["theory_cos"].as_f64().unwrap() - 0.3916).abs() < 1e-4);
}

#[test]
fn joma_toy_json_has_the_dip_and_rebound() {
    let (ok, stdout, stderr) = lab(&["joma", "--toy", "--seed", "0", "--json"]);
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let s = &v["summary"];
    assert!((s["initial"].as_f64().unwrap() - 10f64.ln()).abs() < 1e-9);
    assert!(s["rebound"].as_f64().unwrap() > 0.2, "{s}");
    assert_eq!(s["shape"], "dip_and_rebound");
    let curve = v["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 101, "every 50 steps from 0 to 5000");
    assert_eq!(curve[100]["step"], 5000);
}

#[test]
fn science_commands_reject_bad_input() {
    for args in [
        &["brownian", "--walkers", "0"][..],
        &["brownian", "--scheme", "rk4"],
        &["brownian", "--diffusion=-1"],
        &["brownian", "--dim", "1024", "--walkers", "100000"],
        &["joma", "--mlp", "tanh"],
    ] {
        let (ok, _, stderr) = lab(args);
        assert!(!ok && stderr.starts_with("error: "), "{args:?}: {stderr}");
    }
}

/// `lab particles`: started equiangular, every recorded mean inner product follows the closed-form
/// ODE of docs/science.md#interacting-particles (integrated here, by RK4 in f64); a random start in a hemisphere ends in one
/// cluster; bad starts are refused.
#[test]
fn particles_json_follows_the_equiangular_ode_and_clusters() {
    let args = ["particles", "--tokens", "5", "--dim", "8", "--beta", "2", "--time", "3", "--dt", "0.01"];
    let (ok, stdout, stderr) = lab(&[&args[..], &["--equiangular", "0.1", "--record", "0.5", "--json"]].concat());
    assert!(ok, "{stderr}");
    let rate = |r: f64| 2.0 * (2.0 * r).exp() * (1.0 - r) * (4.0 * r + 1.0) / (2f64.exp() + 4.0 * (2.0 * r).exp());
    let rho_at = |t: f64| {
        let (mut r, h) = (0.1, 1e-4);
        for _ in 0..(t / h).round() as usize {
            let k1 = rate(r);
            let k2 = rate(r + h / 2.0 * k1);
            let k3 = rate(r + h / 2.0 * k2);
            r += h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + rate(r + h * k3));
        }
        r
    };
    let lines: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).expect("JSON per line")).collect();
    assert_eq!(lines.len(), 7, "t = 0, 0.5, ..., 3");
    for v in &lines {
        let (t, rho) = (v["t"].as_f64().unwrap(), v["mean_inner"].as_f64().unwrap());
        assert!((rho - rho_at(t)).abs() < 1e-8, "t {t}: {rho} vs the ODE's {}", rho_at(t));
    }
    let (ok, stdout, stderr) =
        lab(&["particles", "--tokens", "12", "--dim", "4", "--time", "25", "--dt", "0.05", "--hemisphere", "--json"]);
    assert!(ok, "{stderr}");
    let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!((last["clustered"].as_f64(), last["clusters"].as_u64()), (Some(1.0), Some(1)), "{last}");
    for (bad, want) in [
        (&["particles", "--tokens", "8", "--dim", "8", "--equiangular", "0.2"][..], "needs d > n"),
        (&["particles", "--equiangular", "0.2", "--hemisphere"][..], "not both"),
        (&["particles", "--dt", "0"][..], "dt > 0"),
    ] {
        let (ok, _, stderr) = lab(bad);
        assert!(!ok && stderr.contains(want), "{bad:?}: {stderr}");
    }
}

/// The smoke run of JoMA on real text (`bench/joma_text.sh` is the report run): character-level
/// training on the Debian fortunes databases, which `cargo xtask setup` installs.
#[test]
fn joma_runs_on_real_english_text() {
    let dir = std::path::Path::new("/usr/share/games/fortunes");
    let mut corpus = String::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run cargo xtask setup (apt-get install fortunes)", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !matches!(p.extension().and_then(|x| x.to_str()), Some("dat" | "u8")))
        .collect();
    files.sort();
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        corpus.extend(text.lines().filter(|l| *l != "%").flat_map(|l| [l, "\n"]));
        if corpus.len() > 200_000 {
            break;
        }
    }
    let path = std::env::temp_dir().join(format!("spherewalk-fortunes-{}.txt", std::process::id()));
    std::fs::write(&path, &corpus).unwrap();
    let (ok, stdout, stderr) = lab(&[
        "joma",
        "--data",
        path.to_str().unwrap(),
        "--steps",
        "30",
        "--mlp",
        "gelu",
        "--eval-every",
        "30",
        "--json",
    ]);
    std::fs::remove_file(&path).ok();
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).expect("JSON");
    let layers = v["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 2);
    for l in layers {
        let e = &l["entropy"];
        let (first, low) = (e["initial"].as_f64().unwrap(), e["min"].as_f64().unwrap());
        assert!(first.is_finite() && low <= first && low > 0.0, "{l}");
        assert!(e["shape"].is_string(), "{l}");
    }
    // Thirty steps already predict characters better than a uniform guess over the alphabet.
    let vocab = v["model"]["vocab"].as_f64().unwrap();
    assert!(vocab > 60.0, "an English alphabet with punctuation, got {vocab} symbols");
    assert!(v["final_val_loss"].as_f64().unwrap() < vocab.ln(), "{}", v["final_val_loss"]);
}
