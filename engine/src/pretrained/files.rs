//! What a model's files have to be before their contents are read: JSON as text (a byte-order
//! mark allowed, an HTML page that a server sent in its place named as such), safetensors whose
//! header describes exactly the file, and, natively, regular files of a sensible size (never a
//! device or a pipe, which would be read forever).

use crate::error::{Error, Result};

/// The most a `config.json` can reasonably hold.
pub const CONFIG_LIMIT: u64 = 1 << 20;
/// The most a tokenizer's file can reasonably hold (Qwen2's tokenizer.json is 7 MB).
pub const TOKENIZER_LIMIT: u64 = 64 << 20;
/// The most a safetensors header can hold before the data (the format's own limit).
const HEADER_LIMIT: u64 = 100_000_000;

/// `bytes` of the JSON file `name`, ready for a JSON reader: a UTF-8 byte-order mark is dropped,
/// and an HTML page (what a hub or a proxy sends for a missing file, a login or an error) is
/// refused as what it is.
pub fn json_text<'a>(bytes: &'a [u8], name: &str) -> Result<&'a [u8]> {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let first = text.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'<') {
        return Err(Error::Data(format!(
            "{name} is an HTML page, not JSON: the server sent a web page (a missing file, a login or an error page) \
             instead of the model's file"
        )));
    }
    Ok(text)
}

/// The whole length a safetensors file must have, read from the header at its start (`head` holds
/// at least the file's first 8 bytes and the header they announce), or why it cannot be read.
pub fn safetensors_len(head: &[u8]) -> Result<u64> {
    fn refuse<T>(why: String) -> Result<T> {
        Err(Error::Checkpoint(format!("model.safetensors: {why}")))
    }
    // What a file that is no safetensors is, by its first bytes: the sentence names it.
    let start = head.iter().skip_while(|b| b.is_ascii_whitespace());
    if start.clone().next() == Some(&b'<') {
        return refuse(
            "it is an HTML page, not safetensors: the server sent a web page (a missing file, a login or an error \
             page) instead of the model's weights"
                .into(),
        );
    }
    if head.starts_with(b"PK\x03\x04") {
        return refuse(
            "it is a zip archive (PyTorch's pytorch_model.bin), not safetensors: name it pytorch_model.bin".into(),
        );
    }
    if head.first() == Some(&0x80) && head.get(1).is_some_and(|p| (2..=5).contains(p)) {
        return refuse(
            "it is a bare pickle (PyTorch's file before 1.6), not safetensors: the lab reads safetensors and \
             torch.save's zip (load it and save it again in PyTorch 1.6 or later)"
                .into(),
        );
    }
    let Some(n) = head.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))) else {
        return refuse(format!(
            "the file has {} bytes: too short to be safetensors (an interrupted download?)",
            head.len()
        ));
    };
    if n > HEADER_LIMIT {
        return refuse(format!("its header claims {n} bytes: not a safetensors file"));
    }
    let Some(header) = head.get(8..8 + n as usize) else {
        return refuse(format!(
            "the file has {} bytes, shorter than its own header of {n}: it is truncated (an interrupted download?)",
            head.len()
        ));
    };
    let header: serde_json::Value = serde_json::from_slice(header)
        .or_else(|e| refuse(format!("its header is not JSON ({e}): not a safetensors file")))?;
    let Some(tensors) = header.as_object() else { return refuse("its header is not a JSON object".into()) };
    let mut end = 0u64;
    for (name, t) in tensors.iter().filter(|(k, _)| *k != "__metadata__") {
        match t.get("data_offsets").and_then(|o| o.get(1)).and_then(|e| e.as_u64()) {
            Some(e) => end = end.max(e),
            None => return refuse(format!("tensor {name} has no data_offsets in the header")),
        }
    }
    Ok(8 + n + end)
}

/// Refuses a safetensors file of `actual` bytes whose header describes `described`.
pub fn check_len(described: u64, actual: u64) -> Result<()> {
    let refuse = |why: String| Err(Error::Checkpoint(format!("model.safetensors: {why}")));
    match actual.cmp(&described) {
        std::cmp::Ordering::Less => refuse(format!(
            "the file has {actual} bytes, not the {described} its header describes: it is truncated (an interrupted \
             download?)"
        )),
        std::cmp::Ordering::Greater => refuse(format!(
            "the file has {actual} bytes, {} more than the {described} its header describes: trailing bytes that \
             are not part of it (a file joined to another, or a download that went wrong)",
            actual - described
        )),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Natively: the size of a regular file; a device, a pipe or a folder is refused before anything
/// is read from it.
#[cfg(not(target_arch = "wasm32"))]
pub fn regular_len(path: &std::path::Path, what: &str) -> Result<u64> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::Checkpoint(format!("cannot read {what} at {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Error::Checkpoint(format!(
            "{} is not a regular file (a device, a pipe or a folder): the lab reads {what} from a file",
            path.display()
        )));
    }
    Ok(meta.len())
}

