//! The session behind the page, the CLI and scripts: numbers equal to the plain trainer's, a probe
//! schedule in steps, pause-and-keep on a non-finite loss on the CPU and the GPU, the memory budget,
//! and the backend policy with its failover (natively on lavapipe).
#![cfg(all(not(target_arch = "wasm32"), feature = "gpu"))]

use engine::config::{ModelConfig, OptimizerConfig, TrainConfig};
use engine::gpu::{block_on, GpuContext, GpuError};
use engine::science::cache;
use engine::session::{BackendChoice, Experiment, Metrics, Progress, Runner, Session};
use engine::train::interrupt::Interrupt;
use engine::train::remote::{ShardFuture, ShardPool, ShardTask, ShardWorker};
use engine::Trainer;

const BUDGET: u64 = 1 << 30;

fn config(optimizer: OptimizerConfig, steps: usize) -> TrainConfig {
    let mut cfg = TrainConfig::browser_default();
    cfg.model = ModelConfig { d_model: 32, heads: 4, layers: 2, d_ff: 72, context: 24, ..cfg.model };
    cfg.batch = 3;
    cfg.steps = steps;
    cfg.eval_every = 4;
    cfg.optimizer = optimizer;
    cfg
}

fn experiment(cfg: TrainConfig, backend: BackendChoice) -> Experiment {
    let mut exp = Experiment::new(cfg);
    exp.backend = backend;
    exp.probe.every = 3;
    exp
}

fn run_to_end(s: &mut Session) -> Vec<Progress> {
    let mut out = Vec::new();
    loop {
        match block_on(s.step()).unwrap() {
            Progress::Done => return out,
            p => out.push(p),
        }
    }
}

fn ctx() -> GpuContext {
    block_on(GpuContext::new()).expect("GPU tests need an adapter (apt-get install mesa-vulkan-drivers)")
}

/// max |a - b| / (1 + |b|).
fn max_err(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f32::max)
}

#[test]
fn a_session_trains_exactly_as_the_trainer_and_records_on_its_step_schedule() {
    let cfg = config(OptimizerConfig::adam(), 14);
    let mut reference = Trainer::new(cfg.clone()).unwrap();
    let mut expected = Vec::new();
    let mut expected_val = vec![(0, reference.evaluate().unwrap())];
    for _ in 0..14 {
        let r = reference.step().unwrap();
        expected.push((r.step, r.loss));
        if r.step.is_multiple_of(4) || r.step == 14 {
            expected_val.push((r.step, reference.evaluate().unwrap()));
        }
    }
    let mut s = block_on(Session::new(experiment(cfg, BackendChoice::Cpu), BUDGET)).unwrap();
    let progress = run_to_end(&mut s);
    assert_eq!(progress.len(), 14);
    assert_eq!(s.metrics().train, expected, "bit-identical training losses");
    assert_eq!(s.metrics().val, expected_val);
    let steps: Vec<usize> = s.probe().frames().iter().map(|f| f.step).collect();
    assert_eq!(steps, vec![0, 3, 6, 9, 12], "frames every 3 steps from step 0");
    // The last frame's entropy equals the model's own per-layer entropy on the probe row.
    let cfg = s.probe().config().clone();
    let last = s.entropy().last().unwrap();
    assert_eq!(last.step, 12);
    let mut probe = engine::science::probe::Probe::on_validation(
        &cfg,
        &engine::data::Dataset::new(&s.experiment().train.data, cfg.context, s.experiment().train.seed).unwrap(),
        1,
        Default::default(),
    )
    .unwrap();
    let mut at12 = Trainer::new(s.experiment().train.clone()).unwrap();
    for _ in 0..12 {
        at12.step().unwrap();
    }
    probe.observe(at12.model()).unwrap();
    for l in 0..cfg.layers {
        let want = cache::layer_entropy(&cfg, probe.cache(), l).unwrap();
        assert!((last.layers[l] - want).abs() < 1e-9, "layer {l}: {} vs {want}", last.layers[l]);
    }
    // The panels: unit points for every frame and depth, rows of attention that sum to one.
    let p = s.panels(0).unwrap();
    assert_eq!(p.steps, steps);
    assert_eq!(p.sphere.len(), (cfg.layers + 1) * steps.len() * cfg.context * 3);
    for v in p.sphere.chunks_exact(3) {
        let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        assert!((n - 1.0).abs() < 1e-5, "{v:?}");
    }
    let t = cfg.context;
    let att = p.attention_of(1, 3);
    assert_eq!(att, &s.probe().frames()[4].attention(&cfg, 1)[3 * t * t..4 * t * t]);
    // The verdicts: on the sphere and a Markov chain, measured; Brownian's sentence carries its numbers.
    use engine::session::Agreement;
    assert_eq!(p.verdicts.sphere.as_ref().unwrap().agreement, Agreement::Agrees, "{:?}", p.verdicts.sphere);
    assert_eq!(p.verdicts.markov.as_ref().unwrap().agreement, Agreement::Agrees, "{:?}", p.verdicts.markov);
    assert_eq!(p.verdicts.joma.len(), cfg.layers);
    assert!(
        p.verdicts.brownian.as_ref().unwrap().sentence.contains("critical value 0.39 for 24 tokens"),
        "{:?}",
        p.verdicts.brownian
    );
    let b = p.brownian.unwrap().unwrap();
    assert_eq!((b.times.len(), b.ghosts.len()), (4, t * 3));
    assert!(b.diffusion > 0.0 && (0.0..=1.0).contains(&b.ks));
}

