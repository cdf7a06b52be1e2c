//! `lab bench`: the CPU table (step time per optimizer and size, matmul GFLOP/s, probe cost) or,
//! with `--backend gpu`, the WGSL backend's matmul GFLOP/s and step times beside the CPU's; with
//! `--model`, a real model reading and writing (`bench/model_reference.py` puts PyTorch beside it).

use std::time::Instant;

use engine::bench::{matmul_gflops, probe_overhead, size, step_table, Size, MATMUL_SHAPES, SIZES};
use engine::config::{DataSpec, ModelConfig, OptimizerConfig, TrainConfig};
use engine::gpu::matmul::{Dims, Matmul, Tiling, View};
use engine::gpu::reader::GpuReader;
use engine::gpu::trainer::{GpuTrainer, READ_EVERY};
use engine::gpu::{bench as gpu_bench, block_on, GpuContext};
use engine::lenses as inspect;
use engine::memory::DEFAULT_BUDGET;
use engine::pretrained::Pretrained;
use engine::sample::{self, SampleSpec};
use engine::session::bench::BenchSpec;
use engine::train::shards::default_threads;
use engine::{Error, Trainer};
use serde_json::json;

use engine::session::BackendChoice as Backend;

/// What `lab bench` runs: the whole table, or the step rows of some sizes and optimizers (and on
/// the GPU, the matmul at some sides).
pub struct Only {
    pub sizes: Vec<String>,
    pub optimizers: Vec<String>,
    pub matmul: Vec<usize>,
}

pub fn run(as_json: bool, iters: usize, backend: Backend, only: Only) -> Result<(), Error> {
    match backend {
        Backend::Cpu if !only.matmul.is_empty() => {
            Err(Error::Config("--matmul picks the GPU's matmul sides: use it with --backend gpu".into()))
        }
        Backend::Cpu => cpu(as_json, iters, only),
        Backend::Gpu | Backend::Auto => gpu(as_json, iters, only),
    }
}

fn cpu(as_json: bool, iters: usize, only: Only) -> Result<(), Error> {
    let whole = only.sizes.is_empty() && only.optimizers.is_empty();
    let sizes = match only.sizes.is_empty() {
        true => SIZES.to_vec(),
        false => only.sizes.iter().map(|n| size(n)).collect::<Result<_, _>>()?,
    };
    // SGD last: Adam's row comes first, the one the others are compared with.
    let all = OptimizerConfig::NAMES.iter().filter(|&&n| n != "sgd").chain(&["sgd"]);
    let optimizers: Vec<&str> = match only.optimizers.is_empty() {
        true => all.copied().collect(),
        false => only.optimizers.iter().map(String::as_str).collect(),
    };
    let steps = step_table(iters, default_threads(), &sizes, &optimizers)?;
    // The matmul and probe rows come with the whole table only.
    let matmuls: Vec<_> = match whole {
        true => MATMUL_SHAPES.iter().map(|&(m, k, n)| matmul_gflops(m, k, n)).collect(),
        false => vec![],
    };
    let probes = whole.then(|| probe_overhead(&SIZES[1], iters.max(20))).transpose()?;
    if as_json {
        say!("{}", json!({"steps": steps, "matmul": matmuls, "probe_overhead": probes}));
        return Ok(());
    }
    say!(
        "{:<8} {:<6} {:>7} {:>9} {:>10} {:>12} {:>8}",
        "size",
        "optim",
        "threads",
        "params",
        "ms/step",
        "tokens/s",
        "vs adam"
    );
    for r in &steps {
        say!(
            "{:<8} {:<6} {:>7} {:>9} {:>10.2} {:>12.0} {:>8.2}",
            r.size,
            r.optimizer,
            r.threads,
            r.params,
            r.ms_per_step,
            r.tokens_per_s,
            r.vs_adam
        );
    }
    let Some(probes) = probes else { return Ok(()) };
    say!("\n{:>6} {:>6} {:>6} {:>9}", "m", "k", "n", "GFLOP/s");
    for r in &matmuls {
        say!("{:>6} {:>6} {:>6} {:>9.1}", r.m, r.k, r.n, r.gflops);
    }
    say!(
        "\nprobes at the {} size: {:.2} ms/step without, every step x{:.2}, every 10 steps x{:.2}",
        probes.size,
        probes.ms_no_probe,
        probes.ratio_every_1,
        probes.ratio_every_10
    );
    Ok(())
}

