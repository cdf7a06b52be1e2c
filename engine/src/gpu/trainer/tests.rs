//! The GPU trainer against the CPU reference: the same losses, parameters and optimizer state, step
//! by step, for every optimizer the GPU runs; state handed over both ways; a lost device.

use super::super::block_on;
use super::super::testing::*;
use super::*;
use crate::config::{Activation, OptimizerConfig};
use crate::optim::kronecker::Product;
use crate::optim::second_order::{Method, SecondOrderConfig};
use crate::Trainer;

fn config(act: Activation, causal: bool, optimizer: OptimizerConfig, steps: usize) -> TrainConfig {
    let mut cfg = TrainConfig::browser_default();
    cfg.model =
        ModelConfig { d_model: 32, heads: 4, layers: 2, d_ff: 72, context: 24, activation: act, causal, ..cfg.model };
    cfg.batch = 3;
    cfg.steps = steps;
    cfg.optimizer = optimizer;
    cfg
}

/// The worst relative differences of loss and gradient norm over the steps, and the parameters'
/// (`max_err`) at the end.
#[derive(Clone, Copy, Debug, Default)]
struct Gap {
    loss: f32,
    grad_norm: f32,
    params: f32,
}

/// What the GPU's f32 kernels differ from the CPU by on lavapipe (AdamW and SGD, six steps of the
/// model below): loss 7.6e-8, gradient norm 1.1e-7, parameters 1.6e-6. The bounds leave about
/// 10x room; a 0.1% error in the update fails them (`a_slightly_wrong_update_fails_parity`).
const BOUNDS: Gap = Gap { loss: 1e-6, grad_norm: 1e-6, params: 2e-5 };

/// Steps both trainers in lockstep, comparing each step's loss and gradient norm.
fn lockstep(cpu: &mut Trainer, gpu: &mut GpuTrainer, steps: usize) -> Gap {
    let mut worst = Gap::default();
    for _ in 0..steps {
        let (c, g) = (cpu.step().unwrap(), block_on(gpu.step_read()).unwrap().0);
        assert_eq!(c.step, g.step);
        let el = (c.loss - g.loss).abs() / c.loss;
        let en = (c.grad_norm - g.grad_norm).abs() / c.grad_norm;
        eprintln!("step {}: loss cpu {} gpu {} (rel {el:e}), grad norm rel {en:e}", c.step, c.loss, g.loss);
        worst = Gap { loss: worst.loss.max(el), grad_norm: worst.grad_norm.max(en), ..worst };
    }
    worst
}

/// The CPU trainer on `cfg` and the GPU trainer on `gpu_cfg`, side by side.
fn gap(cfg: TrainConfig, gpu_cfg: TrainConfig) -> Gap {
    let mut cpu = Trainer::new(cfg.clone()).unwrap();
    let mut gpu = GpuTrainer::new(ctx(), gpu_cfg).unwrap();
    let worst = lockstep(&mut cpu, &mut gpu, cfg.steps);
    let g = Gap { params: max_err(&block_on(gpu.params()).unwrap(), &cpu.model().params), ..worst };
    eprintln!("{}: {g:?}", cfg.optimizer.name());
    g
}

fn within(g: Gap, bounds: Gap) -> bool {
    g.loss < bounds.loss && g.grad_norm < bounds.grad_norm && g.params < bounds.params
}

fn parity(cfg: TrainConfig) {
    let g = gap(cfg.clone(), cfg);
    assert!(within(g, BOUNDS), "{g:?} beyond {BOUNDS:?}");
}

/// The bounds catch a GPU update that is 0.1% off (its learning rate scaled by 1.001), the size
/// of AdamW scaling error an earlier version of the kernel had.
#[test]
fn a_slightly_wrong_update_fails_parity() {
    for optimizer in [OptimizerConfig::adam(), OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.01 }] {
        let cfg = config(Activation::Gelu, true, optimizer, 6);
        let wrong = TrainConfig { lr: cfg.lr * 1.001, ..cfg.clone() };
        let g = gap(cfg, wrong);
        assert!(!within(g, BOUNDS), "a 0.1% wrong update passed: {g:?}");
    }
}

#[test]
fn gpu_training_matches_cpu_losses_and_parameters() {
    parity(config(Activation::Gelu, true, OptimizerConfig::adam(), 6));
}

