//! PyTorch's `pytorch_model.bin`, read without running anything. `torch.save` writes a zip:
//! `<name>/data.pkl`, a pickle of the state dict, and `<name>/data/<key>`, each storage's raw
//! bytes. A pickle is a program (its REDUCE calls any function it names), so it is not unpickled:
//! a small interpreter runs only the opcodes a saved state dict uses and knows only its globals
//! (`collections.OrderedDict`, `torch._utils._rebuild_tensor_v2`, `_rebuild_parameter`, the typed
//! storages); anything else is refused by name. The tensors come out as safetensors bytes, which
//! the families read as they read `model.safetensors`.

use std::io::{Cursor, Read};

use safetensors::Dtype;

use crate::error::{Error, Result};

fn refuse<T>(why: impl std::fmt::Display) -> Result<T> {
    Err(Error::Checkpoint(format!("pytorch_model.bin: {why}")))
}

/// Whether `bytes` start as a zip archive (what `torch.save` writes since PyTorch 1.6).
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04")
}

/// The functions and classes a state dict's pickle may name.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Global {
    OrderedDict,
    RebuildTensor,
    RebuildParameter,
    Storage(Dtype),
}

impl Global {
    fn of(module: &str, name: &str) -> Result<Global> {
        let storage = |d| Ok(Global::Storage(d));
        match (module, name) {
            ("collections", "OrderedDict") => Ok(Global::OrderedDict),
            ("torch._utils", "_rebuild_tensor_v2") => Ok(Global::RebuildTensor),
            ("torch._utils", "_rebuild_parameter") => Ok(Global::RebuildParameter),
            ("torch", "FloatStorage") => storage(Dtype::F32),
            ("torch", "HalfStorage") => storage(Dtype::F16),
            ("torch", "BFloat16Storage") => storage(Dtype::BF16),
            ("torch", "DoubleStorage") => storage(Dtype::F64),
            ("torch", "BoolStorage") => storage(Dtype::BOOL),
            ("torch", "ByteStorage") => storage(Dtype::U8),
            ("torch", "CharStorage") => storage(Dtype::I8),
            ("torch", "ShortStorage") => storage(Dtype::I16),
            ("torch", "IntStorage") => storage(Dtype::I32),
            ("torch", "LongStorage") => storage(Dtype::I64),
            _ => refuse(format!(
                "its pickle names {module}.{name}, which a saved state dict does not use; refused, since a pickle \
                 can run any function it names"
            )),
        }
    }
}

/// A tensor as the pickle describes it: a view into a storage.
#[derive(Clone, Debug, PartialEq)]
struct View {
    dtype: Dtype,
    key: String,
    offset: usize,
    shape: Vec<usize>,
    stride: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Global(Global),
    Storage(Dtype, String),
    Tensor(View),
    Mark,
}

impl Value {
    fn usize(&self, what: &str) -> Result<usize> {
        match self {
            Value::Int(i) if *i >= 0 => Ok(*i as usize),
            other => refuse(format!("{what} should be a count, not {other:?}")),
        }
    }

    fn usizes(&self, what: &str) -> Result<Vec<usize>> {
        match self {
            Value::Tuple(v) => v.iter().map(|x| x.usize(what)).collect(),
            other => refuse(format!("{what} should be a tuple of counts, not {other:?}")),
        }
    }
}

/// Reads the pickle's bytes one opcode at a time.
struct Ops<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Ops<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else { return refuse("its pickle ends in the middle of an opcode") };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<usize> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn line(&mut self) -> Result<String> {
        let rest = &self.bytes[self.at..];
        let Some(n) = rest.iter().position(|&b| b == b'\n') else { return refuse("its pickle has an unended name") };
        let s = String::from_utf8(rest[..n].to_vec()).or_else(|_| refuse("its pickle has a name that is not UTF-8"))?;
        self.at += n + 1;
        Ok(s)
    }

    fn text(&mut self, n: usize) -> Result<String> {
        String::from_utf8(self.take(n)?.to_vec()).or_else(|_| refuse("its pickle has a string that is not UTF-8"))
    }
}

