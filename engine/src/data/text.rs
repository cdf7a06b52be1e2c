//! The user's own text at character level: the vocabulary is the sorted set of its characters.

use crate::config::MAX_VOCAB;
use crate::error::{Error, Result};

/// (symbols, token ids) of `text`.
pub fn encode(text: &str) -> Result<(Vec<String>, Vec<u32>)> {
    if text.is_empty() {
        return Err(Error::Data("the text is empty; give at least a few sentences".into()));
    }
    let mut chars: Vec<char> = text.chars().collect();
    chars.sort_unstable();
    chars.dedup();
    if chars.len() > MAX_VOCAB {
        return Err(Error::Data(format!(
            "the text uses {} distinct characters; the vocabulary limit is {MAX_VOCAB}",
            chars.len()
        )));
    }
    let ids = text.chars().map(|ch| chars.binary_search(&ch).expect("char in vocabulary") as u32).collect();
    Ok((chars.into_iter().map(String::from).collect(), ids))
}
