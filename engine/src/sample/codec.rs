//! Text to token ids and back, whichever model reads it: the lab's own symbols (`Vocab`) or GPT-2's
//! BPE (`pretrained::Tokenizer`). Writing and predicting go through this, not through either.

use crate::error::Result;

pub trait Codec {
    /// The ids of a prompt; a piece the vocabulary lacks is an error that names it.
    fn encode(&self, text: &str) -> Result<Vec<u32>>;
    /// The text of a sequence of ids.
    fn decode(&self, ids: &[u32]) -> String;
    /// The text of one id, for the candidates and labels.
    fn text(&self, id: u32) -> String;
    /// Where an empty prompt starts.
    fn start(&self) -> u32;
}
