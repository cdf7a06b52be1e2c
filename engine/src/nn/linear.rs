//! A linear layer `y = x W^T + b` with W stored (out, in), as PyTorch stores it.

use crate::nn::matmul::{gemm, MatMut, MatRef};
#[cfg(target_arch = "wasm32")]
use crate::nn::reduce;
use crate::scalar::Scalar;

/// Layers with this many weights or more are split into two halves run at once (natively; by
/// output columns unless they read many rows): a text read by GPT-2 is one row of T tokens, and one
/// token written is one row, with no batch for the shards to share out. The split depends on the
/// shape alone, so the bits never depend on the thread count. GPT-2 small's smallest layers (Q, K, V and the attention's output,
/// 768 x 768) are over it; the lab's own models (d_model up to 256 or so) never split.
pub const SPLIT_WEIGHTS: usize = 1 << 19;

/// One row (a token written) is split from this many weights: its product reads each weight once
/// and does little else, so it runs at the memory's pace, which two cores reach and one does not.
/// SmolLM2's 576 x 576 projections (a fifth of its weights) are under `SPLIT_WEIGHTS`.
pub const SPLIT_ROW_WEIGHTS: usize = 1 << 17;

/// Layers with this many weights or more that read fewer rows than a quarter of their inputs and
/// half their outputs write `out^T` (`forward_transposed`): SmolLM2's 576 x 576 and 576 x 192
/// projections reading 64 tokens, a d256 model's shard of a few rows.
pub const TRANSPOSE_WEIGHTS: usize = 1 << 16;

/// Layers reading this many rows or more, for products of `SPLIT_ROWS_PRODUCT` multiply-adds or
/// more, are split by rows (`forward_rows`) unless they write `out^T` (`forward_transposed`) and
/// their output is under `WIDE_OUTPUT` values.
pub const SPLIT_ROWS: usize = 128;
pub const SPLIT_ROWS_PRODUCT: usize = 1 << 23;
pub const WIDE_OUTPUT: usize = 1 << 22;

/// inp (N, in) -> out (N, out).
pub fn forward<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    #[cfg(not(target_arch = "wasm32"))]
    if dout >= 64 {
        let least = if n == 1 { SPLIT_ROW_WEIGHTS } else { SPLIT_WEIGHTS };
        let (few, split) = (n > 1 && 2 * n <= din, din * dout >= least);
        let transpose = few && (split || (din * dout >= TRANSPOSE_WEIGHTS && 4 * n <= din && 2 * n <= dout));
        let rows = n >= SPLIT_ROWS && n * din * dout >= SPLIT_ROWS_PRODUCT;
        if rows && (!transpose || n * dout >= WIDE_OUTPUT) {
            return forward_rows(out, inp, w, b, n, din, dout);
        }
        if transpose {
            return forward_transposed(out, inp, w, b, n, din, dout);
        }
        if split {
            return forward_split(out, inp, w, b, n, din, dout);
        }
    }
    forward_whole(out, inp, w, b, n, din, dout)
}

/// `forward` over two cores: the rows in two halves, each reading the whole of W and writing its
/// own rows of `out` (nothing to allocate or copy back). For many rows, where a layer that is not
/// transposed ran on one core: SmolLM2's 576 x 576 projections and grouped keys and values reading
/// 256 tokens (a fifth of its products). Also for a wide output (a head over the vocabulary), whose
/// `out^T` and its transposition cost more than packing W twice. Each row's products are the whole
/// product's, to the bit (tested). `lab bench --model` of SmolLM2, 256 tokens, each way three times
/// in one run: 294, 318 and 414 ms before, 263, 264 and 278 after; GPT-2's 226 and 226, 221 and 226.
#[cfg(not(target_arch = "wasm32"))]
fn forward_rows<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    let cut = (n / 2).next_multiple_of(16);
    let (o1, o2) = out.split_at_mut(cut * dout);
    let (x1, x2) = inp.split_at(cut * din);
    rayon::join(|| forward_whole(o1, x1, w, b, cut, din, dout), || forward_whole(o2, x2, w, b, n - cut, din, dout));
}

