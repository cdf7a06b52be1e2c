//! The GPU parity tests in a real browser: WebGPU in headless Chromium (SwiftShader, enabled by
//! `--enable-unsafe-webgpu` in engine/webdriver.json) trains the same AdamW and CG-FAC runs as the
//! CPU reference. Everything is awaited (CG-FAC's per-iteration status readbacks included);
//! nothing blocks the browser's thread.
#![cfg(all(target_arch = "wasm32", feature = "gpu"))]

use engine::config::{Activation, ModelConfig, OptimizerConfig, TrainConfig};
use engine::gpu::trainer::GpuTrainer;
use engine::gpu::GpuContext;
use engine::optim::kronecker::Product;
use engine::optim::second_order::{Method, SecondOrderConfig};
use engine::Trainer;
use wasm_bindgen_test::{console_log, wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

/// max |a - b| / (1 + |b|): relative for large values, absolute near zero.
fn max_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
}

// Measured on SwiftShader (Chromium 156): loss 7e-8, gradient norm 8e-8, parameters 5e-6 after
// five steps. Scaling the AdamW update by 1.001 in the kernel gives 3e-5, 4e-4 and 7e-5, so each
// bound alone catches an error of a tenth of a percent.
const ADAMW_TOL: Tolerances = Tolerances { loss: 1e-5, norm: 1e-4, params: 3e-5 };

/// The largest relative differences a run may show in its losses, gradient norms and final
/// parameters.
struct Tolerances {
    loss: f32,
    norm: f32,
    params: f32,
}

/// Sizes that are not multiples of the matmul tile, so the edge paths run too.
fn config(optimizer: OptimizerConfig) -> TrainConfig {
    let mut cfg = TrainConfig::browser_default();
    cfg.model = ModelConfig {
        d_model: 32,
        heads: 4,
        layers: 2,
        d_ff: 72,
        context: 24,
        activation: Activation::Gelu,
        ..cfg.model
    };
    cfg.batch = 3;
    cfg.steps = 5;
    cfg.optimizer = optimizer;
    cfg
}

#[wasm_bindgen_test]
async fn webgpu_adamw_training_matches_the_cpu() {
    matches_the_cpu(OptimizerConfig::adam(), "adamw", ADAMW_TOL).await;
}

// CG-FAC (factors product, defaults): f32 CG whose dot products sum in a different order than the
// CPU's. Natively (lavapipe) six steps differ by 1e-6 in the loss, 3e-5 in the gradient norm and
// 1.4e-5 in the parameters; the bounds leave about ten times that.
const CG_TOL: Tolerances = Tolerances { loss: 1e-5, norm: 3e-4, params: 2e-4 };

#[wasm_bindgen_test]
async fn webgpu_cgfac_training_matches_the_cpu() {
    matches_the_cpu(OptimizerConfig::named("cgfac").unwrap(), "cgfac", CG_TOL).await;
}

// The exact empirical-Fisher product (per-layer batches stored on the GPU, thin matmuls and the
// row-dot kernel). Natively six steps differ by 4.5e-7 in the loss, 1.3e-5 in the gradient norm and
// 2.2e-6 in the parameters: the factors' bounds hold with room.
#[wasm_bindgen_test]
async fn webgpu_cgfac_exact_fisher_training_matches_the_cpu() {
    let mut so = SecondOrderConfig::new(Method::CgFac);
    so.product = Product::ExactFisher;
    matches_the_cpu(OptimizerConfig::CgFac(so), "cgfac exact-fisher", CG_TOL).await;
}

/// Trains `optimizer`'s run on the CPU and on `ctx` side by side; a second-order run must also take
/// the same CG iterations in every layer.
async fn matches_the_cpu(optimizer: OptimizerConfig, tag: &str, tol: Tolerances) {
    let ctx = GpuContext::new().await.expect("WebGPU adapter (Chromium needs --enable-unsafe-webgpu)");
    console_log!("{tag} on {}", ctx.adapter_name());
    let cfg = config(optimizer);
    let mut cpu = Trainer::new(cfg.clone()).unwrap();
    let mut gpu = GpuTrainer::new(ctx, cfg.clone()).unwrap();
    let (mut worst_loss, mut worst_norm) = (0.0f32, 0.0f32);
    for _ in 0..cfg.steps {
        let c = cpu.step().unwrap();
        let g = gpu.step_read().await.unwrap().0;
        let el = (c.loss - g.loss).abs() / c.loss;
        let en = (c.grad_norm - g.grad_norm).abs() / c.grad_norm;
        console_log!("{tag} step {}: loss cpu {} gpu {} (rel {el:e}), grad norm rel {en:e}", c.step, c.loss, g.loss);
        assert!(el < tol.loss, "step {}: loss differs by {el} (relative)", c.step);
        assert!(en < tol.norm, "step {}: gradient norm differs by {en} (relative)", c.step);
        worst_loss = worst_loss.max(el);
        worst_norm = worst_norm.max(en);
        if let Some(dc) = cpu.diagnostics() {
            let dg = gpu.diagnostics().expect("the GPU's second-order run has diagnostics too");
            for (lc, lg) in dc.layers.iter().zip(&dg.layers) {
                assert_eq!(lc.cg.iterations, lg.cg.iterations, "{}: CG iterations", lc.name);
            }
        }
    }
    let pe = max_err(&gpu.params().await.unwrap(), &cpu.model().params);
    console_log!("{tag}: worst loss rel {worst_loss:e}, grad norm rel {worst_norm:e}, params {pe:e}");
    assert!(pe < tol.params, "parameters differ by {pe}");
}
