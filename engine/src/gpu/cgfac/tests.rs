use super::super::testing::*;
use super::*;
use crate::nn::matmul::{gemm, MatMut, MatRef};
use crate::optim::cg::{self, CgWork};
use crate::optim::kronecker::{self, Operands, Product, Scratch};
use crate::optim::second_order::{update_a_factor, Method};

const TOKENS: usize = 37;
/// Scored tokens of the batch: fewer than its positions, as on the algorithmic tasks.
const SCORED: usize = 29;

/// One layer inside the 64-wide matmul tile and one straddling it.
fn solver(ctx: &GpuContext) -> Solver {
    solver_for(ctx, Product::Factors)
}

fn solver_for(ctx: &GpuContext, product: Product) -> Solver {
    let shapes = [("small".to_string(), 6, 5, 0, 0), ("wide".to_string(), 70, 67, 0, 0)];
    Solver::new(ctx, &shapes, &ctx.tensor("norm", 1).unwrap(), product, TOKENS, SCORED).unwrap()
}

/// Replaces `len` values of `t` from `at`.
fn put(ctx: &GpuContext, t: &Tensor, at: usize, v: &[f32]) {
    let mut all = read(ctx, t);
    all[at..at + v.len()].copy_from_slice(v);
    ctx.write(t, &all);
}

/// A batch's inputs (n, din) and mean-loss output gradients (n, dout), and the CPU factors
/// `second_order` builds from them, blended into `a`, `g` with weight `keep`.
fn cpu_factors(l: &Layer, seed: u64, keep: f32, a: &mut [f32], g: &mut [f32]) -> (Vec<f32>, Vec<f32>) {
    let inp = random(TOKENS * l.din, seed);
    let dy: Vec<f32> = random(TOKENS * l.dout, seed + 1).iter().map(|x| x / TOKENS as f32).collect();
    let mut aa = vec![0.0; l.din1() * l.din1()];
    update_a_factor(a, &mut aa, &inp, TOKENS, l.din, keep);
    let mut g1 = vec![0.0; dy.len()];
    curvature::per_token(&mut g1, &dy, SCORED);
    let m = MatRef::new(&g1, TOKENS, l.dout);
    gemm((1.0 - keep) / SCORED as f32, m.t(), m, keep, MatMut::new(g, l.dout, l.dout));
    (inp, dy)
}

/// Uploads fresh factors for every layer; returns them as the CPU holds them.
fn load_factors(ctx: &GpuContext, s: &Solver) -> Vec<(Vec<f32>, Vec<f32>)> {
    let mut all = vec![0.0; s.factors.len];
    let out = (s.layers.iter().enumerate())
        .map(|(i, l)| {
            let (mut a, mut g) = (vec![0.0; l.din1() * l.din1()], vec![0.0; l.dout * l.dout]);
            cpu_factors(l, 100 + i as u64, 0.0, &mut a, &mut g);
            all[l.a..l.a + a.len()].copy_from_slice(&a);
            all[l.g..l.g + g.len()].copy_from_slice(&g);
            (a, g)
        })
        .collect();
    ctx.write(&s.factors, &all);
    out
}

#[test]
fn factor_updates_match_cpu() {
    let ctx = ctx();
    let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
    let mut worst = 0.0f32;
    for l in &s.layers {
        let (mut a, mut g) = (vec![0.0; l.din1() * l.din1()], vec![0.0; l.dout * l.dout]);
        // The first update replaces, the next ones blend with the factor decay.
        for (k, keep) in [0.0, 0.95, 0.95].into_iter().enumerate() {
            let (inp, dy) = cpu_factors(l, 10 * k as u64, keep, &mut a, &mut g);
            let (gi, gd) = (ctx.tensor_from("inp", &inp).unwrap(), ctx.tensor_from("dy", &dy).unwrap());
            let ops = s.factor_ops(&ctx, &mm, l, &gi, &gd, (TOKENS, SCORED), keep);
            ctx.run(&ops.iter().collect::<Vec<_>>());
            let f = read(&ctx, &s.factors);
            let ea = max_err(&f[l.a..l.a + a.len()], &a);
            let eg = max_err(&f[l.g..l.g + g.len()], &g);
            assert!(ea < 1e-5 && eg < 1e-5, "{} update {k}: A {ea}, G {eg}", l.name);
            worst = worst.max(ea).max(eg);
        }
    }
    eprintln!("factor updates: max error {worst:e}");
}

