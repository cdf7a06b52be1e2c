//! Data parallelism whose results do not depend on the thread count. The batch is cut into a fixed
//! number of shards of whole sequences (the split never looks at the threads); each shard runs the
//! forward and backward pass into its own cache and gradients, for the whole batch's mean loss, and
//! the shards' gradients are summed in shard order. Where the batch's rows hold fewer numbers than
//! the gradient (a wide model reading a few sequences: `Shards::whole_weights`), the linear layers'
//! weight gradients, nearly all of such a model's, are instead taken over every shard's rows at once
//! (`Model::weight_grads`), each written once, in pieces shared out over the threads; only the rest
//! (norms, biases, embeddings) is summed. Threads only decide who computes which shard or piece, so a
//! step is bit-identical on one core or many, as reproducible links need.
//!
//! K-FAC and CG-FAC read every token's layer inputs and output gradients from one cache, so they
//! take the batch as a single shard.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use multiversion::multiversion;

use crate::error::Result;
use crate::model::{Cache, Grads, Model, PassRows};
use crate::nn::loss;
use crate::optim::clip;

/// Shards a batch is cut into for the first-order optimizers (fewer when the batch is smaller).
pub const SHARDS: usize = 4;

/// Threads new trainers use; 0 means every core (`lab --threads` sets it).
static DEFAULT_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the threads new trainers use (0: every core).
pub fn set_default_threads(threads: usize) {
    DEFAULT_THREADS.store(threads, Ordering::Relaxed);
}

