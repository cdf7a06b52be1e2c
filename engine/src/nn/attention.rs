//! Multi-head self-attention: `P = softmax(Q K^T / sqrt(hs) + mask)`, `Y = P V` per head.
//!
//! q, k, v and the output are (B, T, C) with head h in columns `h*hs..(h+1)*hs`; `att` holds the
//! row-stochastic matrices P as (B, NH, T, T): the Markov transition matrices the lab studies.
//!
//! With the causal mask the products cover only the visible triangle, in blocks of [`BLOCK`] rows
//! (rows `r0..r1` see columns `..r1`): the masked entries are never computed, only set to zero.
//! The entries skipped are exact zeros of P, so the results are those of the full products.

use std::ops::Range;

use multiversion::multiversion;
#[cfg(not(target_arch = "wasm32"))]
use rayon::prelude::*;

use crate::nn::loss::softmax_in_place;
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::nn::reduce;
use crate::scalar::Scalar;

#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub b: usize,
    pub t: usize,
    pub c: usize,
    pub nh: usize,
    pub causal: bool,
}

impl Shape {
    fn hs(&self) -> usize {
        self.c / self.nh
    }
    /// View of head `h` of batch row `b` in a (B, T, C) buffer: a T x hs matrix.
    fn head<'a, S: Scalar>(&self, buf: &'a [S], b: usize, h: usize) -> MatRef<'a, S> {
        MatRef::strided(buf, b * self.t * self.c + h * self.hs(), self.t, self.hs(), self.c, 1)
    }
    fn head_mut<'a, S: Scalar>(&self, buf: &'a mut [S], b: usize, h: usize) -> MatMut<'a, S> {
        MatMut::strided(buf, b * self.t * self.c + h * self.hs(), self.t, self.hs(), self.c, 1)
    }
    fn att_range(&self, b: usize, h: usize) -> Range<usize> {
        let tt = self.t * self.t;
        let start = (b * self.nh + h) * tt;
        start..start + tt
    }
    /// The row blocks of a (T, T) matrix, each with the columns its rows can see (all but the
    /// masked ones): one block of every column without the mask.
    fn blocks(&self) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
        let (t, causal, step) = (self.t, self.causal, self.block_rows());
        (0..t).step_by(step).map(move |r0| {
            let r1 = (r0 + step).min(t);
            (r0..r1, 0..if causal { r1 } else { t })
        })
    }
    /// Rows per block of `blocks`.
    fn block_rows(&self) -> usize {
        if self.causal {
            BLOCK
        } else {
            self.t.max(1)
        }
    }
    /// Row `i`'s visible columns.
    fn visible(&self, i: usize) -> usize {
        if self.causal {
            i + 1
        } else {
            self.t
        }
    }
}

/// Rows per block of the causal triangle: at T = 128 the products cover 62% of the square, at
/// T = 64 75% (blocks of 16 covered less but their many small products ran slower: measured).
pub const BLOCK: usize = 32;

pub fn forward<S: Scalar>(att: &mut [S], out: &mut [S], q: &[S], k: &[S], v: &[S], s: Shape) {
    let (scale, t, hs) = (S::one() / S::of(s.hs() as f64).sqrt(), s.t, s.hs());
    // Each head's P = softmax(q K^T): the larger part of the work, and each head's own matrix, so
    // natively the heads share the cores (a text read is one row: its heads are all there is to
    // share). The same bits either way.
    let scores = |(bh, p): (usize, &mut [S])| {
        let (qh, kh) = (s.head(q, bh / s.nh, bh % s.nh), s.head(k, bh / s.nh, bh % s.nh));
        for (rows, cols) in s.blocks() {
            let (qb, kb) = (qh.block(rows.clone(), 0..hs), kh.block(cols.clone(), 0..hs));
            gemm(scale, qb, kb.t(), S::zero(), MatMut::new(p, t, t).block(rows, cols));
        }
        for (i, row) in p.chunks_exact_mut(t).enumerate() {
            let visible = s.visible(i);
            softmax_in_place(&mut row[..visible]);
            row[visible..].fill(S::zero());
        }
    };
    let heads = &mut att[..s.b * s.nh * t * t];
    #[cfg(not(target_arch = "wasm32"))]
    heads.par_chunks_mut(t * t).enumerate().for_each(scores);
    #[cfg(target_arch = "wasm32")]
    heads.chunks_exact_mut(t * t).enumerate().for_each(scores);
    // Y = P V by blocks of rows, each block every head's columns of its own rows of `out`: the
    // blocks share the cores natively (the same products, so the same bits).
    let step = s.block_rows();
    for (b, out) in out.chunks_exact_mut(t * s.c).take(s.b).enumerate() {
        let values = |(i, rows_out): (usize, &mut [S])| {
            let rows = i * step..i * step + rows_out.len() / s.c;
            let cols = 0..if s.causal { rows.end } else { t };
            for h in 0..s.nh {
                let pb = MatRef::new(&att[s.att_range(b, h)], t, t).block(rows.clone(), cols.clone());
                let y = MatMut::strided(rows_out, h * hs, rows.len(), hs, s.c, 1);
                gemm(S::one(), pb, s.head(v, b, h).block(cols.clone(), 0..hs), S::zero(), y);
            }
        };
        #[cfg(not(target_arch = "wasm32"))]
        out.par_chunks_mut(step * s.c).enumerate().for_each(values);
        #[cfg(target_arch = "wasm32")]
        out.chunks_mut(step * s.c).enumerate().for_each(values);
    }
}

