//! GPT-2 opened from Hugging Face's files, end to end through `lab`: a random-weight GPT-2 in the
//! hub's exact layout (`tests/gpt2/fixture.py`, both name layouts) read by `lab inspect --dump`
//! and written by `lab sample --model`, against an independent numpy forward of GPT-2 (the same
//! script); and every bad file refused with what is wrong. Needs python3 with numpy (Debian's
//! python3-numpy, which `cargo xtask setup` installs; SPHEREWALK_PYTHON picks another).

#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::{lab, tensors, Tensors};

mod support;

const TEXT: &str = "The Brownian motion in the transformer model: a random walk on the sphere.";

fn scratch(name: &str) -> PathBuf {
    support::scratch("gpt2", name)
}

fn fixture(dir: &Path, args: &[&str]) {
    support::fixture("gpt2/fixture.py", dir, args)
}

/// `lab inspect --dump` on `backend` (cpu, gpu): the JSON report, or None when there is no GPU.
fn inspect_dump(dir: &Path, backend: &str) -> Option<(Value, Tensors)> {
    let dump = dir.join(format!("dump-{backend}.safetensors"));
    let (d, dump_arg) = (dir.to_str().unwrap(), dump.to_str().unwrap());
    let (ok, out, err) =
        lab(&["inspect", "--model", d, "--text", TEXT, "--json", "--dump", dump_arg, "--backend", backend]);
    if !ok && err.contains("no GPU adapter") {
        eprintln!("skipped the GPU's reading, no adapter: {err}");
        return None;
    }
    assert!(ok, "{backend}: {err}");
    Some((serde_json::from_str(out.trim()).unwrap(), tensors(&dump)))
}

