//! PyTorch's `pytorch_model.bin`, read without running anything. `torch.save` writes a zip:
//! `<name>/data.pkl`, a pickle of the state dict, and `<name>/data/<key>`, each storage's raw
//! bytes. A pickle is a program (its REDUCE calls any function it names), so it is not unpickled:
//! a small interpreter runs only the opcodes a saved state dict uses and knows only its globals
//! (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`, `_rebuild_parameter`, the typed
//! storages); anything else is refused by name. The tensors come out as safetensors bytes, which
//! the families read as they read `model.safetensors`.
//!
//! The file is untrusted, so every limit is checked before what it limits is allocated: a value
//! nests at most [`pickle::MAX_DEPTH`] deep (a million nested tuples would overflow the stack), the
//! pickle's values take at most [`pickle::VALUE_BYTES_PER_BYTE`] times its own size (a value memoised once
//! and repeated a billion times would take gigabytes), every zip entry is at most the file's size,
//! and a tensor's view holds at most as many bytes as its storage (a stride of 0 would repeat one
//! number 2^62 times). What torch.save never writes (entries outside the pickle's folder or more of
//! them than storages, bytes around the archive, a comment) is refused, not ignored in silence.

mod pickle;

use std::io::{Cursor, Read};

use safetensors::Dtype;

use crate::error::{Error, Result};
use pickle::{unpickle, Value, View};

fn refuse<T>(why: impl std::fmt::Display) -> Result<T> {
    Err(Error::Checkpoint(format!("pytorch_model.bin: {why}")))
}

/// The bytes held while a weights file of `file_bytes` is read: a `pytorch_model.bin` (`zip`) is
/// held with its tensors gathered out of it and the safetensors written from them, three times its
/// size at most (each storage let go after its last tensor).
pub fn held_while_read(file_bytes: u64, zip: bool) -> u64 {
    if zip {
        file_bytes.saturating_mul(3)
    } else {
        file_bytes
    }
}

/// Whether `bytes` start as a zip archive (what `torch.save` writes since PyTorch 1.6).
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04")
}

fn size_of(d: Dtype) -> usize {
    match d {
        Dtype::F64 | Dtype::I64 => 8,
        Dtype::F32 | Dtype::I32 => 4,
        Dtype::F16 | Dtype::BF16 | Dtype::I16 => 2,
        _ => 1,
    }
}

