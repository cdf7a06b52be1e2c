//! The model's linear layers `y = W a + b` and where each keeps its weights in the flat buffer:
//! what the optimizers that work per layer (K-FAC, CG-FAC, SOAP, Muon), the GPU trainer and the
//! residual-scaled initialisation walk over.

use super::architecture::BlockLinear;
use super::params::Layout;

/// A linear layer of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinearId {
    Block(usize, BlockLinear),
    Head,
}

/// Where one linear layer `y = W a + b` keeps its weights: W (dout, din) and b (dout) as tensor
/// indices of the `Layout`.
#[derive(Clone, Debug)]
pub struct LinearSpec {
    pub id: LinearId,
    pub name: String,
    pub w: usize,
    pub b: usize,
    pub din: usize,
    pub dout: usize,
}

impl LinearId {
    /// Its weight's tensor index in the `Layout`.
    pub fn weight(self, layout: &Layout) -> usize {
        match self {
            LinearId::Block(i, r) => layout.blocks[i].linear(r).0,
            LinearId::Head => layout.head_w,
        }
    }
}

impl LinearSpec {
    pub fn of(layout: &Layout, id: LinearId) -> LinearSpec {
        let (name, (w, b)) = match id {
            LinearId::Block(i, r) => (format!("blocks.{i}.{}", r.name()), layout.blocks[i].linear(r)),
            LinearId::Head => ("head".to_string(), (layout.head_w, layout.head_b)),
        };
        let shape = &layout.tensors[w].shape;
        LinearSpec { id, name, w, b, din: shape[1], dout: shape[0] }
    }
}

/// Every linear layer: each block's in forward order, then the head.
pub fn linears(layout: &Layout) -> Vec<LinearSpec> {
    ids(layout).map(|id| LinearSpec::of(layout, id)).collect()
}

/// Every linear layer's id, in `linears`' order (allocating nothing: a training step walks them).
pub fn ids(layout: &Layout) -> impl Iterator<Item = LinearId> + Clone {
    let blocks = (0..layout.blocks.len()).flat_map(|i| BlockLinear::ALL.map(|r| LinearId::Block(i, r)));
    blocks.chain([LinearId::Head])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;

    #[test]
    fn linears_follow_the_parameter_names_and_shapes() {
        let cfg =
            ModelConfig { vocab: 11, d_model: 8, heads: 2, layers: 2, d_ff: 20, context: 5, ..Default::default() };
        let layout = Layout::new(&cfg);
        let all = linears(&layout);
        assert_eq!(all.len(), 6 * 2 + 1);
        for spec in &all {
            assert_eq!(layout.tensors[spec.w].name, format!("{}.weight", spec.name));
            assert_eq!(layout.tensors[spec.b].name, format!("{}.bias", spec.name));
            assert_eq!(layout.tensors[spec.w].shape, vec![spec.dout, spec.din]);
        }
        let fc = LinearSpec::of(&layout, LinearId::Block(1, BlockLinear::Fc));
        assert_eq!((fc.name.as_str(), fc.din, fc.dout), ("blocks.1.mlp.fc", 8, 20));
    }
}