/// `forward` over two cores: the output columns in two halves.
#[cfg(not(target_arch = "wasm32"))]
fn forward_split<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    let cut = (dout / 2).next_multiple_of(16);
    let ((w1, w2), (b1, b2)) = (w.split_at(cut * din), b.split_at(cut));
    let (mut left, mut right) = (vec![S::zero(); n * cut], vec![S::zero(); n * (dout - cut)]);
    rayon::join(
        || forward_whole(&mut left, inp, w1, b1, n, din, cut),
        || forward_whole(&mut right, inp, w2, b2, n, din, dout - cut),
    );
    let halves = left.chunks_exact(cut).zip(right.chunks_exact(dout - cut));
    for (o, (l, r)) in out.chunks_exact_mut(dout).zip(halves) {
        o[..cut].copy_from_slice(l);
        o[cut..].copy_from_slice(r);
    }
}

/// `forward` over two cores for fewer rows than half the inputs (a text read, a wide model's
/// shard): the gemm crate writes `out^T` (out, N), each core a contiguous half of it, then it is
/// transposed with the bias added. Asked for `out` itself it packs W, stored (out, in), by a
/// transposing gather that cost more than the product's own arithmetic at these shapes: on one
/// core GPT-2 small's 64-token products ran at 81-92 GFLOP/s that way and at 138-156 this way, a
/// d1024 model's 16-row shard at 28-30 and 84-89. With more rows than that the usual way is as
/// fast or faster. Layers under `TRANSPOSE_WEIGHTS` keep it, and middle-sized ones (SmolLM2's
/// 576-wide projections) use this way for fewer rows still (a quarter of the inputs): SmolLM2's
/// 64-token forward took 195-202 ms before, 169-180 after, and at 256 tokens this way was slower.
/// The lab's own models at the page's sizes keep the usual way, so a step of theirs allocates
/// nothing here.
#[cfg(not(target_arch = "wasm32"))]
fn forward_transposed<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    use rayon::prelude::*;
    let mut out_t = vec![S::zero(); dout * n];
    let product = |out_t: &mut [S], w: &[S], rows: usize| {
        let x = MatRef::new(inp, n, din);
        gemm(S::one(), x, MatRef::new(w, rows, din).t(), S::zero(), MatMut::strided(out_t, 0, n, rows, 1, n))
    };
    let cut = (dout / 2).next_multiple_of(16);
    let ((t1, t2), (w1, w2)) = (out_t.split_at_mut(cut * n), w.split_at(cut * din));
    rayon::join(|| product(t1, w1, cut), || product(t2, w2, dout - cut));
    // Sixteen rows of `out` at a time, so each line of `out_t` is read once.
    out.par_chunks_mut(16 * dout).enumerate().for_each(|(at, rows)| {
        for (j, &bias) in b.iter().enumerate() {
            let col = &out_t[j * n + 16 * at..][..rows.len() / dout];
            for (row, &v) in rows.chunks_exact_mut(dout).zip(col) {
                row[j] = bias + v;
            }
        }
    });
}

/// `forward` as one product.
fn forward_whole<S: Scalar>(out: &mut [S], inp: &[S], w: &[S], b: &[S], n: usize, din: usize, dout: usize) {
    #[cfg(target_arch = "wasm32")]
    if n == 1 {
        return matvec(out, inp, w, b, din);
    }
    for row in out.chunks_exact_mut(dout) {
        row.copy_from_slice(b);
    }
    gemm(S::one(), MatRef::new(inp, n, din), MatRef::new(w, dout, din).t(), S::one(), MatMut::new(out, n, dout));
}

/// One row (a token written) in wasm32: a dot product a weight row, reading W once as it lies.
/// matrixmultiply packs W first, as much memory traffic again as the product itself; this more than
/// doubles GPT-2's writing in a browser. Natively the gemm crate's own path for one row is faster.
#[cfg(target_arch = "wasm32")]
fn matvec<S: Scalar>(out: &mut [S], x: &[S], w: &[S], b: &[S], din: usize) {
    for ((o, row), &bias) in out.iter_mut().zip(w.chunks_exact(din)).zip(b) {
        *o = bias + reduce::dot(x, row);
    }
}