#[test]
fn inspect_dump_equals_an_independent_gpt2_forward_in_both_hub_layouts() {
    for layout in ["plain", "prefixed"] {
        let dir = scratch(layout);
        fixture(&dir, &["--layout", layout]);
        let (report, cpu) = inspect_dump(&dir, "cpu").expect("the CPU reads");
        assert_eq!(report["n_layer"], 12);
        assert_eq!(report["on"], "CPU");
        let ids: Vec<u64> = report["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        let pieces: String = report["pieces"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(pieces, TEXT);
        assert_eq!(report["layers"].as_array().unwrap().len(), 13);
        let ids_arg = ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        fixture(&dir, &["--layout", layout, "--reference", &ids_arg]);
        let reference = tensors(&dir.join("reference.safetensors"));
        // The GPU's forward (the trainer's WGSL kernels, lavapipe in CI) to the same tolerance.
        let gpu = inspect_dump(&dir, "gpu");
        if let Some((report, _)) = &gpu {
            assert!(report["on"].as_str().unwrap().starts_with("WebGPU"), "{}", report["on"]);
            assert_eq!(report["tokens"].as_array().unwrap().len(), ids.len());
        }
        for (backend, ours) in [("cpu", Some(cpu)), ("gpu", gpu.map(|g| g.1))] {
            let Some(ours) = ours else { continue };
            assert_eq!(ours.len(), 13 + 12 + 1 + 12, "hidden.0..=12, attn.0..12, logits, lens.0..12");
            for (name, (shape, want)) in &reference {
                let (our_shape, got) = &ours[name];
                assert_eq!(our_shape, shape, "{name}");
                let scale = want.iter().fold(0f32, |m, x| m.max(x.abs()));
                let err = got.iter().zip(want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(
                    err <= 1e-4 * scale,
                    "{backend} {layout} {name}: max error {err:e} against a largest value of {scale}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The index of the largest value in row `i` of a (T, V) tensor.
fn argmax_row(t: &(Vec<usize>, Vec<f32>), i: usize) -> usize {
    let v = t.0[1];
    let row = &t.1[i * v..(i + 1) * v];
    (0..v).fold(0, |b, j| if row[j] > row[b] { j } else { b })
}

#[test]
fn the_logit_lens_reads_the_reference_head_at_every_depth() {
    let dir = scratch("lens");
    fixture(&dir, &[]);
    let d = dir.to_str().unwrap();
    let (ok, out, err) = lab(&["inspect", "--model", d, "--text", TEXT, "--json", "--logit-lens"]);
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let ids: Vec<String> = report["tokens"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
    fixture(&dir, &["--reference", &ids.join(",")]);
    let reference = tensors(&dir.join("reference.safetensors"));
    let lens = &report["logit_lens"];
    let depths = lens["depths"].as_array().unwrap();
    assert_eq!(depths.len(), 13, "depths 0 to 12");
    for (d, cells) in depths.iter().enumerate() {
        // Depth 12 is the model's output; below, ln_f and the unembedding on the stream entering
        // block d, as the independent numpy forward computes them.
        let want = &reference[&if d == 12 { "logits".to_string() } else { format!("lens.{d}") }];
        for (i, cell) in cells.as_array().unwrap().iter().enumerate() {
            let top = cell["top"].as_array().unwrap();
            assert_eq!(top.len(), 5);
            assert_eq!(top[0][0].as_u64().unwrap() as usize, argmax_row(want, i), "depth {d}, position {i}");
            let answer = argmax_row(&reference["logits"], i);
            let row = &want.1[i * want.0[1]..(i + 1) * want.0[1]];
            let rank = 1 + row.iter().filter(|&&x| x > row[answer]).count();
            assert_eq!(cell["rank"].as_u64().unwrap() as usize, rank, "depth {d}, position {i}");
        }
    }
    let settles = lens["settles"].as_array().unwrap();
    assert_eq!(settles.len(), ids.len());
    let (ok, text, err) = lab(&["inspect", "--model", d, "--text", TEXT, "--logit-lens"]);
    assert!(ok, "{err}");
    assert!(text.contains("Read through the model's own head at every depth (the logit lens)"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn greedy_writing_through_the_key_value_cache_equals_the_reference() {
    let dir = scratch("greedy");
    fixture(&dir, &[]);
    let d = dir.to_str().unwrap();
    let (ok, out, err) = lab(&["inspect", "--model", d, "--text", TEXT, "--json"]);
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let ids: Vec<String> = report["tokens"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
    fixture(&dir, &["--reference", &ids.join(","), "--greedy", "12"]);
    let greedy: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("greedy.json")).unwrap()).unwrap();
    let (ok, out, err) =
        lab(&["sample", "--model", d, "--prompt", TEXT, "--tokens", "12", "--temperature", "0", "--json"]);
    assert!(ok, "{err}");
    let sample: Value = serde_json::from_str(out.trim()).unwrap();
    let (ours, want) = (sample["tokens"].as_array().unwrap(), greedy["tokens"].as_array().unwrap());
    // Compared while the reference's best token beat its runner-up clearly (f32 against f64).
    let clear = greedy["margins"].as_array().unwrap().iter().take_while(|m| m.as_f64().unwrap() > 1e-3).count();
    assert!(clear >= 8, "only {clear} clear steps");
    assert_eq!(ours[..clear], want[..clear]);
    assert_eq!(sample["prompt"], TEXT);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_models_are_refused_with_what_is_wrong() {
    let dir = scratch("bad");
    fixture(&dir, &[]);
    let d = dir.to_str().unwrap();
    let copy = |name: &str, edit: &dyn Fn(&Path)| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["config.json", "model.safetensors"] {
            std::fs::copy(dir.join(f), to.join(f)).unwrap();
        }
        edit(&to);
        to.to_str().unwrap().to_string()
    };
    let truncated = copy("truncated", &|p| {
        let f = std::fs::OpenOptions::new().write(true).open(p.join("model.safetensors")).unwrap();
        f.set_len(f.metadata().unwrap().len() - 1000).unwrap();
    });
    let t5 = copy("t5", &|p| {
        let c = std::fs::read_to_string(p.join("config.json")).unwrap().replace("\"gpt2\"", "\"t5\"");
        std::fs::write(p.join("config.json"), c).unwrap();
    });
    let wider = copy("wider", &|p| {
        let c = std::fs::read_to_string(p.join("config.json")).unwrap().replace("\"n_embd\": 64", "\"n_embd\": 128");
        std::fs::write(p.join("config.json"), c).unwrap();
    });
    let pickle = copy("pickle", &|p| std::fs::write(p.join("pytorch_model.bin"), b"PK\x03\x04").unwrap());
    let pickle_bin = format!("{pickle}/pytorch_model.bin");
    let nowhere = format!("{d}/nowhere");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["inspect", "--model", &truncated, "--text", "a"], "truncated"),
        (vec!["inspect", "--model", &t5, "--text", "a"], "model_type is \"t5\""),
        (
            vec!["inspect", "--model", &wider, "--text", "a"],
            "wte.weight has shape [50257, 64], but config.json makes it [50257, 128]",
        ),
        (vec!["inspect", "--model", &pickle_bin, "--text", "a"], "pytorch_model.bin: not a readable zip"),
        (vec!["inspect", "--model", d, "--text", "a", "--memory-limit-mib", "20"], "over the memory limit of 20.0 MiB"),
        (vec!["inspect", "--model", d, "--text", ""], "the text is empty"),
        (vec!["inspect", "--model", &nowhere, "--text", "a"], "cannot read"),
        (vec!["sample", "--model", d, "--top-p", "2"], "top_p"),
    ];
    let long = "word ".repeat(200);
    let too_long = vec!["inspect", "--model", d, "--text", &long];
    let short = "word ".repeat(100);
    let heavy = vec!["inspect", "--model", d, "--text", &short, "--memory-limit-mib", "40"];
    let more = [(too_long, "over the model's context of 128"), (heavy, "reading 101 tokens needs about")];
    for (args, want) in cases.into_iter().chain(more) {
        let (ok, _, err) = lab(&args);
        assert!(!ok && err.contains(want), "{args:?}: {err}");
    }
    // The largest limit there is means no limit (it once overflowed reading the weights).
    let (ok, _, err) = lab(&["inspect", "--model", d, "--text", "a", "--memory-limit-mib", &u64::MAX.to_string()]);
    assert!(ok, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `lab` and gives up after `secs` (a command that blocks on a pipe must fail the test, not
/// hang it); returns (success, stdout, stderr), or None when it had to be killed.
fn lab_within(args: &[&str], secs: u64) -> Option<(bool, String, String)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed().as_secs() >= secs {
            let _ = child.kill();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    ))
}

/// What an adversarial folder or path holds is refused before it costs anything: non-finite
/// weights by tensor, devices and pipes without reading them, files longer than their header
/// says, a folder with only a broken pickle; a dump path that cannot be written or is the model itself is
/// refused before the inspection; writing past the context is refused; a byte-order mark is fine.
#[test]
fn hostile_files_and_paths_are_refused_before_they_cost_anything() {
    let dir = scratch("hostile");
    fixture(&dir, &[]);
    let variant = |name: &str, edit: &dyn Fn(&Path)| {
        let to = dir.join(name);
        std::fs::create_dir_all(&to).unwrap();
        for f in ["config.json", "model.safetensors"] {
            std::fs::copy(dir.join(f), to.join(f)).unwrap();
        }
        edit(&to);
        to.to_str().unwrap().to_string()
    };
    let set_last = |p: &Path, x: f32| {
        let f = p.join("model.safetensors");
        let mut bytes = std::fs::read(&f).unwrap();
        let n = bytes.len();
        bytes[n - 4..].copy_from_slice(&x.to_le_bytes());
        std::fs::write(f, bytes).unwrap();
    };
    let nan = variant("nan", &|p| set_last(p, f32::NAN));
    let inf = variant("inf", &|p| set_last(p, f32::NEG_INFINITY));
    let zero = variant("zero", &|p| {
        std::fs::remove_file(p.join("config.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", p.join("config.json")).unwrap();
    });
    let fifo = variant("fifo", &|p| {
        std::fs::remove_file(p.join("model.safetensors")).unwrap();
        assert!(Command::new("mkfifo").arg(p.join("model.safetensors")).status().unwrap().success());
    });
    let longer = variant("longer", &|p| {
        let mut f = std::fs::OpenOptions::new().append(true).open(p.join("model.safetensors")).unwrap();
        std::io::Write::write_all(&mut f, &[0u8; 1000]).unwrap();
    });
    let pickle_only = variant("pickle-only", &|p| {
        std::fs::remove_file(p.join("model.safetensors")).unwrap();
        std::fs::write(p.join("pytorch_model.bin"), b"PK\x03\x04").unwrap();
    });
    let html = variant("html", &|p| std::fs::write(p.join("config.json"), "<!DOCTYPE html><p>Sign in").unwrap());
    let bom = variant("bom", &|p| {
        let c = std::fs::read(p.join("config.json")).unwrap();
        std::fs::write(p.join("config.json"), [b"\xEF\xBB\xBF".as_slice(), &c].concat()).unwrap();
    });
    let d = dir.to_str().unwrap();
    let model = format!("{d}/model.safetensors");
    let nowhere = format!("{d}/no/such/folder/dump.safetensors");
    // The model's file under another name, and a FIFO that would hang an open for writing.
    let (link, fifo_dump) = (format!("{d}/linked.safetensors"), format!("{d}/dump.fifo"));
    std::fs::hard_link(&model, &link).unwrap();
    assert!(Command::new("mkfifo").arg(&fifo_dump).status().unwrap().success());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["inspect", "--model", &nan, "--text", "a"], "tensor ln_f.bias holds NaN at element 63"),
        (vec!["sample", "--model", &nan, "--tokens", "3"], "holds NaN"),
        (vec!["inspect", "--model", &inf, "--text", "a"], "holds -inf"),
        (vec!["inspect", "--model", &zero, "--text", "a"], "is not a regular file"),
        (vec!["inspect", "--model", &fifo, "--text", "a"], "is not a regular file"),
        (vec!["inspect", "--model", &longer, "--text", "a"], "1000 more than"),
        (vec!["inspect", "--model", &pickle_only, "--text", "a"], "pytorch_model.bin: not a readable zip"),
        (vec!["inspect", "--model", &html, "--text", "a"], "config.json is an HTML page, not JSON"),
        (vec!["inspect", "--model", d, "--text", "a", "--dump", &model], "which the model is read from"),
        (vec!["inspect", "--model", d, "--text", "a", "--dump", &nowhere], &nowhere),
        (vec!["inspect", "--model", d, "--text", "a", "--dump", &link], "which the model is read from"),
        (vec!["inspect", "--model", d, "--text", "a", "--dump", &fifo_dump], "is not a regular file"),
        (vec!["inspect", "--model", d, "--text", "a", "--dump", "/dev/null"], "is not a regular file"),
        (vec!["sample", "--model", d, "--prompt", "one two three", "--tokens", "126"], "at most 125 more, not 126"),
    ];
    let before = std::fs::read(&model).unwrap();
    for (args, want) in cases {
        let Some((ok, out, err)) = lab_within(&args, 60) else { panic!("{args:?} did not finish in 60 s") };
        assert!(!ok && err.contains(want), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed before failing: {out}");
    }
    assert_eq!(std::fs::read(&model).unwrap(), before, "the model file is untouched");
    assert!(!Path::new(&nowhere).exists());
    std::fs::remove_file(&link).unwrap();
    std::fs::remove_file(&fifo_dump).unwrap();
    // Output that cannot be written ends without a panic: quietly when the reader went away
    // (`| head -c 10`), with the reason when the disk is full.
    let json = ["inspect", "--model", d, "--text", "a", "--json"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_lab"))
        .args(json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.is_empty(), "into a closed pipe: {:?} {err}", out.status);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(json).stdout(full).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("the output could not be written"), "into /dev/full: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let (ok, out, err) = lab(&["inspect", "--model", &bom, "--text", "a", "--json"]);
    assert!(ok && out.contains("\"tokens\""), "a config.json with a byte-order mark opens: {err}");
    let (ok, _, err) =
        lab(&["sample", "--model", d, "--prompt", "one two three", "--tokens", "125", "--temperature", "0"]);
    assert!(ok, "125 new tokens fit: {err}");
    // A model of 128 positions is benchmarked within them.
    let (ok, _, err) = lab(&["bench", "--model", d, "--iters", "1"]);
    assert!(ok, "lab bench --model on a 128-token model: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_page_view_holds_every_depth_head_and_piece() {
    use engine::lenses::view;
    use engine::pretrained::Pretrained;
    let dir = scratch("view");
    fixture(&dir, &[]);
    let p = Pretrained::open(&dir, 1 << 30).unwrap();
    let (inspection, panels) = view(&p, TEXT, 1 << 30).unwrap();
    let t = inspection.tokens.len();
    assert_eq!((panels.layers, panels.heads, panels.context, panels.frames()), (12, 4, t, 1));
    assert_eq!(panels.symbols.concat(), TEXT);
    assert_eq!(panels.sphere.len(), 13 * t * 3);
    for depth in 0..=12 {
        let on_unit_sphere =
            panels.points(depth, 0).iter().all(|p| (p.iter().map(|x| x * x).sum::<f64>() - 1.0).abs() < 1e-4);
        assert!(on_unit_sphere, "depth {depth}");
    }
    // One view for every depth: each dot is the top three principal directions of every depth's
    // LayerNorm output together, applied to that depth's token and normalised. The u's come from
    // the dumped residual stream, normalised here; the directions from the full 64 x 64 moment.
    let dump = dir.join("dump.safetensors");
    let (ok, _, err) =
        lab(&["inspect", "--model", dir.to_str().unwrap(), "--text", TEXT, "--dump", dump.to_str().unwrap()]);
    assert!(ok, "{err}");
    let hidden = tensors(&dump);
    let c = 64;
    let us: Vec<Vec<f64>> = (0..=12)
        .map(|depth| {
            let x = &hidden[&format!("hidden.{depth}")].1;
            x.chunks_exact(c)
                .flat_map(|row| {
                    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / c as f64;
                    let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / c as f64;
                    row.iter().map(move |&v| (v as f64 - mean) / (var + 1e-5).sqrt()).collect::<Vec<_>>()
                })
                .collect()
        })
        .collect();
    let all = nalgebra::DMatrix::from_row_slice(13 * t, c, &us.concat());
    let eig = nalgebra::SymmetricEigen::new(all.transpose() * &all);
    let mut order: Vec<usize> = (0..c).collect();
    order.sort_by(|&a, &b| eig.eigenvalues[b].total_cmp(&eig.eigenvalues[a]));
    let dirs: Vec<Vec<f64>> =
        order[..3].iter().map(|&i| eig.eigenvectors.column(i).iter().copied().collect()).collect();
    let mut signs = [0.0f64; 3];
    for (depth, u) in us.iter().enumerate() {
        for (i, (u, dot)) in u.chunks_exact(c).zip(panels.points(depth, 0)).enumerate() {
            let y: Vec<f64> = dirs.iter().map(|d| d.iter().zip(u).map(|(a, b)| a * b).sum()).collect();
            let n = y.iter().map(|v| v * v).sum::<f64>().sqrt();
            for k in 0..3 {
                // Each direction's sign is the view's to choose: taken from the first token.
                if signs[k] == 0.0 {
                    signs[k] = (dot[k] * y[k]).signum();
                }
                let want = signs[k] * y[k] / n;
                assert!((dot[k] - want).abs() < 1e-3, "depth {depth} token {i} axis {k}: {} against {want}", dot[k]);
            }
        }
    }
    // Head 3 of layer 5 is that head's attention: causal, rows of probabilities.
    let a = panels.attention_of(5, 3);
    assert_eq!(a.len(), t * t);
    for (i, row) in a.chunks_exact(t).enumerate() {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4 && row[i + 1..].iter().all(|&x| x == 0.0));
    }
    let v = &panels.verdicts;
    assert!(v.sphere.as_ref().unwrap().sentence.starts_with("On the sphere"));
    assert!(v.markov.as_ref().unwrap().sentence.starts_with("A Markov chain"));
    assert!([&v.sphere, &v.markov, &v.kernel, &v.brownian, &v.flow]
        .iter()
        .all(|x| x.as_ref().is_some_and(|x| x.settled)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_layer_table_as_csv_holds_every_head_s_entropy_of_the_reference_attention() {
    let dir = scratch("csv");
    fixture(&dir, &[]);
    let d = dir.to_str().unwrap();
    let (ok, json, err) = lab(&["inspect", "--model", d, "--text", TEXT, "--json"]);
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(json.trim()).unwrap();
    let (ok, csv, err) = lab(&["inspect", "--model", d, "--text", TEXT, "--csv"]);
    assert!(ok, "{err}");
    let ids: Vec<String> = report["tokens"].as_array().unwrap().iter().map(|v| v.to_string()).collect();
    fixture(&dir, &["--reference", &ids.join(",")]);
    let reference = tensors(&dir.join("reference.safetensors"));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(engine::lenses::table::HEADER));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 12 layers of 4 heads, and the final LayerNorm's one row.
    assert_eq!(rows.len(), 12 * 4 + 1);
    for row in &rows {
        assert_eq!(row.len(), 8, "{row:?}");
        let layer: usize = row[0].parse().unwrap();
        let lens = &report["layers"][layer];
        let num = |i: usize| row[i].parse::<f64>().unwrap();
        // serde_json parses floats to within an ulp.
        let same = |i: usize, v: &Value| {
            let want = v.as_f64().unwrap();
            assert!((num(i) - want).abs() <= 1e-12 * want.abs(), "{row:?} column {i}: {want}");
        };
        same(2, &lens["residual_norm"]);
        same(3, &lens["radius"]["max_rel_err"]);
        same(4, &lens["gain"]["mean_rel_offset"]);
        if layer == 12 {
            assert_eq!(&row[5..], ["", "", ""], "the final LayerNorm has no heads");
            continue;
        }
        // The head's entropy from the independent forward's attention: the mean over query
        // positions of -sum_j P_ij ln P_ij.
        let head: usize = row[1].parse().unwrap();
        let (shape, attn) = &reference[&format!("attn.{layer}")];
        let t = shape[1];
        let p = &attn[head * t * t..(head + 1) * t * t];
        let entropy = (0..t)
            .map(|i| {
                p[i * t..(i + 1) * t].iter().filter(|&&x| x > 0.0).map(|&x| -(x as f64) * (x as f64).ln()).sum::<f64>()
            })
            .sum::<f64>()
            / t as f64;
        assert!((num(5) - entropy).abs() < 1e-4, "layer {layer} head {head}: {} against {entropy}", num(5));
        same(6, &lens["heads"][head]["kernel_tv_mean"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
