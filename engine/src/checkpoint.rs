//! Checkpoints: `model.safetensors` (f32 weights, names and shapes as in `params::Layout`),
//! `optimizer.safetensors` (optimizer state), and `config.json` (run config and step) in one folder.

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

impl Snapshot {
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let layout = Layout::new(&self.config.model);
        std::fs::write(dir.join(MODEL_FILE), to_safetensors(&named_tensors(&layout, &self.params))?)?;
        let opt: Vec<_> = self.optimizer.iter().map(|(n, v)| (n.clone(), vec![v.len()], v.clone())).collect();
        std::fs::write(dir.join(OPTIMIZER_FILE), to_safetensors(&opt)?)?;
        let cfg = ConfigFile { engine_version: crate::VERSION.into(), step: self.step, config: self.config.clone() };
        std::fs::write(dir.join(CONFIG_FILE), serde_json::to_string_pretty(&cfg)?)?;
        Ok(())
    }

    pub fn load(dir: &Path) -> Result<Snapshot> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| Error::Checkpoint(format!("cannot read {}: {e}", dir.join(name).display())))
        };
        let cfg: ConfigFile = serde_json::from_slice(&read(CONFIG_FILE)?).map_err(|e| {
            Error::Checkpoint(format!("{} is not a valid config: {e}", dir.join(CONFIG_FILE).display()))
        })?;
        cfg.config.model.validate()?;
        let layout = Layout::new(&cfg.config.model);
        let params = flat_from_named(&layout, from_safetensors(&read(MODEL_FILE)?, MODEL_FILE)?, MODEL_FILE)?;
        // A run that went non-finite keeps its last good state: weights like these were not saved by it.
        if let Some(i) = params.iter().position(|v| !v.is_finite()) {
            return Err(Error::Checkpoint(format!(
                "{}: weight {i} is not finite (NaN or infinity); the model cannot be used",
                dir.join(MODEL_FILE).display()
            )));
        }
        let optimizer =
            from_safetensors(&read(OPTIMIZER_FILE)?, OPTIMIZER_FILE)?.into_iter().map(|(n, (_, v))| (n, v)).collect();
        Ok(Snapshot { config: cfg.config, step: cfg.step, params, optimizer })
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
