//! A model's `model.safetensors`, read for its family (`families`): each stored tensor found by
//! name (after the family's prefix, such as `transformer.` or `model.`), checked against the shape
//! the config gives it, and converted to f32 (F32, F16, BF16). Every tensor the family does not
//! read must be one it knows to skip (causal-mask buffers, a stored copy of a tied head), so a file
//! of another architecture or another config is refused by name.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

use crate::error::{Error, Result};
use crate::model::params::Layout;

use super::files;

pub fn refuse<T>(why: impl std::fmt::Display) -> Result<T> {
    Err(Error::Checkpoint(format!("model.safetensors: {why}")))
}

/// What the first bytes say the file is, when it is not safetensors.
fn not_safetensors(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        // (`Pretrained::from_files` rewrites a torch.save zip as safetensors before it comes here.)
        [b'P', b'K', 3, 4, ..] => Some("a zip archive (a PyTorch pickle, pytorch_model.bin)"),
        [0x80, 2..=5, ..] => Some("a bare Python pickle (a pytorch_model.bin older than PyTorch 1.6)"),
        [] => Some("empty"),
        _ => None,
    }
}

/// The tensors of one file, by name without the family's prefix, and which have been read.
pub struct Stored<'a> {
    st: SafeTensors<'a>,
    names: HashMap<String, String>,
    read: Vec<String>,
}

impl<'a> Stored<'a> {
    /// Opens the file's bytes; names are kept with `prefix` taken off where they have it.
    pub fn open(bytes: &'a [u8], prefix: &str) -> Result<Stored<'a>> {
        if let Some(what) = not_safetensors(bytes) {
            return refuse(format!(
                "the file is {what}; the lab reads safetensors (model.safetensors on the model's hub page) and \
                 torch.save's zip (pytorch_model.bin since PyTorch 1.6)"
            ));
        }
        files::check_len(files::safetensors_len(bytes)?, bytes.len() as u64)?;
        let st = SafeTensors::deserialize(bytes).or_else(|e| refuse(format!("not a safetensors file ({e})")))?;
        let mut names = HashMap::new();
        for stored in st.names() {
            let name = stored.strip_prefix(prefix).unwrap_or(stored);
            if names.insert(name.to_string(), stored.to_string()).is_some() {
                return refuse(format!("tensor {name} is stored twice (with and without `{prefix}`)"));
            }
        }
        Ok(Stored { st, names, read: Vec::new() })
    }

    /// The stored shape of `name`, if the file has it.
    pub fn shape(&self, name: &str) -> Option<Vec<usize>> {
        let stored = self.names.get(name)?;
        self.st.tensor(stored).ok().map(|t| t.shape().to_vec())
    }

    /// Tensor `name` as f32, checked against `shape`; `family` names the model in the message
    /// when it is missing.
    pub fn get(&mut self, name: &str, shape: &[usize], family: &str) -> Result<Vec<f32>> {
        let Some(stored) = self.names.get(name) else {
            return refuse(format!("tensor {name} is missing (a {family} checkpoint has it)"));
        };
        let t = self.st.tensor(stored).or_else(refuse)?;
        if t.shape() != shape {
            return refuse(format!("tensor {stored} has shape {:?}, but config.json makes it {shape:?}", t.shape()));
        }
        let data = t.data();
        let out: Vec<f32> = match t.dtype() {
            Dtype::F32 => data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
            Dtype::F16 => data.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            Dtype::BF16 => data.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect(),
            other => return refuse(format!("tensor {stored} is {other:?}; the lab reads F32, F16 and BF16")),
        };
        // A NaN or an infinity would spread through every reading as NaN probabilities.
        if let Some((i, x)) = out.iter().enumerate().find(|(_, x)| !x.is_finite()) {
            return refuse(format!("tensor {stored} holds {x} at element {i}: a weight must be a finite number"));
        }
        self.read.push(name.to_string());
        Ok(out)
    }

    /// Refuses a file with a tensor the family neither read nor `skipped`: another architecture,
    /// or a config that is not this file's (`what` says which model was expected).
    pub fn all_read(&self, skipped: impl Fn(&str) -> bool, what: &str) -> Result<()> {
        match self.names.keys().filter(|n| !skipped(n) && !self.read.contains(n)).min() {
            Some(extra) => refuse(format!(
                "tensor {extra} is not part of {what} (another architecture, or config.json is not this file's)"
            )),
            None => Ok(()),
        }
    }
}

/// Writes `data` into tensor `id` of `params`.
pub fn put(layout: &Layout, params: &mut [f32], id: usize, data: &[f32]) {
    layout.of_mut(params, id).copy_from_slice(data)
}

/// Writes the rows `rows` of the (dout_all, din) matrix `src` as the engine's (rows.len(), din) `dst`.
pub fn rows_into(dst: &mut [f32], src: &[f32], din: usize, rows: std::ops::Range<usize>) {
    dst.copy_from_slice(&src[rows.start * din..rows.end * din]);
}

/// Writes the (in, out) matrix `src`'s columns `cols` as the engine's (out, in) `dst`.
pub fn transpose_into(dst: &mut [f32], src: &[f32], din: usize, dout_all: usize, cols: std::ops::Range<usize>) {
    let dout = cols.len();
    for o in 0..dout {
        for i in 0..din {
            dst[o * din + i] = src[i * dout_all + cols.start + o];
        }
    }
}

/// Key or value rows (kv_heads * hs, C) for every query head (heads * hs, C): query head h reads
/// its group's key/value head h / (heads / kv_heads), as transformers' `repeat_kv` does.
pub fn repeat_kv(src: &[f32], heads: usize, kv_heads: usize, hs: usize, c: usize) -> Vec<f32> {
    let group = heads / kv_heads;
    (0..heads).flat_map(|h| src[(h / group) * hs * c..(h / group + 1) * hs * c].iter().copied()).collect()
}

/// The same for a bias (kv_heads * hs).
pub fn repeat_kv_bias(src: &[f32], heads: usize, kv_heads: usize, hs: usize) -> Vec<f32> {
    repeat_kv(src, heads, kv_heads, hs, 1)
}