/// Muon: the Newton-Schulz products as matmul ops, the momentum and update kernels, AdamW for
/// the rest, against `optim::muon` (gradient clip on, as by default).
#[test]
fn gpu_muon_training_matches_cpu() {
    let cfg = config(Activation::Gelu, true, OptimizerConfig::named("muon").unwrap(), 6);
    let cfg = TrainConfig { lr: cfg.optimizer.default_lr(), ..cfg };
    let g = gap(cfg.clone(), cfg);
    assert!(within(g, MUON), "{g:?} beyond {MUON:?}");
}

/// Muon's bounds, about ten times what lavapipe measures over six steps (loss 2.9e-7, gradient
/// norm 1.1e-7, weights 2.3e-6): the Newton-Schulz iterations amplify the GPU's summation order a
/// little beyond AdamW's.
const MUON: Gap = Gap { loss: 3e-6, grad_norm: 1e-6, params: 2e-5 };

#[test]
fn gpu_training_matches_cpu_with_relu_non_causal() {
    parity(config(Activation::Relu, false, OptimizerConfig::adam(), 3));
}

/// A context of 150 spans three 64-row tiles, so causal attention's products skip the tiles above
/// the diagonal (the model above fits in one): still the CPU's steps.
#[test]
fn gpu_training_past_one_attention_tile_matches_cpu() {
    let mut cfg = config(Activation::Gelu, true, OptimizerConfig::adam(), 3);
    (cfg.model.context, cfg.batch) = (150, 1);
    parity(cfg);
}

#[test]
fn gpu_sgd_training_matches_cpu() {
    // Weight decay on, so the decay mask is exercised too.
    parity(config(Activation::Gelu, true, OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.01 }, 6));
}

#[test]
fn gpu_evaluation_matches_cpu() {
    let mut cfg = config(Activation::Gelu, true, OptimizerConfig::adam(), 4);
    cfg.eval_batches = 3;
    let mut cpu = Trainer::new(cfg.clone()).unwrap();
    let mut gpu = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
    let mut worst = 0.0f32;
    for _ in 0..2 {
        let (c, g) = (cpu.evaluate().unwrap(), block_on(gpu.evaluate()).unwrap());
        let e = (c - g).abs() / c;
        eprintln!("validation loss at step {}: cpu {c} gpu {g} (rel {e:e})", gpu.step_count());
        worst = worst.max(e);
        let steps = lockstep(&mut cpu, &mut gpu, 2);
        assert!(within(Gap { params: 0.0, ..steps }, BOUNDS), "{steps:?}");
    }
    // Evaluating changed nothing the next training step depends on.
    assert!(max_err(&block_on(gpu.params()).unwrap(), &cpu.model().params) < BOUNDS.params);
    assert!(worst < BOUNDS.loss, "validation loss differs by {worst}");
}

/// A run split between the backends: `first` steps on one, the rest on the other, against an
/// uninterrupted CPU run.
fn hand_over(optimizer: OptimizerConfig) {
    let (first, total) = (3, 6);
    let cfg = config(Activation::Gelu, true, optimizer, total);
    let mut reference = Trainer::new(cfg.clone()).unwrap();
    let expected: Vec<f32> = (0..total).map(|_| reference.step().unwrap().loss).collect();

    let mut gpu = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
    for _ in 0..first {
        block_on(gpu.step_read()).unwrap();
    }
    let mut cpu = Trainer::restore(block_on(gpu.snapshot()).unwrap()).unwrap();
    assert_eq!(cpu.step_count(), first);
    let losses: Vec<f32> = (first..total).map(|_| cpu.step().unwrap().loss).collect();
    let el = max_err(&losses, &expected[first..]);
    let pe = max_err(&cpu.model().params, &reference.model().params);
    eprintln!("{}: GPU then CPU: loss {el:e}, params {pe:e}", cfg.optimizer.name());
    assert!(el < BOUNDS.loss && pe < BOUNDS.params, "GPU then CPU: loss {el}, params {pe}");

    let mut cpu = Trainer::new(cfg).unwrap();
    for _ in 0..first {
        cpu.step().unwrap();
    }
    let mut gpu = GpuTrainer::restore(ctx(), cpu.snapshot()).unwrap();
    assert_eq!(gpu.step_count(), first);
    let losses: Vec<f32> = (first..total).map(|_| block_on(gpu.step_read()).unwrap().0.loss).collect();
    let el = max_err(&losses, &expected[first..]);
    let pe = max_err(&block_on(gpu.params()).unwrap(), &reference.model().params);
    eprintln!("CPU then GPU: loss {el:e}, params {pe:e}");
    assert!(el < BOUNDS.loss && pe < BOUNDS.params, "CPU then GPU: loss {el}, params {pe}");
}

