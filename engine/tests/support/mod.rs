//! What the real-model tests share (`gpt2.rs`, `families.rs`): Debian's python3 for the fixture
//! scripts, a scratch folder, the `lab` binary, and a safetensors file's tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use safetensors::SafeTensors;

/// Debian's python3 (with numpy); SPHEREWALK_PYTHON picks another.
pub fn python() -> String {
    std::env::var("SPHEREWALK_PYTHON").unwrap_or_else(|_| {
        if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" }.to_string()
    })
}

/// An empty folder of this test process's own.
pub fn scratch(kind: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spherewalk-{kind}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the fixture script `script` (under `tests/`) writing into `dir`.
pub fn fixture(script: &str, dir: &Path, args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join(script);
    let out = Command::new(python()).arg(script).arg(dir).args(args).output().expect("python3 runs");
    assert!(
        out.status.success(),
        "fixture.py failed (python3 with numpy needed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `lab`; returns (success, stdout, stderr).
pub fn lab(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lab")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// A safetensors file's tensors by name: shape and values.
pub type Tensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

pub fn tensors(path: &Path) -> Tensors {
    let bytes = std::fs::read(path).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.iter()
        .map(|(name, t)| {
            let data = t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            (name.to_string(), (t.shape().to_vec(), data))
        })
        .collect()
}