#[test]
fn the_same_experiment_gives_the_same_numbers_and_history_stays_bounded() {
    let cfg = config(OptimizerConfig::adam(), 60);
    let mut exp = experiment(cfg, BackendChoice::Cpu);
    exp.probe.every = 1;
    let per = engine::science::probe::Probe::frame_bytes(&exp.train.model, 1) as u64;
    exp.probe.budget_bytes = (10 * per) as usize;
    let summaries: Vec<String> = (0..2)
        .map(|_| {
            let mut s = block_on(Session::new(exp.clone(), BUDGET)).unwrap();
            run_to_end(&mut s);
            assert!(s.probe().frames().len() <= 10);
            assert_eq!(s.entropy().len(), s.probe().frames().len(), "entropy follows the decimation");
            let mut v = serde_json::to_value(s.summary(1.0, 60)).unwrap();
            v["wall_s"] = 0.into();
            v["tokens_per_s"] = 0.into();
            v.to_string()
        })
        .collect();
    assert_eq!(summaries[0], summaries[1]);
    assert!(summaries[0].contains("\"probe_every\":8"), "{}", summaries[0]);
}

#[test]
fn a_non_finite_loss_pauses_at_the_last_good_state_and_a_new_rate_goes_on() {
    for backend in [BackendChoice::Cpu, BackendChoice::Gpu] {
        let mut cfg = config(OptimizerConfig::adam(), 12);
        cfg.lr = 1e30;
        let mut s = block_on(Session::new(experiment(cfg, backend), BUDGET)).unwrap();
        let stop = loop {
            match block_on(s.step()).unwrap() {
                Progress::NonFinite { message, kept } => break (message, kept),
                Progress::Done => panic!("{backend:?}: lr 1e30 trained to the end"),
                Progress::Stepped { .. } | Progress::Interrupted { .. } => {}
            }
        };
        let (message, kept) = stop;
        assert!(message.contains("with learning rate 1e30: training paused"), "{message}");
        assert!(message.contains(&format!("The state after step {kept} is kept")), "{message}");
        assert_eq!(s.step_count(), kept);
        assert!(s.metrics().train.iter().all(|p| p.1.is_finite() && p.0 <= kept));
        let snap = block_on(s.snapshot()).unwrap();
        assert!(snap.params.iter().all(|p| p.is_finite() && p.abs() < 1e6), "{backend:?}: the kept weights are sane");
        block_on(s.set_lr(3e-3)).unwrap();
        let progress = run_to_end(&mut s);
        assert!(progress.iter().all(|p| matches!(p, Progress::Stepped { .. })));
        assert_eq!(s.step_count(), 12);
        let steps: Vec<usize> = s.metrics().train.iter().map(|p| p.0).collect();
        assert_eq!(steps, (1..=12).collect::<Vec<_>>(), "{backend:?}: every step's loss, once");
        assert!(s.metrics().train.iter().all(|p| p.1.is_finite()));
    }
}

