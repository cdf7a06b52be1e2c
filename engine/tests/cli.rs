//! The `lab` command line end to end: JSON outputs have the promised fields and real values, and
//! bad input exits non-zero with a message.
#![cfg(not(target_arch = "wasm32"))]

use std::process::Command;

fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().expect("lab runs");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn last_json(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.lines().last().expect("output")).expect("JSON line")
}

const TINY: [&str; 10] = ["--d-model", "16", "--heads", "2", "--layers", "1", "--context", "16", "--batch", "4"];

#[test]
fn train_json_summary_has_baselines_and_speed() {
    let mut args = vec!["train", "--data", "grammar", "--steps", "30", "--eval-every", "10", "--json"];
    args.extend(TINY);
    let (ok, stdout, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "three evaluations and a summary:\n{stdout}");
    let s = last_json(&stdout);
    for key in ["final_train_loss", "final_val_loss", "unigram_val_loss", "bigram_val_loss", "wall_s", "tokens_per_s"] {
        assert!(s[key].as_f64().is_some_and(f64::is_finite), "{key} in {s}");
    }
    assert_eq!(s["steps"], 30);
    assert!(s["params"].as_u64().unwrap() > 1000);
    assert!(s["bigram_val_loss"].as_f64() < s["unigram_val_loss"].as_f64());
}

