//! Each kernel family against the CPU function it mirrors (`crate::nn`), at sizes that cross
//! a workgroup's width; the matmul, the optimizers and the trainer test themselves beside their code.

use super::activation::Act;
use super::cross_entropy::{Buffers, CrossEntropy};
use super::elementwise::{Elementwise, REDUCE_GROUPS};
use super::embedding::{Embedding, Table};
use super::layer_norm::{Affine, LayerNorm};
use super::rotary::Rotary;
use super::softmax::Softmax;
use super::testing::*;
use crate::config::{Activation, NormKind};
use crate::nn::loss::{self, softmax_in_place};
use crate::nn::{activation, embedding, layer_norm, rotary};

#[test]
fn activations_match_cpu_forward_and_backward() {
    let ctx = ctx();
    let k = Act::new(&ctx);
    let n = 70_001;
    // Wide inputs reach GELU's saturated tails.
    let x: Vec<f32> = random(n, 1).iter().map(|v| v * 8.0).collect();
    let g = random(n, 2);
    let (gx, gg) = (ctx.tensor_from("x", &x).unwrap(), ctx.tensor_from("g", &g).unwrap());
    let out = ctx.tensor("out", n).unwrap();
    let all = [Activation::Gelu, Activation::Relu, Activation::Identity, Activation::GeluExact, Activation::Silu];
    for a in all {
        let mut want = vec![0.0; n];
        activation::forward(a, &mut want, &x);
        ctx.run(&[&k.forward(&ctx, a, &out, &gx)]);
        let ef = max_err(&read(&ctx, &out), &want);
        activation::backward(a, &mut want, &g, &x);
        ctx.run(&[&k.backward(&ctx, a, &out, &gg, &gx)]);
        let eb = max_err(&read(&ctx, &out), &want);
        eprintln!("{a:?}: forward error {ef:e}, backward error {eb:e}");
        assert!(ef < 1e-5 && eb < 1e-5, "{a:?}: {ef} {eb}");
    }
}

/// A real model's pieces: RMSNorm (no centring, its own epsilon), rotary positions, the gated
/// activation, each against the CPU's.
#[test]
fn rms_norm_rotary_and_the_gate_match_cpu() {
    let ctx = ctx();
    let (n, c) = (70, 300);
    let x: Vec<f32> = random(n * c, 2).iter().map(|v| 3.0 * v + 0.5).collect();
    let mut prm = random(2 * c, 1);
    prm[..c].iter_mut().for_each(|w| *w += 1.0);
    let (mut out, mut u, mut rstd) = (vec![0.0; n * c], vec![0.0; n * c], vec![0.0; n]);
    layer_norm::forward_as(NormKind::RmsNorm, 1e-6, &mut out, &mut u, &mut rstd, &x, &prm[..c], &prm[c..], c);
    let t = |d: &[f32]| ctx.tensor_from("t", d).unwrap();
    let (gx, gp) = (t(&x), t(&prm));
    let (gout, gu, grstd) =
        (ctx.tensor("out", n * c).unwrap(), ctx.tensor("u", n * c).unwrap(), ctx.tensor("r", n).unwrap());
    let a = Affine { w_off: 0, b_off: c, eps: 1e-6, centre: false };
    let unused = ctx.tensor("grads", 1).unwrap();
    ctx.run(&[&LayerNorm::new(&ctx).forward(&ctx, &gout, &gu, &grstd, &gx, &gp, &unused, a, n, c)]);
    let errs = [max_err(&read(&ctx, &gout), &out), max_err(&read(&ctx, &gu), &u), max_err(&read(&ctx, &grstd), &rstd)];
    assert!(errs.iter().all(|&e| e < 1e-4), "RMSNorm: {errs:?}");

    // 70 rows of 5 positions (14 batch rows), 6 heads of 50 with 20 turned, at angles up to 4 rad.
    let (t_len, nh, hs, dims) = (5, 6, 50, 20);
    let mut want = x.clone();
    let inv = rotary::frequencies(dims, 100.0, crate::config::RopeScaling::None);
    rotary::forward(&mut want, t_len, 0, nh, hs, &inv);
    let (gq, table) = (t(&x), Rotary::upload(&ctx, t_len, &inv).unwrap());
    ctx.run(&[&Rotary::new(&ctx).forward(&ctx, &gq, &table, n, t_len, nh, hs, dims)]);
    let e = max_err(&read(&ctx, &gq), &want);
    assert!(e < 1e-5, "rotary: {e}");

    // The gate: act(gate) * up.
    let (gate, up) = (&x[..n * c / 2], &x[n * c / 2..]);
    let mut act = vec![0.0; gate.len()];
    activation::forward(Activation::Silu, &mut act, gate);
    let want: Vec<f32> = act.iter().zip(up).map(|(a, u)| a * u).collect();
    let (gg, gu2, go) = (t(gate), t(up), ctx.tensor("o", gate.len()).unwrap());
    ctx.run(&[&Act::new(&ctx).gated(&ctx, Activation::Silu, &go, &gg, &gu2)]);
    let e = max_err(&read(&ctx, &go), &want);
    assert!(e < 1e-5, "gated SiLU: {e}");
}