#[test]
fn adam_state_moves_between_gpu_and_cpu() {
    hand_over(OptimizerConfig::adam());
}

#[test]
fn muon_state_moves_between_gpu_and_cpu() {
    hand_over(OptimizerConfig::named("muon").unwrap());
}

#[test]
fn sgd_state_moves_between_gpu_and_cpu() {
    hand_over(OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.01 });
}

#[test]
fn a_lost_device_is_an_error_not_a_panic() {
    let cfg = config(Activation::Gelu, true, OptimizerConfig::adam(), 4);
    let mut gpu = GpuTrainer::new(ctx(), cfg).unwrap();
    block_on(gpu.step_read()).unwrap();
    gpu.context().device.destroy();
    let err = block_on(gpu.step_read()).unwrap_err();
    assert!(matches!(err, GpuError::Failed(_)), "{err}");
    assert_eq!(gpu.pending(), 1, "the failed step's report never came");
}

#[test]
fn gpu_trainer_rejects_kfac_but_takes_every_cgfac_product() {
    let cfg = TrainConfig { optimizer: OptimizerConfig::named("kfac").unwrap(), ..TrainConfig::browser_default() };
    let err = GpuTrainer::new(ctx(), cfg).err().expect("K-FAC is not on the GPU");
    assert!(err.to_string().contains("runs AdamW, SGD, Muon and CG-FAC"), "{err}");
    let sampled = SecondOrderConfig { fisher: crate::config::Fisher::Sampled, ..SecondOrderConfig::new(Method::CgFac) };
    let cfg = TrainConfig { optimizer: OptimizerConfig::CgFac(sampled), ..TrainConfig::browser_default() };
    let err = GpuTrainer::new(ctx(), cfg).err().expect("the sampled Fisher is refused on the GPU");
    assert!(err.to_string().contains("sampled Fisher"), "{err}");
    for product in [Product::Factors, Product::MatrixFree, Product::ExactFisher] {
        let so = SecondOrderConfig { product, ..SecondOrderConfig::new(Method::CgFac) };
        let cfg = TrainConfig { optimizer: OptimizerConfig::CgFac(so), ..TrainConfig::browser_default() };
        assert!(GpuTrainer::new(ctx(), cfg).is_ok(), "{product:?}");
    }
}

/// CG-FAC in lockstep: losses, gradient norms, parameters, and each layer's CG iterations,
/// fallbacks and the KL-clip scale. Measured on lavapipe over six steps: loss 1e-6, gradient
/// norm 3e-5, parameters 1.4e-5 (f32 CG with a tree-ordered dot product against the CPU's
/// sequential one); the bounds (`STRICT`) leave about ten times that.
fn cgfac_parity(so: SecondOrderConfig) {
    cgfac_parity_within(so, STRICT);
}

/// Bounds on the worst relative loss, gradient norm and parameters, and on the KL scale.
const STRICT: (Gap, f32) = (Gap { loss: 1e-5, grad_norm: 3e-4, params: 2e-4 }, 1e-4);

fn cgfac_parity_within(so: SecondOrderConfig, bounds: (Gap, f32)) {
    cgfac_parity_of(config(Activation::Gelu, true, OptimizerConfig::CgFac(so), 6), bounds);
}