#[test]
fn runs_over_the_memory_budget_are_refused_before_allocating() {
    let mut cfg = config(OptimizerConfig::adam(), 2);
    cfg.model = ModelConfig { d_model: 1024, heads: 1024, layers: 32, context: 1024, ..cfg.model };
    cfg.batch = 1024;
    let msg = block_on(Session::new(experiment(cfg, BackendChoice::Cpu), BUDGET)).err().unwrap().to_string();
    assert!(msg.contains("over the memory limit of 1.0 GiB"), "{msg}");
    let small = block_on(Session::new(experiment(config(OptimizerConfig::adam(), 2), BackendChoice::Cpu), 1 << 20));
    assert!(small.err().unwrap().to_string().contains("over the memory limit of 1.0 MiB"));
}

/// The device is lost after `lose_after` GPU steps; the run must end where an uninterrupted CPU
/// run ends.
fn lost_device(optimizer: OptimizerConfig) {
    let is_cgfac = matches!(optimizer, OptimizerConfig::CgFac(_));
    let (total, sync_every, lose_after) = (9, 3, 5);
    let cfg = config(optimizer, total);
    let mut reference = Trainer::new(cfg.clone()).unwrap();
    let expected: Vec<f32> = (0..total).map(|_| reference.step().unwrap().loss).collect();

    let (mut runner, line) = Runner::with_context(Trainer::new(cfg).unwrap(), BackendChoice::Gpu, Ok(ctx())).unwrap();
    assert!(line.starts_with("gpu ("), "{line}");
    runner.set_sync_every(sync_every);
    let mut notices = Vec::new();
    let mut reports = Vec::new();
    for _ in 0..lose_after {
        block_on(runner.step(&mut notices, &mut reports)).unwrap();
    }
    runner.gpu_context().unwrap().device.destroy();
    while runner.step_count() < total {
        block_on(runner.step(&mut notices, &mut reports)).unwrap();
    }
    assert!(runner.adapter().is_none(), "the run moved to the CPU");
    assert_eq!(notices.len(), 1, "{notices:?}");
    // Step 6 found the device gone (at the host copy's read): steps 4 to 6 are recomputed.
    assert!(notices[0].contains("copy at step 3 plus 3 steps recomputed"), "{}", notices[0]);
    let steps: Vec<usize> = reports.iter().map(|r| r.0.step).collect();
    assert_eq!(steps, (1..=total).collect::<Vec<_>>(), "every step reported once, in order");
    let losses: Vec<f32> = reports.iter().map(|r| r.0.loss).collect();
    let el = max_err(&losses, &expected);
    let snap = block_on(runner.snapshot()).unwrap();
    let pe = max_err(&snap.params, &reference.model().params);
    assert_eq!(snap.step, total);
    assert!(el < 1e-5, "losses differ by {el}");
    assert!(pe < 1e-3, "parameters differ by {pe}");
    if is_cgfac {
        // The CPU continued from the GPU's CG-FAC state, so its counters carry on.
        let (d, r) = (runner.diagnostics().unwrap(), reference.diagnostics().unwrap());
        assert_eq!(d.fallbacks_total, r.fallbacks_total);
    }
    let ev = (block_on(runner.evaluate(&mut notices)).unwrap() - reference.evaluate().unwrap()).abs();
    assert!(ev < 1e-4, "validation losses differ by {ev}");
}