/// `forward` for a layer whose output is heads of `hs` columns repeating in groups of `group` (the
/// keys and values of grouped-query attention, whose rows a model stores once per query head, as
/// transformers' `repeat_kv` reads them): each group's first head is computed and copied to the
/// others, a `group`-th of the products and of the weights read.
#[allow(clippy::too_many_arguments)]
pub fn forward_grouped<S: Scalar>(
    out: &mut [S],
    inp: &[S],
    w: &[S],
    b: &[S],
    n: usize,
    din: usize,
    hs: usize,
    group: usize,
) {
    let dout = b.len();
    if group == 1 {
        return forward(out, inp, w, b, n, din, dout);
    }
    let mut first = vec![S::zero(); n * hs];
    for start in (0..dout).step_by(group * hs) {
        forward(&mut first, inp, &w[start * din..(start + hs) * din], &b[start..start + hs], n, din, hs);
        for (row, head) in out.chunks_exact_mut(dout).zip(first.chunks_exact(hs)) {
            row[start..start + group * hs].chunks_exact_mut(hs).for_each(|h| h.copy_from_slice(head));
        }
    }
}

/// Sets (`beta` = 0) or adds to (`beta` = 1) the input's gradient `dinp = dy W`, and writes the
/// bias's `db = sum dy` whole. The weight's gradient is `backward_weight`'s: the data-parallel
/// shards take it over all their rows at once (`Model::weight_grads`).
#[allow(clippy::too_many_arguments)]
pub fn backward_input<S: Scalar>(
    dinp: &mut [S],
    beta: S,
    db: &mut [S],
    dy: &[S],
    w: &[S],
    n: usize,
    din: usize,
    dout: usize,
) {
    gemm(S::one(), MatRef::new(dy, n, dout), MatRef::new(w, dout, din), beta, MatMut::new(dinp, n, din));
    db.fill(S::zero());
    for row in dy.chunks_exact(dout) {
        for (g, &d) in db.iter_mut().zip(row) {
            *g += d;
        }
    }
}

/// Output rows of a weight's gradient computed as one product (`backward_weight`): a fixed number,
/// so how a gradient is cut never depends on the threads that share it out.
pub const WEIGHT_ROWS: usize = 256;