fn cgfac_parity_of(cfg: TrainConfig, (bounds, nu): (Gap, f32)) {
    let mut cpu = Trainer::new(cfg.clone()).unwrap();
    let mut gpu = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
    let (mut worst, mut worst_nu) = (Gap::default(), 0.0f32);
    for _ in 0..cfg.steps {
        let w = lockstep(&mut cpu, &mut gpu, 1);
        worst = Gap { loss: worst.loss.max(w.loss), grad_norm: worst.grad_norm.max(w.grad_norm), ..worst };
        let (dc, dg) = (cpu.diagnostics().unwrap(), gpu.diagnostics().unwrap());
        assert_eq!(dc.layers.len(), dg.layers.len());
        for (c, g) in dc.layers.iter().zip(&dg.layers) {
            assert_eq!(c.name, g.name);
            assert_eq!((c.cg.iterations, c.fell_back), (g.cg.iterations, g.fell_back), "{}", c.name);
        }
        assert_eq!(dc.fallbacks_total, dg.fallbacks_total);
        worst_nu = worst_nu.max((dc.kl_scale - dg.kl_scale).abs() / dc.kl_scale);
    }
    let worst = Gap { params: max_err(&block_on(gpu.params()).unwrap(), &cpu.model().params), ..worst };
    eprintln!("cgfac: {worst:?}, KL scale rel {worst_nu:e}");
    assert!(within(worst, bounds) && worst_nu < nu, "{worst:?}, KL scale {worst_nu}, beyond {bounds:?}");
}

#[test]
fn gpu_cgfac_training_matches_cpu() {
    cgfac_parity(SecondOrderConfig::new(Method::CgFac));
}

/// On copy only the answers are scored: the factors and both matrix-free products are normalised
/// by those M tokens, not the batch's N positions, on the GPU as on the CPU. Damping 0.1: at 0.01
/// this small copy model's curvature is ill-conditioned enough that ten f32 CG iterations on
/// either side drift apart (loss 7e-5 after six steps); at 0.1 they agree to 2e-7.
#[test]
fn gpu_cgfac_matches_cpu_on_a_masked_task() {
    for product in [Product::Factors, Product::MatrixFree, Product::ExactFisher] {
        let so = SecondOrderConfig { product, damping: 0.1, ..SecondOrderConfig::new(Method::CgFac) };
        let mut cfg = config(Activation::Gelu, true, OptimizerConfig::CgFac(so), 6);
        cfg.data = crate::config::DataSpec::Copy;
        cgfac_parity_of(cfg, STRICT);
    }
}

#[test]
fn gpu_cgfac_with_kl_clip_decay_and_warm_start_matches_cpu() {
    // A KL-clip that binds, weight decay, factors refreshed every other step, warm starts.
    let so = SecondOrderConfig {
        kl_clip: 1e-6,
        weight_decay: 0.01,
        update_interval: 2,
        warm_start: true,
        ..SecondOrderConfig::new(Method::CgFac)
    };
    cgfac_parity(so);
}

/// The matrix-free product, CG iteration counts equal at every step. With damping 0.1 no solve
/// hits the iteration cap and the runs agree as closely as with the factors (measured: loss
/// 2.2e-7, parameters 5.9e-8). At the default damping 1e-2 the batch-only curvature (rank at
/// most N per factor) leaves attn.o and mlp.proj at the 10-iteration cap with relative
/// residuals 0.1-0.25, where f32 CG's loss of conjugacy amplifies rounding: measured on
/// lavapipe over six steps, loss 1.3e-5, gradient norm 2.7e-4, parameters 8.1e-5; the bounds
/// leave about ten times that.
#[test]
fn gpu_cgfac_matrix_free_training_matches_cpu() {
    let so = SecondOrderConfig { product: Product::MatrixFree, ..SecondOrderConfig::new(Method::CgFac) };
    cgfac_parity(SecondOrderConfig { damping: 0.1, ..so.clone() });
    cgfac_parity_within(so, (Gap { loss: 1e-4, grad_norm: 3e-3, params: 1e-3 }, 1e-4));
}

/// The exact empirical-Fisher product at the defaults; measured on lavapipe over six steps:
/// loss 4.5e-7, gradient norm 1.3e-5, parameters 2.2e-6.
#[test]
fn gpu_cgfac_exact_fisher_training_matches_cpu() {
    cgfac_parity(SecondOrderConfig { product: Product::ExactFisher, ..SecondOrderConfig::new(Method::CgFac) });
}

#[test]
fn cgfac_exact_fisher_state_moves_between_gpu_and_cpu() {
    let so = SecondOrderConfig { product: Product::ExactFisher, ..SecondOrderConfig::new(Method::CgFac) };
    hand_over(OptimizerConfig::CgFac(so));
}

