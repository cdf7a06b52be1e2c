//! The built-in English text: Jane Austen's *Pride and Prejudice* (1813, public domain), taken
//! from Debian's `r-cran-janeaustenr` (MIT; her six novels in R's lazy-load database) and written
//! as plain text to `public/data/austen.txt`, which the page serves and `lab --data austen` reads.
//!
//! The database (`data/Rdata.rdb`) is a run of objects, each a 4-byte big-endian length and a
//! zlib stream of R's XDR serialisation; each novel is a character vector of its lines. The
//! package is unpacked, not installed (it would pull in R).

use std::fs;
use std::path::{Path, PathBuf};

use miniz_oxide::inflate::stream::{inflate, InflateState};
use miniz_oxide::{DataFormat, MZFlush, MZStatus};

pub const PACKAGE: &str = "r-cran-janeaustenr";
const RDB: &str = "usr/lib/R/site-library/janeaustenr/data/Rdata.rdb";
const TITLE: &str = "PRIDE AND PREJUDICE";

/// Where the text goes, relative to the workspace root.
pub fn target(root: &Path) -> PathBuf {
    root.join("public").join("data").join("austen.txt")
}

/// The novel's lines, from the unpacked package at `unpacked`.
pub fn novel_lines(unpacked: &Path) -> Result<Vec<String>, String> {
    let path = unpacked.join(RDB);
    let db = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut at = 0;
    while at + 4 <= db.len() {
        let len = u32::from_be_bytes(db[at..at + 4].try_into().expect("4 bytes")) as usize;
        let (object, used) = inflate_one(&db[at + 4..], len)?;
        at += 4 + used;
        let lines = strings(&object)?;
        if lines.first().map(String::as_str) == Some(TITLE) {
            return Ok(lines);
        }
    }
    Err(format!("{} holds no character vector starting with {TITLE:?}", path.display()))
}

/// One zlib stream of `len` bytes; the bytes it took.
fn inflate_one(input: &[u8], len: usize) -> Result<(Vec<u8>, usize), String> {
    let mut state = InflateState::new_boxed(DataFormat::Zlib);
    let mut out = vec![0; len];
    let r = inflate(&mut state, input, &mut out, MZFlush::Finish);
    match r.status {
        Ok(MZStatus::StreamEnd) if r.bytes_written == len => Ok((out, r.bytes_consumed)),
        other => Err(format!("a database object did not inflate: {other:?}, {} of {len} bytes", r.bytes_written)),
    }
}

/// The strings of an R-serialised character vector (XDR, format 2 or 3); NA reads as "".
fn strings(object: &[u8]) -> Result<Vec<String>, String> {
    let mut r = Reader { buf: object, at: 0 };
    if r.take(2)? != b"X\n" {
        return Err("not R's XDR serialisation".into());
    }
    let version = r.int()?;
    r.int()?; // the R that wrote it
    r.int()?; // the oldest R that reads it
    if version == 3 {
        let n = r.int()? as usize;
        r.take(n)?; // the native encoding's name
    }
    if r.int()? & 0xff != 16 {
        return Ok(Vec::new()); // not a character vector
    }
    let n = r.int()? as usize;
    (0..n)
        .map(|_| {
            r.int()?; // CHARSXP flags (encoding bits)
            let len = r.int()?;
            if len < 0 {
                return Ok(String::new());
            }
            String::from_utf8(r.take(len as usize)?.to_vec()).map_err(|e| e.to_string())
        })
        .collect()
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or("the object ends early")?;
        let s = &self.buf[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn int(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
}

/// The book as prose: the lines of a paragraph joined by spaces, one paragraph a line.
pub fn prose(lines: &[String]) -> String {
    let mut out = String::new();
    let mut para: Vec<&str> = Vec::new();
    for line in lines.iter().map(|l| l.trim()).chain([""]) {
        if line.is_empty() {
            if !para.is_empty() {
                out.push_str(&para.join(" "));
                out.push('\n');
                para.clear();
            }
        } else {
            para.push(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_become_lines() {
        let lines: Vec<String> = ["Chapter 1", "", "It is a truth", "universally acknowledged.", "", ""]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(prose(&lines), "Chapter 1\nIt is a truth universally acknowledged.\n");
    }

    #[test]
    fn reads_a_serialised_character_vector() {
        let mut obj = b"X\n".to_vec();
        for v in [3, 0x040201, 0x030500, 5] {
            obj.extend_from_slice(&i32::to_be_bytes(v));
        }
        obj.extend_from_slice(b"UTF-8");
        obj.extend_from_slice(&16i32.to_be_bytes());
        obj.extend_from_slice(&2i32.to_be_bytes());
        for s in ["ab", "c"] {
            obj.extend_from_slice(&0x40009i32.to_be_bytes());
            obj.extend_from_slice(&(s.len() as i32).to_be_bytes());
            obj.extend_from_slice(s.as_bytes());
        }
        assert_eq!(strings(&obj).unwrap(), vec!["ab".to_string(), "c".to_string()]);
        assert!(strings(&obj[..obj.len() - 1]).is_err(), "a cut object is an error");
    }
}
