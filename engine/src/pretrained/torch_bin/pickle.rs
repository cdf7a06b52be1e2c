//! The state dict's pickle, run by a small interpreter that knows only the opcodes and globals a
//! saved state dict uses (`torch_bin`), within limits checked before anything is allocated.

use std::cell::RefCell;
use std::rc::Rc;

use safetensors::Dtype;

use super::refuse;
use crate::error::Result;

/// Levels of nesting a value may have: a state dict's deepest is a storage's persistent id inside a
/// tensor's arguments inside the dict.
pub(super) const MAX_DEPTH: usize = 32;
/// Bytes the pickle's values may take per byte of the pickle, beyond [`VALUE_BYTES_FLOOR`]: a state
/// dict's take a few dozen (each opcode makes a value of 48 bytes at most, and memoised tuples are
/// copied once).
pub(super) const VALUE_BYTES_PER_BYTE: usize = 64;
const VALUE_BYTES_FLOOR: usize = 16 << 20;

/// The functions and classes a state dict's pickle may name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Global {
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
pub(super) struct View {
    pub(super) dtype: Dtype,
    pub(super) key: String,
    pub(super) offset: usize,
    pub(super) shape: Vec<usize>,
    pub(super) stride: Vec<usize>,
}

/// A list or dict is shared, as in Python: the memo and the stack hold the same one, so what is
/// set on it after it was memoised is seen through every reference (`torch.load` reads it so).
pub(super) type Shared<T> = Rc<RefCell<Vec<T>>>;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Tuple(Vec<Value>),
    List(Shared<Value>),
    Dict(Shared<(Value, Value)>),
    Global(Global),
    Storage(Dtype, String),
    Tensor(View),
    Mark,
}

impl Value {
    /// The bytes this value takes (about), refused past [`MAX_DEPTH`] levels of nesting below
    /// `depth`. Every value on the pickle's stack is at most that deep, so this never recurses
    /// further.
    fn weigh(&self, depth: usize) -> Result<usize> {
        if depth > MAX_DEPTH {
            return refuse(format!("its pickle nests values more than {MAX_DEPTH} deep, as no state dict does"));
        }
        let node = std::mem::size_of::<Value>();
        let items = |v: &[Value]| v.iter().try_fold(node, |a, x| Ok(a + x.weigh(depth + 1)?));
        match self {
            Value::Str(s) | Value::Storage(_, s) => Ok(node + s.len()),
            Value::Tuple(v) => items(v),
            Value::List(v) => items(&v.borrow()),
            Value::Dict(d) => {
                d.borrow().iter().try_fold(node, |a, (k, v)| Ok(a + k.weigh(depth + 1)? + v.weigh(depth + 1)?))
            }
            Value::Tensor(t) => Ok(node + t.key.len() + 8 * (t.shape.len() + t.stride.len())),
            _ => Ok(node),
        }
    }