#[test]
fn cross_entropy_matches_cpu_forward_and_backward() {
    let ctx = ctx();
    let k = CrossEntropy::new(&ctx);
    // v = 300 spans two passes of a workgroup; every 4th target is ignored.
    for (n, v) in [(50, 300), (129, 11)] {
        let logits: Vec<f32> = random(n * v, 1).iter().map(|x| 4.0 * x).collect();
        let targets: Vec<u32> = (0..n).map(|i| if i % 4 == 3 { loss::IGNORE } else { ((i * 7) % v) as u32 }).collect();
        let mut probs = logits.clone();
        let (mean, count) = loss::forward(&mut probs, &targets, v);
        let mut dl = vec![0.0; n * v];
        loss::backward(&mut dl, &probs, &targets, count, v);

        let gp = ctx.tensor_from("logits", &logits).unwrap();
        let gt = ctx.tensor_from("targets", &targets).unwrap();
        let (rows, stats, gd) =
            (ctx.tensor("rows", 2 * n).unwrap(), ctx.tensor("stats", 2).unwrap(), ctx.tensor("d", n * v).unwrap());
        let b = Buffers { probs: &gp, targets: &gt, rows: &rows, stats: &stats, dlogits: &gd };
        let [f1, f2] = k.forward(&ctx, &b, n, v);
        let bw = k.backward(&ctx, &b, n, v);
        ctx.run(&[&f1, &f2, &bw]);
        let s = read(&ctx, &stats);
        let errs = [max_err(&read(&ctx, &gp), &probs), max_err(&read(&ctx, &gd), &dl), (s[0] - mean).abs() / mean];
        eprintln!("cross-entropy n={n} v={v}: probs, dlogits, relative loss errors {errs:?}");
        assert_eq!(s[1], count as f32);
        assert!(errs.iter().all(|&e| e < 1e-5), "{errs:?}");
    }
}

