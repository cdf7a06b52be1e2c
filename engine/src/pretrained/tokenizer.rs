//! GPT-2's byte-level BPE (`r50k_base`, carried by the `tiktoken-rs` crate): text to token ids, ids
//! back to text, and each token's own piece of text for labels.

use tiktoken_rs::CoreBPE;

use crate::error::{Error, Result};
use crate::sample::Codec;

/// GPT-2's vocabulary: 50,000 merges, 256 bytes and `<|endoftext|>`.
pub const GPT2_VOCAB: usize = 50257;
/// `<|endoftext|>`: where GPT-2 starts a text of its own.
pub const END_OF_TEXT: u32 = 50256;

pub struct Tokenizer {
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tokenizer(r50k_base)")
    }
}

impl Tokenizer {
    pub fn gpt2() -> Tokenizer {
        Tokenizer { bpe: tiktoken_rs::r50k_base_singleton() }
    }

    /// The ids of `text`; `<|endoftext|>` written in a text is read as text, as GPT-2's reference
    /// encoder reads it.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.bpe.encode_ordinary(text)
    }

    /// The bytes of `ids`, as text (a character cut between tokens at the end shows as U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        String::from_utf8_lossy(&self.bytes(ids)).into_owned()
    }

    fn bytes(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| match self.bpe.decode_bytes(&[id]) {
                Ok(b) => b,
                Err(_) => "\u{fffd}".as_bytes().to_vec(),
            })
            .collect()
    }

    /// Each token's own text: its bytes, or U+FFFD where a token holds part of a character.
    pub fn pieces(&self, ids: &[u32]) -> Vec<String> {
        ids.iter().map(|&id| self.decode(&[id])).collect()
    }
}

impl Codec for Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Ok(Tokenizer::encode(self, text))
    }
    fn decode(&self, ids: &[u32]) -> String {
        Tokenizer::decode(self, ids)
    }
    fn text(&self, id: u32) -> String {
        self.decode(&[id])
    }
    fn start(&self) -> u32 {
        END_OF_TEXT
    }
}

/// Refuses ids the vocabulary does not have (a JS caller can pass any number).
pub fn check_ids(ids: &[u32]) -> Result<()> {
    match ids.iter().find(|&&i| i as usize >= GPT2_VOCAB) {
        Some(bad) => Err(Error::Data(format!("token id {bad} is outside GPT-2's vocabulary of {GPT2_VOCAB}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids from an independent implementation of GPT-2's BPE, the npm package gpt-3-encoder 1.1.4
    /// (`node e2e/gpt2_reference_ids.cjs` writes the file).
    const REFERENCE: &[(&str, &[u32])] = &include!("tokenizer_reference.in");

    #[test]
    fn ids_equal_the_reference_encoder_and_decode_back() {
        let t = Tokenizer::gpt2();
        for (text, ids) in REFERENCE {
            assert_eq!(t.encode(text), *ids, "{text:?}");
            assert_eq!(t.decode(ids), *text);
        }
        assert!(REFERENCE.len() >= 10);
    }

    #[test]
    fn pieces_show_each_token_and_ids_are_checked() {
        let t = Tokenizer::gpt2();
        let ids = t.encode("Hello world, it's 2026!");
        assert_eq!(t.pieces(&ids).concat(), "Hello world, it's 2026!");
        assert_eq!(t.pieces(&t.encode(" world"))[0], " world");
        assert!(check_ids(&[END_OF_TEXT]).is_ok());
        assert!(check_ids(&[50257]).unwrap_err().to_string().contains("50257"));
    }
}