#[test]
fn a_lost_device_continues_on_the_cpu_with_the_adam_state() {
    lost_device(OptimizerConfig::adam());
}

#[test]
fn a_lost_device_continues_on_the_cpu_with_the_sgd_state() {
    lost_device(OptimizerConfig::Sgd { momentum: 0.9, weight_decay: 0.01 });
}

#[test]
fn a_lost_device_continues_on_the_cpu_with_the_cgfac_state() {
    lost_device(OptimizerConfig::named("cgfac").unwrap());
}

#[test]
fn a_model_past_the_buffer_limit_runs_on_the_cpu() {
    let cpu = Trainer::new(config(OptimizerConfig::adam(), 2)).unwrap();
    // The weights alone are over 64 KiB.
    let small = block_on(GpuContext::with_max_buffer(64 << 10)).unwrap();
    let (mut runner, line) = Runner::with_context(cpu, BackendChoice::Gpu, Ok(small)).unwrap();
    assert!(line.starts_with("cpu (the GPU ") && line.contains("over the adapter's limit"), "{line}");
    assert!(runner.adapter().is_none());
    block_on(runner.step(&mut Vec::new(), &mut Vec::new())).unwrap();
}

#[test]
fn auto_takes_a_hardware_gpu_only_and_without_an_adapter_the_cpu_says_why() {
    let cfg = config(OptimizerConfig::adam(), 2);
    let none = || Err(GpuError::NoAdapter("none here".into()));
    let (runner, line) = Runner::with_context(Trainer::new(cfg.clone()).unwrap(), BackendChoice::Auto, none()).unwrap();
    assert!(runner.adapter().is_none() && line.starts_with("cpu (auto: no GPU adapter"), "{line}");
    let (runner, line) = Runner::with_context(Trainer::new(cfg.clone()).unwrap(), BackendChoice::Gpu, none()).unwrap();
    assert!(runner.adapter().is_none() && line.starts_with("cpu (no GPU adapter: none here"), "{line}");
    // lavapipe is a software adapter: auto keeps the CPU and says why; gpu takes it as asked.
    let ctx = ctx();
    assert!(ctx.is_software(), "this test expects lavapipe");
    let (runner, line) =
        Runner::with_context(Trainer::new(cfg.clone()).unwrap(), BackendChoice::Auto, Ok(ctx)).unwrap();
    assert!(
        runner.adapter().is_none()
            && line.contains("the GPU adapter llvmpipe")
            && line.contains("is software, slower than the CPU path"),
        "{line}"
    );
    let (runner, _) = Runner::with_context(Trainer::new(cfg).unwrap(), BackendChoice::Gpu, Ok(self::ctx())).unwrap();
    assert!(runner.adapter().is_some());
}

#[test]
fn cgfac_runs_on_the_gpu_and_kfac_stays_on_the_cpu_with_a_notice() {
    let cfg = config(OptimizerConfig::named("cgfac").unwrap(), 2);
    let (mut runner, line) = Runner::with_context(Trainer::new(cfg).unwrap(), BackendChoice::Gpu, Ok(ctx())).unwrap();
    assert!(line.starts_with("gpu ("), "{line}");
    let mut reports = Vec::new();
    block_on(runner.step(&mut Vec::new(), &mut reports)).unwrap();
    block_on(runner.flush(&mut Vec::new(), &mut reports)).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(runner.diagnostics().unwrap().layers.len(), 2 * 6 + 1, "every linear layer reports");
    let cfg = config(OptimizerConfig::named("kfac").unwrap(), 2);
    let mut s = block_on(Session::new(experiment(cfg, BackendChoice::Gpu), BUDGET)).unwrap();
    assert!(s.adapter().is_none() && s.backend().contains("runs AdamW, SGD, Muon and CG-FAC"), "{}", s.backend());
    let notices = s.take_notices();
    assert!(notices.len() == 1 && notices[0].ends_with("; training on the CPU"), "{notices:?}");
    assert!(matches!(block_on(s.step()).unwrap(), Progress::Stepped { .. }));
}

