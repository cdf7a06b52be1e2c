//! The curvature products CG-FAC can use for one linear layer, all of the form `X -> F X + lambda X`
//! on X (dout, din1), never forming a Kronecker product or a Fisher matrix (docs/science.md#cg-fac):
//! - `Factors`: `G X A` from stored factors A (din1, din1) and G (dout, dout);
//! - `MatrixFree`: `G X A = (1/(M N)) g^T (g X) a~^T a~` from the current batch, no A or G formed;
//! - `ExactFisher`: the empirical-Fisher block `(1/M) g^T diag(s) a~`, `s_n = g_n^T X a~_n`.
//!
//! N positions, M scored tokens, g the per-token gradient of the summed loss (`curvature`).

use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::scalar::Scalar;

pub use super::settings::Product;

/// One layer's operands: factors (for `Factors`) or the batch (for the matrix-free products).
pub struct Operands<'a, S> {
    pub dout: usize,
    pub din1: usize,
    /// Positions N (the batch's rows) and scored tokens M.
    pub n: usize,
    pub m: usize,
    /// (din1, din1) and (dout, dout); empty when unused.
    pub a_factor: &'a [S],
    pub g_factor: &'a [S],
    /// (N, din1) inputs with the ones column and (N, dout) per-token output gradients.
    pub a_batch: &'a [S],
    pub g_batch: &'a [S],
}

/// Scratch buffers sized for the largest layer: (N, din1), (dout, din1), (dout, N) and (N).
pub struct Scratch<S> {
    pub nd: Vec<S>,
    pub od: Vec<S>,
    pub on: Vec<S>,
    pub s: Vec<S>,
}

impl<S: Scalar> Scratch<S> {
    pub fn new(n: usize, max_dout: usize, max_din1: usize) -> Self {
        Scratch {
            nd: vec![S::zero(); n * max_din1],
            od: vec![S::zero(); max_dout * max_din1],
            on: vec![S::zero(); max_dout * n],
            s: vec![S::zero(); n],
        }
    }
}

/// `out = F x + lambda x` for the chosen product.
pub fn apply<S: Scalar>(
    product: Product,
    out: &mut [S],
    x: &[S],
    op: &Operands<S>,
    lambda: S,
    scratch: &mut Scratch<S>,
) {
    let (o, d, n) = (op.dout, op.din1, op.n);
    let xm = MatRef::new(x, o, d);
    match product {
        Product::Factors => {
            // G X into scratch, then (G X) A into out.
            let gx = &mut scratch.od[..o * d];
            gemm(S::one(), MatRef::new(op.g_factor, o, o), xm, S::zero(), MatMut::new(gx, o, d));
            gemm(S::one(), MatRef::new(&*gx, o, d), MatRef::new(op.a_factor, d, d), S::zero(), MatMut::new(out, o, d));
        }
        Product::MatrixFree => {
            // Four thin products: (g X) -> g^T (g X) -> (.) a~^T -> (.) a~, each N * dout * din1.
            let inv = S::one() / S::of((op.m * n) as f64);
            let gx = &mut scratch.nd[..n * d];
            let ga = MatRef::new(op.g_batch, n, o);
            gemm(S::one(), ga, xm, S::zero(), MatMut::new(gx, n, d));
            let ggx = &mut scratch.od[..o * d];
            gemm(S::one(), ga.t(), MatRef::new(&*gx, n, d), S::zero(), MatMut::new(ggx, o, d));
            let t = &mut scratch.on[..o * n];
            let aa = MatRef::new(op.a_batch, n, d);
            gemm(S::one(), MatRef::new(&*ggx, o, d), aa.t(), S::zero(), MatMut::new(t, o, n));
            gemm(inv, MatRef::new(&*t, o, n), aa, S::zero(), MatMut::new(out, o, d));
        }
        Product::ExactFisher => {
            // s_n = (g X)_n . a~_n, then (1/M) g^T diag(s) a~.
            let gx = &mut scratch.nd[..n * d];
            gemm(S::one(), MatRef::new(op.g_batch, n, o), xm, S::zero(), MatMut::new(gx, n, d));
            let inv = S::one() / S::of(op.m as f64);
            for (i, s) in scratch.s[..n].iter_mut().enumerate() {
                let row = &gx[i * d..(i + 1) * d];
                *s = row.iter().zip(&op.a_batch[i * d..(i + 1) * d]).map(|(&p, &q)| p * q).sum::<S>() * inv;
            }
            // Scale the rows of a~ by s (reusing the (N, din1) scratch), then g^T (diag(s) a~).
            for i in 0..n {
                let s = scratch.s[i];
                for (dst, &src) in gx[i * d..(i + 1) * d].iter_mut().zip(&op.a_batch[i * d..(i + 1) * d]) {
                    *dst = s * src;
                }
            }
            gemm(
                S::one(),
                MatRef::new(op.g_batch, n, o).t(),
                MatRef::new(&*gx, n, d),
                S::zero(),
                MatMut::new(out, o, d),
            );
        }
    }
    out.iter_mut().zip(x).for_each(|(y, &xv)| *y += lambda * xv);
}
