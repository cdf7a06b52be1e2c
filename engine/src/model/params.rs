//! All parameters in one flat buffer with named views (llm.c style): one optimizer loop, one
//! checkpoint write, one GPU upload. Names and shapes follow PyTorch conventions (Linear is (out, in)).

use super::architecture::{BlockLinear, Norm};
use crate::config::ModelConfig;

#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    pub offset: usize,
    pub len: usize,
}

impl TensorInfo {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len
    }
    /// Matrices get weight decay; gains, biases and vectors do not.
    pub fn is_matrix(&self) -> bool {
        self.shape.len() == 2
    }
}

/// Index of each tensor of one block in `Layout::tensors`.
#[derive(Clone, Copy, Debug)]
pub struct BlockIds {
    pub ln1_w: usize,
    pub ln1_b: usize,
    pub q_w: usize,
    pub q_b: usize,
    pub k_w: usize,
    pub k_b: usize,
    pub v_w: usize,
    pub v_b: usize,
    pub o_w: usize,
    pub o_b: usize,
    pub ln2_w: usize,
    pub ln2_b: usize,
    pub fc_w: usize,
    pub fc_b: usize,
    pub proj_w: usize,
    pub proj_b: usize,
    /// The gated MLP's gate (weight, bias), beside `fc` (its "up") and `proj` (its "down").
    pub gate: Option<(usize, usize)>,
}

impl BlockIds {
    /// The (weight, bias) of one of the block's linear layers.
    pub fn linear(&self, r: BlockLinear) -> (usize, usize) {
        match r {
            BlockLinear::Q => (self.q_w, self.q_b),
            BlockLinear::K => (self.k_w, self.k_b),
            BlockLinear::V => (self.v_w, self.v_b),
            BlockLinear::O => (self.o_w, self.o_b),
            BlockLinear::Fc => (self.fc_w, self.fc_b),
            BlockLinear::Proj => (self.proj_w, self.proj_b),
        }
    }
    /// The (gain, bias) of one of the block's LayerNorms.
    pub fn norm(&self, n: Norm) -> (usize, usize) {
        match n {
            Norm::One => (self.ln1_w, self.ln1_b),
            Norm::Two => (self.ln2_w, self.ln2_b),
        }
    }
}

/// BERT's masked-LM head transform before the vocabulary matrix: `LN(act(x W^T + b))`.
#[derive(Clone, Copy, Debug)]
pub struct Transform {
    pub w: usize,
    pub b: usize,
    pub ln_w: usize,
    pub ln_b: usize,
}

#[derive(Clone, Debug)]
pub struct Layout {
    pub tensors: Vec<TensorInfo>,
    pub wte: usize,
    pub wpe: usize,
    pub blocks: Vec<BlockIds>,
    pub lnf_w: usize,
    pub lnf_b: usize,
    /// The head's transform (`arch.head_transform`), between the final norm and the head.
    pub transform: Option<Transform>,
    pub head_w: usize,
    pub head_b: usize,
    pub total: usize,
}

impl Layout {
    /// The head is tied to the token embedding.
    pub fn is_tied(&self) -> bool {
        self.head_w == self.wte
    }

    /// Whether tensor `i` is a linear layer's weight or bias (the head, tied or not, included).
    pub fn is_linear(&self, i: usize) -> bool {
        i == self.head_w
            || i == self.head_b
            || self.blocks.iter().any(|b| {
                [b.q_w, b.q_b, b.k_w, b.k_b, b.v_w, b.v_b, b.o_w, b.o_b, b.fc_w, b.fc_b, b.proj_w, b.proj_b]
                    .contains(&i)
                    || b.gate.is_some_and(|(w, bias)| i == w || i == bias)
            })
    }

    /// Every tensor's index but those in `covered`, in layout order.
    pub fn tensors_except(&self, covered: &[usize]) -> Vec<usize> {
        (0..self.tensors.len()).filter(|i| !covered.contains(i)).collect()
    }

    /// The tensors `cfg` describes, in order. A head tied to the token embedding (`arch.tied_head`,
    /// `head_w == wte`) stores no `head.weight`. Every linear layer and norm keeps a bias, zero for
    /// a family without one; keys and values are stored for every query head (grouped-query
    /// attention's shared rows repeated), so one forward pass runs every family.
    pub fn new(cfg: &ModelConfig) -> Layout {
        let (v, c, f) = (cfg.vocab, cfg.d_model, cfg.d_ff);
        let t = cfg.arch.position_rows(cfg.context);
        let (tied, gated) = (cfg.arch.tied_head, cfg.arch.mlp == crate::config::Mlp::Gated);
        let mut tensors = Vec::new();
        let mut add = |name: String, shape: Vec<usize>| {
            let offset = tensors.last().map_or(0, |x: &TensorInfo| x.offset + x.len);
            let len = shape.iter().product();
            tensors.push(TensorInfo { name, shape, offset, len });
            tensors.len() - 1
        };
        let wte = add("wte".into(), vec![v, c]);
        let wpe = add("wpe".into(), vec![t, c]);
        let mut blocks = Vec::new();
        for l in 0..cfg.layers {
            let p = |s: &str| format!("blocks.{l}.{s}");
            blocks.push(BlockIds {
                ln1_w: add(p("ln1.weight"), vec![c]),
                ln1_b: add(p("ln1.bias"), vec![c]),
                q_w: add(p("attn.q.weight"), vec![c, c]),
                q_b: add(p("attn.q.bias"), vec![c]),
                k_w: add(p("attn.k.weight"), vec![c, c]),
                k_b: add(p("attn.k.bias"), vec![c]),
                v_w: add(p("attn.v.weight"), vec![c, c]),
                v_b: add(p("attn.v.bias"), vec![c]),
                o_w: add(p("attn.o.weight"), vec![c, c]),
                o_b: add(p("attn.o.bias"), vec![c]),
                ln2_w: add(p("ln2.weight"), vec![c]),
                ln2_b: add(p("ln2.bias"), vec![c]),
                fc_w: add(p("mlp.fc.weight"), vec![f, c]),
                fc_b: add(p("mlp.fc.bias"), vec![f]),
                proj_w: add(p("mlp.proj.weight"), vec![c, f]),
                proj_b: add(p("mlp.proj.bias"), vec![c]),
                gate: gated.then(|| (add(p("mlp.gate.weight"), vec![f, c]), add(p("mlp.gate.bias"), vec![f]))),
            });
        }
        let lnf_w = add("ln_f.weight".into(), vec![c]);
        let lnf_b = add("ln_f.bias".into(), vec![c]);
        let transform = cfg.arch.head_transform.then(|| Transform {
            w: add("head.transform.weight".into(), vec![c, c]),
            b: add("head.transform.bias".into(), vec![c]),
            ln_w: add("head.transform_norm.weight".into(), vec![c]),
            ln_b: add("head.transform_norm.bias".into(), vec![c]),
        });
        let head_w = if tied { wte } else { add("head.weight".into(), vec![v, c]) };
        let head_b = add("head.bias".into(), vec![v]);
        let total = tensors.last().map_or(0, |x| x.offset + x.len);
        Layout { tensors, wte, wpe, blocks, lnf_w, lnf_b, transform, head_w, head_b, total }
    }

    /// The slice of tensor `id` in a flat buffer laid out by this layout.
    pub fn of<'a, S>(&self, buf: &'a [S], id: usize) -> &'a [S] {
        &buf[self.tensors[id].range()]
    }
    pub fn of_mut<'a, S>(&self, buf: &'a mut [S], id: usize) -> &'a mut [S] {
        &mut buf[self.tensors[id].range()]
    }
}