#[test]
fn a_session_moves_between_backends_from_the_exact_state() {
    let cfg = config(OptimizerConfig::adam(), 8);
    let mut reference = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
    run_to_end(&mut reference);
    let mut s = block_on(Session::new(experiment(cfg, BackendChoice::Gpu), BUDGET)).unwrap();
    assert!(s.backend().starts_with("gpu ("), "{}", s.backend());
    for _ in 0..4 {
        block_on(s.step()).unwrap();
    }
    block_on(s.set_backend(BackendChoice::Cpu)).unwrap();
    assert_eq!((s.backend(), s.step_count()), ("cpu", 4));
    run_to_end(&mut s);
    let (a, b) = (s.metrics().train.clone(), reference.metrics().train.clone());
    let (a, b): (Vec<f32>, Vec<f32>) = (a.iter().map(|p| p.1).collect(), b.iter().map(|p| p.1).collect());
    assert!(max_err(&a, &b) < 1e-5, "{a:?} vs {b:?}");
    // A restored session goes on from the snapshot with its metrics.
    let snap = block_on(s.snapshot()).unwrap();
    let restored = block_on(Session::restore(s.experiment().clone(), snap, s.metrics().clone(), BUDGET)).unwrap();
    assert_eq!((restored.step_count(), restored.metrics()), (8, &s.metrics().clone()));
    let _ = Metrics::default();
}

#[test]
fn a_non_finite_gpu_step_is_skipped_on_the_device() {
    let mut cfg = config(OptimizerConfig::adam(), 6);
    cfg.lr = 1e30;
    let mut gpu = engine::gpu::trainer::GpuTrainer::new(ctx(), cfg).unwrap();
    block_on(gpu.step_read()).unwrap(); // finite loss, huge weights
    let before = block_on(gpu.snapshot()).unwrap();
    let err = block_on(gpu.step_read()).err().unwrap().to_string();
    assert!(err.contains("non-finite"), "{err}");
    let after = block_on(gpu.snapshot()).unwrap();
    assert_eq!(after.step, before.step, "the skipped step is not counted");
    assert_eq!(after.params, before.params, "the weights are those of the last good step");
    assert_eq!(after.optimizer, before.optimizer, "and so is the optimizer state");
}