#[test]
fn factors_product_matches_kronecker_apply() {
    let ctx = ctx();
    let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
    let factors = load_factors(&ctx, &s);
    let lambda = 0.01;
    let mut worst = 0.0f32;
    for (i, (l, (a, g))) in s.layers.iter().zip(&factors).enumerate() {
        let x = random(l.size(), 7 + i as u64);
        put(&ctx, &s.vecs, l.p, &x);
        ctx.run(&s.product(&ctx, &mm, l, l.p, l.ap, lambda).iter().collect::<Vec<_>>());
        let ops =
            Operands { dout: l.dout, din1: l.din1(), n: 0, m: 0, a_factor: a, g_factor: g, a_batch: &[], g_batch: &[] };
        let mut want = vec![0.0; l.size()];
        kronecker::apply(Product::Factors, &mut want, &x, &ops, lambda, &mut Scratch::new(0, l.dout, l.din1()));
        let err = max_err(&read(&ctx, &s.vecs)[l.ap..l.ap + l.size()], &want);
        assert!(err < 1e-5, "{}: {err}", l.name);
        worst = worst.max(err);
    }
    eprintln!("factors product: max error {worst:e}");
}

/// The matrix-free products against `kronecker::apply` on random layers (one inside the 64-wide
/// matmul tile, one straddling it; 37 tokens), the batch stored by `batch_ops` from random inputs
/// and output gradients. The error is relative to the largest output value.
fn batch_product_error(product: Product) -> f32 {
    let ctx = ctx();
    let (mm, s) = (Matmul::new(&ctx), solver_for(&ctx, product));
    let lambda = 0.01;
    let mut worst = 0.0f32;
    for (i, l) in s.layers.iter().enumerate() {
        let inp = random(TOKENS * l.din, 20 + i as u64);
        let dy: Vec<f32> = random(TOKENS * l.dout, 30 + i as u64).iter().map(|x| x / TOKENS as f32).collect();
        let (gi, gd) = (ctx.tensor_from("inp", &inp).unwrap(), ctx.tensor_from("dy", &dy).unwrap());
        let x = random(l.size(), 7 + i as u64);
        put(&ctx, &s.vecs, l.p, &x);
        let mut ops = s.batch_ops(&ctx, l, &gi, &gd);
        ops.extend(s.product(&ctx, &mm, l, l.p, l.ap, lambda));
        ctx.run(&ops.iter().collect::<Vec<_>>());
        let (mut a1, mut g1) = (vec![0.0; TOKENS * l.din1()], vec![0.0; TOKENS * l.dout]);
        curvature::fold_bias(&mut a1, &inp, l.din);
        curvature::per_token(&mut g1, &dy, SCORED);
        let ops = Operands {
            dout: l.dout,
            din1: l.din1(),
            n: TOKENS,
            m: SCORED,
            a_factor: &[],
            g_factor: &[],
            a_batch: &a1,
            g_batch: &g1,
        };
        let mut want = vec![0.0; l.size()];
        kronecker::apply(product, &mut want, &x, &ops, lambda, &mut Scratch::new(TOKENS, l.dout, l.din1()));
        let got = &read(&ctx, &s.vecs)[l.ap..l.ap + l.size()];
        let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let err = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max) / scale;
        eprintln!("{product:?} {}: max |F x| {scale:e}, relative error {err:e}", l.name);
        worst = worst.max(err);
    }
    worst
}

#[test]
fn matrix_free_product_matches_kronecker_apply() {
    let err = batch_product_error(Product::MatrixFree);
    assert!(err < 1e-5, "matrix-free product: {err}");
}

#[test]
fn exact_fisher_product_matches_kronecker_apply() {
    let err = batch_product_error(Product::ExactFisher);
    assert!(err < 1e-5, "exact-Fisher product: {err}");
}

/// `fisher_rows` with fewer workgroups than rows (each strides over several, as past
/// `ROW_GROUPS` rows) and a row longer than a workgroup.
#[test]
fn fisher_rows_strides_over_the_rows() {
    let ctx = ctx();
    let s = solver_for(&ctx, Product::ExactFisher);
    let (n, d) = (TOKENS, 300);
    let (pm, am) = (random(n * d, 1), random(n * d, 2));
    let (tp, ta) = (ctx.tensor_from("p", &pm).unwrap(), ctx.tensor_from("a", &am).unwrap());
    let w = Words { rows: n, cols: d, f: [0.5, 0.0, 0.0, 0.0], ..Words::default() };
    ctx.run(&[&s.op(&ctx, Entry::FisherRows, &tp, &ta, w, [5, 1, 1])]);
    let want: Vec<f32> = (pm.chunks_exact(d).zip(am.chunks_exact(d)))
        .flat_map(|(pr, ar)| {
            let sn = 0.5 * pr.iter().zip(ar).map(|(x, y)| x * y).sum::<f32>();
            ar.iter().map(move |y| sn * y)
        })
        .collect();
    let err = max_err(&read(&ctx, &tp), &want);
    assert!(err < 1e-5, "fisher rows: {err}");
}