/// One query row (a token written) over the `seen` positions cached: per head P = softmax(q K^T /
/// sqrt(hs)) into `p` (seen), then `y = P V`; q and y are (C), K and V (seen, C). Multiversioned as
/// the element-wise kernels (the same bits in every version: the sums keep their lane order).
#[multiversion(targets = "simd")]
pub fn forward_row<S: Scalar>(y: &mut [S], p: &mut [S], q: &[S], k: &[S], v: &[S], nh: usize) {
    let (c, seen) = (q.len(), p.len());
    let hs = c / nh;
    let scale = S::one() / S::of(hs as f64).sqrt();
    for ((qh, yh), h) in q.chunks_exact(hs).zip(y.chunks_exact_mut(hs)).zip((0..c).step_by(hs)) {
        for (s, key) in p.iter_mut().zip(k.chunks_exact(c)) {
            *s = reduce::dot(qh, &key[h..h + hs]) * scale;
        }
        softmax_in_place(p);
        yh.fill(S::zero());
        for (&pj, value) in p.iter().zip(v.chunks_exact(c).take(seen)) {
            yh.iter_mut().zip(&value[h..h + hs]).for_each(|(y, &vv)| *y += pj * vv);
        }
    }
}

/// Sets `dq`, `dk`, `dv` (B, T, C) from `dout`; `scratch` is (T, T).
#[allow(clippy::too_many_arguments)]
pub fn backward<S: Scalar>(
    dq: &mut [S],
    dk: &mut [S],
    dv: &mut [S],
    scratch: &mut [S],
    dout: &[S],
    att: &[S],
    q: &[S],
    k: &[S],
    v: &[S],
    s: Shape,
) {
    let (scale, t, hs) = (S::one() / S::of(s.hs() as f64).sqrt(), s.t, s.hs());
    for b in 0..s.b {
        for h in 0..s.nh {
            let p = &att[s.att_range(b, h)];
            let pm = MatRef::new(p, t, t);
            let (qh, kh, vh, dy) = (s.head(q, b, h), s.head(k, b, h), s.head(v, b, h), s.head(dout, b, h));
            // dP = dY V^T on the visible entries.
            for (rows, cols) in s.blocks() {
                let (dyb, vb) = (dy.block(rows.clone(), 0..hs), vh.block(cols.clone(), 0..hs));
                gemm(S::one(), dyb, vb.t(), S::zero(), MatMut::new(scratch, t, t).block(rows, cols));
            }
            // Softmax backward: dS = P * (dP - sum_j P dP), row by row; masked entries are 0 (those
            // in a diagonal block were computed, the others hold an earlier head's values).
            for (i, (row, pr)) in scratch.chunks_exact_mut(t).zip(p.chunks_exact(t)).enumerate() {
                let (dp, masked) = row.split_at_mut(s.visible(i));
                softmax_backward(dp, pr);
                masked.fill(S::zero());
            }
            let ds = MatRef::new(&*scratch, t, t);
            for (rows, cols) in s.blocks() {
                // dQ = dS K over each row block's visible columns.
                let (dsb, kb) = (ds.block(rows.clone(), cols.clone()), kh.block(cols, 0..hs));
                gemm(scale, dsb, kb, S::zero(), s.head_mut(dq, b, h).block(rows.clone(), 0..hs));
                // dK = dS^T Q and dV = P^T dY over each column block's visible rows (from its first
                // row on; the blocks are square, so the row block is the column block).
                let seen = if s.causal { rows.start..t } else { 0..t };
                let (dsb, qb) = (ds.block(seen.clone(), rows.clone()), qh.block(seen.clone(), 0..hs));
                gemm(scale, dsb.t(), qb, S::zero(), s.head_mut(dk, b, h).block(rows.clone(), 0..hs));
                let (pb, dyb) = (pm.block(seen.clone(), rows.clone()), dy.block(seen, 0..hs));
                gemm(S::one(), pb.t(), dyb, S::zero(), s.head_mut(dv, b, h).block(rows, 0..hs));
            }
        }
    }
}

