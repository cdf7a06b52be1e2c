//! Multi-head self-attention: `P = softmax(Q K^T / sqrt(hs) + mask)`, `Y = P V` per head.
//!
//! q, k, v and the output are (B, T, C) with head h in columns `h*hs..(h+1)*hs`; `att` holds the
//! row-stochastic matrices P as (B, NH, T, T): the Markov transition matrices the lab studies.

use crate::nn::loss::softmax_in_place;
use crate::nn::matmul::{gemm, MatMut, MatRef};
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
    fn att_range(&self, b: usize, h: usize) -> std::ops::Range<usize> {
        let tt = self.t * self.t;
        let start = (b * self.nh + h) * tt;
        start..start + tt
    }
}

pub fn forward<S: Scalar>(att: &mut [S], out: &mut [S], q: &[S], k: &[S], v: &[S], s: Shape) {
    let scale = S::one() / S::of(s.hs() as f64).sqrt();
    for b in 0..s.b {
        for h in 0..s.nh {
            let p = &mut att[s.att_range(b, h)];
            gemm(scale, s.head(q, b, h), s.head(k, b, h).t(), S::zero(), MatMut::new(p, s.t, s.t));
            for (i, row) in p.chunks_exact_mut(s.t).enumerate() {
                let visible = if s.causal { i + 1 } else { s.t };
                softmax_in_place(&mut row[..visible]);
                row[visible..].fill(S::zero());
            }
            gemm(S::one(), MatRef::new(p, s.t, s.t), s.head(v, b, h), S::zero(), s.head_mut(out, b, h));
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
    let scale = S::one() / S::of(s.hs() as f64).sqrt();
    for b in 0..s.b {
        for h in 0..s.nh {
            let p = &att[s.att_range(b, h)];
            let pm = MatRef::new(p, s.t, s.t);
            // dV = P^T dY, dP = dY V^T.
            gemm(S::one(), pm.t(), s.head(dout, b, h), S::zero(), s.head_mut(dv, b, h));
            gemm(S::one(), s.head(dout, b, h), s.head(v, b, h).t(), S::zero(), MatMut::new(scratch, s.t, s.t));
            // Softmax backward: dS = P * (dP - sum_j P dP), row by row; masked entries have P = 0.
            for (dp, pr) in scratch.chunks_exact_mut(s.t).zip(p.chunks_exact(s.t)) {
                let dot: S = dp.iter().zip(pr).map(|(&a, &b)| a * b).sum();
                for (d, &pp) in dp.iter_mut().zip(pr) {
                    *d = pp * (*d - dot);
                }
            }
            let ds = MatRef::new(&*scratch, s.t, s.t);
            gemm(scale, ds, s.head(k, b, h), S::zero(), s.head_mut(dq, b, h));
            gemm(scale, ds.t(), s.head(q, b, h), S::zero(), s.head_mut(dk, b, h));
        }
    }
}