/// Runs the pickle with the opcodes protocols 2 to 4 write for a state dict; returns the object.
fn unpickle(bytes: &[u8]) -> Result<Value> {
    let mut ops = Ops { bytes, at: 0 };
    let mut stack: Vec<Value> = Vec::new();
    let mut memo: std::collections::HashMap<usize, Value> = std::collections::HashMap::new();
    let pop = |stack: &mut Vec<Value>| stack.pop().map_or_else(|| refuse("its pickle pops an empty stack"), Ok);
    let to_mark = |stack: &mut Vec<Value>| -> Result<Vec<Value>> {
        let Some(m) = stack.iter().rposition(|v| *v == Value::Mark) else { return refuse("its pickle has no MARK") };
        let items = stack.split_off(m + 1);
        stack.pop();
        Ok(items)
    };
    loop {
        let op = ops.u8()?;
        match op {
            0x80 => drop(ops.u8()?),    // PROTO
            0x95 => drop(ops.take(8)?), // FRAME
            b'.' => return pop(&mut stack),
            b'(' => stack.push(Value::Mark),
            b'N' => stack.push(Value::None),
            0x88 => stack.push(Value::Bool(true)),
            0x89 => stack.push(Value::Bool(false)),
            b'K' => stack.push(Value::Int(ops.u8()? as i64)),
            b'M' => {
                let b = ops.take(2)?;
                stack.push(Value::Int(u16::from_le_bytes([b[0], b[1]]) as i64))
            }
            b'J' => {
                let b = ops.take(4)?;
                stack.push(Value::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64))
            }
            0x8a => {
                // LONG1: a little-endian two's-complement integer of n bytes.
                let n = ops.u8()? as usize;
                let b = ops.take(n)?;
                if n > 8 {
                    return refuse("its pickle has an integer over 64 bits");
                }
                let mut v: i64 = 0;
                for (i, &x) in b.iter().enumerate() {
                    v |= (x as i64) << (8 * i);
                }
                if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                stack.push(Value::Int(v))
            }
            b'G' => {
                let b = ops.take(8)?;
                stack.push(Value::Float(f64::from_be_bytes(b.try_into().expect("8 bytes"))))
            }
            b'X' => {
                let n = ops.u32()?;
                stack.push(Value::Str(ops.text(n)?))
            }
            0x8c => {
                let n = ops.u8()? as usize;
                stack.push(Value::Str(ops.text(n)?))
            }
            b')' => stack.push(Value::Tuple(vec![])),
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if stack.len() < n {
                    return refuse("its pickle makes a tuple of an empty stack");
                }
                let items = stack.split_off(stack.len() - n);
                stack.push(Value::Tuple(items))
            }
            b't' => {
                let items = to_mark(&mut stack)?;
                stack.push(Value::Tuple(items))
            }
            b']' => stack.push(Value::List(vec![])),
            b'}' => stack.push(Value::Dict(vec![])),
            b'a' | b'e' => {
                let items = if op == b'a' { vec![pop(&mut stack)?] } else { to_mark(&mut stack)? };
                match stack.last_mut() {
                    Some(Value::List(l)) => l.extend(items),
                    _ => return refuse("its pickle appends to something that is not a list"),
                }
            }
            b's' | b'u' => {
                let items = if op == b's' {
                    let v = pop(&mut stack)?;
                    vec![pop(&mut stack)?, v]
                } else {
                    to_mark(&mut stack)?
                };
                if items.len() % 2 != 0 {
                    return refuse("its pickle sets a key without a value");
                }
                let Some(Value::Dict(d)) = stack.last_mut() else {
                    return refuse("its pickle sets an item on something that is not a dict");
                };
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    d.push((k, v));
                }
            }
            b'q' => drop(memo.insert(ops.u8()? as usize, stack.last().cloned().unwrap_or(Value::None))),
            b'r' => drop(memo.insert(ops.u32()?, stack.last().cloned().unwrap_or(Value::None))),
            0x94 => drop(memo.insert(memo.len(), stack.last().cloned().unwrap_or(Value::None))),
            b'h' | b'j' => {
                let i = if op == b'h' { ops.u8()? as usize } else { ops.u32()? };
                let Some(v) = memo.get(&i) else { return refuse(format!("its pickle reads memo {i}, never written")) };
                stack.push(v.clone())
            }
            b'c' => {
                let (module, name) = (ops.line()?, ops.line()?);
                stack.push(Value::Global(Global::of(&module, &name)?))
            }
            0x93 => match (pop(&mut stack)?, pop(&mut stack)?) {
                (Value::Str(name), Value::Str(module)) => stack.push(Value::Global(Global::of(&module, &name)?)),
                _ => return refuse("its pickle names a global by something that is not a string"),
            },
            b'Q' => {
                // A storage by its persistent id: ('storage', <Storage>, key, location, numel).
                match pop(&mut stack)? {
                    Value::Tuple(t) => match t.as_slice() {
                        [Value::Str(kind), Value::Global(Global::Storage(d)), Value::Str(key), ..]
                            if kind == "storage" =>
                        {
                            stack.push(Value::Storage(*d, key.clone()))
                        }
                        other => return refuse(format!("its pickle names a persistent object {other:?}")),
                    },
                    other => return refuse(format!("its pickle names a persistent object {other:?}")),
                }
            }
            b'R' => {
                let args = pop(&mut stack)?;
                let f = pop(&mut stack)?;
                stack.push(call(f, args)?)
            }
            b'b' => {
                // The state of an OrderedDict (a state dict's `_metadata`): kept out.
                let _state = pop(&mut stack)?;
                if !matches!(stack.last(), Some(Value::Dict(_))) {
                    return refuse("its pickle sets the state of something that is not a dict");
                }
            }
            other => return refuse(format!("its pickle uses opcode 0x{other:02x}, which a saved state dict does not")),
        }
    }
}