/// The threads a new trainer uses: the set default, else every core (one on wasm32, which has
/// none to spawn).
pub fn default_threads() -> usize {
    match DEFAULT_THREADS.load(Ordering::Relaxed) {
        _ if cfg!(target_arch = "wasm32") => 1,
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Runs `f(run)` on `threads` contiguous runs of `items` at once, on rayon's pool (its
/// threads live on between steps: spawning them every step cost more than a tiny step's shards
/// gained; its parallel iterators, unlike its scoped spawns, allocate nothing); with one thread, and
/// on wasm32, on the whole slice here.
#[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
fn in_runs<T: Send>(threads: usize, items: &mut [T], f: impl Fn(&mut [T]) + Sync) {
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 && items.len() > 1 {
        use rayon::prelude::*;
        items.par_chunks_mut(items.len().div_ceil(threads)).for_each(&f);
        return;
    }
    f(items)
}

/// `out += g` element by element, multiversioned as `nn::activation::forward` (the same bits in
/// every version).
#[multiversion(targets = "simd")]
fn add(out: &mut [f32], g: &[f32]) {
    out.iter_mut().zip(g).for_each(|(s, &g)| *s += g);
}

/// Values summed at once: a run's sum stays in the cache while every shard's values are added.
const SUM_RUN: usize = 1 << 14;

/// `out` = the shards' gradients from `at` on, summed in shard order, element by element in runs
/// shared out over the threads (the same bits on any number).
#[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
fn sum_into(threads: usize, out: &mut [f32], at: usize, parts: &[Part]) {
    let f = |(i, out): (usize, &mut [f32])| {
        let r = at + i * SUM_RUN..at + i * SUM_RUN + out.len();
        out.copy_from_slice(&parts[0].grads.data[r.clone()]);
        parts[1..].iter().for_each(|p| add(out, &p.grads.data[r.clone()]));
    };
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 && out.len() > SUM_RUN {
        use rayon::prelude::*;
        return out.par_chunks_mut(SUM_RUN).enumerate().for_each(f);
    }
    out.chunks_mut(SUM_RUN).enumerate().for_each(f)
}

/// The sum of squares of each block of `clip::BLOCK` values of `data` into `squares`, the blocks
/// shared out over `threads` in runs of whole blocks: the same blocks on any number of threads.
#[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
fn squares_by_block(threads: usize, data: &[f32], squares: &mut [f64]) {
    let f = |(run, squares): (&[f32], &mut [f64])| {
        run.chunks(clip::BLOCK).zip(squares).for_each(|(block, square)| *square = clip::block_squares(block))
    };
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 && squares.len() > 1 {
        use rayon::prelude::*;
        let per = squares.len().div_ceil(threads);
        return data.par_chunks(per * clip::BLOCK).zip(squares.par_chunks_mut(per)).for_each(f);
    }
    f((data, squares))
}

struct Part {
    /// Sequences of the batch this shard holds.
    seqs: Range<usize>,
    cache: Cache<f32>,
    grads: Grads<f32>,
    /// The probability each scored token gave its target, in row order (for the batch's loss).
    target_p: Vec<f32>,
    /// Scored tokens.
    count: usize,
    error: Option<crate::error::Error>,
}

/// A shard computed by another worker (`train::remote`): its gradient (`Shards::summed`, end to
/// end: without the linear layers' weights' where `Shards::whole_weights`), the rows those read
/// (`PassRows::buffers`, end to end; none otherwise), the probability each scored token gave its
/// target, in row order, and their count.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardOut {
    pub grads: Vec<f32>,
    pub rows: Vec<f32>,
    pub target_p: Vec<f32>,
    pub count: usize,
}

pub struct Shards {
    parts: Vec<Part>,
    /// The whole batch's parameter gradient, when there is more than one shard.
    sum: Option<Grads<f32>>,
    /// Its sum of squares per block of `clip::BLOCK` values.
    squares: Vec<f64>,
    /// Whether the linear layers' weight gradients are taken over the whole batch's rows at once
    /// (`Model::weight_grads`) rather than in each shard and summed: when the rows hold fewer
    /// numbers than the gradient. The batch's shape decides it, never the threads or workers.
    pub(super) whole_weights: bool,
    /// The parameter ranges the shards' own passes write and `combine` sums: all of them, or with
    /// `whole_weights` all but the linear layers' weights (a head tied to the embedding's is
    /// summed, then added to).
    summed: Vec<Range<usize>>,
    /// The batch's scored targets: each shard's gradient is for the batch's mean loss.
    scored: usize,
    /// Scratch for the shards' rows put end to end (`Model::weight_grads`).
    rows: Vec<f32>,
    context: usize,
    threads: usize,
}

impl Shards {
    /// `count` shards of a batch of `batch` sequences (at most one per sequence).
    pub fn new(model: &Model<f32>, batch: usize, count: usize) -> Shards {
        Self::with_room(model, batch, count, 0..usize::MAX)
    }

    /// As `new`, with memory only for the shards `which` (another worker's share, `remote`): the
    /// others can be neither computed nor read.
    pub fn with_room(model: &Model<f32>, batch: usize, count: usize, which: Range<usize>) -> Shards {
        let count = count.clamp(1, batch.max(1));
        let parts = (0..count)
            .map(|s| {
                let seqs = s * batch / count..(s + 1) * batch / count;
                let room = if which.contains(&s) { seqs.len() } else { 0 };
                let cache = Cache::new(&model.cfg, room);
                let grads = Grads::new(model, room);
                Part { seqs, cache, grads, target_p: Vec::new(), count: 0, error: None }
            })
            .collect();
        let sum = (count > 1).then(|| Grads::new(model, 0));
        let squares = vec![0.0; sum.as_ref().map_or(0, |s| s.data.len().div_ceil(clip::BLOCK))];
        let l = &model.layout;
        let rows = (batch * model.cfg.context).saturating_mul(model.weight_row_width());
        let whole_weights = count > 1 && rows <= l.total;
        let weights: Vec<usize> = match whole_weights {
            true => crate::model::linears::ids(l).map(|id| id.weight(l)).filter(|&w| w != l.wte).collect(),
            false => Vec::new(),
        };
        let summed = l.tensors_except(&weights).into_iter().map(|i| l.tensors[i].range()).collect();
        Shards {
            parts,
            sum,
            squares,
            whole_weights,
            summed,
            scored: 0,
            rows: Vec::new(),
            context: model.cfg.context,
            threads: default_threads(),
        }
    }

    pub fn count(&self) -> usize {
        self.parts.len()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Threads to spread the shards over (at least 1; always 1 on wasm32).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = if cfg!(target_arch = "wasm32") { 1 } else { threads.max(1) };
    }

    /// Runs `f` on the shards `which`, dealt to the threads in contiguous runs.
    fn each(&mut self, which: Range<usize>, f: impl Fn(&mut Part) + Sync) {
        in_runs(self.threads, &mut self.parts[which], |run| run.iter_mut().for_each(&f));
    }

    /// Runs the forward pass (and, with `backward`, the backward pass) of the shards `which` on
    /// their sequences of the batch (`tokens`, `targets`: B*T).
    pub fn compute(
        &mut self,
        model: &Model<f32>,
        tokens: &[u32],
        targets: &[u32],
        backward: bool,
        which: Range<usize>,
    ) -> Result<()> {
        let t = self.context;
        let n = self.parts.last().map_or(0, |p| p.seqs.end) * t;
        crate::model::check_batch(n, model.cfg.vocab, tokens, targets)?;
        let v = model.cfg.vocab;
        self.scored = loss::scored(targets);
        let (scored, whole) = (self.scored, self.whole_weights);
        self.each(which.clone(), |p| {
            let r = p.seqs.start * t..p.seqs.end * t;
            p.error = model.forward(&mut p.cache, &tokens[r.clone()], &targets[r]).err();
            if p.error.is_none() {
                p.target_p.clear();
                p.target_p.extend(loss::target_probs(&p.cache.probs, &p.cache.targets, v));
                p.count = p.cache.count;
                if backward {
                    backward_of(model, p, scored, whole);
                }
            }
        });
        match self.parts[which].iter_mut().find_map(|p| p.error.take()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The backward pass of the shards `which`, after their forward pass (`compute` without
    /// `backward`): the same gradients `compute` with `backward` gives, to the bit.
    pub fn backward(&mut self, model: &Model<f32>, which: Range<usize>) {
        let (scored, whole) = (self.scored, self.whole_weights);
        self.each(which, |p| backward_of(model, p, scored, whole));
    }

    /// Takes the shards from `first` on from another worker (as `compute` would have left them).
    pub fn accept(&mut self, first: usize, outs: Vec<ShardOut>) -> Result<()> {
        let parts = self.parts.get_mut(first..).filter(|p| p.len() == outs.len());
        let Some(parts) = parts else {
            return Err(crate::error::Error::Config(format!("{} remote shards for shards {first}..", outs.len())));
        };
        let summed: usize = self.summed.iter().map(|r| r.len()).sum();
        for (p, out) in parts.iter_mut().zip(outs) {
            let tokens = p.seqs.len() * self.context;
            let mut rows = match self.whole_weights {
                true => PassRows::buffers(&mut p.cache, &mut p.grads),
                false => Vec::new(),
            };
            let room: usize = rows.iter().map(|r| r.len()).sum();
            if out.grads.len() != summed
                || out.rows.len() != room
                || out.target_p.len() != out.count
                || out.count > tokens
            {
                return Err(crate::error::Error::Config("a remote shard of the wrong size".into()));
            }
            let mut from = &out.rows[..];
            for row in rows.iter_mut() {
                let (these, rest) = from.split_at(row.len());
                row.copy_from_slice(these);
                from = rest;
            }
            let mut from = &out.grads[..];
            for r in &self.summed {
                let (these, rest) = from.split_at(r.len());
                p.grads.data[r.clone()].copy_from_slice(these);
                from = rest;
            }
            (p.target_p, p.count) = (out.target_p, out.count);
        }
        Ok(())
    }

    /// What `compute` left in the shards `which`, for another worker's `accept`.
    pub fn outs(&mut self, which: Range<usize>) -> Vec<ShardOut> {
        let (summed, whole) = (&self.summed, self.whole_weights);
        let part = |p: &mut Part| ShardOut {
            grads: summed.iter().flat_map(|r| &p.grads.data[r.clone()]).copied().collect(),
            rows: match whole {
                true => PassRows::buffers(&mut p.cache, &mut p.grads).into_iter().flatten().map(|x| *x).collect(),
                false => Vec::new(),
            },
            target_p: p.target_p.clone(),
            count: p.count,
        };
        self.parts[which].iter_mut().map(part).collect()
    }

    /// The batch's mean loss from every shard's rows in batch order, as one pass over the batch
    /// sums them; with `backward` and more than one shard the batch's gradient: the shards' in
    /// order, with `whole_weights` the linear layers' weights' over every shard's rows at once.
    pub fn combine(&mut self, model: &Model<f32>, backward: bool) -> f32 {
        let (mut total, mut scored) = (0.0f32, 0);
        for p in &self.parts {
            p.target_p.iter().for_each(|&x| loss::add_nll_of(&mut total, x));
            scored += p.count;
        }
        if let (Some(sum), true) = (self.sum.as_mut(), backward) {
            let parts = &self.parts;
            for r in &self.summed {
                sum_into(self.threads, &mut sum.data[r.clone()], r.start, parts);
            }
            if self.whole_weights {
                let passes = parts.iter().map(|p| p.grads.rows(&p.cache));
                model.weight_grads(passes, &mut sum.data, &mut self.rows, self.threads);
            }
            squares_by_block(self.threads, &sum.data, &mut self.squares);
        }
        loss::mean(total, scored)
    }

    /// The batch's mean loss.
    pub fn forward(&mut self, model: &Model<f32>, tokens: &[u32], targets: &[u32]) -> Result<f32> {
        self.compute(model, tokens, targets, false, 0..self.count())?;
        Ok(self.combine(model, false))
    }

    /// The batch's mean loss, with its gradient in `grads()`.
    pub fn forward_backward(&mut self, model: &Model<f32>, tokens: &[u32], targets: &[u32]) -> Result<f32> {
        self.compute(model, tokens, targets, true, 0..self.count())?;
        Ok(self.combine(model, true))
    }

    /// The last batch's gradient (after `forward_backward`).
    pub fn grads(&self) -> &Grads<f32> {
        self.sum.as_ref().unwrap_or(&self.parts[0].grads)
    }

    /// The last batch's gradient norm (after `forward_backward`, or `combine` with `backward`):
    /// `clip::global_norm` of `grads()`, to the bit.
    pub fn grad_norm(&self) -> f32 {
        match self.sum {
            Some(_) => clip::norm_of(self.squares.iter().copied()),
            None => clip::global_norm(&self.parts[0].grads.data),
        }
    }

    pub fn grads_mut(&mut self) -> &mut Grads<f32> {
        self.sum.as_mut().unwrap_or(&mut self.parts[0].grads)
    }

    /// The first shard's forward cache: the whole batch's when there is one shard, as K-FAC and
    /// CG-FAC need.
    pub fn cache(&self) -> &Cache<f32> {
        &self.parts[0].cache
    }
}

/// A shard's backward pass for its batch's mean loss over `scored` targets; with `whole_weights`
/// all but the linear layers' weights' gradients (`combine` takes those over every shard's rows).
fn backward_of(model: &Model<f32>, p: &mut Part, scored: usize, whole_weights: bool) {
    match whole_weights {
        true => model.backward_rows(&p.cache, &p.cache.targets, scored, &mut p.grads),
        false => model.backward_scored(&p.cache, &p.cache.targets, scored, &mut p.grads),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::nn::loss::IGNORE;

    /// The shards' weighted gradient is the whole batch's, also when the shards score different
    /// numbers of tokens, and the same bits on any number of threads.
    #[test]
    fn shards_give_the_whole_batch_gradient_on_any_thread_count() {
        // Many tokens a weight: each shard's gradient, summed. A wide model reading 15 tokens: the
        // weights' gradients over all the shards' rows at once, a layer of 320 outputs in two pieces.
        let cfg =
            ModelConfig { vocab: 11, d_model: 16, heads: 2, layers: 2, d_ff: 32, context: 6, ..ModelConfig::default() };
        against_the_whole_batch(cfg.clone(), 7, false);
        let wide = ModelConfig { d_model: 64, d_ff: 320, context: 3, ..cfg };
        against_the_whole_batch(wide.clone(), 5, true);
        // A head tied to the token embedding adds its product to the shards' summed embedding rows.
        let tied = crate::config::Arch { tied_head: true, ..wide.arch.clone() };
        against_the_whole_batch(ModelConfig { arch: tied, ..wide }, 5, true);
    }

    fn against_the_whole_batch(cfg: ModelConfig, b: usize, whole_weights: bool) {
        let model = Model::<f32>::new(cfg.clone()).unwrap();
        let t = cfg.context;
        let tokens: Vec<u32> = (0..b * t).map(|i| (i * 7 % 11) as u32).collect();
        // Scored tokens differ from sequence to sequence: 0 in the first, all in the last.
        let targets: Vec<u32> =
            (0..b * t).map(|i| if i % t < (i / t) * t / (b - 1) { IGNORE } else { (i * 5 % 11) as u32 }).collect();
        let (mut cache, mut whole) = (Cache::new(&cfg, b), Grads::new(&model, b));
        let loss = model.forward(&mut cache, &tokens, &targets).unwrap();
        model.backward(&cache, &mut whole);
        let mut runs = vec![];
        for threads in [1, 2, 3] {
            let mut shards = Shards::new(&model, b, SHARDS);
            assert_eq!(shards.whole_weights, whole_weights);
            shards.set_threads(threads);
            let l = shards.forward_backward(&model, &tokens, &targets).unwrap();
            // The norm summed block by block beside the shards is the whole gradient's, to the bit.
            assert_eq!(shards.grad_norm().to_bits(), clip::global_norm(&shards.grads().data).to_bits());
            runs.push((l, shards.grads().data.clone()));
        }
        assert!(runs[0].1.len() > 3 * clip::BLOCK, "blocks enough for three threads' runs");
        let (l, g) = &runs[0];
        let err = g.iter().zip(&whole.data).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let scale = whole.data.iter().map(|x| x.abs()).fold(0.0f32, f32::max);
        eprintln!(
            "4 shards against the whole batch (whole weights: {whole_weights}): loss {l} vs {loss}, largest \
             gradient gap {err:e} (largest {scale})"
        );
        // Each row's probabilities do not depend on the rows beside it, so the loss is the same bits.
        assert!(l.to_bits() == loss.to_bits() && err < 1e-5 * scale);
        for (threads, run) in [2, 3].iter().zip(&runs[1..]) {
            assert!(run.0.to_bits() == l.to_bits() && run.1 == *g, "{threads} threads differ from one");
        }
        assert!(Shards::new(&model, b, SHARDS).forward(&model, &tokens[1..], &targets[1..]).is_err());
    }
}