/// Natively: a regular file's bytes, at most `limit` of them.
#[cfg(not(target_arch = "wasm32"))]
pub fn read_regular(path: &std::path::Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let cannot = |e: std::io::Error| Error::Checkpoint(format!("cannot read {what} at {}: {e}", path.display()));
    let len = regular_len(path, what)?;
    if len > limit {
        return Err(Error::Checkpoint(format!(
            "{what} at {} has {len} bytes, more than the {limit} it may have here",
            path.display()
        )));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // A file that grows while it is read still stops at the limit.
    std::fs::File::open(path).map_err(cannot)?.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(Error::Checkpoint(format!(
            "{what} at {} grew past {limit} bytes while it was read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Natively: whether a file's first bytes are `magic` (a zip's, for a pytorch_model.bin).
#[cfg(not(target_arch = "wasm32"))]
pub fn starts_with(path: &std::path::Path, magic: &[u8]) -> Result<bool> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).map_err(|e| Error::Checkpoint(format!("cannot read {}: {e}", path.display())))?;
    let mut head = vec![0u8; magic.len()];
    Ok(f.read_exact(&mut head).is_ok() && head == magic)
}

/// Natively: the length a safetensors file's header describes, read from its first bytes only.
#[cfg(not(target_arch = "wasm32"))]
pub fn described_len(path: &std::path::Path) -> Result<u64> {
    use std::io::Read;
    let cannot = |e: std::io::Error| Error::Checkpoint(format!("cannot read {}: {e}", path.display()));
    let mut f = std::fs::File::open(path).map_err(cannot)?;
    let mut head = Vec::with_capacity(8);
    (&mut f).take(8).read_to_end(&mut head).map_err(cannot)?;
    // A file of fewer than 8 bytes is named with its own length.
    let Some(n) = head.get(..8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes"))) else {
        return safetensors_len(&head);
    };
    f.take(n.min(HEADER_LIMIT + 1)).read_to_end(&mut head).map_err(cannot)?;
    safetensors_len(&head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_served_as_safetensors_is_named_by_its_first_bytes() {
        let named = |head: &[u8]| safetensors_len(head).unwrap_err().to_string();
        assert!(named(b"\n<!DOCTYPE html><p>Sign in").contains("it is an HTML page, not safetensors"));
        assert!(named(b"PK\x03\x04\x14\x00\x00\x00").contains("it is a zip archive"));
        assert!(named(b"\x80\x02\x8a\x0alZ\xfc").contains("a bare pickle (PyTorch's file before 1.6)"));
        assert!(named(b"abcd").contains("the file has 4 bytes: too short"));
    }

    #[test]
    fn json_may_start_with_a_byte_order_mark_and_an_html_page_is_named() {
        assert_eq!(json_text(b"\xEF\xBB\xBF{\"a\": 1}", "config.json").unwrap(), b"{\"a\": 1}");
        let err = json_text(b"\n  <!doctype html><title>404</title>", "config.json").unwrap_err().to_string();
        assert!(err.contains("config.json is an HTML page, not JSON"), "{err}");
    }

    #[test]
    fn a_safetensors_header_gives_the_whole_length_and_a_wrong_length_is_named() {
        let header = br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}"#;
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header);
        file.extend_from_slice(&[0; 8]);
        let len = safetensors_len(&file).unwrap();
        assert_eq!(len, file.len() as u64);
        assert!(check_len(len, len).is_ok());
        assert!(check_len(len, len - 3).unwrap_err().to_string().contains("truncated"));
        let err = check_len(len, len + 5).unwrap_err().to_string();
        assert!(err.contains("5 more than") && err.contains("trailing bytes"), "{err}");
        assert!(safetensors_len(&file[..10]).unwrap_err().to_string().contains("shorter than its own header"));
        assert!(safetensors_len(&u64::MAX.to_le_bytes()).unwrap_err().to_string().contains("not a safetensors"));
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn only_regular_files_of_a_sensible_size_are_read() {
        let dir = std::env::temp_dir().join(format!("spherewalk-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(read_regular(&file, "config.json", 10).unwrap(), b"{}");
        assert!(read_regular(&file, "config.json", 1).unwrap_err().to_string().contains("more than the 1"));
        let err = read_regular(std::path::Path::new("/dev/zero"), "config.json", 10).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(read_regular(&dir, "config.json", 10).unwrap_err().to_string().contains("not a regular file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
