//! The model's layer sequence, written once: what one Pre-LN block does, layer by layer, with the
//! activations each layer reads and writes, and the list of the model's linear layers.
//!
//! `Model::forward`/`backward` are the readable CPU pairs of this sequence. The GPU trainer records
//! its dispatches by walking [`BLOCK`] (forward top to bottom, backward bottom to top), and
//! `optim::curvature::sites` is [`linears`]: the CG-FAC factors on the GPU find their layer by
//! [`LinearId`], never by position. The GPU is checked against the CPU by the parity tests, so a
//! sequence that differed from the CPU's would fail them.

use crate::config::ModelConfig;

/// An activation of one block: its input `X` and output `Next` (the residual stream), and the
/// rows its layers produce (the CPU's `BlockCache` fields of the same names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    X,
    Ln1Out,
    Q,
    K,
    V,
    AttnY,
    H,
    Ln2Out,
    FcPre,
    FcAct,
    Next,
}

impl Slot {
    /// The slots a block keeps (all but the residual stream it reads and writes).
    pub const KEPT: [Slot; 9] =
        [Slot::Ln1Out, Slot::Q, Slot::K, Slot::V, Slot::AttnY, Slot::H, Slot::Ln2Out, Slot::FcPre, Slot::FcAct];

    /// Numbers per token: d_ff inside the MLP, d_model elsewhere.
    pub fn width(self, cfg: &ModelConfig) -> usize {
        match self {
            Slot::FcPre | Slot::FcAct => cfg.d_ff,
            _ => cfg.d_model,
        }
    }
}

/// One of a block's two LayerNorms: before attention, and before the MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Norm {
    One,
    Two,
}

impl Norm {
    pub fn input(self) -> Slot {
        match self {
            Norm::One => Slot::X,
            Norm::Two => Slot::H,
        }
    }
    pub fn output(self) -> Slot {
        match self {
            Norm::One => Slot::Ln1Out,
            Norm::Two => Slot::Ln2Out,
        }
    }
}

/// The linear layers of a block, in forward order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockLinear {
    Q,
    K,
    V,
    O,
    Fc,
    Proj,
}

impl BlockLinear {
    pub const ALL: [BlockLinear; 6] =
        [BlockLinear::Q, BlockLinear::K, BlockLinear::V, BlockLinear::O, BlockLinear::Fc, BlockLinear::Proj];

    /// The name inside the block, as the parameters are named (`blocks.{i}.attn.q.weight`).
    pub fn name(self) -> &'static str {
        match self {
            BlockLinear::Q => "attn.q",
            BlockLinear::K => "attn.k",
            BlockLinear::V => "attn.v",
            BlockLinear::O => "attn.o",
            BlockLinear::Fc => "mlp.fc",
            BlockLinear::Proj => "mlp.proj",
        }
    }
    pub fn input(self) -> Slot {
        match self {
            BlockLinear::Q | BlockLinear::K | BlockLinear::V => Slot::Ln1Out,
            BlockLinear::O => Slot::AttnY,
            BlockLinear::Fc => Slot::Ln2Out,
            BlockLinear::Proj => Slot::FcAct,
        }
    }
    pub fn output(self) -> Slot {
        match self {
            BlockLinear::Q => Slot::Q,
            BlockLinear::K => Slot::K,
            BlockLinear::V => Slot::V,
            BlockLinear::O => Slot::H,
            BlockLinear::Fc => Slot::FcPre,
            BlockLinear::Proj => Slot::Next,
        }
    }
    /// Writes into the residual stream, so GPT-2 scales its initial weights by 1/sqrt(2L).
    pub fn feeds_residual(self) -> bool {
        matches!(self, BlockLinear::O | BlockLinear::Proj)
    }
}

/// One step of a block's forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// LayerNorm of `norm.input()` into `norm.output()`, keeping its centred rows and 1/std.
    Norm(Norm),
    /// `output = input W^T + b`.
    Linear(BlockLinear),
    /// Causal (or full) multi-head attention of Q, K, V into AttnY, keeping the attention matrices.
    Attention,
    /// `into += from`: the residual connection.
    Residual { into: Slot, from: Slot },
    /// The MLP's nonlinearity, FcPre into FcAct.
    Activation,
}

/// One Pre-LN block: `h = x + O(attn(LN1(x)))`, `x' = h + proj(act(fc(LN2(h))))`.
pub const BLOCK: [Layer; 12] = [
    Layer::Norm(Norm::One),
    Layer::Linear(BlockLinear::Q),
    Layer::Linear(BlockLinear::K),
    Layer::Linear(BlockLinear::V),
    Layer::Attention,
    Layer::Linear(BlockLinear::O),
    Layer::Residual { into: Slot::H, from: Slot::X },
    Layer::Norm(Norm::Two),
    Layer::Linear(BlockLinear::Fc),
    Layer::Activation,
    Layer::Linear(BlockLinear::Proj),
    Layer::Residual { into: Slot::Next, from: Slot::H },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each linear layer of the sequence reads what an earlier layer (or the block's input)
    /// wrote, and every kept slot is written once: the sequence is a well-formed data flow.
    #[test]
    fn every_layer_reads_what_an_earlier_one_wrote() {
        let mut written = vec![Slot::X];
        for layer in BLOCK {
            let (reads, writes): (Vec<Slot>, Vec<Slot>) = match layer {
                Layer::Norm(n) => (vec![n.input()], vec![n.output()]),
                Layer::Linear(r) => (vec![r.input()], vec![r.output()]),
                Layer::Attention => (vec![Slot::Q, Slot::K, Slot::V], vec![Slot::AttnY]),
                Layer::Residual { into, from } => (vec![into, from], vec![]),
                Layer::Activation => (vec![Slot::FcPre], vec![Slot::FcAct]),
            };
            for r in reads {
                assert!(written.contains(&r), "{layer:?} reads {r:?} before it is written");
            }
            for w in writes {
                assert!(!written.contains(&w), "{layer:?} writes {w:?} a second time");
                written.push(w);
            }
        }
        for s in Slot::KEPT.into_iter().chain([Slot::Next]) {
            assert!(written.contains(&s), "{s:?} is never written");
        }
    }
}
