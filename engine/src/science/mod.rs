//! The science layer (docs/science.md): what the lab measures on tokens and attention, and the
//! reference processes it compares them with. Everything is f64 and serde, and runs on wasm32.
//!
//! - `sphere`: tokens on the sphere of radius sqrt(d), LayerNorm's affine drift off it, a 3-D view.
//! - `markov`: an attention matrix as a Markov transition matrix (powers, spectrum, entropy, kernel).
//! - `brownian`: Brownian motion on a sphere, simulated two ways, with its closed forms.
//! - `fit`: an effective diffusion coefficient for token trajectories, and how well it explains them.
//! - `flow_fit`: Brownian diffusion against the particles' attention flow, fitted to the same curves.
//! - `grouping`: whether tokens of the same kind (vowel, space, ...) sit together on the sphere.
//! - `ito`: Ito's lemma by Monte Carlo for |B|^2.
//! - `particles`: tokens as interacting particles on the sphere (Geshkovski et al.), their clustering.
//! - `joma`: JoMA's toy dynamics and the dip-and-rebound summary of entropy curves.
//! - `probe`: a fixed probe batch recorded over training, in a bounded history.
//! - `cache`: reading the model's forward cache as f64 matrices per head and layer.
//! - `stats`: means with standard errors, and the Kolmogorov-Smirnov distance.
//! - `walkers`: discrete random walkers jumping from token to token with the attention's probabilities.

pub mod brownian;
pub mod cache;
pub mod fit;
pub mod flow_fit;
pub mod grouping;
pub mod ito;
pub mod joma;
pub mod markov;
pub mod particles;
pub mod probe;
pub mod sphere;
pub mod stats;
pub mod walkers;
