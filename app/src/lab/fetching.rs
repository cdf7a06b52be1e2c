//! A model's files fetched from the hub (or the browser's cache) at one revision: config.json
//! first, then its tokenizer's, then the weights (model.safetensors, or else pytorch_model.bin),
//! each checked before it is kept; a model the tab cannot hold is refused from its config and
//! the weights' announced length, before their download. Opening a model (`real_model`) and a
//! training history (`history`) both fetch this way.

use engine::memory::MODEL_BUDGET;
use engine::pretrained::{files, torch_bin, Pretrained};
use wasm_bindgen::JsValue;

use super::hub::{self, Got};
use super::Lab;

/// What came: the files as the model worker names them, their bytes, notes (a cache that refused
/// them) and the addresses kept in this browser's cache.
pub struct Fetched {
    pub names: Vec<String>,
    pub bulk: Vec<JsValue>,
    pub notes: Vec<String>,
    pub urls: Vec<String>,
}

/// The most a model's other files (config.json, its tokenizer's) may hold: Qwen2's tokenizer.json,
/// among the largest, is 7 MB.
const SMALL_FILE_BYTES: f64 = 64e6;

/// Whether the tab can hold the model `config` describes with a weights file of `bytes` (0: the
/// weights alone; `zip`: a pytorch_model.bin), said before anything large is read or downloaded.
pub fn fits(config: &[u8], bytes: f64, zip: bool) -> Result<(), String> {
    let held = engine::pretrained::torch_bin::held_while_read(bytes as u64, zip);
    Pretrained::check(config, held, MODEL_BUDGET).map(drop).map_err(|e| e.to_string())
}

/// The files under `base` (a model's folder at a revision). Ok(None): `still` said the fetch is no
/// longer wanted (a later one replaced it).
pub async fn fetch(
    lab: Lab,
    base: &str,
    controller: &web_sys::AbortController,
    still: impl Fn() -> bool,
) -> Result<Option<Fetched>, String> {
    let mut out = Fetched { names: Vec::new(), bulk: Vec::new(), notes: Vec::new(), urls: Vec::new() };
    let mut config = Vec::new();
    // The small files first: a model whose files cannot be found, or that the tab cannot hold,
    // fails before its weights come.
    let mut plan = vec!["config.json", "tokenizer.json", "model.safetensors"];
    let mut next = 0;
    while let Some(&file) = plan.get(next) {
        next += 1;
        let url = format!("{base}/{file}");
        let json = |b: &[u8]| files::json_text(b, file).map(drop).map_err(|e| e.to_string());
        let safetensors = |b: &[u8]| {
            files::safetensors_len(b).and_then(|len| files::check_len(len, b.len() as u64)).map_err(|e| e.to_string())
        };
        let text = |_: &[u8]| Ok(());
        let zip = |b: &[u8]| match torch_bin::is_zip(b) {
            true => Ok(()),
            false => Err("pytorch_model.bin is not torch.save's zip".to_string()),
        };
        let check: hub::Check = match file {
            "model.safetensors" => &safetensors,
            "pytorch_model.bin" => &zip,
            "merges.txt" => &text,
            _ => &json,
        };
        let weights = |len: Option<f64>| fits(&config, len.unwrap_or(0.0), file == "pytorch_model.bin");
        let small = |len: Option<f64>| match len {
            Some(l) if l > SMALL_FILE_BYTES => {
                Err(format!("{file} is over {} MB, far more than such a file holds", SMALL_FILE_BYTES / 1e6))
            }
            _ => Ok(()),
        };
        let announced: hub::Announced =
            if matches!(file, "model.safetensors" | "pytorch_model.bin") { &weights } else { &small };
        let got = hub::download(lab, &url, file, controller, check, announced).await;
        if !still() {
            return Ok(None);
        }
        match got? {
            Some(Got { bytes, note }) => {
                if file == "config.json" {
                    config = bytes.to_vec();
                    fits(&config, 0.0, false)?;
                }
                out.bulk.push(bytes.into());
                // The model worker reads a .bin as the safetensors it holds.
                out.names.push(if file == "pytorch_model.bin" { "model.safetensors" } else { file }.to_string());
                out.notes.extend(note);
                out.urls.push(url);
            }
            // No tokenizer.json: GPT-2's older pair (without it the model worker says what is missing).
            None if file == "tokenizer.json" => drop(plan.splice(next..next, ["vocab.json", "merges.txt"])),
            None if matches!(file, "vocab.json" | "merges.txt") => {}
            // Some revisions (older Pythia checkpoints) keep only PyTorch's file.
            None if file == "model.safetensors" => plan.push("pytorch_model.bin"),
            None => return Err(format!("{url} was not found (404): is the model id right?")),
        }
    }
    Ok(Some(out))
}
