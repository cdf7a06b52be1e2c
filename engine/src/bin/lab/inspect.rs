//! `lab inspect`: a real transformer (the GPT-2 family, from Hugging Face's files) reading a text,
//! through every lens the lab has.

use std::path::PathBuf;

use clap::Args;
use engine::gpu::reader::GpuReader;
use engine::gpu::{block_on, GpuContext, GpuError};
use engine::lenses::{self as inspect, Comparison, Inspection, Read};
use engine::memory::{self, DEFAULT_BUDGET};
use engine::pretrained::Pretrained;
use engine::session::BackendChoice;
use engine::Error;

#[derive(Args)]
pub struct InspectArgs {
    /// A folder with config.json and model.safetensors (Hugging Face's layout), or the
    /// .safetensors file with its config.json beside it.
    #[arg(long)]
    model: PathBuf,
    /// The text the model reads (up to its context, in GPT-2's tokens).
    #[arg(long)]
    text: String,
    /// A second text to compare with the first, read through the same model: where they part,
    /// how far each shared token's place on the sphere differs at every layer, each head's
    /// entropy in both, and the candidates after each (printed instead of the reading).
    #[arg(long, conflicts_with_all = ["csv", "dump"])]
    compare: Option<String>,
    /// One JSON object: tokens, pieces, per layer the radius and kernel statistics and entropy per
    /// head, the depth fit with its verdicts, and the next-token candidates.
    #[arg(long)]
    json: bool,
    /// The layer table as CSV: one row per layer and head (the page's "Download reading" gives
    /// the same).
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Also write the raw tensors here (safetensors): hidden.{i} (T, C) entering block i
    /// (i = n_layer: before ln_f), attn.{l} (NH, T, T), logits (T, V), and the logit lens
    /// lens.{d} (T, V) for d < n_layer.
    #[arg(long)]
    dump: Option<PathBuf>,
    /// The logit lens: the model's own head (final norm and unembedding) read from the stream
    /// entering every block, its top candidates at every depth and position and where the final
    /// answer ranks (in the JSON as logit_lens). Costs as much as L + 1 more heads.
    #[arg(long, conflicts_with_all = ["compare", "csv"])]
    logit_lens: bool,
    /// Refuse to open or read more than this many MiB (default 16 GiB).
    #[arg(long)]
    memory_limit_mib: Option<u64>,
    /// Where the forward pass runs: cpu, gpu (the WGSL forward the trainer uses), or auto (a
    /// hardware GPU when there is one, else the CPU). The lenses are measured on the CPU.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendChoice,
}

/// `--memory-limit-mib` as bytes (every command that takes it).
pub fn budget(mib: Option<u64>) -> u64 {
    mib.map_or(DEFAULT_BUDGET, |m| m.saturating_mul(1 << 20))
}

pub fn run(a: InspectArgs) -> Result<(), Error> {
    let budget = budget(a.memory_limit_mib);
    // The dump's path is checked before the work: a path that cannot be written fails at once.
    let dump = a.dump.as_deref().map(|p| Dump::open(p, &Pretrained::inputs(&a.model))).transpose()?;
    let model = Pretrained::open(&a.model, budget)?;
    let read = read(&model, &a.text, budget, a.backend)?;
    if let Some(second) = &a.compare {
        // Both passes are held at once: the second within what the first leaves.
        let left = budget.saturating_sub(memory::read_bytes(&model.model.cfg, read.ids.len())?);
        let other = self::read(&model, second, left, a.backend)?;
        let c = inspect::compare(&model, &read, &other)?;
        match a.json {
            true => say!("{}", serde_json::to_string(&c)?),
            false => print_comparison(&c),
        }
        return Ok(());
    }
    let mut report = inspect::inspect(&model, &read)?;
    if a.logit_lens {
        report.logit_lens = Some(inspect::logit_lens(&model, &read)?);
    }
    if let Some(d) = dump {
        d.write(&inspect::dump(&model, &read)?)?;
    }
    if a.json {
        say!("{}", serde_json::to_string(&report)?);
    } else if a.csv {
        say_part!("{}", inspect::table::csv(&report));
    } else {
        print(&report, &model);
    }
    Ok(())
}

