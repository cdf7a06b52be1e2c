//! End-to-end training on the CPU: the model learns, runs are reproducible, checkpoints resume
//! exactly, and bad input is refused with a message that names the problem.

use engine::checkpoint::Snapshot;
use engine::config::{DataSpec, ModelConfig, OptimizerConfig, Schedule, TrainConfig};
use engine::{Error, Trainer};

fn copy_config() -> TrainConfig {
    TrainConfig {
        model: ModelConfig { d_model: 32, heads: 2, d_ff: 128, context: 16, ..ModelConfig::default() },
        data: DataSpec::Copy,
        batch: 16,
        steps: 400,
        eval_every: 100,
        ..TrainConfig::default()
    }
}

fn run(trainer: &mut Trainer, steps: usize) -> Vec<f32> {
    (0..steps).map(|_| trainer.step().unwrap().loss).collect()
}

#[test]
fn grammar_beats_the_bigram_baseline_within_the_default_steps() {
    let cfg = TrainConfig::default();
    let mut t = Trainer::new(cfg.clone()).unwrap();
    let base = t.baselines();
    let before = t.evaluate().unwrap();
    run(&mut t, cfg.steps);
    let after = t.evaluate().unwrap();
    assert!(base.bigram < base.unigram, "bigram {} unigram {}", base.bigram, base.unigram);
    assert!((after as f64) < base.bigram - 0.3, "val loss {after} vs bigram {}", base.bigram);
    assert!(after < before);
}

#[test]
fn copy_task_is_learned() {
    let mut t = Trainer::new(copy_config()).unwrap();
    let chance = (10f32).ln();
    run(&mut t, 400);
    // Only the copied half is scored, so this is the loss of the copy itself.
    let val = t.evaluate().unwrap();
    assert!(val < 0.05, "copy loss {val} (chance {chance})");
}

#[test]
fn same_seed_gives_bit_identical_losses() {
    let cfg = TrainConfig { steps: 15, ..copy_config() };
    let a = run(&mut Trainer::new(cfg.clone()).unwrap(), 15);
    let b = run(&mut Trainer::new(cfg.clone()).unwrap(), 15);
    assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let other = run(&mut Trainer::new(TrainConfig { seed: 1, ..cfg }).unwrap(), 15);
    assert_ne!(a, other);
}

/// Data parallelism (`train::shards`): the batch's shards and their order never depend on the
/// threads, so losses, validation loss and weights are the same bits on 1, 2 or 3 threads.
#[test]
fn a_run_is_bit_identical_on_one_thread_or_many() {
    for optimizer in [OptimizerConfig::adam(), OptimizerConfig::named("muon").unwrap()] {
        let cfg = TrainConfig {
            steps: 6,
            batch: 8,
            optimizer: optimizer.clone(),
            lr: optimizer.default_lr(),
            ..copy_config()
        };
        let runs: Vec<_> = [1, 2, 3]
            .into_iter()
            .map(|threads| {
                let mut t = Trainer::new(cfg.clone()).unwrap();
                t.set_threads(threads);
                let losses: Vec<u32> = run(&mut t, 6).iter().map(|x| x.to_bits()).collect();
                (losses, t.evaluate().unwrap().to_bits(), t.model().params.clone())
            })
            .collect();
        for (threads, r) in [2, 3].iter().zip(&runs[1..]) {
            assert!(*r == runs[0], "{}: {threads} threads differ from one", optimizer.name());
        }
    }
}

#[test]
fn resumed_run_equals_uninterrupted_run() {
    let named = |n| OptimizerConfig::named(n).unwrap();
    for optimizer in [OptimizerConfig::adam(), OptimizerConfig::sgd(), named("muon"), named("soap")] {
        let cfg = TrainConfig { steps: 20, optimizer: optimizer.clone(), lr: optimizer.default_lr(), ..copy_config() };
        let mut straight = Trainer::new(cfg.clone()).unwrap();
        let full = run(&mut straight, 20);

        let mut first = Trainer::new(cfg).unwrap();
        let mut resumed_losses = run(&mut first, 8);
        let dir = std::env::temp_dir().join(format!("spherewalk-resume-{}-{}", optimizer.name(), std::process::id()));
        first.snapshot().save(&dir).unwrap();
        drop(first);
        let mut second = Trainer::restore(Snapshot::load(&dir).unwrap()).unwrap();
        assert_eq!(second.step_count(), 8);
        resumed_losses.extend(run(&mut second, 12));
        assert_eq!(full, resumed_losses, "{}", optimizer.name());
        assert_eq!(straight.model().params, second.model().params, "{}", optimizer.name());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn missing_or_corrupt_checkpoint_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("spherewalk-corrupt-{}", std::process::id()));
    let err = Snapshot::load(&dir).err().unwrap().to_string();
    assert!(err.contains("cannot read") && err.contains("config.json"), "{err}");

    let t = Trainer::new(TrainConfig { steps: 1, ..copy_config() }).unwrap();
    t.snapshot().save(&dir).unwrap();
    std::fs::write(dir.join("model.safetensors"), b"not a tensor file").unwrap();
    let err = Snapshot::load(&dir).err().unwrap().to_string();
    assert!(err.contains("model.safetensors is not valid safetensors"), "{err}");
    std::fs::write(dir.join("config.json"), b"{\"step\": 3").unwrap();
    let err = Snapshot::load(&dir).err().unwrap().to_string();
    assert!(err.contains("not a valid config"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_sizes_are_refused_with_the_reason() {
    let with = |f: &dyn Fn(&mut TrainConfig)| {
        let mut c = copy_config();
        f(&mut c);
        Trainer::new(c).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(with(&|c| c.model.heads = 3).contains("heads (3) must divide d_model (32)"));
    assert!(with(&|c| c.model.d_model = 0).contains("d_model must be positive"));
    assert!(with(&|c| c.model.layers = 0).contains("layers must be positive"));
    assert!(with(&|c| c.batch = 0).contains("batch must be positive"));
    assert!(with(&|c| c.lr = -1.0).contains("learning rate must be positive"));
    assert!(with(&|c| c.model.context = 0).contains("context must be positive"));
    let many: String = (0..300u32).map(|i| char::from_u32(0x4e00 + i).unwrap()).collect();
    assert!(with(&|c| c.data = DataSpec::Text { text: many.clone() }).contains("the vocabulary limit is 256"));
    assert!(with(&|c| c.data = DataSpec::Text { text: String::new() }).contains("empty"));
    assert!(with(&|c| c.data = DataSpec::Text { text: "hello".into() }).contains("needs at least 34"));
}

#[test]
fn non_finite_loss_stops_and_keeps_the_last_good_weights() {
    // An absurd learning rate blows the weights up within a few steps.
    let cfg = TrainConfig {
        optimizer: OptimizerConfig::sgd(),
        lr: 1e30,
        clip: 0.0,
        schedule: Schedule::Constant,
        ..copy_config()
    };
    let mut t = Trainer::new(cfg).unwrap();
    let mut err = None;
    for _ in 0..20 {
        let before = t.model().params.clone();
        match t.step() {
            Ok(_) => {}
            Err(e) => {
                assert_eq!(t.model().params, before, "a failed step must not touch the weights");
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("the run must stop on a non-finite value");
    assert!(matches!(err, Error::NonFinite { .. }), "{err}");
    assert!(err.to_string().contains("non-finite"), "{err}");
    // The trainer is still usable: evaluation reports the problem rather than panicking.
    let _ = t.evaluate();
}
