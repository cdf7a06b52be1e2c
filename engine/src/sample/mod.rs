//! What the model writes: prompts cut into the model's symbols (`codec`: the lab's `vocab`, or
//! GPT-2's BPE), the next token chosen with temperature, top-k and top-p from a seeded stream
//! (`choice`), whole samples through the key/value cache (`generate`), and how well it predicted
//! every position of a text (`predict`).

pub mod choice;
pub mod codec;
pub mod generate;
pub mod predict;
pub mod vocab;

pub use choice::Choice;
pub use codec::Codec;
pub use generate::{generate, Sample, SampleSpec, Step};
pub use predict::{predictions, Prediction};
pub use vocab::Vocab;