/// Runs the GPU solve (all `max_iters` iterations recorded, the status flags freezing each layer
/// when it stops) and the fallback, against `cg::solve` with `kronecker::apply` on the CPU.
/// Returns the worst error in x and the worst relative difference of the final residuals.
fn solve_against_cpu(cfg: &SecondOrderConfig) -> (f32, f64, Vec<CgOutcome>) {
    let ctx = ctx();
    let (mm, s) = (Matmul::new(&ctx), solver(&ctx));
    let factors = load_factors(&ctx, &s);
    let grads: Vec<Vec<f32>> = (s.layers.iter().enumerate())
        .map(|(i, l)| random(l.size(), 50 + i as u64).iter().map(|x| x * 1e-2).collect())
        .collect();
    let mut vecs = vec![0.0; s.vecs.len];
    for (l, g) in s.layers.iter().zip(&grads) {
        vecs[l.grad..l.grad + l.size()].copy_from_slice(g);
    }
    ctx.write(&s.vecs, &vecs);
    let mut ops = Vec::new();
    for l in &s.layers {
        ops.extend(s.solve_init(&ctx, &mm, l, cfg));
    }
    for _ in 0..cfg.max_iters {
        for l in &s.layers {
            ops.extend(s.solve_iteration(&ctx, &mm, l, cfg));
        }
    }
    for l in &s.layers {
        ops.extend(s.fallback(&ctx, l));
    }
    ctx.run(&ops.iter().collect::<Vec<_>>());
    let (got, sc) = (read(&ctx, &s.vecs), read(&ctx, &s.sc));
    let (mut ex, mut er, mut outcomes) = (0.0f32, 0.0f64, Vec::new());
    for ((l, (a, g)), grad) in s.layers.iter().zip(&factors).zip(&grads) {
        let ops =
            Operands { dout: l.dout, din1: l.din1(), n: 0, m: 0, a_factor: a, g_factor: g, a_batch: &[], g_batch: &[] };
        let mut scratch = Scratch::new(0, l.dout, l.din1());
        let mut x = vec![0.0; l.size()];
        let lambda = cfg.damping;
        let out = cg::solve(
            |v, o| kronecker::apply(Product::Factors, o, v, &ops, lambda, &mut scratch),
            grad,
            &mut x,
            cfg.max_iters,
            cfg.tol as f64,
            &mut CgWork::new(l.size()),
        );
        if out.diverged {
            x.copy_from_slice(grad);
        }
        eprintln!("{}: cpu {out:?}, gpu iterations {} rel {}", l.name, sc[l.slot + ITERS], sc[l.slot + REL]);
        assert_eq!(sc[l.slot + ITERS] as usize, out.iterations, "{}: iterations", l.name);
        assert_eq!(sc[l.slot + STATUS] == DIVERGED, out.diverged, "{}: divergence", l.name);
        assert_eq!(sc[l.slot + FELL] != 0.0, out.diverged, "{}: fallback", l.name);
        ex = ex.max(max_err(&got[l.x..l.x + l.size()], &x));
        if !out.diverged {
            er = er.max((sc[l.slot + REL] as f64 - out.rel_residual).abs() / out.rel_residual);
        }
        outcomes.push(out);
    }
    (ex, er, outcomes)
}

#[test]
fn gpu_cg_matches_cpu_solve() {
    let mut cfg = SecondOrderConfig::new(Method::CgFac);
    // The defaults (tolerance 1e-2, up to 10 iterations) and a tight tolerance that runs to the cap.
    for (tol, iters) in [(cfg.tol, cfg.max_iters), (1e-8, 6)] {
        (cfg.tol, cfg.max_iters) = (tol, iters);
        let (ex, er, outcomes) = solve_against_cpu(&cfg);
        eprintln!("cg tol {tol} max {iters}: x error {ex:e}, residual rel {er:e}");
        assert!(outcomes.iter().all(|o| !o.diverged && o.iterations > 0));
        assert!(ex < 1e-4 && er < 1e-3, "x {ex}, residual {er}");
    }
}

#[test]
fn negative_curvature_falls_back_to_the_gradient() {
    let mut cfg = SecondOrderConfig::new(Method::CgFac);
    // A damping far below the factors' scale makes p^T (A ⊗ G + lambda I) p negative.
    cfg.damping = -10.0;
    let (ex, _, outcomes) = solve_against_cpu(&cfg);
    assert!(outcomes.iter().all(|o| o.diverged), "{outcomes:?}");
    assert_eq!(ex, 0.0, "x is the gradient, exactly");
}
