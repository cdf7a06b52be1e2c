//! The memory budget at its edge, for every optimizer: the widest model a budget accepts trains
//! (session, steps with their rollback states, evaluation, probe frames, a snapshot) without ever
//! holding more bytes than the budget, and one size wider is refused before anything is allocated.
//! A counting allocator measures the bytes really held, so an estimate that undercounts (a run
//! the page accepts and the tab then cannot hold) fails here.
#![cfg(not(target_arch = "wasm32"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use engine::config::{ModelConfig, OptimizerConfig, TrainConfig};
use engine::session::{BackendChoice, Experiment, Session};

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The CPU session's futures never wait on anything: polling them to the end is running them.
fn run<T>(f: impl Future<Output = T>) -> T {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

const BUDGET: u64 = 40 << 20;

/// The counts are for the whole process: one test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn experiment(optimizer: &str, d_model: usize) -> Experiment {
    let mut cfg = TrainConfig::browser_default();
    cfg.model = ModelConfig { d_model, heads: 4, layers: 2, d_ff: 4 * d_model, context: 32, ..cfg.model };
    cfg.batch = 8;
    cfg.steps = 4;
    cfg.eval_every = 2;
    cfg.optimizer = OptimizerConfig::named(optimizer).unwrap();
    let mut exp = Experiment::new(cfg);
    exp.backend = BackendChoice::Cpu;
    exp.probe.every = 1;
    exp.probe.budget_bytes = 1 << 20;
    exp
}

/// Whether the budget takes a model of width `d_model` (checked as the session checks it).
fn accepted(optimizer: &str, d_model: usize) -> bool {
    let mut exp = experiment(optimizer, d_model);
    // The grammar's vocabulary, known once the data is read.
    exp.train.model.vocab = 27;
    exp.validate(BUDGET).is_ok()
}

#[test]
fn the_widest_model_a_budget_takes_trains_within_it_and_one_wider_is_refused() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for optimizer in ["sgd", "adam", "muon", "soap", "kfac", "cgfac"] {
        let widest = (1..).map(|k| 8 * k).take_while(|&d| accepted(optimizer, d)).last().expect("d8 fits");
        assert!(widest >= 64, "{optimizer}: only d{widest} fits {} MiB", BUDGET >> 20);
        let before = HELD.load(Ordering::SeqCst);
        PEAK.store(before, Ordering::SeqCst);
        {
            let mut s = run(Session::new(experiment(optimizer, widest), BUDGET)).unwrap();
            for _ in 0..4 {
                run(s.step()).unwrap();
            }
            run(s.snapshot()).unwrap();
        }
        let peak = (PEAK.load(Ordering::SeqCst) - before) as u64;
        assert!(
            peak <= BUDGET,
            "{optimizer} at d{widest}: held {:.1} MiB, over the budget of {} MiB it was accepted under",
            peak as f64 / (1 << 20) as f64,
            BUDGET >> 20
        );
        // One size wider: refused before any allocation, with the estimate and the limit.
        let before = HELD.load(Ordering::SeqCst);
        PEAK.store(before, Ordering::SeqCst);
        let refused = run(Session::new(experiment(optimizer, widest + 8), BUDGET)).err().expect("over the budget");
        assert!(refused.to_string().contains("over the memory limit of 40.0 MiB"), "{refused}");
        let spent = PEAK.load(Ordering::SeqCst) - before;
        assert!(spent < 1 << 20, "{optimizer}: {spent} bytes allocated before refusing");
        eprintln!(
            "{optimizer}: d{widest} accepted, held {:.1} of {} MiB",
            peak as f64 / (1 << 20) as f64,
            BUDGET >> 20
        );
    }
}

#[test]
fn a_long_context_gets_a_probe_that_holds_its_fewest_frames() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Attention frames of T = 256: 2.3 MB each, and the probe keeps at least 8, over the default
    // 16 MiB history. The page took such a run and then refused it at Start.
    let mut exp = experiment("adam", 64);
    exp.train.model.context = 256;
    exp.train.batch = 2;
    exp.probe = Default::default();
    let mut s = run(Session::new(exp, 1 << 30)).unwrap();
    run(s.step()).unwrap();
    assert_eq!(s.step_count(), 1);
}