#[test]
fn cgfac_training_reports_its_preconditioner() {
    let mut args =
        vec!["train", "--optimizer", "cgfac", "--steps", "10", "--eval-every", "10", "--json", "--cg-iters", "3"];
    args.extend(TINY);
    let (ok, stdout, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let eval: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let p = &eval["preconditioner"];
    assert!(p["mean_cg_iterations"].as_f64().unwrap() <= 3.0);
    assert!(p["layers"].as_array().unwrap().len() == 7, "{p}");
}

#[test]
fn gradcheck_passes_and_reports_every_case() {
    let (ok, stdout, stderr) = lab(&["gradcheck", "--json"]);
    assert!(ok, "{stderr}");
    let s = last_json(&stdout);
    assert!(s["max_rel_err"].as_f64().unwrap() < engine::gradcheck::TOLERANCE, "{s}");
    assert_eq!(s["cases"].as_array().unwrap().len(), 6);
}

#[test]
fn eval_writes_gradients_with_the_weight_names() {
    let dir = std::env::temp_dir().join(format!("spherewalk-cli-{}", std::process::id()));
    let ckpt = dir.join("ckpt");
    let mut args = vec!["train", "--data", "copy", "--steps", "5", "--json", "--save", ckpt.to_str().unwrap()];
    args.extend(TINY);
    assert!(lab(&args).0);
    let grads = dir.join("grads.safetensors");
    let (ok, stdout, stderr) =
        lab(&["eval", "--checkpoint", ckpt.to_str().unwrap(), "--grads", grads.to_str().unwrap(), "--json"]);
    assert!(ok, "{stderr}");
    assert!(last_json(&stdout)["loss"].as_f64().unwrap() > 0.0);
    let g = engine::checkpoint::from_safetensors(&std::fs::read(&grads).unwrap(), "grads").unwrap();
    let w = engine::checkpoint::from_safetensors(&std::fs::read(ckpt.join("model.safetensors")).unwrap(), "w").unwrap();
    assert_eq!(g.len(), w.len());
    for (name, (shape, _)) in &w {
        assert_eq!(&g[name].0, shape, "{name}");
    }
    assert!(g["head.weight"].1.iter().any(|&x| x != 0.0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn race_reports_steps_and_seconds_to_target_per_optimizer() {
    let dir = std::env::temp_dir().join(format!("spherewalk-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("race.svg");
    let mut args = vec![
        "race",
        "--optimizers",
        "adam,kfac",
        "--steps",
        "20",
        "--eval-every",
        "5",
        "--seeds",
        "2",
        "--target-loss",
        "2.8",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ];
    args.extend(TINY);
    let (ok, stdout, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let s = last_json(&stdout);
    let opts = s["optimizers"].as_array().unwrap();
    assert_eq!(opts.len(), 2);
    for o in opts {
        assert_eq!(o["runs"].as_array().unwrap().len(), 2);
        assert_eq!(o["runs"][0]["curve"].as_array().unwrap().len(), 5);
        assert!(o["summary"]["final_val_loss"][0].as_f64().is_some());
    }
    // Same initialisation for everyone: the step-0 validation loss is identical across optimizers.
    assert_eq!(opts[0]["runs"][0]["curve"][0]["val_loss"], opts[1]["runs"][0]["curve"][0]["val_loss"]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_input_exits_with_a_message() {
    let cases: [(&[&str], &str); 5] = [
        (&["train", "--data", "nope"], "unknown data set"),
        (&["train", "--heads", "3"], "must divide d_model"),
        (&["train", "--optimizer", "cgfac", "--damping", "-1"], "damping must be positive"),
        (&["train", "--optimizer", "cgfac", "--cg-tol", "2"], "tolerance must be in (0, 1)"),
        (&["eval", "--checkpoint", "/nonexistent/ckpt"], "cannot read"),
    ];
    for (args, want) in cases {
        let (ok, _, stderr) = lab(args);
        assert!(!ok, "{args:?} should fail");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}

#[test]
fn gpu_backend_trains_like_the_cpu_engine() {
    // CI has lavapipe (Mesa's CPU Vulkan), so an adapter exists; the WGSL step must track the CPU.
    let run = |backend: &str| {
        let mut args = vec!["train", "--backend", backend, "--steps", "8", "--eval-every", "4", "--json"];
        args.extend(TINY);
        let (ok, stdout, stderr) = lab(&args);
        assert!(ok, "{backend}: {stderr}");
        last_json(&stdout)
    };
    let (cpu, gpu) = (run("cpu"), run("gpu"));
    assert!(gpu["backend"].as_str().unwrap().starts_with("gpu ("), "{gpu}");
    assert_eq!(cpu["backend"], "cpu");
    let (a, b) = (cpu["final_val_loss"].as_f64().unwrap(), gpu["final_val_loss"].as_f64().unwrap());
    // Eight steps of the lockstep parity bounds (gpu::trainer::tests): 1e-6 relative.
    eprintln!("final validation loss: cpu {a} gpu {b} (rel {:e})", (a - b).abs() / a);
    assert!((a - b).abs() < 1e-6 * a, "cpu {a} gpu {b}");

    // Half the run on the GPU, saved (optimizer state included), then resumed on the GPU.
    let dir = std::env::temp_dir().join(format!("spherewalk-gpu-save-{}", std::process::id()));
    let dir_s = dir.to_str().unwrap();
    let mut args = vec!["train", "--backend", "gpu", "--steps", "4", "--eval-every", "4", "--save", dir_s];
    args.extend(TINY);
    let (ok, _, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) =
        lab(&["train", "--backend", "gpu", "--resume", dir_s, "--steps", "8", "--eval-every", "4", "--json"]);
    assert!(ok, "{stderr}");
    let resumed = last_json(&stdout)["final_val_loss"].as_f64().unwrap();
    assert!((a - resumed).abs() < 1e-6 * a, "cpu {a}, gpu resumed {resumed}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn print_config_replays_through_config_with_the_same_numbers() {
    let mut args = vec!["train", "--data", "grammar", "--steps", "12", "--eval-every", "6", "--lr", "0.005"];
    args.extend(TINY);
    let (ok, printed, stderr) = lab(&[&args[..], &["--print-config"]].concat());
    assert!(ok, "{stderr}");
    let exp: serde_json::Value = serde_json::from_str(&printed).expect("an experiment");
    assert_eq!((exp["version"].as_u64(), exp["backend"].as_str()), (Some(1), Some("cpu")));
    assert!((exp["train"]["lr"].as_f64().unwrap() - 0.005).abs() < 1e-9, "{exp}");
    let path = std::env::temp_dir().join(format!("spherewalk-exp-{}.json", std::process::id()));
    std::fs::write(&path, &printed).unwrap();
    let (ok, from_flags, stderr) = lab(&[&args[..], &["--json"]].concat());
    assert!(ok, "{stderr}");
    let (ok, from_file, stderr) = lab(&["train", "--config", path.to_str().unwrap(), "--json"]);
    assert!(ok, "{stderr}");
    let strip = |s: &str| {
        let mut v = last_json(s);
        for k in ["wall_s", "tokens_per_s"] {
            v[k] = serde_json::Value::Null;
        }
        v
    };
    let (a, b) = (strip(&from_flags), strip(&from_file));
    assert_eq!(a, b, "the same run from the flags and from the printed config");
    for key in ["brownian", "entropy"] {
        assert_eq!(a[key].as_array().map(Vec::len), Some(if key == "brownian" { 2 } else { 1 }), "{key}: {a}");
    }
    assert!(a["brownian"][0]["diffusion"].as_f64().is_some_and(|d| d > 0.0), "{a}");
    std::fs::write(&path, "{\"train\": {\"lr\": 1}}").unwrap();
    let (ok, _, stderr) = lab(&["train", "--config", path.to_str().unwrap()]);
    assert!(!ok && stderr.contains("the experiment cannot be read"), "{stderr}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_run_over_the_memory_limit_is_refused_with_the_estimate() {
    let (ok, _, stderr) =
        lab(&["train", "--d-model", "1024", "--heads", "8", "--layers", "32", "--context", "1024", "--batch", "512"]);
    assert!(!ok && stderr.contains("over the memory limit of 16.0 GiB"), "{stderr}");
    let mut args = vec!["train", "--steps", "2", "--memory-limit-mib", "1"];
    args.extend(TINY);
    let (ok, _, stderr) = lab(&args);
    assert!(!ok && stderr.contains("over the memory limit of 1.0 MiB"), "{stderr}");
}

#[test]
fn kfac_damping_split_and_the_fisher_are_flags() {
    let pi = |extra: &[&str]| {
        let (ok, printed, stderr) = lab(&[&["train", "--optimizer", "kfac", "--print-config"], extra].concat());
        assert!(ok, "{stderr}");
        let exp: serde_json::Value = serde_json::from_str(&printed).expect("an experiment");
        exp["train"]["optimizer"]["pi_damping"].as_bool()
    };
    assert_eq!(pi(&[]), Some(true), "the pi correction is K-FAC's default");
    assert_eq!(pi(&["--no-pi-damping"]), Some(false));
    let (ok, printed, stderr) = lab(&["train", "--optimizer", "cgfac", "--fisher", "sampled", "--print-config"]);
    assert!(ok, "{stderr}");
    let exp: serde_json::Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(exp["train"]["optimizer"]["fisher"], "sampled");
    let (ok, _, stderr) = lab(&["train", "--optimizer", "cgfac", "--fisher", "fake"]);
    assert!(!ok && stderr.contains("use empirical or sampled"), "{stderr}");
}

/// `lab bench --backend gpu` filtered to one matmul side and one step row: both tilings timed, the
/// one a 256^3 launch takes named, and the training step's one readback per round of 10 steps.
#[test]
fn gpu_bench_times_both_matmul_tilings_and_the_steps_readbacks() {
    let args = ["bench", "--backend", "gpu", "--json", "--iters", "2", "--sizes", "tiny", "--optimizers", "adam"];
    let (ok, stdout, stderr) = lab(&[&args[..], &["--matmul", "256"]].concat());
    assert!(ok, "{stderr}");
    let s = last_json(&stdout);
    let m = s["matmul"].as_array().unwrap();
    assert!(m.len() == 1 && m[0]["n"] == 256, "{s}");
    for tiling in ["square64", "wide128"] {
        assert!(m[0][tiling].as_f64().is_some_and(|g| g > 0.0), "{s}");
    }
    // 256^3 is four wide tiles: a software adapter's few cores take them, a hardware GPU's many not.
    let software = s["adapter"].as_str().unwrap().ends_with("Cpu)");
    let (taken, rate) = if software { ("Wide128", "wide128") } else { ("Square64", "square64") };
    assert!(m[0]["tiling"] == taken && m[0]["gflops"] == m[0][rate], "{s}");
    let steps = s["steps"].as_array().unwrap();
    assert!(steps.len() == 1 && steps[0]["size"] == "tiny" && steps[0]["optimizer"] == "adam", "{s}");
    assert_eq!(steps[0]["readbacks_per_step"].as_f64(), Some(0.1), "{s}");
    assert!(steps[0]["gpu_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{s}");

    let (ok, _, stderr) = lab(&["bench", "--matmul", "256"]);
    assert!(!ok && stderr.contains("with --backend gpu"), "{stderr}");
    let (ok, _, stderr) = lab(&["bench", "--backend", "gpu", "--sizes", "huge"]);
    assert!(!ok && stderr.contains("no bench size `huge` (sizes: tiny, small, medium, large)"), "{stderr}");
    let (ok, _, stderr) = lab(&["bench", "--backend", "gpu", "--optimizers", "fast"]);
    assert!(!ok && stderr.contains("fast"), "{stderr}");
}

/// `lab bench --sizes/--optimizers` prints only those step rows, and `--spec` times the page's
/// `spherewalk.bench` spec natively: the model it builds, and a bad spec's message.
#[test]
fn bench_filters_its_rows_and_times_a_page_spec() {
    let (ok, stdout, stderr) =
        lab(&["--threads", "2", "bench", "--json", "--iters", "1", "--sizes", "tiny", "--optimizers", "sgd,adam"]);
    assert!(ok, "{stderr}");
    let s = last_json(&stdout);
    let rows: Vec<(String, String, u64)> = (s["steps"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["size"].as_str().unwrap().into(),
                r["optimizer"].as_str().unwrap().into(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [("tiny", "sgd", 1), ("tiny", "adam", 1), ("tiny", "adam", 2)].map(|(a, b, t)| (a.into(), b.into(), t));
    assert_eq!(rows, want, "{s}");
    assert_eq!(s["steps"][1]["vs_adam"].as_f64(), Some(1.0));
    assert!(s["matmul"].as_array().unwrap().is_empty() && s["probe_overhead"].is_null(), "{s}");

    let spec = r#"{"d_model":16,"layers":1,"heads":2,"context":8,"batch":2,"steps":2}"#;
    let (ok, stdout, stderr) = lab(&["bench", "--json", "--spec", spec]);
    assert!(ok, "{stderr}");
    let r = last_json(&stdout);
    let cfg = serde_json::from_str::<engine::session::bench::BenchSpec>(spec).unwrap().config().unwrap();
    assert_eq!(r["params"].as_u64(), Some(engine::Model::<f32>::new(cfg.model).unwrap().num_params() as u64));
    assert!(r["ms_per_step"].as_f64().is_some_and(|ms| ms > 0.0) && r["steps"] == 2, "{r}");
    let (ok, _, stderr) = lab(&["bench", "--spec", r#"{"d_model":16,"heads":5}"#]);
    assert!(!ok && stderr.contains("heads"), "{stderr}");
    let (ok, _, stderr) = lab(&["bench", "--sizes", "huge"]);
    assert!(!ok && stderr.contains("no bench size `huge`"), "{stderr}");
}

#[test]
fn sample_writes_json_with_probabilities_and_candidates() {
    let dir = std::env::temp_dir().join(format!("spherewalk-sample-{}", std::process::id()));
    let ckpt = dir.join("ckpt");
    let mut args = vec!["train", "--steps", "30", "--save", ckpt.to_str().unwrap()];
    args.extend(TINY);
    let (ok, _, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let c = ckpt.to_str().unwrap();
    let call =
        ["sample", "--checkpoint", c, "--prompt", "the ", "--tokens", "20", "--samples", "2", "--seed", "5", "--json"];
    let (ok, stdout, stderr) = lab(&call);
    assert!(ok, "{stderr}");
    let lines: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    for (i, s) in lines.iter().enumerate() {
        assert_eq!(s["seed"], 5 + i as u64);
        let steps = s["steps"].as_array().unwrap();
        assert_eq!((steps.len(), s["tokens"].as_array().unwrap().len()), (20, 20));
        let text: String = steps.iter().map(|t| t["text"].as_str().unwrap()).collect();
        assert_eq!(s["text"].as_str().unwrap(), text);
        for t in steps {
            let p = t["p"].as_f64().unwrap();
            assert!(p > 0.0 && p <= 1.0, "{t}");
            let top: Vec<(String, f64)> = serde_json::from_value(t["top"].clone()).unwrap();
            assert!(!top.is_empty() && top.len() <= 5);
            assert!(top.windows(2).all(|w| w[0].1 >= w[1].1), "best first: {t}");
            assert!(top.iter().map(|x| x.1).sum::<f64>() <= 1.0 + 1e-9);
            if let Some(x) = top.iter().find(|x| x.0 == t["text"].as_str().unwrap()) {
                assert_eq!(x.1, p, "the drawn token's p is its candidate's");
            }
        }
    }
    assert_ne!(lines[0]["text"], lines[1]["text"], "seeds 5 and 6 write differently");
    let (_, again, _) = lab(&call);
    assert_eq!(again, stdout, "the same seed writes the same");
    let (ok, plain, _) = lab(&["sample", "--checkpoint", c, "--prompt", "the ", "--tokens", "20", "--seed", "5"]);
    assert!(ok && plain.contains(&format!("the \u{2502}{}", lines[0]["text"].as_str().unwrap())), "{plain}");
    for (flags, want) in [
        (vec!["--temperature", "-1"], "temperature"),
        (vec!["--temperature", "NaN"], "temperature"),
        (vec!["--top-p", "0"], "top_p"),
        (vec!["--top-p", "1.5"], "top_p"),
        (vec!["--tokens", "0"], "tokens must be from 1"),
        (vec!["--tokens", "10001"], "tokens must be from 1"),
        (vec!["--prompt", "th\u{e9}"], "\"\u{e9}\""),
    ] {
        let mut a = vec!["sample", "--checkpoint", c];
        a.extend(&flags);
        let (ok, _, stderr) = lab(&a);
        assert!(!ok && stderr.contains(want), "{flags:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn train_writes_a_sample_on_its_schedule() {
    let mut args =
        vec!["train", "--steps", "20", "--eval-every", "10", "--sample-every", "10", "--sample-tokens", "12"];
    args.push("--json");
    args.extend(TINY);
    let (ok, stdout, stderr) = lab(&args);
    assert!(ok, "{stderr}");
    let samples: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("sample").is_some())
        .collect();
    let steps: Vec<u64> = samples.iter().map(|s| s["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, vec![0, 10, 20], "{stdout}");
    assert!(samples.iter().all(|s| s["sample"]["text"].as_str().unwrap().chars().count() == 12));
    let (ok, _, stderr) = lab(&["train", "--steps", "5", "--sample-every", "0"]);
    assert!(!ok && stderr.contains("--sample-every"), "{stderr}");
}

/// `lab` under a time limit: a hang is a failure, not a stuck test.
fn lab_within(seconds: u32, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg(seconds.to_string())
        .arg(env!("CARGO_BIN_EXE_lab"))
        .args(args)
        .output()
        .expect("timeout runs lab");
    assert_ne!(out.status.code(), Some(124), "lab {args:?} ran past {seconds} s");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn bad_input_gets_a_message_before_any_work_never_a_panic_or_a_hang() {
    let dir = std::env::temp_dir().join(format!("spherewalk-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let refused = |args: &[&str], want: &str| {
        let (ok, stderr) = lab_within(60, args);
        assert!(!ok && stderr.contains(want) && !stderr.contains("panicked"), "{args:?}: {stderr}");
    };
    // Endless files are refused at a size limit, not read until memory runs out.
    refused(&["train", "--data", "/dev/zero"], "over the limit of 64 MiB");
    refused(&["train", "--config", "/dev/zero"], "over the limit of 64 MiB");
    refused(&["race", "--data", "/dev/urandom", "--optimizers", "adam", "--target-loss", "2"], "over the limit");
    refused(&["train", "--data", "missing.txt"], "there is no file missing.txt");
    // Refused before the run, not after it.
    refused(
        &["train", "--layers", "1", "--flow", "2", "--steps", "100000"],
        "--flow 2: this model's depths are 0 to 1",
    );
    refused(&["bench", "--iters", "0"], "--iters must be at least 1");
    refused(&["race", "--optimizers", "adam", "--target-loss", "NaN"], "--target-loss");
    refused(&["race", "--optimizers", "adam", "--target-loss", "-1"], "--target-loss");
    refused(&["train", "--batch", "0"], "batch must be positive, got 0");
    // A place that cannot take the checkpoint is refused before a long run, and named.
    refused(&["train", "--steps", "100000", "--save", "/proc/version/ckpt"], "cannot save to /proc/version/ckpt");
    // Impossible settings in a config file, which names itself in the message.
    let (ok, stdout, _) = lab(&["train", "--print-config"]);
    assert!(ok);
    let exp: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let config = dir.join("exp.json");
    let path = config.to_str().unwrap();
    for (field, value, want) in [
        ("eval_batches", serde_json::json!(1_000_000_000u64), "eval_batches = 1000000000 is over the limit of 1000"),
        (
            "optimizer",
            serde_json::json!({"kind": "adam", "beta1": 1.5, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.0}),
            "Adam's betas must be in [0, 1)",
        ),
        (
            "optimizer",
            serde_json::json!({"kind": "adam", "beta1": 0.9, "beta2": 0.99, "eps": 0.0, "weight_decay": 0.0}),
            "Adam's eps must be positive",
        ),
        ("schedule", serde_json::json!({"kind": "warmup_cosine", "warmup": 20, "min_ratio": 5.0}), "min_ratio"),
        (
            "schedule",
            serde_json::json!({"kind": "warmup_cosine", "warmup": 1_000_000_000_000u64, "min_ratio": 0.1}),
            "a warm-up of 1000000000000 steps is longer than the run",
        ),
    ] {
        let mut e = exp.clone();
        e["train"][field] = value;
        std::fs::write(&config, e.to_string()).unwrap();
        refused(&["train", "--config", path], want);
    }
    // A byte-order mark is not an error.
    let mut e = exp.clone();
    e["train"]["steps"] = 2.into();
    std::fs::write(&config, format!("\u{feff}{e}")).unwrap();
    let (ok, stderr) = lab_within(60, &["train", "--config", path]);
    assert!(ok, "{stderr}");
    // A checkpoint with a NaN weight is refused by every command that reads it.
    let ckpt = dir.join("ckpt");
    let mut args = vec!["train", "--steps", "2", "--save", ckpt.to_str().unwrap()];
    args.extend(TINY);
    assert!(lab(&args).0);
    let model = ckpt.join("model.safetensors");
    let mut bytes = std::fs::read(&model).unwrap();
    let n = bytes.len();
    bytes[n - 4..].copy_from_slice(&f32::NAN.to_le_bytes());
    std::fs::write(&model, bytes).unwrap();
    let c = ckpt.to_str().unwrap();
    refused(&["eval", "--checkpoint", c], "is not finite");
    refused(&["sample", "--checkpoint", c], "is not finite");
    refused(&["train", "--resume", c], "is not finite");
    // Data in other symbols than the model's is named as the data's problem, not the checkpoint's.
    let ckpt = dir.join("good");
    let mut args = vec!["train", "--steps", "2", "--save", ckpt.to_str().unwrap()];
    args.extend(TINY);
    assert!(lab(&args).0);
    let other = dir.join("other.txt");
    std::fs::write(&other, "héllo wörld 😀 ça va? ".repeat(200)).unwrap();
    refused(
        &["eval", "--checkpoint", ckpt.to_str().unwrap(), "--data", other.to_str().unwrap()],
        "the data has 14 symbols and the model was trained on",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
