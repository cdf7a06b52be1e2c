//! The lab's models read symbols: characters for text and the grammar, numbers and marks for the
//! algorithmic tasks. A prompt is cut into them (characters, or words between spaces when a symbol
//! is longer than one character) and what the model writes is joined back the same way.

use super::codec::Codec;
use crate::data::Dataset;
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Vocab {
    pub symbols: Vec<String>,
    /// Every symbol is one character: prompts are read character by character.
    chars: bool,
    /// The first token of the training data: where an empty prompt starts.
    pub start: u32,
}

impl Vocab {
    pub fn new(symbols: Vec<String>, start: u32) -> Self {
        let chars = symbols.iter().all(|s| s.chars().count() == 1);
        Vocab { symbols, chars, start }
    }

    pub fn of(data: &Dataset) -> Self {
        Vocab::new(data.symbols.clone(), data.first_token())
    }

    /// The prompt as token ids; a symbol the vocabulary lacks is an error that names it.
    pub fn encode(&self, prompt: &str) -> Result<Vec<u32>> {
        let find = |piece: &str| {
            self.symbols.iter().position(|s| s == piece).map(|i| i as u32).ok_or_else(|| {
                let shown = piece.escape_debug();
                let known: String = self.symbols.iter().take(40).map(|s| s.escape_debug().to_string()).collect();
                Error::Data(format!(
                    "the prompt has \"{shown}\", which is not among this model's {} symbols ({known}{})",
                    self.symbols.len(),
                    if self.symbols.len() > 40 { " ..." } else { "" }
                ))
            })
        };
        if self.chars {
            prompt.chars().map(|ch| find(ch.encode_utf8(&mut [0; 4]))).collect()
        } else {
            prompt.split_whitespace().map(find).collect()
        }
    }

    /// The text of one token.
    pub fn text(&self, id: u32) -> &str {
        self.symbols.get(id as usize).map_or("\u{fffd}", String::as_str)
    }

    /// The text of a token sequence (symbols of several characters between spaces).
    pub fn decode(&self, ids: &[u32]) -> String {
        let pieces: Vec<&str> = ids.iter().map(|&i| self.text(i)).collect();
        pieces.join(if self.chars { "" } else { " " })
    }
}

impl Codec for Vocab {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Vocab::encode(self, text)
    }
    fn decode(&self, ids: &[u32]) -> String {
        Vocab::decode(self, ids)
    }
    fn text(&self, id: u32) -> String {
        Vocab::text(self, id).to_string()
    }
    fn start(&self) -> u32 {
        self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_and_words() {
        let v = Vocab::new(vec!["\n".into(), " ".into(), "a".into(), "b".into()], 2);
        assert_eq!(v.encode("ab a\n").unwrap(), vec![2, 3, 1, 2, 0]);
        assert_eq!(v.decode(&[3, 1, 2]), "b a");
        let err = v.encode("abc").unwrap_err().to_string();
        assert!(err.contains("\"c\"") && err.contains("4 symbols"), "{err}");
        let w = Vocab::new(vec!["0".into(), "12".into(), "=".into()], 0);
        assert_eq!(w.encode(" 12 0 = ").unwrap(), vec![1, 0, 2]);
        assert_eq!(w.decode(&[1, 2]), "12 =");
        assert!(w.encode("3").unwrap_err().to_string().contains("\"3\""));
    }
}
