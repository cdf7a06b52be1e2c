//! `lab`: the Spherewalk engine headless. Every command can print JSON for scripts.

/// `println!` and `print!` that never panic (`output`).
macro_rules! say {
    ($($t:tt)*) => { $crate::output::print(format_args!($($t)*), true) };
}
macro_rules! say_part {
    ($($t:tt)*) => { $crate::output::print(format_args!($($t)*), false) };
}

mod alloc;
mod args;
mod bench;
mod history;
mod inspect;
mod output;
mod race;
mod sample;
mod science;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use args::RunArgs;
use clap::{Args, Parser, Subcommand};
use engine::checkpoint::{self, Snapshot};
use engine::data::Split;
use engine::gpu::block_on;
use engine::model::{Cache, Grads};
use engine::session::{BackendChoice, Experiment, Metrics, Progress, Session};
use engine::{Error, Trainer};
use serde_json::json;

#[derive(Parser)]
#[command(name = "lab", version, about = "Spherewalk's laboratory on the command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Threads a CPU training step spreads its batch shards over (default: every core). The
    /// numbers are the same for any count.
    #[arg(long, global = true)]
    threads: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model and report losses against count-based baselines.
    Train(TrainArgs),
    /// Check every parameter's gradient against finite differences (f64).
    Gradcheck {
        #[arg(long)]
        json: bool,
    },
    /// What a saved model or a real one writes: samples of a prompt with temperature, top-k and top-p.
    Sample(sample::SampleArgs),
    /// A real model (Hugging Face's files) reading a text: tokens on the sphere at every layer,
    /// attention as a Markov chain and against the Gaussian kernel, Brownian motion through depth.
    Inspect(inspect::InspectArgs),
    /// A model's checkpoints along its training (Pythia's revisions) reading the same texts: the
    /// attention entropy per layer at every step (JoMA: sparse, then dense?), the other lenses,
    /// identical checkpoints found.
    History(history::HistoryArgs),
    /// Loss of a checkpoint on a fixed batch; optionally write its gradients as safetensors.
    Eval {
        #[arg(long)]
        checkpoint: PathBuf,
        #[arg(long)]
        data: Option<String>,
        #[arg(long)]
        grads: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// The same runs for several optimizers: steps and seconds to a target validation loss.
    Race(race::RaceArgs),
    /// Brownian walkers on a sphere against the closed forms for E[cos theta] and MSD.
    Brownian(science::BrownianArgs),
    /// Tokens as interacting particles on the sphere (pure self-attention flow): clustering over time.
    Particles(science::ParticlesArgs),
    /// Attention entropy over training per layer (JoMA), or with --toy JoMA's toy dynamics.
    Joma(science::JomaArgs),
    /// Train with probes: tokens on the sphere, attention as a Gaussian kernel, Brownian fits.
    Sphere(science::SphereArgs),
    /// Run the standard experiments; write figures and summary.md answering each paper claim.
    Report(science::ReportArgs),
    /// Training-step time at three sizes and matmul GFLOP/s.
    Bench {
        #[arg(long)]
        json: bool,
        /// Steps timed per size.
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// cpu: step times per optimizer, matmul and probe cost; gpu: the WGSL backend against the CPU.
        #[arg(long, value_enum, default_value = "cpu")]
        backend: BackendChoice,
        /// Only these sizes' step rows (tiny, small, medium; on the GPU also large), on the CPU
        /// without the matmul and probe rows.
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<String>,
        /// Only these optimizers' step rows (GPU default: adam, cgfac), on the CPU without the
        /// matmul and probe rows.
        #[arg(long, value_delimiter = ',')]
        optimizers: Vec<String>,
        /// GPU: the matmul's sides (default 256-2048, and 4096 on hardware).
        #[arg(long, value_delimiter = ',')]
        matmul: Vec<usize>,
        /// CPU: time what `spherewalk.bench(SPEC)` times in the page (JSON, every field optional:
        /// d_model, layers, heads, context, batch, steps, optimizer), natively on every core.
        #[arg(long, value_name = "SPEC", conflicts_with_all = ["sizes", "optimizers", "iters", "matmul"])]
        spec: Option<String>,
        /// A model's folder (as `lab inspect --model`): its forward of 64 and 256 tokens (with
        /// --backend gpu on the GPU too), the whole inspection and greedy writing with the GB/s
        /// of weights it reads (bench/model_reference.py runs PyTorch beside it).
        #[arg(long, conflicts_with_all = ["sizes", "optimizers", "matmul", "spec"])]
        model: Option<PathBuf>,
    },
}

