//! Seeded randomness. Every random stream is derived from (seed, purpose, index), so a run is
//! reproducible and a resumed run draws exactly what an uninterrupted one would.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub type Rng = ChaCha8Rng;

/// Purposes get their own streams so adding one never shifts another.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Init = 1,
    Generate = 2,
    TrainBatch = 3,
    ValBatch = 4,
    /// Science experiments (`science::*`): Brownian walkers, Ito paths, JoMA's toy draws.
    Brownian = 5,
    Ito = 6,
    Joma = 7,
    Walkers = 8,
    Particles = 9,
    /// K-FAC's sampled Fisher: labels drawn from the model, one draw per second-order step.
    Fisher = 10,
    /// What the model writes (`sample`): one stream per sample's seed.
    Sample = 11,
}

pub fn rng(seed: u64, stream: Stream, index: u64) -> Rng {
    // splitmix64 of the three inputs: distinct, well-mixed 64-bit seeds.
    let mut z = seed ^ (stream as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ChaCha8Rng::seed_from_u64(z)
}
