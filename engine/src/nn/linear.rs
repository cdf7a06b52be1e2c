//! A linear layer `y = x W^T + b` with W stored (out, in), as PyTorch stores it.

use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::scalar::Scalar;

/// inp (N, in) -> out (N, out).
pub fn forward<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    for row in out.chunks_exact_mut(dout) {
        row.copy_from_slice(b);
    }
    gemm(S::one(), MatRef::new(inp, n, din), MatRef::new(w, dout, din).t(), S::one(), MatMut::new(out, n, dout));
}

/// Accumulates `dw += dy^T x` and `db += sum dy`; sets (`beta` = 0) or adds to (`beta` = 1) `dinp`.
#[allow(clippy::too_many_arguments)]
pub fn backward<S: Scalar>(
    dinp: &mut [S],
    beta: S,
    dw: &mut [S],
    db: &mut [S],
    dy: &[S],
    inp: &[S],
    w: &[S],
    n: usize,
    din: usize,
    dout: usize,
) {
    gemm(S::one(), MatRef::new(dy, n, dout), MatRef::new(w, dout, din), beta, MatMut::new(dinp, n, din));
    gemm(S::one(), MatRef::new(dy, n, dout).t(), MatRef::new(inp, n, din), S::one(), MatMut::new(dw, dout, din));
    for row in dy.chunks_exact(dout) {
        for (g, &d) in db.iter_mut().zip(row) {
            *g += d;
        }
    }
}
