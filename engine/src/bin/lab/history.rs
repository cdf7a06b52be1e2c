//! `lab history`: a model's checkpoints along its training (Pythia's revisions, each a folder),
//! the same texts read by each: per checkpoint and layer the attention entropy JoMA plots, with
//! its spread over the texts, the other lenses through depth, copies of earlier weights found, and
//! per layer whether the entropy falls and rises again.

use std::path::PathBuf;

use clap::Args;
use engine::lenses::{self, history, History};
use engine::pretrained::Pretrained;
use engine::Error;

#[derive(Args)]
pub struct HistoryArgs {
    /// A checkpoint's folder (as `lab inspect --model`), once per checkpoint. Its step comes from
    /// `--steps`, else from a `stepN` in its path (Pythia's revisions: `…/step3000`).
    #[arg(long, required = true)]
    model: Vec<PathBuf>,
    /// A text every checkpoint reads; several give the entropy's spread over texts.
    #[arg(long, required = true)]
    text: Vec<String>,
    /// The checkpoints' steps, in the order of `--model` (comma-separated).
    #[arg(long, value_delimiter = ',')]
    steps: Vec<u64>,
    /// One JSON object: steps, layers, entropy[checkpoint][layer], spread, checkpoints (with the
    /// other lenses and the weights' hash), identical, verdict.
    #[arg(long)]
    json: bool,
    /// Refuse to open or read more than this many MiB (default 16 GiB).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
}

pub fn run(a: HistoryArgs) -> Result<(), Error> {
    if !a.steps.is_empty() && a.steps.len() != a.model.len() {
        return Err(Error::Config(format!(
            "--steps gives {} steps for {} checkpoints (--model): give one per checkpoint, or none",
            a.steps.len(),
            a.model.len()
        )));
    }
    let steps = match a.steps.is_empty() {
        false => a.steps.clone(),
        true => a
            .model
            .iter()
            .map(|m| {
                history::step_in_name(&m.to_string_lossy()).ok_or_else(|| {
                    Error::Config(format!("{}: no stepN in its path; give the steps with --steps", m.display()))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let budget = crate::inspect::budget(a.memory_limit_mib);
    let started = std::time::Instant::now();
    let mut name = String::new();
    let mut checkpoints = Vec::with_capacity(a.model.len());
    // One checkpoint in memory at a time.
    for (path, &step) in a.model.iter().zip(&steps) {
        let read = Pretrained::open(path, budget).and_then(|p| {
            let readings = a
                .text
                .iter()
                .map(|t| lenses::read(&p, t, budget).and_then(|r| lenses::inspect(&p, &r)))
                .collect::<Result<Vec<_>, _>>()?;
            name.clone_from(&p.name);
            history::checkpoint(step, &path.display().to_string(), &p, &readings)
        });
        match read {
            Ok(c) => checkpoints.push(c),
            // What was read stays: the history of the checkpoints before this one, then why it stopped.
            Err(e) if !checkpoints.is_empty() => {
                let n = checkpoints.len();
                show(&history::history(&name, a.text.len(), checkpoints)?, a.json, started);
                return Err(Error::Checkpoint(format!(
                    "step {step} ({}): {e}; the history above holds the {n} checkpoints read before it",
                    path.display()
                )));
            }
            Err(e) => return Err(Error::Checkpoint(format!("step {step} ({}): {e}", path.display()))),
        }
        if !a.json {
            eprintln!("step {step}: {} read ({:.1} s so far)", path.display(), started.elapsed().as_secs_f64());
        }
    }
    show(&history::history(&name, a.text.len(), checkpoints)?, a.json, started);
    Ok(())
}

fn show(h: &History, json: bool, started: std::time::Instant) {
    match json {
        true => match serde_json::to_string(h) {
            Ok(s) => say!("{s}"),
            Err(e) => eprintln!("the history could not be written as JSON: {e}"),
        },
        false => print(h, started.elapsed().as_secs_f64()),
    }
}

fn print(h: &History, seconds: f64) {
    say!("{}: {} checkpoints, {} layers, {} texts, read in {seconds:.1} s", h.model, h.steps.len(), h.layers, h.texts);
    say!("\nattention entropy per layer (nats; ± half the spread over the texts)");
    let heads: Vec<String> = (0..h.layers).map(|l| format!("{:>13}", format!("layer {l}"))).collect();
    say!("{:>8}  {}", "step", heads.join(""));
    for c in &h.checkpoints {
        let cells: Vec<String> = c
            .entropy
            .iter()
            .zip(&c.spread)
            .map(|(e, s)| format!("{:>13}", format!("{e:.3} ±{:.3}", s / 2.0)))
            .collect();
        let copy = c.same_as.map(|s| format!("  the same weights as step {s}")).unwrap_or_default();
        say!("{:>8}  {}{copy}", c.step, cells.join(""));
    }
    for (later, earlier) in &h.identical {
        say!("\nstep {later} has exactly step {earlier}'s weights: it is left out of the verdicts.");
    }
    say!("");
    for v in &h.verdict {
        say!("- {}", v.sentence);
    }
}
