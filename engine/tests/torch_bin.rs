//! PyTorch's pytorch_model.bin, read without running it: files written by torch.save itself
//! (`tests/torch_bin/make.py`, committed with them). The GPT-NeoX fixture's state dict as a .bin
//! reads exactly as its model.safetensors does; views (transposes, slices, shared storages) in
//! every dtype come out as torch lists them; a pickle that would run a command is refused by name.

#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use engine::pretrained::torch_bin;
use safetensors::SafeTensors;
use serde_json::Value;
use support::{lab, tensors};

mod support;

fn committed(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/torch_bin").join(name)
}

/// A safetensors tensor's values as f64 (F32, F16, BF16, BOOL, I64).
fn values(t: &safetensors::tensor::TensorView) -> Vec<f64> {
    let d = t.data();
    match t.dtype() {
        safetensors::Dtype::F32 => {
            d.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64).collect()
        }
        safetensors::Dtype::F16 => d.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64()).collect(),
        safetensors::Dtype::BF16 => {
            d.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64()).collect()
        }
        safetensors::Dtype::BOOL => d.iter().map(|&b| b as f64).collect(),
        safetensors::Dtype::I64 => {
            d.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64).collect()
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn views_come_out_as_torch_lists_them() {
    let st = torch_bin::to_safetensors(&std::fs::read(committed("views.bin")).unwrap()).unwrap();
    let st = SafeTensors::deserialize(&st).unwrap();
    let want: Value = serde_json::from_str(&std::fs::read_to_string(committed("views.json")).unwrap()).unwrap();
    let want = want.as_object().unwrap();
    assert_eq!(st.names().len(), want.len());
    for (name, w) in want {
        let t = st.tensor(name).unwrap();
        let shape: Vec<usize> = w["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
        assert_eq!(t.shape(), shape.as_slice(), "{name}");
        let listed: Vec<f64> = w["values"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        // torch listed them widened to float32: the same numbers.
        let got: Vec<f64> = values(&t).iter().map(|&x| x as f32 as f64).collect();
        assert_eq!(got, listed, "{name}");
    }
}

#[test]
fn a_pickle_that_would_run_a_command_is_refused() {
    let e = torch_bin::to_safetensors(&std::fs::read(committed("evil.bin")).unwrap()).unwrap_err().to_string();
    assert!(e.contains("names posix.system, which a saved state dict does not use"), "{e}");
}

/// The GPT-NeoX fixture twice under a scratch folder: `safetensors/` as the fixture writes it, and
/// `bin/` with the same config and tokenizer beside the committed .bin of the same weights.
fn neox_both_ways(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = support::scratch("torch-bin", name);
    let (safe, bin) = (dir.join("safetensors"), dir.join("bin"));
    support::fixture("families/fixture.py", &safe, &["--family", "gpt_neox"]);
    std::fs::create_dir_all(&bin).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(safe.join(f), bin.join(f)).unwrap();
    }
    std::fs::copy(committed("gpt_neox.bin"), bin.join("pytorch_model.bin")).unwrap();
    (dir, safe, bin)
}

#[test]
fn a_bin_checkpoint_reads_as_its_safetensors_does() {
    let (dir, safe, bin) = neox_both_ways("neox");
    let text = "The tokens walk on the sphere.";
    let dump = |d: &Path| {
        let out = d.join("dump.safetensors");
        let (ok, json, err) = lab(&[
            "inspect",
            "--model",
            d.to_str().unwrap(),
            "--text",
            text,
            "--json",
            "--dump",
            out.to_str().unwrap(),
        ]);
        assert!(ok, "{}: {err}", d.display());
        (serde_json::from_str::<Value>(json.trim()).unwrap(), tensors(&out))
    };
    let ((a, da), (b, db)) = (dump(&safe), dump(&bin));
    assert_eq!(a["layers"], b["layers"]);
    assert_eq!(a["next"], b["next"]);
    assert_eq!(da.len(), db.len());
    for (name, t) in &da {
        assert_eq!(t, &db[name], "{name}: the same from the .bin");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A .bin is held three times over while it is rewritten (the file, its tensors gathered, the
/// safetensors written from them), so the memory check counts it so: a limit that holds the
/// model from its safetensors refuses it from its .bin, before anything is read.
#[test]
fn a_bin_is_counted_with_its_copies_against_the_memory_limit() {
    use engine::pretrained::{families::Family, Pretrained};
    let (dir, safe, bin) = neox_both_ways("limit");
    let (_, cfg) = Family::of_config(&std::fs::read(safe.join("config.json")).unwrap()).unwrap();
    let len = |p: PathBuf| std::fs::metadata(p).unwrap().len();
    let (safe_len, bin_len) = (len(safe.join("model.safetensors")), len(bin.join("pytorch_model.bin")));
    let budget = engine::memory::weight_bytes(&cfg).unwrap() + safe_len.max(bin_len) + 1;
    assert!(Pretrained::open(&safe, budget).is_ok(), "the safetensors fits");
    let e = Pretrained::open(&bin, budget).unwrap_err().to_string();
    assert!(e.contains("over the memory limit"), "{e}");
    assert!(Pretrained::open(&bin, budget + 2 * bin_len).is_ok(), "the .bin fits with room for its copies");
    let _ = std::fs::remove_dir_all(&dir);
}
