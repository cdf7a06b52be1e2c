//! JoMA's latent hierarchical generative model (docs/science.md#the-hierarchy-data). A top latent picks mid-level latents;
//! each mid latent emits its own chunk of tokens (with a little noise). The chunk every position came
//! from is kept, so the lab can score whether attention stays inside the true chunk.

use rand::seq::IndexedRandom;
use rand::Rng;

use crate::rng::Rng as R;

pub const TOKENS: usize = 31;
pub const SEPARATOR: u32 = TOKENS as u32;
const TOP: usize = 4;
const MID: usize = 8;
const CHUNK: usize = 4;
const CHUNKS_PER_SENTENCE: usize = 4;
const MIDS_PER_TOP: usize = 3;
const NOISE: f64 = 0.1;

pub struct Hierarchy {
    /// Canonical token chunk of each mid latent.
    chunks: Vec<[u32; CHUNK]>,
    /// Mid latents each top latent may pick.
    children: Vec<Vec<usize>>,
}

/// A generated stream and, per position, the index of the chunk occurrence it belongs to
/// (separators get their own index).
pub struct Generated {
    pub tokens: Vec<u32>,
    pub chunk_of: Vec<u32>,
}

impl Hierarchy {
    pub fn new(rng: &mut R) -> Self {
        let chunks = (0..MID).map(|_| std::array::from_fn(|_| rng.random_range(0..TOKENS as u32))).collect();
        let all: Vec<usize> = (0..MID).collect();
        let children = (0..TOP).map(|_| all.choose_multiple(rng, MIDS_PER_TOP).copied().collect()).collect();
        Hierarchy { chunks, children }
    }

    pub fn generate(&self, rng: &mut R, len: usize) -> Generated {
        let mut g = Generated { tokens: Vec::with_capacity(len + 32), chunk_of: Vec::with_capacity(len + 32) };
        let mut occurrence = 0u32;
        while g.tokens.len() < len {
            let top = rng.random_range(0..TOP);
            for _ in 0..CHUNKS_PER_SENTENCE {
                let mid = *self.children[top].choose(rng).expect("non-empty");
                for &tok in &self.chunks[mid] {
                    let tok = if rng.random_bool(NOISE) { rng.random_range(0..TOKENS as u32) } else { tok };
                    g.tokens.push(tok);
                    g.chunk_of.push(occurrence);
                }
                occurrence += 1;
            }
            g.tokens.push(SEPARATOR);
            g.chunk_of.push(occurrence);
            occurrence += 1;
        }
        g
    }

    /// Display symbols: letters for tokens, '|' for the separator.
    pub fn symbols() -> Vec<String> {
        let letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcde";
        letters.chars().map(String::from).chain(std::iter::once("|".to_string())).collect()
    }
}
