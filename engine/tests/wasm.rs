//! The engine compiled to wasm32 trains in a real browser (headless Chromium, wasm-bindgen-test).
#![cfg(target_arch = "wasm32")]

use engine::config::TrainConfig;
use engine::Trainer;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
fn trains_a_few_steps_and_the_loss_falls() {
    let cfg = TrainConfig { steps: 30, ..TrainConfig::browser_default() };
    let mut t = Trainer::new(cfg).unwrap();
    let before = t.evaluate().unwrap();
    let losses: Vec<f32> = (0..30).map(|_| t.step().unwrap().loss).collect();
    let after = t.evaluate().unwrap();
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(after < before - 0.3, "validation loss {before} -> {after}");
}

#[wasm_bindgen_test]
fn same_seed_is_bit_identical_in_the_browser() {
    let cfg = TrainConfig { steps: 5, ..TrainConfig::browser_default() };
    let run = || {
        let mut t = Trainer::new(cfg.clone()).unwrap();
        (0..5).map(|_| t.step().unwrap().loss.to_bits()).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[wasm_bindgen_test]
fn bad_input_is_an_error_not_a_panic() {
    let mut cfg = TrainConfig::browser_default();
    cfg.model.heads = 5;
    let err = Trainer::new(cfg).err().unwrap().to_string();
    assert!(err.contains("must divide d_model"), "{err}");
}

/// One row (a token written) takes its own path in wasm32 (a dot product a weight row, no packing):
/// it must give what the general product gives that row, to f32 rounding.
#[wasm_bindgen_test]
fn one_row_of_a_linear_layer_equals_the_general_product() {
    let (din, dout) = (768, 300);
    let w: Vec<f32> = (0..din * dout).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-3).collect();
    let b: Vec<f32> = (0..dout).map(|i| i as f32 * 1e-2).collect();
    let x: Vec<f32> = (0..din).map(|i| ((i * 104729 % 997) as f32 - 498.0) * 1e-3).collect();
    let mut one = vec![0.0; dout];
    engine::nn::linear::forward(&mut one, &x, &w, &b, 1, din, dout);
    // The same row twice: two rows go through the general product.
    let (two_x, mut two) = ([x.as_slice(), x.as_slice()].concat(), vec![0.0; 2 * dout]);
    engine::nn::linear::forward(&mut two, &two_x, &w, &b, 2, din, dout);
    let scale = two.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let err = one.iter().zip(&two[..dout]).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max) / scale;
    assert!(err < 1e-6, "one row differs from the product by {err} (relative to its largest value)");
}