/// Where `--dump` writes: a file that can be written, and never one the model is read from.
struct Dump {
    path: PathBuf,
    file: std::fs::File,
    made: bool,
}

impl Dump {
    fn open(path: &std::path::Path, inputs: &[PathBuf]) -> Result<Dump, Error> {
        use std::os::unix::fs::MetadataExt;
        let refuse = |why: String| Error::Config(format!("--dump {}: {why}", path.display()));
        let existing = std::fs::metadata(path).ok();
        // The same file under any name: the same path, a link, or a hard link (the same inode).
        let same = |a: &std::path::Path| match (std::fs::metadata(a), &existing) {
            (Ok(a), Some(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if let Some(input) = inputs.iter().find(|i| same(i)) {
            return Err(refuse(format!(
                "that is {}, which the model is read from; choose another path",
                input.display()
            )));
        }
        // A FIFO would hang until something reads it, a device would take the dump nowhere.
        if existing.as_ref().is_some_and(|m| !m.is_file()) {
            return Err(refuse("is not a regular file (a folder, a FIFO or a device): --dump writes a file".into()));
        }
        let made = !path.exists();
        // Opened now (not truncated), written at the end.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| refuse(format!("cannot be written: {e}")))?;
        Ok(Dump { path: path.to_path_buf(), file, made })
    }

    fn write(mut self, bytes: &[u8]) -> Result<(), Error> {
        use std::io::Write;
        let fail = |e: std::io::Error| Error::Config(format!("--dump {}: {e}", self.path.display()));
        self.file.set_len(0).map_err(fail)?;
        self.file.write_all(bytes).map_err(fail)?;
        self.made = false;
        Ok(())
    }
}

impl Drop for Dump {
    /// A dump that was never written leaves no empty file behind.
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `text`'s forward pass through `m` where `backend` says; under auto a GPU that is missing,
/// software or too small for the weights leaves it to the CPU, with the reason on stderr.
pub fn read(m: &Pretrained, text: &str, budget: u64, backend: BackendChoice) -> Result<Read, Error> {
    if backend == BackendChoice::Cpu {
        return inspect::read(m, text, budget);
    }
    let gpu = || -> Result<Read, GpuError> {
        let ctx = block_on(GpuContext::new())?;
        if backend == BackendChoice::Auto && ctx.is_software() {
            let why = format!("only a software one ({}), slower than the CPU", ctx.adapter_name());
            return Err(GpuError::NoAdapter(why));
        }
        let ids = inspect::tokens_within(m, text, budget)?;
        let reader = GpuReader::new(ctx, &m.model)?;
        let (cache, logits) = block_on(reader.read(&ids))?;
        Ok(Read { ids, cache, logits, on: format!("WebGPU ({})", reader.context().adapter_name()) })
    };
    match gpu() {
        Ok(r) => Ok(r),
        Err(GpuError::Engine(e)) => Err(e),
        Err(e) if backend == BackendChoice::Auto => {
            eprintln!("auto: reading on the CPU ({e})");
            inspect::read(m, text, budget)
        }
        Err(e) => Err(Error::Config(format!("GPU backend: {e}"))),
    }
}

fn print(r: &Inspection, m: &Pretrained) {
    let cfg = &m.model.cfg;
    say!(
        "{}: {} layers, {} heads, width {}, context {}, {} weights ({}), read on {}",
        r.model,
        r.n_layer,
        r.n_head,
        r.d_model,
        r.context,
        m.model.params.len(),
        memory::human(4 * m.model.params.len() as u64),
        r.on
    );
    let shown: Vec<String> = r.pieces.iter().map(|p| format!("[{}]", p.replace(' ', "\u{2423}"))).collect();
    say!("{} tokens: {}", r.tokens.len(), shown.join(""));
    say!("\n{}", inspect::words::in_words(r));
    if let Some(k) = inspect::words::kernel_in_words(r) {
        say!("\n{k}");
    }
    say!("\nlayer  |x| before LN  radius after LN (sqrt C = {:.2})  off the sphere after the gain  entropy per head (nats)  kernel TV per head", (cfg.d_model as f64).sqrt());
    for l in &r.layers {
        let ent: Vec<String> = l.heads.iter().map(|h| format!("{:.2}", h.entropy)).collect();
        let tv: Vec<String> = l.heads.iter().map(|h| format!("{:.2}", h.kernel_tv_mean)).collect();
        // Post-LN's last norm ends the last block; Pre-LN's final norm stands after it.
        let last = if cfg.arch.post_norm { "out" } else { "ln_f" };
        let name = if l.layer == r.n_layer { last.to_string() } else { l.layer.to_string() };
        say!(
            "{name:>5}  {:>13.2}  {:>8.3} (worst {:.1e})  {:>28.1}%  {:<24}  {}",
            l.residual_norm,
            l.radius.mean,
            l.radius.max_rel_err,
            100.0 * l.gain.mean_rel_offset,
            ent.join(" "),
            tv.join(" ")
        );
    }
    say!("\nThrough depth (layers as time):");
    if let Some(d) = inspect::words::depth_in_words(&r.depth) {
        say!("{d}");
    }
    for v in &r.depth.verdicts {
        say!("- {} {}", v.label(), v.sentence);
    }
    for e in &r.depth.errors {
        say!("- not fitted: {e}");
    }
    let candidates = |i: usize| r.next[i].iter().map(|(t, p)| format!("{t:?} {p:.2}")).collect::<Vec<_>>().join(", ");
    match (r.predicts.as_str(), r.pieces.last()) {
        ("masked", _) if r.masks.is_empty() => {
            say!("\nA masked LM fills in its mask token: put one in the text (BERT's [MASK]) for its candidates.")
        }
        ("masked", _) => {
            for &i in &r.masks {
                say!("\nAt the mask (token {}) the model fills in: {}", i + 1, candidates(i));
            }
        }
        (_, Some(piece)) => say!("\nAfter {piece:?} the model expects: {}", candidates(r.next.len() - 1)),
        _ => {}
    }
    if let Some(l) = &r.logit_lens {
        print_lens(l, r);
    }
}

/// The logit lens at the last position: each depth's top candidates, and when the answer settles.
fn print_lens(l: &inspect::LogitLens, r: &Inspection) {
    let Some(i) = r.pieces.len().checked_sub(1) else { return };
    let next = r.predicts != "masked";
    if let Some(words) = inspect::logit_lens::lens_in_words(l, &r.pieces, i, next) {
        say!("\n{words}");
    }
    say!("depth  top candidates (probability)  the answer's rank");
    for (d, cells) in l.depths.iter().enumerate() {
        let cell = &cells[i];
        let top: Vec<String> = cell.top.iter().take(3).map(|(_, s, p)| format!("{s:?} {p:.2}")).collect();
        let name = if d == r.n_layer { "out".to_string() } else { d.to_string() };
        say!("{name:>5}  {:<48}  {}", top.join(", "), cell.rank);
    }
}

fn print_comparison(c: &Comparison) {
    let shown = |p: &[String]| p.iter().map(|p| format!("[{}]", p.replace(' ', "\u{2423}"))).collect::<String>();
    say!("{}: two texts", c.model);
    say!("first:  {}\nsecond: {}", shown(&c.pieces[0]), shown(&c.pieces[1]));
    say!("\n{}", inspect::words::compare_in_words(c));
    let mean = if c.causal { "mean after the change" } else { "mean" };
    say!("\nlayer  shared tokens moved ({mean}, most, degrees)  entropy per head: first -> second (nats)");
    for l in &c.layers {
        let heads: Vec<String> =
            l.entropy[0].iter().zip(&l.entropy[1]).map(|(a, b)| format!("{a:.2}->{b:.2}")).collect();
        say!("{:>5}  {:>27.2} {:>8.2}  {}", l.layer, l.mean_angle, l.max_angle, heads.join(" "));
    }
}