    /// A short description for messages: its kind, never its (possibly huge) contents.
    fn kind(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(b) => format!("{b}"),
            Value::Int(i) => format!("{i}"),
            Value::Float(x) => format!("{x}"),
            Value::Str(s) if s.len() <= 40 => format!("{s:?}"),
            Value::Str(s) => format!("a string of {} bytes", s.len()),
            Value::Tuple(v) => format!("a tuple of {}", v.len()),
            Value::List(v) => format!("a list of {}", v.borrow().len()),
            Value::Dict(d) => format!("a dict of {}", d.borrow().len()),
            Value::Global(g) => format!("{g:?}"),
            Value::Storage(d, k) => format!("storage {k} ({d:?})"),
            Value::Tensor(t) => format!("a tensor of shape {:?}", t.shape),
            Value::Mark => "a MARK".into(),
        }
    }

    fn usize(&self, what: &str) -> Result<usize> {
        match self {
            Value::Int(i) if *i >= 0 => Ok(*i as usize),
            other => refuse(format!("{what} should be a count, not {}", other.kind())),
        }
    }

    fn usizes(&self, what: &str) -> Result<Vec<usize>> {
        match self {
            Value::Tuple(v) => v.iter().map(|x| x.usize(what)).collect(),
            other => refuse(format!("{what} should be a tuple of counts, not {}", other.kind())),
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

/// The bytes the pickle's values may still take: every copy of a memoised value is counted.
struct Budget(usize);

impl Budget {
    fn spend(&mut self, v: &Value) -> Result<()> {
        match self.0.checked_sub(v.weigh(0)?) {
            Some(left) => {
                self.0 = left;
                Ok(())
            }
            None => refuse(
                "its pickle's values would take more than 64 times its own size (a value memoised once and \
                 repeated): not a saved state dict",
            ),
        }
    }
}

/// Items about to go into a container: each must leave it within [`MAX_DEPTH`].
fn nest(items: &[Value]) -> Result<()> {
    items.iter().try_for_each(|v| v.weigh(1).map(drop))
}

/// Runs the pickle with the opcodes protocols 2 to 5 write for a state dict; returns the object.
pub(super) fn unpickle(bytes: &[u8]) -> Result<Value> {
    let mut ops = Ops { bytes, at: 0 };
    let mut stack: Vec<Value> = Vec::new();
    let mut memo: std::collections::HashMap<usize, Value> = std::collections::HashMap::new();
    let mut budget = Budget(VALUE_BYTES_FLOOR.saturating_add(bytes.len().saturating_mul(VALUE_BYTES_PER_BYTE)));
    let pop = |stack: &mut Vec<Value>| stack.pop().map_or_else(|| refuse("its pickle pops an empty stack"), Ok);
    let to_mark = |stack: &mut Vec<Value>| -> Result<Vec<Value>> {
        let Some(m) = stack.iter().rposition(|v| *v == Value::Mark) else { return refuse("its pickle has no MARK") };
        let items = stack.split_off(m + 1);
        stack.pop();
        nest(&items)?;
        Ok(items)
    };
    loop {
        let op = ops.u8()?;
        match op {
            0x80 => {
                // PROTO: torch.save writes 2; Python's pickle knows up to 5.
                let p = ops.u8()?;
                if p > 5 {
                    return refuse(format!("its pickle is of protocol {p}; there are 0 to 5"));
                }
            }
            0x95 => {
                // FRAME: the length of the opcodes that follow, which must be there (as Python checks).
                let b = ops.take(8)?;
                let n = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                let left = (ops.bytes.len() - ops.at) as u64;
                if n > left {
                    return refuse(format!("its pickle announces a frame of {n} bytes where {left} are left"));
                }
            }
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
                nest(&items)?;
                stack.push(Value::Tuple(items))
            }
            b't' => {
                let items = to_mark(&mut stack)?;
                stack.push(Value::Tuple(items))
            }
            b']' => stack.push(Value::List(Shared::default())),
            b'}' => stack.push(Value::Dict(Shared::default())),
            b'a' | b'e' => {
                let items = if op == b'a' { vec![pop(&mut stack)?] } else { to_mark(&mut stack)? };
                nest(&items)?;
                match stack.last_mut() {
                    Some(Value::List(l)) => l.borrow_mut().extend(items),
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
                nest(&items)?;
                if items.len() % 2 != 0 {
                    return refuse("its pickle sets a key without a value");
                }
                let Some(Value::Dict(d)) = stack.last_mut() else {
                    return refuse("its pickle sets an item on something that is not a dict");
                };
                let mut d = d.borrow_mut();
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    d.push((k, v));
                }
            }
            b'q' | b'r' | 0x94 => {
                let i = match op {
                    b'q' => ops.u8()? as usize,
                    b'r' => ops.u32()?,
                    _ => memo.len(),
                };
                // PUT: the top of the stack (a list or dict shared, as in Python), counted as a copy.
                let v = stack.last().unwrap_or(&Value::None);
                budget.spend(v)?;
                memo.insert(i, v.clone());
            }
            b'h' | b'j' => {
                let i = if op == b'h' { ops.u8()? as usize } else { ops.u32()? };
                let Some(v) = memo.get(&i) else { return refuse(format!("its pickle reads memo {i}, never written")) };
                budget.spend(v)?;
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
                        other => {
                            return refuse(format!("its pickle names a persistent object of {} parts", other.len()))
                        }
                    },
                    other => return refuse(format!("its pickle names a persistent object {}", other.kind())),
                }
            }
            b'R' => {
                let args = pop(&mut stack)?;
                let f = pop(&mut stack)?;
                let out = call(f, args)?;
                nest(std::slice::from_ref(&out))?;
                stack.push(out)
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
        (Value::Global(Global::OrderedDict), []) => Ok(Value::Dict(Shared::default())),
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
        (f, args) => {
            refuse(format!("its pickle calls {} on {} arguments, not as a state dict does", f.kind(), args.len()))
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

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

    /// BINUNICODE `s`.
    fn text(s: &str) -> Vec<u8> {
        [&[b'X'][..], &(s.len() as u32).to_le_bytes(), s.as_bytes()].concat()
    }

    /// `name`, then a float tensor of one element in storage `key`, as torch.save writes them.
    fn entry(name: &str, key: &str) -> Vec<u8> {
        let mut p = text(name);
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n(");
        p.extend(b"(");
        p.extend(text("storage"));
        p.extend(b"ctorch\nFloatStorage\n");
        p.extend(text(key));
        p.extend(text("cpu"));
        p.extend(b"K\x01tQK\x00K\x01\x85K\x01\x85\x89}tR");
        p
    }

    /// A state dict's pickle of float tensors of one element, `(name, storage key)` each, as
    /// torch.save writes it (protocol 2).
    pub(in crate::pretrained::torch_bin) fn state_dict(tensors: &[(&str, &str)]) -> Vec<u8> {
        let mut p = b"\x80\x02ccollections\nOrderedDict\n)R(".to_vec();
        tensors.iter().for_each(|(name, key)| p.extend(entry(name, key)));
        p.extend(b"u.");
        p
    }

    #[test]
    fn a_dict_set_after_it_was_memoised_is_seen_through_the_memo_as_in_python() {
        // The dict memoised empty, filled, read back from the memo and set again: Python's memo holds
        // the same dict, so the one read back has every key, the replaced one with its new tensor.
        let mut p = b"\x80\x02ccollections\nOrderedDict\n)Rq\x01(".to_vec();
        p.extend(entry("wte", "0"));
        p.extend(entry("wpe", "1"));
        p.extend(b"uh\x01(");
        p.extend(entry("wte", "2"));
        p.extend(b"u.");
        let Value::Dict(d) = unpickle(&p).unwrap() else { panic!("not a dict") };
        let keys: Vec<_> = d
            .borrow()
            .iter()
            .map(|(k, v)| match (k, v) {
                (Value::Str(k), Value::Tensor(t)) => format!("{k}={}", t.key),
                _ => panic!("not a named tensor"),
            })
            .collect();
        // A dict keeps a key's first place and its last value (torch_bin::to_safetensors).
        assert_eq!(keys, ["wte=0", "wpe=1", "wte=2"]);
    }

    #[test]
    fn a_memoised_value_repeated_past_the_budget_is_refused_before_it_is_copied() {
        // A string of 64 kB memoised, then read back 100,000 times into one tuple: 6.5 GB.
        let mut p = b"\x80\x02".to_vec();
        p.extend(text(&"x".repeat(1 << 16)));
        p.extend(b"q\x00(");
        for _ in 0..100_000 {
            p.extend(b"h\x00");
        }
        p.extend(b"t.");
        let e = unpickle(&p).unwrap_err().to_string();
        assert!(e.contains("would take more than 64 times its own size"), "{e}");
    }

    #[test]
    fn values_nested_a_million_deep_are_refused_without_overflowing_the_stack() {
        for (open, close) in [(&b"("[..], &b"t"[..]), (b"]", b"a"), (b"(", b"l")] {
            let mut p = b"\x80\x02".to_vec();
            if close == b"a" {
                // Lists appended into the list below them.
                p.extend(b"]".repeat(1_000_000));
                p.extend(b"a".repeat(999_999));
            } else {
                p.extend(open.repeat(1_000_000));
                p.extend(b"N".to_vec());
                p.extend(close.repeat(1_000_000));
            }
            p.push(b'.');
            let e = unpickle(&p).unwrap_err().to_string();
            assert!(e.contains("nests values more than 32 deep") || e.contains("opcode 0x6c"), "{e}");
        }
    }

    #[test]
    fn a_protocol_no_python_writes_or_a_frame_past_the_end_is_refused() {
        let e = unpickle(b"\x80\xff}.").unwrap_err().to_string();
        assert!(e.contains("protocol 255"), "{e}");
        assert!(unpickle(b"\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00}.").is_ok());
        let e = unpickle(b"\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00}.").unwrap_err().to_string();
        assert!(e.contains("a frame of 4294967295 bytes where 2 are left"), "{e}");
    }
}