/// Writes (`beta` = 0) or adds to (`beta` = 1) the weight's gradient `dw = dy^T x` over `n` rows,
/// natively in pieces of `WEIGHT_ROWS` output rows dealt to `threads` threads: each piece is the
/// whole product's rows, to the bit (tested), so the thread count changes no bit.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
pub fn backward_weight<S: Scalar>(
    dw: &mut [S],
    beta: S,
    dy: &[S],
    x: &[S],
    n: usize,
    din: usize,
    dout: usize,
    threads: usize,
) {
    let (dy, x) = (MatRef::new(dy, n, dout), MatRef::new(x, n, din));
    let piece = |(i, dw): (usize, &mut [S])| {
        let rows = i * WEIGHT_ROWS..(i * WEIGHT_ROWS + dw.len() / din.max(1));
        gemm(S::one(), dy.block(0..n, rows.clone()).t(), x, beta, MatMut::new(dw, rows.len(), din));
    };
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 && dout > WEIGHT_ROWS && din > 0 {
        use rayon::prelude::*;
        return dw.par_chunks_mut(WEIGHT_ROWS * din).enumerate().for_each(piece);
    }
    dw.chunks_mut(WEIGHT_ROWS * din.max(1)).enumerate().for_each(piece);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(n: usize, din: usize, dout: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let w: Vec<f32> = (0..din * dout).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-3).collect();
        let b: Vec<f32> = (0..dout).map(|i| i as f32 * 1e-2).collect();
        let x: Vec<f32> = (0..n * din).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 1e-3).collect();
        (x, w, b)
    }

    #[test]
    fn a_split_layer_gives_the_whole_products_bits() {
        // Over the split's size, at one row (a token written) and at more rows than half the
        // inputs (the product cut in two halves); one row of a layer split for a row alone.
        assert!(1024 * 1040 >= SPLIT_WEIGHTS && (SPLIT_ROW_WEIGHTS..SPLIT_WEIGHTS).contains(&(576 * 576)));
        // Split by rows: many rows of a middle layer, of a grouped key head, and of a wide output.
        const { assert!(256 * 576 * 64 >= SPLIT_ROWS_PRODUCT && 130 * 32768 >= WIDE_OUTPUT) };
        let rows = [(256, 576, 576), (256, 576, 64), (130, 64, 32768)];
        for (n, din, dout) in [(1, 1024, 1040), (515, 1024, 1040), (1, 576, 576)].into_iter().chain(rows) {
            let (x, w, b) = layer(n, din, dout);
            let (mut split, mut whole) = (vec![0.0; n * dout], vec![0.0; n * dout]);
            forward(&mut split, &x, &w, &b, n, din, dout);
            forward_whole(&mut whole, &x, &w, &b, n, din, dout);
            assert!(split.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits()), "({n}, {din}, {dout})");
        }
    }

    #[test]
    fn every_route_is_the_product_with_its_bias() {
        // One row; few rows in a small layer (the usual product), in a middle one and in a split
        // one (out^T, its last block of fewer than 16 rows); many rows.
        let shapes = [
            (1, 96, 40),
            (19, 96, 40),
            (37, 300, 256),
            (37, 1024, 1040),
            (3, 8, 5),
            (515, 1024, 1040),
            (1, 576, 576),
            (133, 576, 120),
        ];
        for (n, din, dout) in shapes {
            let (x, w, b) = layer(n, din, dout);
            let mut out = vec![f32::NAN; n * dout];
            forward(&mut out, &x, &w, &b, n, din, dout);
            for i in 0..n {
                for j in 0..dout {
                    let want =
                        b[j] as f64 + (0..din).map(|k| x[i * din + k] as f64 * w[j * din + k] as f64).sum::<f64>();
                    let got = out[i * dout + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "({n}, {din}, {dout}) [{i}, {j}]: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn grouped_heads_are_the_product_with_the_repeated_rows() {
        // Six heads of 4 columns in groups of 3: the rows of heads 1, 2 repeat head 0's, 4, 5 head 3's.
        let (n, din, hs, group) = (5, 12, 4, 3);
        let (x, w, b) = layer(n, din, 2 * hs);
        let repeat = |t: &[f32], size: usize| -> Vec<f32> {
            t.chunks_exact(size).flat_map(|h| h.repeat(group)).collect::<Vec<f32>>()
        };
        let (w6, b6) = (repeat(&w, hs * din), repeat(&b, hs));
        let (mut grouped, mut every) = (vec![f32::NAN; n * 6 * hs], vec![f32::NAN; n * 6 * hs]);
        forward_grouped(&mut grouped, &x, &w6, &b6, n, din, hs, group);
        forward(&mut every, &x, &w6, &b6, n, din, 6 * hs);
        for (g, e) in grouped.iter().zip(&every) {
            assert!((g - e).abs() <= 1e-6 * (1.0 + e.abs()), "{g} vs {e}");
        }
        let mut one = vec![f32::NAN; n * 6 * hs];
        forward_grouped(&mut one, &x, &w6, &b6, n, din, hs, 1);
        assert_eq!(one, every, "groups of one are the plain product");
    }

    /// A weight's gradient in pieces of `WEIGHT_ROWS` output rows, on any number of threads, is the
    /// whole product's (`dy^T x` in one call) to the bit, set or added; and it is `dy^T x`.
    #[test]
    fn a_weight_gradient_in_pieces_is_the_whole_products() {
        for (n, din, dout) in [(32, 1024, 4096), (37, 96, WEIGHT_ROWS + 3), (300, 64, 40)] {
            let (x, _, _) = layer(n, din, 0);
            let dy: Vec<f32> = (0..n * dout).map(|i| ((i * 7919 % 1009) as f32 - 504.0) * 1e-4).collect();
            let mut whole = vec![0.5; dout * din];
            let (dyv, xv) = (MatRef::new(&dy, n, dout), MatRef::new(&x, n, din));
            gemm(1.0, dyv.t(), xv, 0.0, MatMut::new(&mut whole, dout, din));
            for threads in [1, 2, 3] {
                let mut pieces = vec![f32::NAN; dout * din];
                backward_weight(&mut pieces, 0.0, &dy, &x, n, din, dout, threads);
                assert!(pieces.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits()), "({n}, {din}, {dout})");
                let mut added = vec![0.5; dout * din];
                backward_weight(&mut added, 1.0, &dy, &x, n, din, dout, threads);
                let mut want = vec![0.5; dout * din];
                gemm(1.0, dyv.t(), xv, 1.0, MatMut::new(&mut want, dout, din));
                assert!(added.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "added ({n}, {din}, {dout})");
            }
            for (j, i) in [(0, 0), (dout - 1, din - 1), (dout / 2, din / 3)] {
                let want: f64 = (0..n).map(|r| dy[r * dout + j] as f64 * x[r * din + i] as f64).sum();
                assert!((whole[j * din + i] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()));
            }
        }
    }
}