#[derive(Args)]
struct TrainArgs {
    #[arg(long, default_value = "adam")]
    optimizer: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    run: RunArgs,
    /// Where the step runs: cpu, gpu (AdamW, SGD, CG-FAC), or auto (a hardware GPU when there is
    /// one, else the CPU). Default: cpu, or the experiment's choice with --config.
    #[arg(long, value_enum)]
    backend: Option<BackendChoice>,
    /// Read the whole experiment from this JSON file (as --print-config writes it, or a bare
    /// training config); the run flags cannot be given with it (edit the file instead).
    #[arg(long, conflicts_with_all = [
        "optimizer", "seed", "data", "steps", "d_model", "layers", "heads", "d_ff", "context", "batch", "lr",
        "activation", "bidirectional", "eval_every", "damping", "no_pi_damping", "fisher", "cg_iters", "cg_tol",
        "warm_start", "product", "factor_decay", "update_interval", "inverse_interval", "kl_clip", "momentum",
    ])]
    config: Option<PathBuf>,
    /// Print the experiment JSON the other flags describe, and exit (replay it in the page).
    #[arg(long)]
    print_config: bool,
    /// Refuse runs that need more memory than this many MiB (default 16 GiB).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
    /// Save a checkpoint here at the end (and where a non-finite loss stops the run).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Continue from this checkpoint (its config wins; --steps sets the new total).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// At the end, fit Brownian motion and the particles' attention flow to the first probe row's
    /// tokens at this depth (0..=layers) over training, as the page's "Brownian or not?" panel does.
    #[arg(long)]
    flow: Option<usize>,
    /// Write a sample every this many steps (and at step 0 and the end), from the start of a
    /// validation line.
    #[arg(long)]
    sample_every: Option<usize>,
    /// Tokens per sample written during training.
    #[arg(long, default_value_t = 80)]
    sample_tokens: usize,
    #[arg(long)]
    json: bool,
}

/// The experiment the flags (or --config) describe.
fn experiment_of(a: &TrainArgs) -> Result<Experiment, Error> {
    let mut exp = match &a.config {
        Some(path) => {
            let bytes = args::read_limited(path, "the config")?;
            let text = String::from_utf8(bytes)
                .map_err(|_| Error::Config(format!("the config {} is not UTF-8 text", path.display())))?;
            Experiment::from_json(text.trim_start_matches('\u{feff}'))
                .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?
        }
        None => {
            let mut exp = Experiment::new(a.run.config(&a.optimizer, a.seed)?);
            exp.backend = BackendChoice::Cpu;
            exp
        }
    };
    if let Some(b) = a.backend {
        exp.backend = b;
    }
    if let Some(every) = a.sample_every {
        if every == 0 {
            return Err(Error::Config("--sample-every must be at least 1".into()));
        }
        exp.writing.every = every;
        exp.writing.tokens = a.sample_tokens;
    }
    Ok(exp)
}