/// `lab bench --spec`: the page's `spherewalk.bench` (the same code, model, data and steps) timed
/// natively, so the browser's step can be compared with the native one.
pub fn page_spec(as_json: bool, backend: Backend, spec: &str) -> Result<(), Error> {
    if backend != Backend::Cpu {
        return Err(Error::Config("--spec times the CPU path, as spherewalk.bench does".into()));
    }
    let spec: BenchSpec = serde_json::from_str(spec).map_err(|e| Error::Config(format!("--spec: {e}")))?;
    let clock = Instant::now();
    let r = block_on(spec.run(&|| clock.elapsed().as_secs_f64() * 1e3, None))?;
    match as_json {
        true => say!("{}", json!(r)),
        false => say!(
            "{:.2} ms per step ({:.1} GFLOP/s), 256^3 GEMM {:.1} GFLOP/s, {} params, {} threads",
            r.ms_per_step,
            r.gflops,
            r.gemm_gflops,
            r.params,
            default_threads()
        ),
    }
    if let (false, Some(w)) = (as_json, &r.writing) {
        say!(
            "writing {} tokens: {:.0} tokens/s with the key/value cache, {:.0} without ({:.1}x)",
            w.tokens,
            w.cached_tokens_per_s,
            w.uncached_tokens_per_s,
            w.cached_tokens_per_s / w.uncached_tokens_per_s
        );
    }
    Ok(())
}

fn gpu_error(e: impl std::fmt::Display) -> Error {
    Error::Config(format!("GPU backend: {e}"))
}

