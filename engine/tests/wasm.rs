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
