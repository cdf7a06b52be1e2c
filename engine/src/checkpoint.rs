//! Checkpoints: `model.safetensors` (f32 weights, names and shapes as in `params::Layout`),
//! `optimizer.safetensors` (optimizer state), and `config.json` (run config and step) in one folder.
//! The page's "Download model" file (`spherewalk-model.safetensors`) carries its config and step
//! in its header, and reads as a checkpoint of its own.

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::error::{Error, Result};
use crate::model::params::Layout;

pub const MODEL_FILE: &str = "model.safetensors";
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
pub const CONFIG_FILE: &str = "config.json";
/// The page's downloaded model file.
pub const PAGE_MODEL_FILE: &str = "spherewalk-model.safetensors";

/// Tensors by name: (shape, values).
pub type NamedTensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

#[derive(Clone)]
pub struct Snapshot {
    pub config: TrainConfig,
    pub step: usize,
    pub params: Vec<f32>,
    pub optimizer: Vec<(String, Vec<f32>)>,
}

#[derive(Serialize, Deserialize)]
struct ConfigFile {
    engine_version: String,
    step: usize,
    config: TrainConfig,
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Serialises named f32 tensors to safetensors bytes.
pub fn to_safetensors(tensors: &[(String, Vec<usize>, Vec<f32>)]) -> Result<Vec<u8>> {
    to_safetensors_with(tensors, None)
}

/// Serialises named f32 tensors to safetensors bytes with string `metadata` in the header
/// (`__metadata__`, which safetensors readers show and ignore).
pub fn to_safetensors_with(
    tensors: &[(String, Vec<usize>, Vec<f32>)],
    metadata: Option<HashMap<String, String>>,
) -> Result<Vec<u8>> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> =
        tensors.iter().map(|(n, s, v)| (n.clone(), s.clone(), le_bytes(v))).collect();
    let views = bytes
        .iter()
        .map(|(n, s, b)| {
            TensorView::new(Dtype::F32, s.clone(), b)
                .map(|v| (n.clone(), v))
                .map_err(|e| Error::Checkpoint(e.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    safetensors::serialize(views, metadata).map_err(|e| Error::Checkpoint(e.to_string()))
}

/// Reads every f32 tensor of a safetensors file: name -> (shape, values).
pub fn from_safetensors(bytes: &[u8], what: &str) -> Result<NamedTensors> {
    let st = SafeTensors::deserialize(bytes)
        .map_err(|e| Error::Checkpoint(format!("{what} is not valid safetensors: {e}")))?;
    let mut out = HashMap::new();
    for (name, view) in st.tensors() {
        if view.dtype() != Dtype::F32 {
            return Err(Error::Checkpoint(format!("{what}: tensor {name:?} is {:?}, expected F32", view.dtype())));
        }
        let values = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        out.insert(name, (view.shape().to_vec(), values));
    }
    Ok(out)
}

/// The model's tensors, by name, in layout order.
pub fn named_tensors(layout: &Layout, flat: &[f32]) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    layout.tensors.iter().map(|t| (t.name.clone(), t.shape.clone(), flat[t.range()].to_vec())).collect()
}

/// Fills a flat buffer from named tensors, checking every name and shape.
pub fn flat_from_named(layout: &Layout, mut named: NamedTensors, what: &str) -> Result<Vec<f32>> {
    let mut flat = vec![0.0; layout.total];
    for t in &layout.tensors {
        let (shape, values) = named
            .remove(&t.name)
            .ok_or_else(|| Error::Checkpoint(format!("{what}: tensor {:?} is missing", t.name)))?;
        if shape != t.shape {
            return Err(Error::Checkpoint(format!(
                "{what}: tensor {:?} has shape {shape:?}, expected {:?}",
                t.name, t.shape
            )));
        }
        flat[t.range()].copy_from_slice(&values);
    }
    Ok(flat)
}

/// Makes `dir` (and its parents) and checks that files can be written in it: `lab train --save`
/// asks before the run, not after it.
pub fn writable(dir: &Path) -> Result<()> {
    let fail = |e: std::io::Error| Error::Checkpoint(format!("cannot save to {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let probe = dir.join(".spherewalk-write-check");
    std::fs::write(&probe, b"").map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

impl Snapshot {
    pub fn save(&self, dir: &Path) -> Result<()> {
        writable(dir)?;
        let write = |name: &str, bytes: Vec<u8>| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| Error::Checkpoint(format!("cannot write {}: {e}", path.display())))
        };
        let layout = Layout::new(&self.config.model);
        write(MODEL_FILE, to_safetensors(&named_tensors(&layout, &self.params))?)?;
        let opt: Vec<_> = self.optimizer.iter().map(|(n, v)| (n.clone(), vec![v.len()], v.clone())).collect();
        write(OPTIMIZER_FILE, to_safetensors(&opt)?)?;
        let cfg = ConfigFile { engine_version: crate::VERSION.into(), step: self.step, config: self.config.clone() };
        write(CONFIG_FILE, serde_json::to_string_pretty(&cfg)?.into_bytes())
    }

    /// A checkpoint folder (`config.json`, the model, and the optimizer's state when there is
    /// one), or the page's downloaded model file alone (its config travels in its header).
    /// Without optimizer state the snapshot's `optimizer` is empty: the optimizer starts fresh.
    pub fn load(path: &Path) -> Result<Snapshot> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| Error::Checkpoint(format!("cannot read {}: {e}", path.display())))
        };
        if path.is_file() {
            return Self::from_model_file(path, &read(path)?);
        }
        let dir = path;
        let cfg: ConfigFile = serde_json::from_slice(&read(&dir.join(CONFIG_FILE))?).map_err(|e| {
            Error::Checkpoint(format!("{} is not a valid config: {e}", dir.join(CONFIG_FILE).display()))
        })?;
        // The page's "Download model" names its file apart from the CLI's.
        let model = [MODEL_FILE, PAGE_MODEL_FILE].map(|n| dir.join(n)).into_iter().find(|p| p.is_file());
        let model = model.unwrap_or_else(|| dir.join(MODEL_FILE));
        let params = Self::params_of(&cfg.config, &read(&model)?, &model)?;
        let optimizer = match dir.join(OPTIMIZER_FILE) {
            p if p.is_file() => {
                from_safetensors(&read(&p)?, OPTIMIZER_FILE)?.into_iter().map(|(n, (_, v))| (n, v)).collect()
            }
            _ => Vec::new(),
        };
        Ok(Snapshot { config: cfg.config, step: cfg.step, params, optimizer })
    }

    /// The page's model file: its tensors, and its config and step in the header's metadata.
    fn from_model_file(path: &Path, bytes: &[u8]) -> Result<Snapshot> {
        let (_, header) = SafeTensors::read_metadata(bytes)
            .map_err(|e| Error::Checkpoint(format!("{} is not valid safetensors: {e}", path.display())))?;
        let meta = header.metadata().clone().unwrap_or_default();
        let config = meta.get("config").ok_or_else(|| {
            Error::Checkpoint(format!(
                "{} carries no config in its header: give the folder with its {CONFIG_FILE}",
                path.display()
            ))
        })?;
        let config: TrainConfig = serde_json::from_str(config)
            .map_err(|e| Error::Checkpoint(format!("{}: its config cannot be read: {e}", path.display())))?;
        let step = meta.get("step").and_then(|s| s.parse().ok()).unwrap_or(0);
        let params = Self::params_of(&config, bytes, path)?;
        Ok(Snapshot { config, step, params, optimizer: Vec::new() })
    }

    /// The flat weights of a model file for `config`, refused when one is not finite.
    fn params_of(config: &TrainConfig, bytes: &[u8], path: &Path) -> Result<Vec<f32>> {
        config.model.check()?;
        let layout = Layout::new(&config.model);
        let what = path.display().to_string();
        let params = flat_from_named(&layout, from_safetensors(bytes, &what)?, &what)?;
        // A run that went non-finite keeps its last good state: weights like these were not saved by it.
        if let Some(i) = params.iter().position(|v| !v.is_finite()) {
            return Err(Error::Checkpoint(format!(
                "{what}: weight {i} is not finite (NaN or infinity); the model cannot be used"
            )));
        }
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_travels_in_the_header_and_the_tensors_stay_as_they_were() {
        let tensors = vec![("w".to_string(), vec![2, 3], vec![1.0, -2.0, 3.5, 0.0, 1e-8, 7.0])];
        let meta: HashMap<String, String> = [("step".to_string(), "12".to_string())].into_iter().collect();
        let bytes = to_safetensors_with(&tensors, Some(meta.clone())).unwrap();
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(header.metadata().as_ref(), Some(&meta));
        let back = from_safetensors(&bytes, "the test file").unwrap();
        assert_eq!(back["w"], (vec![2, 3], tensors[0].2.clone()));
    }
}