/// Median ms per call of `step` over `iters` calls, after `warmup` more.
fn median_ms(warmup: usize, iters: usize, mut step: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    let mut times = Vec::with_capacity(iters);
    for i in 0..iters + warmup {
        let start = Instant::now();
        step()?;
        if i >= warmup {
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn gpu(as_json: bool, iters: usize, only: Only) -> Result<(), Error> {
    let ctx = block_on(GpuContext::new()).map_err(gpu_error)?;
    let adapter = ctx.adapter_name();
    // Sizes and optimizers first, so that a wrong name fails before the matmul is timed. On a
    // software adapter (a correctness check, not a speed figure) the two small sizes only: a medium
    // step takes seconds there. On hardware, a larger size too.
    let large = Size { name: "large", d_model: 256, layers: 4, heads: 8, context: 256, batch: 32 };
    let sizes: Vec<Size> = match (only.sizes.is_empty(), ctx.is_software()) {
        (false, _) => {
            let named = |n: &str| match n {
                "large" => Ok(large),
                n => size(n)
                    .map_err(|_| Error::Config(format!("no bench size `{n}` (sizes: tiny, small, medium, large)"))),
            };
            only.sizes.iter().map(|n| named(n)).collect::<Result<_, _>>()?
        }
        (true, true) => SIZES[..2].to_vec(),
        (true, false) => SIZES.iter().copied().chain([large]).collect(),
    };
    let optimizers: Vec<&str> = match only.optimizers.is_empty() {
        true => vec!["adam", "cgfac"],
        false => only.optimizers.iter().map(String::as_str).collect(),
    };
    for name in &optimizers {
        OptimizerConfig::named(name)?;
    }
    let mut matmul = Vec::new();
    // 4096^3 on hardware only: a software adapter takes minutes over it.
    let sides: &[usize] = match (only.matmul.is_empty(), ctx.is_software()) {
        (false, _) => &only.matmul,
        (true, true) => &[256, 512, 1024, 2048],
        (true, false) => &[256, 512, 1024, 2048, 4096],
    };
    for &n in sides {
        // Both tilings side by side, and the one a launch of this size takes.
        let rate = |t| block_on(gpu_bench::matmul_gflops(&ctx, n, Some(t))).map_err(gpu_error);
        let (square, wide) = (rate(Tiling::Square64)?, rate(Tiling::Wide128)?);
        let v = View::rows(0, n);
        let chosen = Matmul::new(&ctx).tiling(Dims::new(n, n, n), v, v);
        let gflops = if chosen == Tiling::Wide128 { wide } else { square };
        matmul.push(
            json!({"n": n, "gflops": gflops, "square64": square, "wide128": wide, "tiling": format!("{chosen:?}")}),
        );
    }
    let mut steps = Vec::new();
    for s in &sizes {
        for &optimizer in &optimizers {
            let cfg = TrainConfig {
                model: ModelConfig::sized(s.d_model, s.layers, s.heads, s.context),
                data: DataSpec::Grammar,
                batch: s.batch,
                optimizer: OptimizerConfig::named(optimizer)?,
                ..TrainConfig::default()
            };
            let mut cpu = Trainer::new(cfg.clone())?;
            let cpu_ms = median_ms(2, iters, || cpu.step().map(|_| ()))?;
            let ctx = block_on(GpuContext::new()).map_err(gpu_error)?;
            let mut gpu = GpuTrainer::new(ctx, cfg).map_err(gpu_error)?;
            // A round of steps ends in its one readback, so rounds are timed and divided.
            let mut out = Vec::new();
            let reads = gpu.context().readbacks();
            let round_ms = median_ms(1, iters.div_ceil(READ_EVERY), || {
                (0..READ_EVERY).try_for_each(|_| block_on(gpu.step(&mut out))).map_err(gpu_error)
            })?;
            let rounds = (gpu.step_count() / READ_EVERY) as f64;
            let readbacks_per_step = (gpu.context().readbacks() - reads) as f64 / (rounds * READ_EVERY as f64);
            let gpu_ms = round_ms / READ_EVERY as f64;
            steps.push(json!({"size": s.name, "optimizer": optimizer, "cpu_ms": cpu_ms, "gpu_ms": gpu_ms,
                "gpu_over_cpu": gpu_ms / cpu_ms, "readbacks_per_step": readbacks_per_step}));
        }
    }
    if as_json {
        say!("{}", json!({"adapter": adapter, "matmul": matmul, "steps": steps}));
        return Ok(());
    }
    say!("adapter: {adapter}");
    say!(
        "{:<14} {:>10} {:>10} {:>10}  (GFLOP/s; tiles 64x64 scalar loads, 128x128 vec4 loads)",
        "matmul",
        "64x64",
        "128x128",
        "taken"
    );
    for m in &matmul {
        let num = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        let taken = m["tiling"].as_str().unwrap_or("");
        say!("{:<14} {:>10.1} {:>10.1} {:>10}", format!("{}^3", m["n"]), num("square64"), num("wide128"), taken);
    }
    say!("\n{:<8} {:<6} {:>10} {:>10} {:>9} {:>11}", "size", "optim", "cpu ms", "gpu ms", "gpu/cpu", "reads/step");
    for s in &steps {
        let num = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
        say!(
            "{:<8} {:<6} {:>10.2} {:>10.2} {:>9.2} {:>11.2}",
            s["size"].as_str().unwrap_or(""),
            s["optimizer"].as_str().unwrap_or(""),
            num("cpu_ms"),
            num("gpu_ms"),
            num("gpu_over_cpu"),
            num("readbacks_per_step")
        );
    }
    Ok(())
}

/// The text lengths `lab bench --model` reads (tokens): a sentence, and a paragraph.
const FORWARD_TOKENS: [usize; 2] = [64, 256];

/// `lab bench --model DIR`: a loaded model reading 64 and 256 tokens (the forward that keeps every
/// layer's hidden states and attention, and the logits), the whole inspection of 64, and greedy
/// writing through the key/value cache; with `--backend gpu` also the GPU's forward, read back
/// whole as the lab reads it. Its own figures only: `bench/model_reference.py` runs PyTorch beside
/// it in the same run for the ratios.
pub fn model(as_json: bool, iters: usize, path: &std::path::Path, backend: Backend) -> Result<(), Error> {
    let m = Pretrained::open(path, DEFAULT_BUDGET)?;
    let phrase = "The Brownian motion in the transformer model: tokens walk on the sphere. ";
    let longest = FORWARD_TOKENS.iter().copied().max().unwrap_or(0).min(m.model.cfg.context);
    let mut text = String::new();
    while m.tokenizer.encode(&text)?.len() < longest {
        text.push_str(phrase);
    }
    let ids = m.tokenizer.encode(&text)?;
    let mut rows = Vec::new();
    // A window never longer than the model's context.
    let context = m.model.cfg.context;
    for t in FORWARD_TOKENS {
        let ids = &ids[..t.min(ids.len()).min(context)];
        let ms = median_ms(1, iters, || m.model.read(ids).map(|c| drop(m.model.logits(&c))))?;
        rows.push(json!({"what": format!("forward, {} tokens", ids.len()), "tokens": ids.len(), "ms": ms}));
    }
    let mut adapter = None;
    if backend == Backend::Gpu {
        let ctx = block_on(GpuContext::new()).map_err(gpu_error)?;
        adapter = Some(ctx.adapter_name());
        let reader = GpuReader::new(ctx, &m.model).map_err(gpu_error)?;
        for t in FORWARD_TOKENS {
            let ids = &ids[..t.min(ids.len()).min(context)];
            let ms = median_ms(1, iters, || block_on(reader.read(ids)).map(drop).map_err(gpu_error))?;
            let what = format!("forward, {} tokens, GPU", ids.len());
            rows.push(json!({"what": what, "tokens": ids.len(), "ms": ms, "gpu": true}));
        }
    }
    // The writing's prompt and its 32 new tokens fit the context too.
    let prompt = m.tokenizer.decode(&ids[..64.min(ids.len()).min(context.saturating_sub(32).max(1))]);
    let inspect = || inspect::read(&m, &prompt, DEFAULT_BUDGET).and_then(|r| inspect::inspect(&m, &r)).map(drop);
    let inspect_ms = median_ms(0, iters.clamp(1, 3), inspect)?;
    rows.push(json!({"what": "inspect (every lens), 64 tokens", "ms": inspect_ms}));
    let spec = SampleSpec { prompt, tokens: 32, temperature: 0.0, ..SampleSpec::default() };
    let start = Instant::now();
    let written = sample::generate(&m.model, &m.tokenizer, &spec)?;
    let per_s = written[0].tokens.len() as f64 / start.elapsed().as_secs_f64();
    // Each token written reads every weight once (of the embeddings a row): the bytes per second
    // the writing reaches, and the weights, for PyTorch's figure (all f32) beside it.
    let (f32s, bf16s) = m.model.written_token_weights();
    rows.push(json!({"what": "greedy writing after 64 tokens", "tokens_per_s": per_s,
        "gb_per_s": per_s * (4 * f32s + 2 * bf16s) as f64 / 1e9, "weights_per_token": f32s + bf16s}));
    let params = m.model.params.len();
    if as_json {
        let out =
            json!({"model": m.name, "params": params, "threads": default_threads(), "adapter": adapter, "rows": rows});
        say!("{out}");
        return Ok(());
    }
    say!("{} ({:.1}M weights) on {} threads", m.name, params as f64 / 1e6, default_threads());
    if let Some(a) = adapter {
        say!("GPU: {a}");
    }
    for r in &rows {
        let what = r["what"].as_str().unwrap_or("");
        let num = |k: &str| r.get(k).and_then(|v| v.as_f64());
        match (num("ms"), num("tokens_per_s")) {
            (Some(ms), _) => say!("{what:<34} {ms:>9.0} ms"),
            (_, Some(tps)) => {
                say!("{what:<34} {tps:>7.1} tok/s ({:.1} GB/s of weights)", num("gb_per_s").unwrap_or(0.0))
            }
            _ => {}
        }
    }
    Ok(())
}