/// Brownian motion or particles (`Session::flow`): refused before three frames, then a fit of the
/// probe row's first tokens with one particle per token in the sphere view's basis, kept until a
/// new frame comes.
#[test]
fn the_flow_fit_needs_three_frames_and_draws_one_particle_per_token() {
    let mut s =
        block_on(Session::new(experiment(config(OptimizerConfig::adam(), 12), BackendChoice::Cpu), BUDGET)).unwrap();
    let err = s.flow(0).unwrap_err().to_string();
    assert!(err.contains("three or more probe frames"), "{err}");
    run_to_end(&mut s);
    let f = s.flow(1).unwrap();
    assert_eq!((f.depth, f.points, f.times.len()), (1, 24, s.probe().frames().len() - 1));
    assert_eq!(f.particles.len(), 3 * f.points);
    for p in f.particles.chunks_exact(3) {
        assert!((p.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5, "a particle off the unit sphere: {p:?}");
    }
    assert!(f.rmse_brownian.is_finite() && f.rmse_particles.is_finite() && f.beta > 0.0);
    assert_eq!(f.better, if f.rmse_particles < f.rmse_brownian { "particles" } else { "brownian" });
    assert_eq!(s.flow(1).unwrap(), f, "the same frames give the same fit");
}

/// On the GPU a step's loss comes with its round; a save in between reads the round first, and a
/// non-finite step found there pauses the run at the last good state, as a step would: the save
/// holds that state and the next step says why.
#[test]
fn a_save_between_rounds_finds_a_non_finite_step_and_the_next_step_says_so() {
    let mut cfg = config(OptimizerConfig::adam(), 20);
    (cfg.lr, cfg.eval_every) = (1e30, 0);
    let mut exp = experiment(cfg, BackendChoice::Gpu);
    exp.probe.every = 7;
    let mut s = block_on(Session::new(exp, BUDGET)).unwrap();
    assert!(s.adapter().is_some(), "{}", s.backend());
    for step in 1..=5 {
        let p = block_on(s.step()).unwrap();
        assert_eq!(
            p,
            Progress::Stepped { step, loss: None, val: None, recorded: false, wrote: false },
            "nothing read yet"
        );
    }
    assert!(s.metrics().train.is_empty());
    let snap = block_on(s.snapshot()).unwrap();
    assert!(snap.params.iter().all(|p| p.is_finite() && p.abs() < 1e6), "the saved weights are the kept ones");
    let Progress::NonFinite { message, kept } = block_on(s.step()).unwrap() else { panic!("the stop is reported") };
    assert!(message.contains("training paused"), "{message}");
    assert_eq!((snap.step, s.step_count()), (kept, kept));
    assert!(s.metrics().train.iter().all(|p| p.1.is_finite() && p.0 <= kept));
}

/// A second worker in the same thread: it computes each task as it arrives (or fails from
/// `fail_at` on), and counts the tasks.
struct InlinePool {
    worker: std::cell::RefCell<Option<ShardWorker>>,
    tasks: std::rc::Rc<std::cell::Cell<usize>>,
    fail_at: usize,
}

impl ShardPool for InlinePool {
    fn start(&self, task: ShardTask) -> Option<ShardFuture> {
        let n = self.tasks.get() + 1;
        self.tasks.set(n);
        let mut slot = self.worker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.fits(&task)) {
            *slot = Some(ShardWorker::for_task(&task).unwrap());
        }
        let result = if n >= self.fail_at {
            Err("it crashed".to_string())
        } else {
            slot.as_mut().unwrap().run(task).map_err(|e| e.to_string())
        };
        Some(Box::pin(std::future::ready(result)))
    }
}

#[test]
fn a_second_worker_takes_half_of_each_step_and_a_failed_one_changes_no_number() {
    let mut cfg = config(OptimizerConfig::adam(), 10);
    // Big enough for a second worker (`remote::MIN_FLOPS`).
    cfg.model = ModelConfig { d_ff: 128, context: 32, ..cfg.model };
    cfg.batch = 16;
    assert!(engine::memory::step_flops(&cfg) >= engine::train::remote::MIN_FLOPS);
    let mut alone = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
    let expected = run_to_end(&mut alone);
    for fail_at in [usize::MAX, 6] {
        let tasks = std::rc::Rc::new(std::cell::Cell::new(0));
        let pool = InlinePool { worker: Default::default(), tasks: tasks.clone(), fail_at };
        let mut s = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
        s.set_shard_pool(Some(Box::new(pool)));
        let got = run_to_end(&mut s);
        assert_eq!(
            format!("{got:?}"),
            format!("{expected:?}"),
            "the same steps, losses and validations (fail at {fail_at})"
        );
        assert_eq!(s.metrics().train, alone.metrics().train);
        let notices = s.take_notices();
        if fail_at == usize::MAX {
            assert_eq!(tasks.get(), 10, "every step gave the other worker its shards");
            assert!(s.uses_shard_pool() && notices.is_empty(), "{notices:?}");
        } else {
            assert_eq!(tasks.get(), 6, "no task after the failure");
            assert!(!s.uses_shard_pool());
            assert!(notices.iter().any(|n| n.contains("second worker stopped (it crashed)")), "{notices:?}");
        }
    }
}