fn train(a: TrainArgs) -> Result<(), Error> {
    let exp = experiment_of(&a)?;
    // Refused before the run, not after it.
    if let Some(depth) = a.flow.filter(|&d| d > exp.train.model.layers) {
        let layers = exp.train.model.layers;
        return Err(Error::Config(format!("--flow {depth}: this model's depths are 0 to {layers}")));
    }
    if a.print_config {
        say!("{}", exp.to_json());
        return Ok(());
    }
    if let Some(dir) = &a.save {
        checkpoint::writable(dir)?;
    }
    let budget = inspect::budget(a.memory_limit_mib);
    let session = match &a.resume {
        Some(dir) => {
            let mut snap = Snapshot::load(dir)?;
            if snap.optimizer.is_empty() {
                eprintln!("{}: weights without optimizer state: the optimizer starts fresh", dir.display());
            }
            if let Some(s) = a.run.steps {
                snap.config.steps = s;
            }
            block_on(Session::restore(exp, snap, Metrics::default(), budget))
        }
        None => block_on(Session::new(exp, budget)),
    };
    let mut session = session?;
    let steps = session.experiment().train.steps;
    if !a.json {
        eprintln!("backend: {}", session.backend());
    }
    let bar = (!a.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(steps as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]")
                .expect("valid template"),
        );
        bar.set_position(session.step_count() as u64);
        bar
    });
    let start = Instant::now();
    let first_step = session.step_count();
    let mut stopped = None;
    if session.step_count() == 0 {
        print_written(&session, a.json, bar.as_ref());
    }
    loop {
        let progress = block_on(session.step())?;
        for n in session.take_notices() {
            eprintln!("{n}");
        }
        if let Progress::Stepped { wrote: true, .. } = progress {
            print_written(&session, a.json, bar.as_ref());
        }
        match progress {
            Progress::Done => break,
            Progress::NonFinite { message, .. } => {
                stopped = Some(message);
                break;
            }
            Progress::Stepped { step, loss: Some(loss), val: Some(val), .. } => {
                let line = json!({
                    "step": step,
                    "train_loss": loss,
                    "val_loss": val,
                    "elapsed_s": start.elapsed().as_secs_f64(),
                    "preconditioner": session.diagnostics().map(summarize),
                });
                match &bar {
                    Some(b) => b.set_message(format!("train {loss:.4}  val {val:.4}")),
                    None if a.json => say!("{line}"),
                    None => eprintln!("step {step:>6}  train {loss:.4}  val {val:.4}"),
                }
            }
            // The lab sets no interrupt: its steps are never stopped.
            Progress::Stepped { .. } | Progress::Interrupted { .. } => {}
        }
        if let Some(b) = &bar {
            b.set_position(session.step_count() as u64);
        }
    }
    if let Some(b) = bar {
        b.finish();
    }
    if let Some(dir) = &a.save {
        block_on(session.snapshot())?.save(dir)?;
    }
    if let Some(message) = stopped {
        return Err(Error::Config(message));
    }
    let wall = start.elapsed().as_secs_f64();
    let mut summary = session.summary(wall, session.step_count() - first_step);
    if let Some(depth) = a.flow {
        summary.flow = Some(session.flow(depth)?);
    }
    if a.json {
        say!("{}", serde_json::to_string(&summary)?);
    } else {
        let fmt = |v: Option<f32>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
        say!(
            "val loss {} (bigram {:.4}, unigram {:.4}) after {} steps in {wall:.1} s",
            fmt(summary.final_val_loss),
            summary.bigram_val_loss,
            summary.unigram_val_loss,
            summary.steps
        );
        if let Some(f) = &summary.flow {
            say!(
                "depth {}: Brownian RMSE {:.3e} (D {:.3e}), particles RMSE {:.3e} (beta {:.2}, {:.3e} per step): {} fits \
                 better",
                f.depth, f.rmse_brownian, f.diffusion, f.rmse_particles, f.beta, f.time_scale, f.better
            );
        }
    }
    Ok(())
}

/// The last sample the session wrote: a JSON progress line, or the text on stderr.
fn print_written(session: &Session, as_json: bool, bar: Option<&indicatif::ProgressBar>) {
    let Some(w) = session.written().last() else { return };
    if as_json {
        let line = json!({"step": w.step, "sample": {"prompt": w.sample.prompt, "text": w.sample.text, "seed": w.sample.seed}});
        say!("{line}");
        return;
    }
    let text =
        format!("step {:>6} writes: {}\u{2502}{}", w.step, w.sample.prompt, w.sample.text.replace('\n', "\u{21b5}"));
    match bar {
        Some(b) => b.println(text),
        None => eprintln!("{text}"),
    }
}

