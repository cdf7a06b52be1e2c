//! Launches past WebGPU's 65535 workgroups per grid dimension (attention's softmax at batch 64 x 8
//! heads x context 128 has 65,536 rows; a matmul can have as many batch-head pairs). Each kernel
//! runs on more rows or batches than that and must match the CPU on them and leave the memory
//! past them alone: sentinel values after the last row show any write by the grid's spare
//! workgroups.

use super::cross_entropy::{Buffers, CrossEntropy};
use super::layer_norm::{Affine, LayerNorm};
use super::matmul::{Dims, Matmul, Tiling, View};
use super::softmax::Softmax;
use super::testing::*;
use crate::nn::{layer_norm, loss};

/// Rows past one grid dimension; the spill into y leaves 2 * 65535 - ROWS spare workgroups.
const ROWS: usize = 70_000;
const SENTINEL: f32 = 7.25;

/// `data` followed by room for every spare workgroup's row of `width`, filled with the sentinel.
fn padded(data: &[f32], width: usize) -> Vec<f32> {
    let spare = (2 * 65535 - ROWS) * width;
    data.iter().copied().chain(std::iter::repeat_n(SENTINEL, spare)).collect()
}

/// The first `len` values against `want`, and every value after them still the sentinel.
fn check(got: &[f32], want: &[f32], what: &str) {
    let err = max_err(&got[..want.len()], want);
    let touched = got[want.len()..].iter().filter(|&&x| x != SENTINEL).count();
    eprintln!("{what}: {ROWS} rows, max error {err:e}, {touched} values written past the end");
    assert!(err < 1e-5, "{what}: error {err}");
    assert_eq!(touched, 0, "{what} wrote past its last row");
}

#[test]
fn softmax_past_65535_rows() {
    let (ctx, t) = (ctx(), 4);
    let k = Softmax::new(&ctx);
    let s = random(ROWS * t, 1);
    let mut want = s.clone();
    for (r, row) in want.chunks_exact_mut(t).enumerate() {
        let visible = r % t + 1;
        loss::softmax_in_place(&mut row[..visible]);
        row[visible..].fill(0.0);
    }
    let gs = ctx.tensor_from("s", &padded(&s, t)).unwrap();
    ctx.run(&[&k.forward(&ctx, &gs, ROWS, t, true)]);
    check(&read(&ctx, &gs), &want, "softmax forward");
    let gdp = ctx.tensor_from("dp", &padded(&s, t)).unwrap();
    let p = ctx.tensor_from("p", &padded(&want, t)).unwrap();
    ctx.run(&[&k.backward(&ctx, &gdp, &p, ROWS, t)]);
    let mut want_ds = s.clone();
    for (d, p) in want_ds.chunks_exact_mut(t).zip(want.chunks_exact(t)) {
        let dot: f32 = d.iter().zip(p).map(|(a, b)| a * b).sum();
        d.iter_mut().zip(p).for_each(|(x, &pp)| *x = pp * (*x - dot));
    }
    check(&read(&ctx, &gdp), &want_ds, "softmax backward");
}

#[test]
fn layer_norm_past_65535_rows() {
    let (ctx, c) = (ctx(), 4);
    let k = LayerNorm::new(&ctx);
    let x = random(ROWS * c, 2);
    let prm: Vec<f32> = (0..2 * c).map(|i| if i < c { 1.0 + 0.1 * i as f32 } else { 0.05 * i as f32 }).collect();
    let (mut out, mut u, mut rstd) = (vec![0.0; ROWS * c], vec![0.0; ROWS * c], vec![0.0; ROWS]);
    layer_norm::forward(&mut out, &mut u, &mut rstd, &x, &prm[..c], &prm[c..], c);
    let t = |d: &[f32], w: usize| ctx.tensor_from("t", &padded(d, w)).unwrap();
    let zeros = vec![0.0; ROWS * c];
    let (gx, gout, gu, grstd) = (t(&x, c), t(&zeros, c), t(&zeros, c), t(&zeros[..ROWS], 1));
    let (gp, gg) = (ctx.tensor_from("prm", &prm).unwrap(), ctx.tensor("g", 2 * c).unwrap());
    ctx.run(&[&k.forward(&ctx, &gout, &gu, &grstd, &gx, &gp, &gg, Affine::layer_norm(0, c), ROWS, c)]);
    check(&read(&ctx, &gout), &out, "layer norm output");
    check(&read(&ctx, &grstd), &rstd, "layer norm 1/std");
}

#[test]
fn cross_entropy_past_65535_rows() {
    let (ctx, v) = (ctx(), 3);
    let k = CrossEntropy::new(&ctx);
    let logits = random(ROWS * v, 3);
    let targets: Vec<u32> = (0..ROWS).map(|i| (i % v) as u32).collect();
    let mut probs = logits.clone();
    let (mean, _) = loss::forward(&mut probs, &targets, v);
    let gp = ctx.tensor_from("logits", &padded(&logits, v)).unwrap();
    let gt = ctx.tensor_from("targets", &targets).unwrap();
    let rows = ctx.tensor_from("rows", &padded(&vec![0.0; 2 * ROWS], 2)).unwrap();
    let (stats, gd) = (ctx.tensor("stats", 2).unwrap(), ctx.tensor("d", ROWS * v).unwrap());
    let b = Buffers { probs: &gp, targets: &gt, rows: &rows, stats: &stats, dlogits: &gd };
    let [f1, f2] = k.forward(&ctx, &b, ROWS, v);
    ctx.run(&[&f1, &f2]);
    check(&read(&ctx, &gp), &probs, "cross-entropy probabilities");
    let s = read(&ctx, &stats);
    assert!((s[0] - mean).abs() < 1e-4 * mean, "mean loss {} vs {mean}", s[0]);
    assert_eq!(s[1], ROWS as f32);
    let r = read(&ctx, &rows);
    assert!(r[2 * ROWS..].iter().all(|&x| x == SENTINEL), "cross-entropy wrote per-row losses past its rows");
}

/// Both tilings: the square tiles on (2 x 3) by (3 x 2) products, the wide ones on (4 x 4) by
/// (4 x 4), the smallest in vec4s.
#[test]
fn matmul_past_65535_batches() {
    let ctx = ctx();
    let k = Matmul::new(&ctx);
    for (tiling, m, kk, n) in [(Tiling::Square64, 2, 3, 2), (Tiling::Wide128, 4, 4, 4)] {
        let (a, b) = (random(ROWS * m * kk, 4), random(ROWS * kk * n, 5));
        let want: Vec<f32> = (0..ROWS)
            .flat_map(|z| {
                let (a, b) = (&a[z * m * kk..], &b[z * kk * n..]);
                (0..m * n).map(move |e| (0..kk).map(|l| a[e / n * kk + l] * b[l * n + e % n]).sum::<f32>())
            })
            .collect();
        let (ga, gb) = (ctx.tensor_from("a", &a).unwrap(), ctx.tensor_from("b", &b).unwrap());
        let gc = ctx.tensor_from("c", &padded(&vec![0.0; ROWS * m * n], m * n)).unwrap();
        let d = Dims::new(m, n, kk).batched(ROWS, 1);
        let view = |cols: usize, size: usize| View::rows(0, cols).batched(size, 0);
        let (va, vb, vc) = (view(kk, m * kk), view(n, kk * n), view(n, m * n));
        ctx.run(&[&k.op_tiled(&ctx, tiling, d, 1.0, (&ga, va), (&gb, vb), 0.0, (&gc, vc))]);
        check(&read(&ctx, &gc), &want, &format!("batched matmul, {tiling:?}"));
    }
}
