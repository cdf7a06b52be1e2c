//! The architecture as a value: what one block does beyond its sizes. The lab's own models are
//! Pre-LN GPT-2 blocks (`Arch::default()`); a real model's family (`pretrained::families`) maps its
//! `config.json` onto the same few choices, so one forward pass runs them all
//! (docs/science.md#the-model).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How a block normalises the residual stream before attention and the MLP.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// `(x - mean) / sqrt(var + eps) * g + b`: every token onto the sphere of radius sqrt(C).
    LayerNorm,
    /// `x / sqrt(mean(x²) + eps) * g` (Llama, Qwen2): onto the same sphere, without centring.
    RmsNorm,
}

/// Where a token's position enters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Positions {
    /// A learned vector added to the token's embedding (GPT-2, the lab).
    Learned,
    /// Rotary embeddings: the first `dims` of each head's query and key dimensions turned by
    /// position-dependent angles `pos · base^(-2i/dims)` (stretched as `scaling` says), pairing
    /// dimension i with i + dims/2 (transformers' `rotate_half`).
    Rotary {
        dims: usize,
        base: f64,
        #[serde(default)]
        scaling: RopeScaling,
    },
}

/// How a model stretches its rotary angles to read past the context it was first trained on
/// (transformers' `rope_scaling`): the two that today's small models use (`nn::rotary::frequencies`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum RopeScaling {
    #[default]
    None,
    /// Every frequency divided by `factor`: positions interpolated.
    Linear { factor: f64 },
    /// Llama 3.1's: frequencies whose wavelength is over `original_max_position_embeddings /
    /// low_freq_factor` divided by `factor`, those under `original / high_freq_factor` kept, and a
    /// smooth mix of the two between.
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position_embeddings: f64 },
}

/// The MLP between the two linear layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// `proj(act(fc x))`.
    Plain,
    /// `proj(act(gate x) * fc x)` (SwiGLU with SiLU: Llama, Qwen2).
    Gated,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Arch {
    pub norm: NormKind,
    pub norm_eps: f64,
    pub positions: Positions,
    pub mlp: Mlp,
    /// Heads of keys and values: fewer than the query heads when groups of query heads share
    /// them (grouped-query attention); 0 means one per query head.
    pub kv_heads: usize,
    /// `x + attn(ln1 x) + mlp(ln2 x)` (GPT-NeoX) instead of `h = x + attn(ln1 x)`, `h + mlp(ln2 h)`.
    pub parallel_residual: bool,
    /// The head reads the token embedding (GPT-2, SmolLM2) instead of keeping its own matrix.
    pub tied_head: bool,
    /// Post-LN (BERT): each norm follows a residual sum, `h = LN1(x + attn(x))`,
    /// `x' = LN2(h + mlp(h))`, and the embedding has a norm of its own. The engine keeps one
    /// layout for both: block i's first norm is the one that puts its input on the sphere (the
    /// embedding's, then the previous block's last), its second the one after attention, and the
    /// final norm the last block's; the residual carries the normalised stream.
    pub post_norm: bool,
    /// BERT's masked-LM head: `LN(act(dense x))` before the vocabulary matrix.
    pub head_transform: bool,
}

/// The lab's LayerNorm epsilon, GPT-2's.
pub const LAYER_NORM_EPS: f64 = 1e-5;

impl Default for Arch {
    /// The lab's block: Pre-LN GPT-2 with a head of its own.
    fn default() -> Self {
        Arch {
            norm: NormKind::LayerNorm,
            norm_eps: LAYER_NORM_EPS,
            positions: Positions::Learned,
            mlp: Mlp::Plain,
            kv_heads: 0,
            parallel_residual: false,
            tied_head: false,
            post_norm: false,
            head_transform: false,
        }
    }
}

impl Arch {
    /// GPT-2 as Hugging Face keeps it: the lab's block with the head tied to the embedding.
    pub fn gpt2() -> Self {
        Arch { tied_head: true, ..Arch::default() }
    }

    /// The lab's own block (which its training, its optimizers and its GPU trainer are written for).
    pub fn is_lab_block(&self) -> bool {
        *self == Arch::default()
    }