/// CG iterations and residuals over the layers of the last step, and the running fallback count.
fn summarize(d: &engine::optim::second_order::Diagnostics) -> serde_json::Value {
    let n = d.layers.len().max(1) as f64;
    json!({
        "mean_cg_iterations": d.layers.iter().map(|l| l.cg.iterations as f64).sum::<f64>() / n,
        "max_rel_residual": d.layers.iter().map(|l| l.cg.rel_residual).fold(0.0, f64::max),
        "fallbacks_total": d.fallbacks_total,
        "damping": d.damping,
        "kl_scale": d.kl_scale,
        "precond_ms": d.precond_ms,
        "layers": d.layers,
    })
}

fn gradcheck(as_json: bool) -> Result<(), Error> {
    let cases = engine::gradcheck::check_all()?;
    let max = cases.iter().map(|c| c.max_rel_err).fold(0.0, f64::max);
    if as_json {
        say!("{}", json!({"cases": cases, "max_rel_err": max}));
    } else {
        for c in &cases {
            say!("{:?} causal={}: max relative error {:.2e}", c.activation, c.causal, c.max_rel_err);
            for t in &c.tensors {
                say!("    {:<28} {:.2e}", t.name, t.rel_err);
            }
        }
        say!("overall max relative error {max:.2e}");
    }
    let tol = engine::gradcheck::TOLERANCE;
    if max >= tol {
        return Err(Error::Config(format!("gradient check failed: max relative error {max:.2e} >= {tol:e}")));
    }
    Ok(())
}

fn eval(dir: PathBuf, data: Option<String>, grads_out: Option<PathBuf>, as_json: bool) -> Result<(), Error> {
    let mut snap = Snapshot::load(&dir)?;
    if let Some(d) = data {
        snap.config.data = args::data_spec(&d)?;
    }
    let trainer = Trainer::restore(snap)?;
    let model = trainer.model();
    let cfg = trainer.config();
    let n = cfg.batch * cfg.model.context;
    let (mut tokens, mut targets) = (vec![0; n], vec![0; n]);
    trainer.data().batch(Split::Val, 0, &mut tokens, &mut targets);
    let mut cache = Cache::new(&model.cfg, cfg.batch);
    let loss = model.forward(&mut cache, &tokens, &targets)?;
    if let Some(path) = &grads_out {
        let mut grads = Grads::new(model, cfg.batch);
        model.backward(&cache, &mut grads);
        let bytes = checkpoint::to_safetensors(&checkpoint::named_tensors(&model.layout, &grads.data))?;
        std::fs::write(path, bytes)
            .map_err(|e| Error::Checkpoint(format!("cannot write the gradients to {}: {e}", path.display())))?;
    }
    let out = json!({"loss": loss, "tokens": cache.count, "step": trainer.step_count(), "grads": grads_out});
    if as_json {
        say!("{out}");
    } else {
        say!("loss {loss:.5} on validation batch 0 ({} scored tokens)", cache.count);
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        engine::train::shards::set_default_threads(n);
    }
    let result = match cli.command {
        Command::Train(a) => train(a),
        Command::Sample(a) => sample::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::History(a) => history::run(a),
        Command::Gradcheck { json } => gradcheck(json),
        Command::Eval { checkpoint, data, grads, json } => eval(checkpoint, data, grads, json),
        Command::Bench { json, backend, spec: Some(spec), .. } => bench::page_spec(json, backend, &spec),
        Command::Bench { iters: 0, spec: None, .. } => Err(Error::Config("--iters must be at least 1".into())),
        Command::Bench { json, iters, backend, model: Some(path), .. } => bench::model(json, iters, &path, backend),
        Command::Bench { json, iters, backend, sizes, optimizers, matmul, spec: None, model: None } => {
            bench::run(json, iters, backend, bench::Only { sizes, optimizers, matmul })
        }
        Command::Race(a) => race::run(a),
        Command::Brownian(a) => science::run_brownian(a),
        Command::Particles(a) => science::run_particles(a),
        Command::Joma(a) => science::run_joma(a),
        Command::Sphere(a) => science::run_sphere(a),
        Command::Report(a) => science::run_report(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