#[test]
fn elementwise_kernels_match_cpu() {
    let ctx = ctx();
    let k = Elementwise::new(&ctx);
    let (rows, cols) = (37, 300);
    let x = random(rows * cols + 5, 1);
    let y = random(rows * cols, 2);
    let (gx, gy) = (ctx.tensor_from("x", &x).unwrap(), ctx.tensor_from("y", &y).unwrap());
    ctx.run(&[&k.add(&ctx, (&gx, 5), (&gy, 0), rows * cols)]);
    let want: Vec<f32> = y.iter().zip(&x[5..]).map(|(a, b)| a + b).collect();
    assert_eq!(read(&ctx, &gy), want, "add is exact");

    ctx.run(&[&k.broadcast_rows(&ctx, (&gx, 3), &gy, rows, cols)]);
    let want: Vec<f32> = (0..rows * cols).map(|i| x[3 + i % cols]).collect();
    assert_eq!(read(&ctx, &gy), want, "broadcast is exact");

    let acc = random(cols + 2, 3);
    let gacc = ctx.tensor_from("acc", &acc).unwrap();
    ctx.run(&[&k.col_sum(&ctx, &gx, (&gacc, 2), rows, cols)]);
    let mut want = acc.clone();
    for r in 0..rows {
        for j in 0..cols {
            want[2 + j] += x[r * cols + j];
        }
    }
    let err = max_err(&read(&ctx, &gacc), &want);
    assert!(err < 1e-5, "col_sum error {err}");

    let n = 100_003;
    let big = random(n, 4);
    let gbig = ctx.tensor_from("big", &big).unwrap();
    let partials = ctx.tensor("partials", REDUCE_GROUPS).unwrap();
    let out = ctx.tensor("out", 1).unwrap();
    for square in [false, true] {
        let ops = k.sum(&ctx, &gbig, n, square, &partials, &out);
        ctx.run(&[&ops[0], &ops[1]]);
        let want: f64 = big.iter().map(|&v| if square { v as f64 * v as f64 } else { v as f64 }).sum();
        let got = read(&ctx, &out)[0] as f64;
        let rel = (got - want).abs() / want.abs().max(1.0);
        eprintln!("reduce square={square}: {got} vs {want}, rel {rel:e}");
        assert!(rel < 1e-5, "reduction error {rel}");
    }
}

#[test]
fn embedding_matches_cpu_gather_and_scatter_add() {
    let ctx = ctx();
    let k = Embedding::new(&ctx);
    let (v, t, c, b) = (13, 9, 70, 5);
    let n = b * t;
    let tab = Table { v, t, c, wte_off: 3, wpe_off: 3 + v * c, learned: true };
    let prm = random(3 + (v + t) * c + 4, 1);
    let tokens: Vec<u32> = (0..n).map(|i| ((i * i + 3) % v) as u32).collect();
    let dout = random(n * c, 2);
    let g0 = random(prm.len(), 3);
    let mut out = vec![0.0; n * c];
    let (wte, wpe) = prm[3..3 + (v + t) * c].split_at(v * c);
    embedding::forward(&mut out, &tokens, wte, wpe, t, c);
    let mut g = g0.clone();
    let (dwte, dwpe) = g[3..3 + (v + t) * c].split_at_mut(v * c);
    embedding::backward(dwte, dwpe, &dout, &tokens, t, c);

    let (gp, gt, gd, gg) = (
        ctx.tensor_from("p", &prm).unwrap(),
        ctx.tensor_from("tok", &tokens).unwrap(),
        ctx.tensor_from("dout", &dout).unwrap(),
        ctx.tensor_from("g", &g0).unwrap(),
    );
    let gout = ctx.tensor("out", n * c).unwrap();
    ctx.run(&[&k.forward(&ctx, &gout, &gt, &gp, tab, n), &k.backward(&ctx, &gg, &gd, &gt, tab, n)]);
    assert_eq!(read(&ctx, &gout), out, "the gather is exact");
    let err = max_err(&read(&ctx, &gg), &g);
    eprintln!("embedding scatter-add error {err:e}");
    assert!(err < 1e-5, "{err}");
}