    /// Heads of keys and values for `heads` query heads.
    pub fn kv_heads_of(&self, heads: usize) -> usize {
        if self.kv_heads == 0 {
            heads
        } else {
            self.kv_heads
        }
    }

    /// The slot a residual connection adds into `into`: the block's input (Pre-LN), or in a
    /// Post-LN block the normalised stream the sub-layer read (`Ln1Out` into `H`, `Ln2Out` into
    /// `Next`).
    pub fn residual_from(&self, from: crate::model::architecture::Slot) -> crate::model::architecture::Slot {
        use crate::model::architecture::Slot;
        match (self.post_norm, from) {
            (true, Slot::X) => Slot::Ln1Out,
            (true, Slot::H) => Slot::Ln2Out,
            (_, s) => s,
        }
    }

    /// Rows of learned positions for a context of `context` (none with rotary positions).
    pub fn position_rows(&self, context: usize) -> usize {
        match self.positions {
            Positions::Learned => context,
            Positions::Rotary { .. } => 0,
        }
    }

    /// The block's own checks against the model's sizes.
    pub fn check(&self, heads: usize, head_size: usize) -> Result<()> {
        let refuse = |why: String| Err(Error::Config(why));
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0 && self.norm_eps < 1.0) {
            return refuse(format!("the norm's epsilon must be in (0, 1), got {}", self.norm_eps));
        }
        let kv = self.kv_heads_of(heads);
        if kv == 0 || !heads.is_multiple_of(kv) {
            return refuse(format!("{kv} key/value heads do not divide {heads} query heads into equal groups"));
        }
        if self.post_norm && self.parallel_residual {
            return refuse("a Post-LN block runs attention and the MLP one after the other".into());
        }
        if let Positions::Rotary { dims, base, scaling } = self.positions {
            if dims == 0 || dims > head_size || !dims.is_multiple_of(2) {
                return refuse(format!(
                    "rotary dimensions must be even and within the head size {head_size}, got {dims}"
                ));
            }
            if !(base.is_finite() && base > 1.0) {
                return refuse(format!("the rotary base must be a finite number above 1, got {base}"));
            }
            let fine = |x: f64| x.is_finite() && x > 0.0;
            let ok = match scaling {
                RopeScaling::None => true,
                RopeScaling::Linear { factor } => fine(factor) && factor >= 1.0,
                RopeScaling::Llama3 {
                    factor,
                    low_freq_factor: low,
                    high_freq_factor: high,
                    original_max_position_embeddings: o,
                } => fine(factor) && factor >= 1.0 && fine(low) && fine(high) && high > low && fine(o),
            };
            if !ok {
                return refuse(format!(
                    "the rotary scaling {scaling:?} needs a factor of at least 1 (and for llama3 positive \
                     frequency factors, the high above the low, and a positive original length)"
                ));
            }
        }
        Ok(())
    }

    /// What the block is, in a few words for the reports ("Pre-LN, LayerNorm, learned positions").
    pub fn describe(&self, heads: usize) -> String {
        let mut parts = vec![];
        if self.post_norm {
            parts.push("Post-LN (a norm after each residual sum)".to_string());
        }
        parts.push(match self.norm {
            NormKind::LayerNorm => "LayerNorm".to_string(),
            NormKind::RmsNorm => "RMSNorm".to_string(),
        });
        parts.push(match self.positions {
            Positions::Learned => "learned positions".into(),
            Positions::Rotary { dims, base, scaling } => {
                let stretched = match scaling {
                    RopeScaling::None => String::new(),
                    RopeScaling::Linear { factor } => format!(", stretched {factor}x (linear)"),
                    RopeScaling::Llama3 { factor, .. } => format!(", stretched up to {factor}x (llama3)"),
                };
                format!("rotary positions on {dims} dims (base {base}{stretched})")
            }
        });
        if self.mlp == Mlp::Gated {
            parts.push("gated MLP".into());
        }
        let kv = self.kv_heads_of(heads);
        if kv < heads {
            parts.push(format!("{heads} query heads share {kv} key/value heads"));
        }
        if self.parallel_residual {
            parts.push("parallel attention and MLP".into());
        }
        if self.head_transform {
            parts.push("masked-LM head".into());
        }
        parts.join(", ")
    }
}