/// The view's elements from its storage's bytes, contiguous (row-major), or why they cannot be.
fn gather(v: &View, storage: &[u8]) -> Result<Vec<u8>> {
    let size = size_of(v.dtype);
    let numel = v.shape.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
    let Some(numel) = numel.filter(|_| v.shape.len() == v.stride.len()) else {
        return refuse(format!("a tensor of shape {:?} and stride {:?}", v.shape, v.stride));
    };
    if numel == 0 {
        return Ok(Vec::new());
    }
    // A view within its storage holds at most the storage's bytes, unless its elements overlap (a
    // stride of 0), which no saved weight does: refused before its copy is allocated.
    if numel.checked_mul(size).is_none_or(|bytes| bytes > storage.len()) {
        return refuse(format!(
            "tensor storage {} holds {} bytes, too few for a view of shape {:?} (stride {:?})",
            v.key,
            storage.len(),
            v.shape,
            v.stride
        ));
    }
    // The farthest element the view reaches must lie in its storage.
    let last = v.shape.iter().zip(&v.stride).try_fold(v.offset, |a, (&s, &st)| a.checked_add((s - 1).checked_mul(st)?));
    if last.is_none_or(|l| l.checked_add(1).and_then(|n| n.checked_mul(size)).is_none_or(|end| end > storage.len())) {
        return refuse(format!("tensor storage {} is too short for a view of shape {:?}", v.key, v.shape));
    }
    let mut out = Vec::with_capacity(numel * size);
    let mut index = vec![0usize; v.shape.len()];
    for _ in 0..numel {
        let at = v.offset + index.iter().zip(&v.stride).map(|(i, s)| i * s).sum::<usize>();
        out.extend_from_slice(&storage[at * size..(at + 1) * size]);
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < v.shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    Ok(out)
}

/// The entries torch.save writes beside the storages: data.pkl, byteorder, version,
/// .format_version, .storage_alignment, .data/version, .data/serialization_id, with room to spare.
const RECORDS: usize = 16;

/// Refuses an archive torch.save would not write, rather than ignore part of it without a word:
/// entries outside the pickle's folder, bytes before or after the archive, a comment.
fn as_torch_saves(zip: &zip::ZipArchive<Cursor<&[u8]>>, bytes: &[u8], prefix: &str) -> Result<()> {
    for name in zip.file_names() {
        let name = name.or_else(|e| refuse(format!("an entry's name is unreadable ({e})")))?;
        let inside = name.starts_with(prefix) && !name.split(['/', '\\']).any(|part| part == "..");
        if inside {
            continue;
        }
        let shown: String = name.chars().take(80).collect();
        return refuse(format!("its entry {shown:?} lies outside its folder {prefix:?}, as torch.save never writes"));
    }
    if !zip.comment().is_empty() {
        return refuse(format!(
            "its archive carries a comment of {} bytes, which torch.save never writes",
            zip.comment().len()
        ));
    }
    // The end record is the archive's last 22 bytes (with no comment): anything after it is junk.
    let ends = bytes.len() >= 22 && bytes[bytes.len() - 22..].starts_with(b"PK\x05\x06");
    if zip.offset() > 0 || !ends {
        return refuse("it has bytes before or after its zip archive, which torch.save never writes");
    }
    Ok(())
}

/// The state dict in `bytes` (torch.save's zip) as safetensors bytes, every tensor contiguous.
pub fn to_safetensors(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).or_else(|e| refuse(format!("not a readable zip ({e})")))?;
    let pickle_name = zip.file_names().filter_map(|n| n.ok()).find(|n| n.ends_with("data.pkl")).map(|n| n.into_owned());
    let Some(pickle_name) = pickle_name else { return refuse("no data.pkl inside: not written by torch.save") };
    let prefix = pickle_name.trim_end_matches("data.pkl").to_string();
    as_torch_saves(&zip, bytes, &prefix)?;
    let entries = zip.len();
    // torch.save stores its entries uncompressed: none holds more than the whole file.
    let most = bytes.len() as u64;
    let mut read = |name: &str| -> Result<Vec<u8>> {
        let f = zip.by_name(name).or_else(|e| refuse(format!("{name}: {e}")))?;
        if f.size() > most {
            return refuse(format!("its entry {name} claims {} bytes, more than the whole file ({most})", f.size()));
        }
        let mut out = Vec::with_capacity(f.size() as usize);
        f.take(most + 1).read_to_end(&mut out).or_else(|e| refuse(format!("{name}: {e}")))?;
        if out.len() as u64 > most {
            return refuse(format!("its entry {name} holds more than the whole file's bytes"));
        }
        Ok(out)
    };
    if let Ok(order) = read(&format!("{prefix}byteorder")) {
        if order != b"little" {
            return refuse("its tensors are big-endian");
        }
    }
    let Value::Dict(items) = unpickle(&read(&pickle_name)?)? else {
        return refuse("its pickle holds no state dict (a dict of tensors)");
    };
    let items = items.take();
    if entries.saturating_sub(RECORDS) > items.len() {
        return refuse(format!(
            "it holds {entries} entries, more than its {} tensors' storages and torch.save's few records",
            items.len()
        ));
    }
    let mut tensors = Vec::with_capacity(items.len());
    let mut places: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut named = Vec::with_capacity(items.len());
    for (k, v) in items {
        let (Value::Str(name), Value::Tensor(view)) = (k, v) else {
            return refuse("its state dict holds something other than named tensors");
        };
        named.push((name, view));
    }
    // Each storage is read once and let go after the last tensor it holds (a copy of the file at
    // most beside the tensors gathered).
    let mut left: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    named.iter().for_each(|(_, v)| *left.entry(v.key.clone()).or_default() += 1);
    let mut storages: std::collections::HashMap<String, Vec<u8>> = std::collections::HashMap::new();
    for (name, view) in named {
        if !storages.contains_key(&view.key) {
            let data = read(&format!("{prefix}data/{}", view.key))?;
            storages.insert(view.key.clone(), data);
        }
        let data = gather(&view, &storages[&view.key])?;
        if let Some(n) = left.get_mut(&view.key) {
            *n -= 1;
            if *n == 0 {
                storages.remove(&view.key);
            }
        }
        // A key set twice keeps its first place and its last value, as a Python dict does.
        match places.get(&name) {
            Some(&i) => tensors[i] = (name, view.dtype, view.shape, data),
            None => {
                places.insert(name.clone(), tensors.len());
                tensors.push((name, view.dtype, view.shape, data));
            }
        }
    }
    let views = tensors
        .iter()
        .map(|(n, d, s, b)| safetensors::tensor::TensorView::new(*d, s.clone(), b).map(|v| (n.as_str(), v)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .or_else(|e| refuse(format!("a tensor does not fit its shape ({e})")))?;
    safetensors::serialize(views, None).or_else(|e| refuse(format!("could not be rewritten as safetensors ({e})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_gather_in_row_major_order() {
        // A 2x3 storage of bytes read through its transpose (shape 3x2, stride 1x3), from offset 0.
        let v = View { dtype: Dtype::U8, key: "0".into(), offset: 0, shape: vec![3, 2], stride: vec![1, 3] };
        assert_eq!(gather(&v, &[0, 1, 2, 3, 4, 5]).unwrap(), vec![0, 3, 1, 4, 2, 5]);
        let past = View { offset: 1, ..v.clone() };
        assert!(gather(&past, &[0, 1, 2, 3, 4, 5]).is_err(), "a view past its storage's end");
    }

    /// A zip of `entries`, stored as torch.save stores them.
    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let stored = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            w.start_file(*name, stored).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn floats(st: &[u8], name: &str) -> Vec<f32> {
        let st = safetensors::SafeTensors::deserialize(st).unwrap();
        st.tensor(name).unwrap().data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
    }

    #[test]
    fn a_key_set_twice_keeps_its_last_tensor_as_torch_load_does() {
        let pickle = pickle::tests::state_dict(&[("w", "0"), ("b", "1"), ("w", "2")]);
        let (one, two, three) = (1f32.to_le_bytes(), 2f32.to_le_bytes(), 3f32.to_le_bytes());
        let file = zip_of(&[
            ("archive/data.pkl", &pickle),
            ("archive/data/0", &one),
            ("archive/data/1", &two),
            ("archive/data/2", &three),
        ]);
        let st = to_safetensors(&file).unwrap();
        assert_eq!((floats(&st, "w"), floats(&st, "b")), (vec![3.0], vec![2.0]));
    }

    #[test]
    fn a_view_of_more_elements_than_its_storage_holds_is_refused_before_it_is_copied() {
        // Stride 0 repeats the storage's one float 2^28 times; sizes of 2^62 overflow.
        let repeat = View { dtype: Dtype::F32, key: "0".into(), offset: 0, shape: vec![1 << 28], stride: vec![0] };
        let e = gather(&repeat, &[0; 4]).unwrap_err().to_string();
        assert!(e.contains("holds 4 bytes, too few for a view of shape [268435456]"), "{e}");
        let huge = View { shape: vec![1 << 31, 1 << 31], stride: vec![0, 0], ..repeat };
        assert!(gather(&huge, &[0; 4]).is_err());
    }

    #[test]
    fn a_zip_entry_that_claims_more_than_the_file_is_refused() {
        let pickle = pickle::tests::state_dict(&[("w", "0")]);
        let mut file = zip_of(&[("archive/data.pkl", &pickle), ("archive/data/0", &1f32.to_le_bytes())]);
        // The uncompressed size of data/0, in its local header and in the central directory.
        let central = file.windows(4).rposition(|w| w == b"PK\x01\x02").unwrap();
        file[central + 24..central + 28].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let local = file.windows(4).rposition(|w| w == b"PK\x03\x04").unwrap();
        file[local + 22..local + 26].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let e = to_safetensors(&file).unwrap_err().to_string();
        assert!(e.contains("claims 4294967280 bytes, more than the whole file"), "{e}");
    }

    #[test]
    fn an_archive_torch_save_would_not_write_is_refused_not_read_in_part() {
        let pickle = pickle::tests::state_dict(&[("w", "0")]);
        let one = 1f32.to_le_bytes();
        let good = zip_of(&[("archive/data.pkl", &pickle), ("archive/data/0", &one)]);
        assert!(to_safetensors(&good).is_ok());
        let outside = zip_of(&[("archive/data.pkl", &pickle), ("archive/data/0", &one), ("../evil", b"x")]);
        let e = to_safetensors(&outside).unwrap_err().to_string();
        assert!(e.contains(r#"its entry "../evil" lies outside its folder "archive/""#), "{e}");
        let dotdot = zip_of(&[("archive/data.pkl", &pickle), ("archive/data/0", &one), ("archive/../x", b"x")]);
        assert!(to_safetensors(&dotdot).unwrap_err().to_string().contains("lies outside"));
        let junk = [&good[..], b"junk after the archive"].concat();
        let e = to_safetensors(&junk).unwrap_err().to_string();
        assert!(e.contains("bytes before or after its zip archive"), "{e}");
        let mut many: Vec<(String, Vec<u8>)> = vec![("archive/data.pkl".into(), pickle.clone())];
        many.extend((0..40).map(|i| (format!("archive/data/{i}"), one.to_vec())));
        let many: Vec<(&str, &[u8])> = many.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
        let e = to_safetensors(&zip_of(&many)).unwrap_err().to_string();
        assert!(e.contains("it holds 41 entries, more than its 1 tensors' storages"), "{e}");
        let mut commented = good.clone();
        let n = commented.len();
        commented[n - 2..].copy_from_slice(&5u16.to_le_bytes());
        commented.extend(b"hello");
        let e = to_safetensors(&commented).unwrap_err().to_string();
        assert!(e.contains("a comment of 5 bytes"), "{e}");
    }
}
