//! The model and the run as bytes: the record saved to IndexedDB (see `persist`), and the model file
//! a visitor downloads and uploads.
//!
//! The downloaded model is one `.safetensors` file: the weights named as in the README's checkpoint
//! section, and in its `__metadata__` the run's config (`config`, the engine's `TrainConfig` as JSON),
//! the page's settings (`settings`) and the step (`step`). Any safetensors reader opens it. Upload
//! takes that file alone, or a `.safetensors` of weights together with a config JSON (the CLI's
//! checkpoint `config.json`, or this page's exported run JSON).

use engine::checkpoint::{self, NamedTensors, Snapshot};
use engine::model::params::Layout;
use engine::TrainConfig;
use serde::{Deserialize, Serialize};

use super::persist::Record;
use crate::settings::Settings;
use engine::session::DiagPoint;

/// What the saved run holds besides its tensors.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SavedMeta {
    pub engine: String,
    /// Milliseconds since the epoch.
    pub saved_at: f64,
    pub settings: Settings,
    pub config: TrainConfig,
    pub step: usize,
    pub train: Vec<(usize, f32)>,
    pub val: Vec<(usize, f32)>,
    pub entropy: Vec<(usize, Vec<f64>)>,
    pub diagnostics: Vec<DiagPoint>,
}

fn optimizer_tensors(state: &[(String, Vec<f32>)]) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    state.iter().map(|(n, v)| (n.clone(), vec![v.len()], v.clone())).collect()
}

pub fn to_record(snap: &Snapshot, meta: &SavedMeta) -> Result<Record, String> {
    let layout = Layout::new(&snap.config.model);
    let model =
        checkpoint::to_safetensors(&checkpoint::named_tensors(&layout, &snap.params)).map_err(|e| e.to_string())?;
    let optimizer = checkpoint::to_safetensors(&optimizer_tensors(&snap.optimizer)).map_err(|e| e.to_string())?;
    let meta = serde_json::to_string(meta).map_err(|e| e.to_string())?;
    Ok(Record { meta, model, optimizer })
}

pub fn meta_of(meta: &str) -> Result<SavedMeta, String> {
    serde_json::from_str(meta).map_err(|e| format!("the saved run cannot be read ({e})"))
}

pub fn from_record(rec: &Record) -> Result<(Snapshot, SavedMeta), String> {
    let meta = meta_of(&rec.meta)?;
    let layout = Layout::new(&meta.config.model);
    let named = checkpoint::from_safetensors(&rec.model, "the saved model").map_err(|e| e.to_string())?;
    let params = checkpoint::flat_from_named(&layout, named, "the saved model").map_err(|e| e.to_string())?;
    let optimizer = checkpoint::from_safetensors(&rec.optimizer, "the saved optimizer state")
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(n, (_, v))| (n, v))
        .collect();
    Ok((Snapshot { config: meta.config.clone(), step: meta.step, params, optimizer }, meta))
}

/// The model as one safetensors file with the config, settings and step in its metadata.
pub fn model_file(config: &TrainConfig, settings: &Settings, step: usize, params: &[f32]) -> Result<Vec<u8>, String> {
    let layout = Layout::new(&config.model);
    let metadata = [
        ("format", "spherewalk".to_string()),
        ("engine_version", engine::VERSION.to_string()),
        ("step", step.to_string()),
        ("config", serde_json::to_string(config).unwrap_or_default()),
        ("settings", serde_json::to_string(settings).unwrap_or_default()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    checkpoint::to_safetensors_with(&checkpoint::named_tensors(&layout, params), Some(metadata))
        .map_err(|e| e.to_string())
}

/// The CLI's checkpoint `config.json` for this run.
pub fn config_file(config: &TrainConfig, step: usize) -> String {
    let doc = serde_json::json!({ "engine_version": engine::VERSION, "step": step, "config": config });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// A model read from uploaded files.
pub struct Uploaded {
    pub config: TrainConfig,
    pub settings: Option<Settings>,
    pub step: usize,
    pub weights: NamedTensors,
    pub name: String,
}

/// Reads a config JSON: the CLI's `{step, config}`, the page's exported run, or a bare config.
fn read_config(name: &str, bytes: &[u8]) -> Result<(TrainConfig, Option<Settings>, usize), String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("{name} is not valid JSON ({e})"))?;
    let step = v.get("step").and_then(|s| s.as_u64()).unwrap_or(0) as usize;
    let settings = v.get("settings").and_then(|s| serde_json::from_value::<Settings>(s.clone()).ok());
    let cfg = v.get("config").cloned().unwrap_or(v);
    let config = serde_json::from_value::<TrainConfig>(cfg)
        .map_err(|e| format!("{name} does not hold a Spherewalk config ({e})"))?;
    Ok((config, settings, step))
}

/// The `__metadata__` of a safetensors file, if it has one.
fn metadata(bytes: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let header: serde_json::Value = serde_json::from_slice(bytes.get(8..8usize.checked_add(n)?)?).ok()?;
    header.get("__metadata__")?.as_object().cloned()
}

pub fn read_upload(files: &[(String, Vec<u8>)]) -> Result<Uploaded, String> {
    if files.is_empty() {
        return Err("no file chosen".into());
    }
    let mut config = None;
    let mut model = None;
    for (name, bytes) in files {
        if bytes.is_empty() {
            return Err(format!("{name} is empty"));
        }
        let looks_json = name.ends_with(".json") || bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        if looks_json {
            config = Some(read_config(name, bytes)?);
        } else {
            let weights = checkpoint::from_safetensors(bytes, name).map_err(|e| e.to_string())?;
            if weights.is_empty() {
                return Err(format!("{name} holds no tensors"));
            }
            model = Some((name.clone(), weights, metadata(bytes)));
        }
    }
    let Some((name, weights, meta)) = model else {
        return Err(
            "no model: choose the .safetensors file (with its config JSON, unless it came from this page)".into()
        );
    };
    let from_meta = meta.as_ref().and_then(|m| {
        let get = |k: &str| m.get(k).and_then(|v| v.as_str());
        let config = serde_json::from_str::<TrainConfig>(get("config")?).ok()?;
        let settings = get("settings").and_then(|s| serde_json::from_str::<Settings>(s).ok());
        let step = get("step").and_then(|s| s.parse().ok()).unwrap_or(0);
        Some((config, settings, step))
    });
    let (config, settings, step) = config.or(from_meta).ok_or_else(|| {
        format!("{name} carries no config: choose its config JSON together with it (both files at once)")
    })?;
    Ok(Uploaded { config, settings, step, weights, name })
}
