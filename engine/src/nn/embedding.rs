//! Token and position embeddings: `x0 = wte[token] + wpe[position]`, or `wte[token]` alone for a
//! model whose positions are rotary (its `wpe` has no rows).

use crate::scalar::Scalar;

/// tokens (B*T) -> out (B*T, C).
pub fn forward<S: Scalar>(out: &mut [S], tokens: &[u32], wte: &[S], wpe: &[S], t: usize, c: usize) {
    for (i, (row, &tok)) in out.chunks_exact_mut(c).zip(tokens).enumerate() {
        let e = &wte[tok as usize * c..(tok as usize + 1) * c];
        if wpe.is_empty() {
            row.copy_from_slice(e);
            continue;
        }
        let pos = i % t;
        let p = &wpe[pos * c..(pos + 1) * c];
        for ((o, &a), &b) in row.iter_mut().zip(e).zip(p) {
            *o = a + b;
        }
    }
}

/// Scatter-adds `dout` (B*T, C) into the embedding gradients.
pub fn backward<S: Scalar>(dwte: &mut [S], dwpe: &mut [S], dout: &[S], tokens: &[u32], t: usize, c: usize) {
    for (i, (row, &tok)) in dout.chunks_exact(c).zip(tokens).enumerate() {
        let pos = i % t;
        for j in 0..c {
            dwte[tok as usize * c + j] += row[j];
            dwpe[pos * c + j] += row[j];
        }
    }
}
