//! `lab sphere`, `lab joma` (training) and `lab report` end to end on tiny models: the JSON carries
//! real values within their mathematical bounds, figures and summary.md are written, and bad input
//! exits non-zero with a message.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("lab runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

const TINY: [&str; 10] = ["--d-model", "16", "--heads", "2", "--layers", "1", "--context", "16", "--batch", "4"];

fn run_json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(TINY);
    all.push("--json");
    let (ok, stdout, stderr) = lab(&all);
    assert!(ok, "{args:?}: {stderr}");
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn sphere_json_has_radius_kernel_entropy_and_fits() {
    let dir = std::env::temp_dir().join(format!("spherewalk-sphere-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("sphere.svg");
    let v = run_json(&[
        "sphere",
        "--data",
        "grammar",
        "--steps",
        "30",
        "--probe-every",
        "5",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(v["probe_frames"], 7, "steps 0, 5, ..., 30");
    let uniform = f(&v["uniform_entropy"]);
    assert!((uniform - (1..=16).map(|i| (i as f64).ln()).sum::<f64>() / 16.0).abs() < 1e-12);
    let radius = v["radius"].as_array().unwrap();
    assert_eq!(radius.len(), 2, "block 0 and the final LayerNorm");
    for r in radius {
        // eps explains the radius up to f32 rounding; Q = K = u on the sphere is the Gaussian kernel.
        assert!(f(&r["max_rel_err_after_eps"]) < 1e-5, "{r}");
        assert!(f(&r["radius"]["max_rel_err"]) < 0.05, "{r}");
        assert!(f(&r["pure_kernel_tv"]) < 1e-5, "{r}");
    }
    let heads = v["heads"].as_array().unwrap();
    assert_eq!(heads.len(), 2);
    for h in heads {
        for key in ["entropy", "entropy_initial"] {
            assert!(f(&h[key]) > 0.0 && f(&h[key]) <= uniform + 1e-6, "{h}");
        }
    }
    let fits = v["training_fits"].as_array().unwrap();
    assert_eq!(fits.len(), 6, "two depths x three phases");
    for fit in fits.iter().chain(std::iter::once(&v["depth_fit"])) {
        assert!(fit["error"].is_null(), "{fit}");
        assert!(f(&fit["diffusion"]) > 0.0, "{fit}");
        // Both models fitted to the same curves, the better named by the smaller error.
        let flow = &fit["flow"];
        let (b, p) = (f(&flow["brownian"]["rmse"]), f(&flow["particles"]["rmse"]));
        assert!(b.is_finite() && p.is_finite() && f(&flow["beta"]) > 0.0, "{flow}");
        assert_eq!(flow["better"], if p < b { "particles" } else { "brownian" }, "{flow}");
    }
    // Walkers through the head-averaged chain of the causal model: their share per token follows
    // the exact product of the chains, and they only ever move towards position 0.
    let w = &v["walkers"];
    assert_eq!(w["start"], 15);
    for err in w["max_abs_error"].as_array().unwrap() {
        assert!(f(err) < 0.05, "{w}");
    }
    for path in w["paths"].as_array().unwrap() {
        let p: Vec<u64> = path.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
        assert!(p.windows(2).all(|s| s[1] <= s[0]), "{p:?}");
    }
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn joma_on_hierarchy_reports_entropy_and_within_chunk_mass() {
    let v = run_json(&["joma", "--data", "hierarchy", "--mlp", "identity", "--steps", "20", "--probe-every", "5"]);
    assert_eq!(v["mlp"], "identity");
    let uniform = f(&v["uniform_entropy"]);
    let curve = v["curve"].as_array().unwrap();
    assert_eq!(curve.len(), 5);
    for p in curve {
        let h = f(&p["entropy"][0]);
        assert!(h > 0.0 && h <= uniform + 1e-6, "{p}");
        let w = f(&p["within_chunk"][0]);
        assert!((0.0..=1.0 + 1e-6).contains(&w), "{p}");
    }
    let chance = f(&v["within_chunk_chance"]);
    assert!(chance > 0.0 && chance < 1.0);
    // No chunks on grammar data.
    let g = run_json(&["joma", "--data", "grammar", "--steps", "10", "--probe-every", "5"]);
    assert!(g["curve"][0]["within_chunk"].is_null() && g["within_chunk_chance"].is_null());
}

#[test]
fn quick_report_writes_figures_and_answers_each_claim() {
    let dir = std::env::temp_dir().join(format!("spherewalk-report-{}", std::process::id()));
    // A real-text result as bench/joma_text.sh writes it: GELU dips and rebounds in both layers,
    // ReLU in one, the identity MLP keeps falling in both.
    std::fs::create_dir_all(&dir).unwrap();
    let run = |mlp: &str, shapes: [&str; 2]| {
        serde_json::json!({"mlp": mlp, "steps": 3000, "layers": shapes.map(|s| serde_json::json!({"entropy": {"shape": s}}))})
            .to_string()
    };
    let lines = [
        run("gelu", ["dip_and_rebound", "dip_and_rebound"]),
        run("relu", ["falling", "dip_and_rebound"]),
        run("identity", ["falling", "falling"]),
    ];
    std::fs::write(dir.join("joma_text.jsonl"), lines.join("\n")).unwrap();
    let (ok, stdout, stderr) = lab(&["report", "--out", dir.to_str().unwrap(), "--quick"]);
    assert!(ok, "{stderr}");
    for name in ["sphere.svg", "joma.svg", "references.svg", "report.json", "summary.md"] {
        assert!(dir.join(name).exists(), "{name}");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert_eq!(md, stdout);
    for claim in [
        "sphere of radius sqrt(d)",
        "Gaussian kernel",
        "Brownian motion over training",
        "dips, then rebounds",
        "keeps falling",
        "Ito",
        "Second-order",
        "interacting particles",
        "Muon and SOAP",
        "JoMA on real text",
        "hold across seeds",
    ] {
        assert!(md.contains(claim), "{claim} missing:\n{md}");
    }
    // Three seeds by default, each counted.
    let seeds_row = md.lines().find(|l| l.contains("hold across seeds")).unwrap();
    assert!(seeds_row.contains("3 seeds:"), "{seeds_row}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let seeds = json["joma_gelu_seeds"].as_array().unwrap();
    assert_eq!(seeds.len(), 3);
    assert_ne!(seeds[0]["final_val_loss"], seeds[1]["final_val_loss"], "the seeds are different runs");
    assert!(md.contains("not run: lab race"), "{md}");
    let text_row = md.lines().find(|l| l.contains("JoMA on real text")).unwrap();
    assert!(
        text_row.contains("3000 steps, 1 seed(s) per MLP; gelu: 2 of 2 layer curves dip and rebound; relu: 1 of 2")
            && text_row.contains("identity: 2 of 2 keep falling")
            && text_row.ends_with("| agrees |"),
        "{text_row}"
    );
    // The exact identities hold whatever the training did.
    let radius_row = md.lines().find(|l| l.contains("radius sqrt(d)")).unwrap();
    assert!(radius_row.ends_with("| agrees |"), "{radius_row}");
    let kernel_row = md.lines().find(|l| l.contains("Pure self-attention")).unwrap();
    assert!(kernel_row.ends_with("| agrees |"), "{kernel_row}");
    let toy_row = md.lines().find(|l| l.contains("toy dynamics")).unwrap();
    assert!(toy_row.ends_with("| agrees |"), "{toy_row}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn probe_commands_reject_bad_input() {
    for (args, message) in [
        (&["sphere", "--steps", "30", "--probe-every", "0"][..], "--probe-every must be positive"),
        (&["sphere", "--steps", "0"], "steps must be positive"),
        (&["sphere", "--steps", "10", "--probe-every", "5"], "needs at least 4"),
        (&["joma", "--steps", "0"], "steps must be positive"),
        (&["joma", "--steps", "10", "--mlp", "tanh"], "unknown activation"),
        (&["sphere", "--steps", "30", "--probe-every", "5", "--probe-budget-mb", "0"], "at least 8"),
    ] {
        let mut all = args.to_vec();
        all.extend(TINY);
        let (ok, _, stderr) = lab(&all);
        assert!(!ok && stderr.starts_with("error: ") && stderr.contains(message), "{args:?}: {stderr}");
    }
}