#[test]
fn layer_norm_matches_cpu_forward_and_backward() {
    let ctx = ctx();
    let k = LayerNorm::new(&ctx);
    // c = 300 is wider than a workgroup; c = 24 narrower.
    for (n, c) in [(45, 300), (130, 24)] {
        // Parameters sit at odd offsets inside a bigger flat buffer, as in the model.
        let (w_off, b_off) = (7, 7 + c);
        let mut prm = random(2 * c + 20, 1);
        prm[w_off..w_off + c].iter_mut().for_each(|w| *w += 1.0);
        let x: Vec<f32> = random(n * c, 2).iter().map(|v| 3.0 * v + 0.5).collect();
        let dy = random(n * c, 3);
        let dx0 = random(n * c, 4);
        let g0 = random(prm.len(), 5);
        let (w, b) = (&prm[w_off..w_off + c], &prm[b_off..b_off + c]);
        let (mut out, mut u, mut rstd) = (vec![0.0; n * c], vec![0.0; n * c], vec![0.0; n]);
        layer_norm::forward(&mut out, &mut u, &mut rstd, &x, w, b, c);
        let (mut dx, mut g) = (dx0.clone(), g0.clone());
        let (gw, gb) = g[w_off..b_off + c].split_at_mut(c);
        layer_norm::backward(&mut dx, gw, gb, &dy, &u, &rstd, w, c);

        let t = |d: &[f32]| ctx.tensor_from("t", d).unwrap();
        let (gx, gp, gdy, gdx, gg) = (t(&x), t(&prm), t(&dy), t(&dx0), t(&g0));
        let (gout, gu, grstd) =
            (ctx.tensor("out", n * c).unwrap(), ctx.tensor("u", n * c).unwrap(), ctx.tensor("rstd", n).unwrap());
        let a = Affine::layer_norm(w_off, b_off);
        let fwd = k.forward(&ctx, &gout, &gu, &grstd, &gx, &gp, &gg, a, n, c);
        let [rows, cols] = k.backward(&ctx, &gdx, &gg, &gdy, &gu, &grstd, &gp, a, n, c);
        ctx.run(&[&fwd, &rows, &cols]);
        let errs = [
            max_err(&read(&ctx, &gout), &out),
            max_err(&read(&ctx, &gu), &u),
            max_err(&read(&ctx, &grstd), &rstd),
            max_err(&read(&ctx, &gdx), &dx),
            max_err(&read(&ctx, &gg), &g),
        ];
        eprintln!("layer norm n={n} c={c}: out, u, rstd, dx, dparams errors {errs:?}");
        assert!(errs.iter().all(|&e| e < 1e-4), "{errs:?}");
    }
}

#[test]
fn masked_softmax_matches_cpu_forward_and_backward() {
    let ctx = ctx();
    let k = Softmax::new(&ctx);
    // t = 300 spans more than one pass of the 256-wide workgroup.
    for (t, bh, causal) in [(300, 2, true), (7, 5, false), (33, 3, true)] {
        let rows = bh * t;
        let s: Vec<f32> = random(rows * t, t as u64).iter().map(|v| v * 5.0).collect();
        let dp = random(rows * t, 1);
        let mut want = s.clone();
        for (r, row) in want.chunks_exact_mut(t).enumerate() {
            let visible = if causal { r % t + 1 } else { t };
            softmax_in_place(&mut row[..visible]);
            row[visible..].fill(0.0);
        }
        let mut want_ds = dp.clone();
        for (d, p) in want_ds.chunks_exact_mut(t).zip(want.chunks_exact(t)) {
            let dot: f32 = d.iter().zip(p).map(|(a, b)| a * b).sum();
            d.iter_mut().zip(p).for_each(|(x, &pp)| *x = pp * (*x - dot));
        }
        let (gs, gdp) = (ctx.tensor_from("s", &s).unwrap(), ctx.tensor_from("dp", &dp).unwrap());
        ctx.run(&[&k.forward(&ctx, &gs, rows, t, causal)]);
        let ef = max_err(&read(&ctx, &gs), &want);
        ctx.run(&[&k.backward(&ctx, &gdp, &gs, rows, t)]);
        let eb = max_err(&read(&ctx, &gdp), &want_ds);
        eprintln!("softmax t={t} causal={causal}: forward {ef:e}, backward {eb:e}");
        assert!(ef < 1e-5 && eb < 1e-5, "t={t}: {ef} {eb}");
    }
}
