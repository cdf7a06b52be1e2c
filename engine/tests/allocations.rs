//! A CPU training step allocates nothing of its own: once the first steps have sized every buffer,
//! each allocation during a step is one of the `gemm` crate's packing buffers (it has no workspace
//! API; its allocations take about 1% of a step). A recording allocator keeps the backtrace of every
//! allocation made during one step, on any thread.
#![cfg(not(target_arch = "wasm32"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::backtrace::Backtrace;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use engine::config::{OptimizerConfig, TrainConfig};
use engine::Trainer;

struct Recording;

static RECORDING: AtomicBool = AtomicBool::new(false);
static TRACES: Mutex<Vec<Backtrace>> = Mutex::new(Vec::new());

thread_local! {
    /// Set while this thread records, so the recorder's own allocations pass straight through.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Recording {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if RECORDING.load(Ordering::Relaxed) && !INSIDE.with(|i| i.replace(true)) {
            let trace = Backtrace::force_capture();
            TRACES.lock().unwrap().push(trace);
            INSIDE.with(|i| i.set(false));
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Recording = Recording;

/// The backtraces of the allocations `f` makes, symbolised.
fn allocations_of(f: impl FnOnce()) -> Vec<String> {
    TRACES.lock().unwrap().clear();
    RECORDING.store(true, Ordering::SeqCst);
    f();
    RECORDING.store(false, Ordering::SeqCst);
    let traces = std::mem::take(&mut *TRACES.lock().unwrap());
    traces.iter().map(|t| t.to_string()).collect()
}

#[test]
fn a_step_allocates_only_inside_the_gemm_crate() {
    for name in ["sgd", "adam", "muon", "soap", "kfac", "cgfac"] {
        let optimizer = OptimizerConfig::named(name).unwrap();
        let cfg = TrainConfig { optimizer, steps: 20, ..TrainConfig::browser_default() };
        let mut trainer = Trainer::new(cfg).unwrap();
        // Two threads, so the shards' thread pool is part of the step (its numbers do not change).
        trainer.set_threads(2);
        for _ in 0..3 {
            trainer.step().unwrap();
        }
        // K-FAC refreshes its inverses every 10 steps (nalgebra's Cholesky allocates): step 4 is not one.
        let traces = allocations_of(|| {
            trainer.step().unwrap();
        });
        let own: Vec<&String> =
            traces.iter().filter(|t| !(t.contains("gemm_common::") || t.contains("gemm::gemm"))).collect();
        assert!(
            own.is_empty(),
            "{name}: {} of {} allocations outside the gemm crate; the first:\n{}",
            own.len(),
            traces.len(),
            own[0]
        );
        // The recorder is on: it saw the GEMM's packing buffers.
        assert!(!traces.is_empty(), "{name}: no allocation recorded");
    }
}