/// `dp = p * (dp - sum_j p_j dp_j)` over one row's visible entries (multiversioned as
/// `activation::forward`, the sum in `reduce`'s order).
#[multiversion(targets = "simd")]
fn softmax_backward<S: Scalar>(dp: &mut [S], p: &[S]) {
    let dot = reduce::dot(dp, p);
    for (d, &pp) in dp.iter_mut().zip(p) {
        *d = pp * (*d - dot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{rng, Stream};
    use rand::Rng as _;

    /// Attention by its definition, one entry at a time (f64): `P`, `Y`, and the gradients of
    /// `sum(Y * dY)`.
    #[allow(clippy::type_complexity)]
    fn naive(q: &[f64], k: &[f64], v: &[f64], dy: &[f64], s: Shape) -> (Vec<f64>, [Vec<f64>; 4]) {
        let (t, c, hs) = (s.t, s.c, s.hs());
        let scale = 1.0 / (hs as f64).sqrt();
        let mut att = vec![0.0; s.b * s.nh * t * t];
        let [mut y, mut dq, mut dk, mut dv] = [(); 4].map(|_| vec![0.0; s.b * t * c]);
        let at = |b: usize, i: usize, h: usize, d: usize| b * t * c + i * c + h * hs + d;
        for b in 0..s.b {
            for h in 0..s.nh {
                let p = &mut att[s.att_range(b, h)];
                for i in 0..t {
                    let vis = s.visible(i);
                    let score = |j: usize| scale * (0..hs).map(|d| q[at(b, i, h, d)] * k[at(b, j, h, d)]).sum::<f64>();
                    let m = (0..vis).map(score).fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = (0..vis).map(|j| (score(j) - m).exp()).sum();
                    for j in 0..vis {
                        p[i * t + j] = (score(j) - m).exp() / z;
                        for d in 0..hs {
                            y[at(b, i, h, d)] += p[i * t + j] * v[at(b, j, h, d)];
                            dv[at(b, j, h, d)] += p[i * t + j] * dy[at(b, i, h, d)];
                        }
                    }
                    let dp = |j: usize| (0..hs).map(|d| dy[at(b, i, h, d)] * v[at(b, j, h, d)]).sum::<f64>();
                    let dot: f64 = (0..vis).map(|j| p[i * t + j] * dp(j)).sum();
                    for j in 0..vis {
                        let ds = p[i * t + j] * (dp(j) - dot) * scale;
                        for d in 0..hs {
                            dq[at(b, i, h, d)] += ds * k[at(b, j, h, d)];
                            dk[at(b, j, h, d)] += ds * q[at(b, i, h, d)];
                        }
                    }
                }
            }
        }
        (att, [y, dq, dk, dv])
    }

    /// The blocked products (causal: only the visible triangle) against the definition, at a
    /// context that is not a multiple of the block, with a scratch full of an earlier head's values.
    #[test]
    fn blocked_attention_matches_the_definition() {
        for causal in [true, false] {
            let s = Shape { b: 2, t: 2 * BLOCK + 5, c: 12, nh: 3, causal };
            let n = s.b * s.t * s.c;
            let mut r = rng(7, Stream::Init, 0);
            let mut fill = || (0..n).map(|_| r.random_range(-2.0..2.0)).collect::<Vec<f64>>();
            let (q, k, v, dy) = (fill(), fill(), fill(), fill());
            let (mut att, mut y) = (vec![0.0; s.b * s.nh * s.t * s.t], vec![0.0; n]);
            forward(&mut att, &mut y, &q, &k, &v, s);
            let [mut dq, mut dk, mut dv] = [(); 3].map(|_| vec![0.0; n]);
            let mut scratch = vec![1e3; s.t * s.t];
            backward(&mut dq, &mut dk, &mut dv, &mut scratch, &dy, &att, &q, &k, &v, s);
            let (att_ref, [y_ref, dq_ref, dk_ref, dv_ref]) = naive(&q, &k, &v, &dy, s);
            let gap = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            let gaps = [gap(&att, &att_ref), gap(&y, &y_ref), gap(&dq, &dq_ref), gap(&dk, &dk_ref), gap(&dv, &dv_ref)];
            assert!(gaps.iter().all(|&g| g < 1e-12), "causal {causal}: P, Y, dQ, dK, dV differ by {gaps:?}");
        }
    }
}