/// Stops at every tenth question it is asked (a step asks 3 or 7: each is taken in the end).
struct EveryTenth(std::cell::Cell<usize>);

impl Interrupt for EveryTenth {
    fn stop(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + '_>> {
        self.0.set(self.0.get() + 1);
        Box::pin(std::future::ready(self.0.get().is_multiple_of(10)))
    }
}

#[test]
fn steps_stopped_for_an_interrupt_are_taken_again_with_the_same_numbers() {
    let mut cfg = config(OptimizerConfig::adam(), 10);
    cfg.model = ModelConfig { d_ff: 128, context: 32, ..cfg.model };
    cfg.batch = 16;
    let mut alone = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
    let expected = run_to_end(&mut alone);
    for pool in [false, true] {
        let mut s = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
        if pool {
            let tasks = std::rc::Rc::new(std::cell::Cell::new(0));
            s.set_shard_pool(Some(Box::new(InlinePool { worker: Default::default(), tasks, fail_at: usize::MAX })));
        }
        s.set_interrupt(Some(Box::new(EveryTenth(Default::default()))));
        let all = run_to_end(&mut s);
        let stopped: Vec<_> = all
            .iter()
            .filter_map(|p| if let Progress::Interrupted { step } = p { Some(*step) } else { None })
            .collect();
        assert!(stopped.len() >= 2, "with the other worker: {pool}; stopped at {stopped:?}");
        let got: Vec<_> = all.into_iter().filter(|p| !matches!(p, Progress::Interrupted { .. })).collect();
        assert_eq!(format!("{got:?}"), format!("{expected:?}"), "the same steps, losses and validations");
        assert_eq!(s.metrics().train, alone.metrics().train);
        assert_eq!(s.metrics().val, alone.metrics().val);
        assert_eq!(block_on(s.snapshot()).unwrap().params, block_on(alone.snapshot()).unwrap().params);
    }
}

/// The state a non-finite loss goes back to is copied every `ROLLBACK_EVERY` steps; going back
/// recomputes the steps since the copy, so the run keeps the uninterrupted run's state to the bit.
#[test]
fn a_non_finite_loss_goes_back_to_the_uninterrupted_runs_state_from_an_older_copy() {
    // Without clipping, SGD at rate 1 and Adam at rate 1 overflow after 47 and 29 steps: past the
    // copy at step 32 and before it.
    for (name, expected) in [("sgd", 46), ("adam", 28)] {
        let mut cfg = config(OptimizerConfig::named(name).unwrap(), 300);
        (cfg.lr, cfg.clip) = (1.0, 0.0);
        let mut s = block_on(Session::new(experiment(cfg.clone(), BackendChoice::Cpu), BUDGET)).unwrap();
        let kept = loop {
            match block_on(s.step()).unwrap() {
                Progress::NonFinite { kept, .. } => break kept,
                Progress::Done => panic!("{name}: rate 1 without clipping trained to the end"),
                Progress::Stepped { .. } | Progress::Interrupted { .. } => {}
            }
        };
        assert_eq!(kept, expected, "{name}");
        let mut reference = Trainer::new(cfg).unwrap();
        let losses: Vec<f32> = (0..kept).map(|_| reference.step().unwrap().loss).collect();
        let (snap, theirs) = (block_on(s.snapshot()).unwrap(), reference.snapshot());
        assert_eq!(snap.step, kept);
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&snap.params), bits(&theirs.params), "{name}: weights");
        let state = |s: &engine::checkpoint::Snapshot| {
            s.optimizer.iter().map(|(k, v)| (k.clone(), bits(v))).collect::<Vec<_>>()
        };
        assert_eq!(state(&snap), state(&theirs), "{name}: optimizer state");
        let ours: Vec<f32> = s.metrics().train.iter().map(|p| p.1).collect();
        assert_eq!(ours, losses, "{name}: each step's loss once, up to the kept step");
    }
}
