//! `lab`: the Spherewalk engine headless. Every command can print JSON for scripts.

mod args;
mod backend;
mod bench;
mod race;
mod science;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use args::RunArgs;
use clap::{Args, Parser, Subcommand};
use engine::checkpoint::{self, Snapshot};
use engine::data::Split;
use engine::model::{Cache, Grads};
use engine::{Error, Trainer};
use serde_json::json;

#[derive(Parser)]
#[command(name = "lab", version, about = "Spherewalk's laboratory on the command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
        backend: backend::Backend,
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
    /// Where the step runs: the CPU engine, the WGSL backend (AdamW, SGD, CG-FAC with the factors
    /// product), or the GPU when one exists.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: backend::Backend,
    /// Save a checkpoint here at the end (and where a non-finite loss stops the run).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Continue from this checkpoint (its config wins; --steps sets the new total).
    #[arg(long)]
    resume: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

fn train(a: TrainArgs) -> Result<(), Error> {
    let trainer = match &a.resume {
        Some(dir) => {
            let mut snap = Snapshot::load(dir)?;
            if let Some(s) = a.run.steps {
                snap.config.steps = s;
            }
            Trainer::restore(snap)?
        }
        None => Trainer::new(a.run.config(&a.optimizer, a.seed)?)?,
    };
    let cfg = trainer.config().clone();
    let baselines = trainer.baselines();
    let num_params = trainer.model().num_params();
    let (mut trainer, chosen) = backend::Runner::new(trainer, a.backend)?;
    if !a.json {
        eprintln!("{chosen}");
    }
    let bar = (!a.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(cfg.steps as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {msg}  [{elapsed} < {eta}]")
                .expect("valid template"),
        );
        bar.set_position(trainer.step_count() as u64);
        bar
    });
    let start = Instant::now();
    let first_step = trainer.step_count();
    let (mut train_loss, mut val_loss) = (f32::NAN, f32::NAN);
    let mut failure = None;
    while trainer.step_count() < cfg.steps {
        match trainer.step() {
            Ok(r) => train_loss = r.loss,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        let s = trainer.step_count();
        if s % cfg.eval_every.max(1) == 0 || s == cfg.steps {
            val_loss = trainer.evaluate()?;
            let line = json!({
                "step": s,
                "train_loss": train_loss,
                "val_loss": val_loss,
                "elapsed_s": start.elapsed().as_secs_f64(),
                "preconditioner": trainer.diagnostics().map(summarize),
            });
            match &bar {
                Some(b) => b.set_message(format!("train {train_loss:.4}  val {val_loss:.4}")),
                None if a.json => println!("{line}"),
                None => eprintln!("step {s:>6}  train {train_loss:.4}  val {val_loss:.4}"),
            }
        }
        if let Some(b) = &bar {
            b.set_position(s as u64);
        }
    }
    if let Some(b) = bar {
        b.finish();
    }
    if let Some(dir) = &a.save {
        trainer.snapshot()?.save(dir)?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let wall = start.elapsed().as_secs_f64();
    let done = trainer.step_count() - first_step;
    let summary = json!({
        "engine_version": engine::VERSION,
        "data": cfg.data.name(),
        "optimizer": cfg.optimizer.name(),
        "final_train_loss": train_loss,
        "final_val_loss": val_loss,
        "unigram_val_loss": baselines.unigram,
        "bigram_val_loss": baselines.bigram,
        "steps": trainer.step_count(),
        "wall_s": wall,
        "tokens_per_s": (done * cfg.batch * cfg.model.context) as f64 / wall.max(1e-9),
        "params": num_params,
        "backend": trainer.adapter().map_or("cpu".to_string(), |a| format!("gpu ({a})")),
        "vocab": cfg.model.vocab,
    });
    if a.json {
        println!("{summary}");
    } else {
        println!(
            "val loss {val_loss:.4} (bigram {:.4}, unigram {:.4}) after {} steps in {wall:.1} s",
            baselines.bigram,
            baselines.unigram,
            trainer.step_count()
        );
    }
    Ok(())
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
        println!("{}", json!({"cases": cases, "max_rel_err": max}));
    } else {
        for c in &cases {
            println!("{:?} causal={}: max relative error {:.2e}", c.activation, c.causal, c.max_rel_err);
            for t in &c.tensors {
                println!("    {:<28} {:.2e}", t.name, t.rel_err);
            }
        }
        println!("overall max relative error {max:.2e}");
    }
    if max >= 1e-3 {
        return Err(Error::Config(format!("gradient check failed: max relative error {max:.2e} >= 1e-3")));
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
        std::fs::write(path, checkpoint::to_safetensors(&checkpoint::named_tensors(&model.layout, &grads.data))?)?;
    }
    let out = json!({"loss": loss, "tokens": cache.count, "step": trainer.step_count(), "grads": grads_out});
    if as_json {
        println!("{out}");
    } else {
        println!("loss {loss:.5} on validation batch 0 ({} scored tokens)", cache.count);
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(a) => train(a),
        Command::Gradcheck { json } => gradcheck(json),
        Command::Eval { checkpoint, data, grads, json } => eval(checkpoint, data, grads, json),
        Command::Bench { json, iters, backend } => bench::run(json, iters, backend),
        Command::Race(a) => race::run(a),
        Command::Brownian(a) => science::run_brownian(a),
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