/// REDUCE: one of the known functions on its arguments.
fn call(f: Value, args: Value) -> Result<Value> {
    let Value::Tuple(args) = args else { return refuse("its pickle calls a function without a tuple of arguments") };
    match (f, args.as_slice()) {
        (Value::Global(Global::OrderedDict), []) => Ok(Value::Dict(vec![])),
        (Value::Global(Global::RebuildTensor), [Value::Storage(dtype, key), offset, shape, stride, ..]) => {
            Ok(Value::Tensor(View {
                dtype: *dtype,
                key: key.clone(),
                offset: offset.usize("a storage offset")?,
                shape: shape.usizes("a shape")?,
                stride: stride.usizes("a stride")?,
            }))
        }
        (Value::Global(Global::RebuildParameter), [t @ Value::Tensor(_), ..]) => Ok(t.clone()),
        (f, args) => refuse(format!("its pickle calls {f:?} on {} arguments, not as a state dict does", args.len())),
    }
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

/// The state dict in `bytes` (torch.save's zip) as safetensors bytes, every tensor contiguous.
pub fn to_safetensors(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).or_else(|e| refuse(format!("not a readable zip ({e})")))?;
    let pickle_name = zip.file_names().filter_map(|n| n.ok()).find(|n| n.ends_with("data.pkl")).map(|n| n.into_owned());
    let Some(pickle_name) = pickle_name else { return refuse("no data.pkl inside: not written by torch.save") };
    let prefix = pickle_name.trim_end_matches("data.pkl").to_string();
    let mut read = |name: &str| -> Result<Vec<u8>> {
        let mut f = zip.by_name(name).or_else(|e| refuse(format!("{name}: {e}")))?;
        let mut out = Vec::with_capacity(f.size() as usize);
        f.read_to_end(&mut out).or_else(|e| refuse(format!("{name}: {e}")))?;
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
    let mut tensors = Vec::with_capacity(items.len());
    let mut storages: std::collections::HashMap<String, Vec<u8>> = std::collections::HashMap::new();
    for (k, v) in items {
        let (Value::Str(name), Value::Tensor(view)) = (k, v) else {
            return refuse("its state dict holds something other than named tensors");
        };
        if !storages.contains_key(&view.key) {
            let data = read(&format!("{prefix}data/{}", view.key))?;
            storages.insert(view.key.clone(), data);
        }
        let data = gather(&view, &storages[&view.key])?;
        tensors.push((name, view.dtype, view.shape, data));
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

    #[test]
    fn a_pickle_that_names_anything_else_is_refused_by_name() {
        // GLOBAL os.system, then a string, a tuple and REDUCE: what a malicious pickle does.
        let evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85R.";
        let e = unpickle(evil).unwrap_err().to_string();
        assert!(e.contains("names os.system, which a saved state dict does not use"), "{e}");
        // BUILD on an object, and an opcode outside the set (INST).
        assert!(unpickle(b"\x80\x02}q\x00}b.").is_ok());
        let e = unpickle(b"\x80\x02i__builtin__\nobject\n.").unwrap_err().to_string();
        assert!(e.contains("opcode 0x69"), "{e}");
    }
}
