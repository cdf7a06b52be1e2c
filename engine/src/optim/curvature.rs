//! The linear layers K-FAC and CG-FAC precondition, and what each one needs from a step: its input
//! `a~ = [a, 1]` (bias folded in) and its per-token output gradient `g`, tokens as samples.

use crate::model::{Cache, Grads, Model};

#[derive(Clone, Copy, Debug)]
enum Source {
    Q(usize),
    K(usize),
    V(usize),
    O(usize),
    Fc(usize),
    Proj(usize),
    Head,
}

/// One linear layer `y = W a + b`, W (dout, din).
#[derive(Clone, Debug)]
pub struct Site {
    pub name: String,
    pub w: usize,
    pub b: usize,
    pub din: usize,
    pub dout: usize,
    source: Source,
}

impl Site {
    /// Columns of the folded input `a~ = [a, 1]` and of the combined gradient `[dW | db]`.
    pub fn din1(&self) -> usize {
        self.din + 1
    }

    /// The layer's input rows (N, din) from the forward cache.
    pub fn input<'a>(&self, c: &'a Cache<f32>) -> &'a [f32] {
        match self.source {
            Source::Q(l) | Source::K(l) | Source::V(l) => &c.blocks[l].ln1_out,
            Source::O(l) => &c.blocks[l].attn_y,
            Source::Fc(l) => &c.blocks[l].ln2_out,
            Source::Proj(l) => &c.blocks[l].fc_act,
            Source::Head => &c.lnf_out,
        }
    }

    /// Gradient of the mean loss with respect to the layer's output rows (N, dout).
    pub fn out_grad<'a>(&self, g: &'a Grads<f32>) -> &'a [f32] {
        match self.source {
            Source::Q(l) => &g.blocks[l].dq,
            Source::K(l) => &g.blocks[l].dk,
            Source::V(l) => &g.blocks[l].dv,
            Source::O(l) => &g.blocks[l].d_o,
            Source::Fc(l) => &g.blocks[l].d_fc,
            Source::Proj(l) => &g.blocks[l].d_proj,
            Source::Head => &g.dlogits,
        }
    }
}

/// Every linear layer of the model: Q, K, V, O, both MLP layers per block, and the head.
pub fn sites(model: &Model<f32>) -> Vec<Site> {
    let (c, f, v) = (model.cfg.d_model, model.cfg.d_ff, model.cfg.vocab);
    let l = &model.layout;
    let mut out = Vec::new();
    for (i, b) in l.blocks.iter().enumerate() {
        let mut add = |name: &str, w, bias, din, dout, source| {
            out.push(Site { name: format!("blocks.{i}.{name}"), w, b: bias, din, dout, source })
        };
        add("attn.q", b.q_w, b.q_b, c, c, Source::Q(i));
        add("attn.k", b.k_w, b.k_b, c, c, Source::K(i));
        add("attn.v", b.v_w, b.v_b, c, c, Source::V(i));
        add("attn.o", b.o_w, b.o_b, c, c, Source::O(i));
        add("mlp.fc", b.fc_w, b.fc_b, c, f, Source::Fc(i));
        add("mlp.proj", b.proj_w, b.proj_b, f, c, Source::Proj(i));
    }
    out.push(Site { name: "head".into(), w: l.head_w, b: l.head_b, din: c, dout: v, source: Source::Head });
    out
}

/// Copies `a` (N, din) into `a1` (N, din + 1) with a trailing column of ones.
pub fn fold_bias(a1: &mut [f32], a: &[f32], din: usize) {
    for (dst, src) in a1.chunks_exact_mut(din + 1).zip(a.chunks_exact(din)) {
        dst[..din].copy_from_slice(src);
        dst[din] = 1.0;
    }
}

/// Per-token output gradients: the mean loss's gradient times N, so `grad_W = (1/N) g^T a~`.
pub fn per_token(g: &mut [f32], dy: &[f32], n: usize) {
    let s = n as f32;
    g.iter_mut().zip(dy).for_each(|(o, &d)| *o = d * s);
}

/// `[dW | db]` (dout, din + 1) from the flat gradient buffer.
pub fn combined_grad(out: &mut [f32], model: &Model<f32>, grads: &[f32], site: &Site) {
    let (dw, db) = (model.layout.of(grads, site.w), model.layout.of(grads, site.b));
    for (o, row) in out.chunks_exact_mut(site.din1()).enumerate() {
        row[..site.din].copy_from_slice(&dw[o * site.din..(o + 1) * site.din]);
        row[site.din] = db[o];
    }
}