#[test]
fn cgfac_state_moves_between_gpu_and_cpu() {
    hand_over(OptimizerConfig::named("cgfac").unwrap());
}

/// The training step waits for nothing: AdamW and CG-FAC read back once per `READ_EVERY` steps,
/// and the reports that arrive in rounds are each step's own: the same bits as a trainer that
/// reads every step, and within the parity bounds of the CPU's over the steps those were measured
/// on, with CG's iterations equal (the fixed budget stops where the CPU's loop does).
#[test]
fn the_step_reads_back_once_per_round() {
    let cgfac = OptimizerConfig::CgFac(SecondOrderConfig::new(Method::CgFac));
    for (optimizer, (bound, _)) in [(OptimizerConfig::adam(), (BOUNDS, 0.0)), (cgfac, STRICT)] {
        let cfg = config(Activation::Gelu, true, optimizer, 2 * READ_EVERY);
        let mut gpu = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
        let before = gpu.context().readbacks();
        let mut out = Vec::new();
        for i in 1..=cfg.steps {
            block_on(gpu.step(&mut out)).unwrap();
            assert_eq!(out.len(), i / READ_EVERY * READ_EVERY, "reports come a round at a time");
        }
        let reads = gpu.context().readbacks() - before;
        eprintln!("{}: {reads} readbacks in {} steps", cfg.optimizer.name(), cfg.steps);
        assert_eq!(reads, cfg.steps / READ_EVERY);
        let mut each = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
        let mut cpu = Trainer::new(cfg.clone()).unwrap();
        let iters = |d: &Diagnostics| d.layers.iter().map(|l| l.cg.iterations).collect::<Vec<_>>();
        for (g, diag) in &out {
            let (e, e_diag) = block_on(each.step_read()).unwrap();
            assert_eq!((g.step, g.loss, g.grad_norm, g.lr), (e.step, e.loss, e.grad_norm, e.lr));
            assert_eq!(diag.as_ref().map(iters), e_diag.as_ref().map(iters), "step {}", g.step);
            let c = cpu.step().unwrap();
            // Later the f32 drift moves a solve across its tolerance (an iteration more or less).
            if c.step <= 6 {
                assert_eq!(diag.as_ref().map(iters), cpu.diagnostics().map(iters), "step {}", c.step);
                assert!((c.loss - g.loss).abs() / c.loss <= bound.loss, "step {}: {} vs {}", c.step, c.loss, g.loss);
                assert!((c.grad_norm - g.grad_norm).abs() / c.grad_norm <= bound.grad_norm, "step {}", c.step);
            }
        }
    }
}

/// A step that goes non-finite inside a round is found when the round is read: the steps before it
/// are reported, it is `NonFinite` with its own step, and the count goes back to it.
#[test]
fn a_non_finite_step_inside_a_round_is_reported_with_its_step() {
    let mut cfg = config(Activation::Gelu, true, OptimizerConfig::adam(), 2 * READ_EVERY);
    cfg.lr = 1e30;
    let mut gpu = GpuTrainer::new(ctx(), cfg.clone()).unwrap();
    let mut out = Vec::new();
    let err = (0..cfg.steps).find_map(|_| block_on(gpu.step(&mut out)).err()).expect("lr 1e30 goes non-finite");
    let GpuError::Engine(Error::NonFinite { step, .. }) = err else { panic!("{err}") };
    eprintln!("non-finite at step {step} (0-based), {} reports before it", out.len());
    assert!(step > 0 && step < READ_EVERY, "the first step is finite, a later one in the round is not: {step}");
    assert_eq!(out.len(), step);
    assert!(out.iter().enumerate().all(|(i, (r, _))| r.step == i + 1 && r.loss.is_finite()));
    assert_eq!((gpu.step_count(), gpu.pending()), (step, 0));
    // The CPU goes non-finite at the same step.
    let mut cpu = Trainer::new(cfg).unwrap();
    let cpu_step = (0..).find_map(|_| cpu.step().err()).unwrap();
    assert!(matches!(cpu_step, Error::NonFinite { step: s, .. } if s == step), "{cpu_step}");
}
