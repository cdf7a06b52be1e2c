//! Data sets: built-in generators and the user's text, split into train and validation, served as
//! batches of (tokens, targets) drawn from seeded streams.

pub mod baseline;
pub mod grammar;
pub mod hierarchy;
pub mod kind;
pub mod tasks;
pub mod text;

use rand::Rng;

use crate::config::{DataSpec, MAX_VOCAB};
use crate::error::{Error, Result};
use crate::rng::{rng, Stream};
use tasks::Task;

/// Characters of grammar text generated per run: enough for thousands of distinct windows.
const GRAMMAR_CHARS: usize = 200_000;
const HIERARCHY_TOKENS: usize = 100_000;
/// Share of a stream kept for validation (the tail, so no window straddles both).
const VAL_SHARE: f64 = 0.1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Val,
}

#[derive(Clone, Debug)]
enum Source {
    /// One long token stream per split; batches are random windows.
    Stream { train: Vec<u32>, val: Vec<u32> },
    /// Fresh sequences per batch; validation uses its own seeded stream.
    Task(Task),
}

#[derive(Clone, Debug)]
pub struct Dataset {
    pub name: String,
    /// Display text of every token id.
    pub symbols: Vec<String>,
    source: Source,
    /// The true latent chunk of every position of the validation stream (hierarchy only).
    val_chunks: Option<Vec<u32>>,
    context: usize,
    seed: u64,
}

impl Dataset {
    pub fn new(spec: &DataSpec, context: usize, seed: u64) -> Result<Self> {
        if context == 0 {
            return Err(Error::Config("context must be positive, got 0".into()));
        }
        let mut gen = rng(seed, Stream::Generate, 0);
        let mut val_chunks = None;
        let (symbols, source) = match spec {
            DataSpec::Grammar => {
                let text = grammar::generate(&mut gen, GRAMMAR_CHARS);
                let (symbols, ids) = text::encode(&text)?;
                (symbols, split_stream(ids, context)?)
            }
            DataSpec::Hierarchy => {
                let h = hierarchy::Hierarchy::new(&mut gen);
                let g = h.generate(&mut gen, HIERARCHY_TOKENS);
                let source = split_stream(g.tokens, context)?;
                if let Source::Stream { val, .. } = &source {
                    // The validation split is the stream's tail.
                    val_chunks = Some(g.chunk_of[g.chunk_of.len() - val.len()..].to_vec());
                }
                (hierarchy::Hierarchy::symbols(), source)
            }
            DataSpec::Text { text } => {
                let (symbols, ids) = text::encode(text)?;
                (symbols, split_stream(ids, context)?)
            }
            task_spec => {
                let task = Task::from_spec(task_spec).expect("remaining specs are tasks");
                if context < task.min_context() {
                    return Err(Error::Config(format!(
                        "{} needs a context of at least {}, got {context}",
                        spec.name(),
                        task.min_context()
                    )));
                }
                (task.symbols(), Source::Task(task))
            }
        };
        if symbols.len() > MAX_VOCAB {
            return Err(Error::Data(format!(
                "vocabulary of {} symbols is over the limit of {MAX_VOCAB}",
                symbols.len()
            )));
        }
        Ok(Dataset { name: spec.name().to_string(), symbols, source, val_chunks, context, seed })
    }

    pub fn vocab_size(&self) -> usize {
        self.symbols.len()
    }

    /// Fills `tokens` and `targets` (B*T each) with batch number `index` of `split`.
    pub fn batch(&self, split: Split, index: u64, tokens: &mut [u32], targets: &mut [u32]) {
        self.fill(split, index, tokens, targets, None);
    }

    /// Validation batch `index` (as `batch`) with the true latent chunk of every position, for
    /// data that knows it (hierarchy); None otherwise, with the batch still filled.
    pub fn val_batch_with_chunks(&self, index: u64, tokens: &mut [u32], targets: &mut [u32]) -> Option<Vec<u32>> {
        let mut chunks = self.val_chunks.as_ref().map(|_| Vec::with_capacity(tokens.len()));
        self.fill(Split::Val, index, tokens, targets, chunks.as_mut());
        chunks
    }

    fn fill(
        &self,
        split: Split,
        index: u64,
        tokens: &mut [u32],
        targets: &mut [u32],
        mut chunks: Option<&mut Vec<u32>>,
    ) {
        let t = self.context;
        let stream = match split {
            Split::Train => Stream::TrainBatch,
            Split::Val => Stream::ValBatch,
        };
        let mut r = rng(self.seed, stream, index);
        for (tok, tgt) in tokens.chunks_exact_mut(t).zip(targets.chunks_exact_mut(t)) {
            match &self.source {
                Source::Stream { train, val } => {
                    let s = if split == Split::Train { train } else { val };
                    let start = r.random_range(0..s.len() - t);
                    tok.copy_from_slice(&s[start..start + t]);
                    tgt.copy_from_slice(&s[start + 1..start + t + 1]);
                    if let (Some(out), Some(all)) = (chunks.as_deref_mut(), &self.val_chunks) {
                        out.extend_from_slice(&all[start..start + t]);
                    }
                }
                Source::Task(task) => task.sample(&mut r, tok, tgt),
            }
        }
    }

    /// Every (previous token, target) pair of the training split that counts: the whole stream, or
    /// `task_rows` fresh task rows. Count-based baselines are fitted on these.
    pub fn train_pairs(&self, task_rows: usize) -> Vec<(u32, u32)> {
        match &self.source {
            Source::Stream { train, .. } => train.windows(2).map(|w| (w[0], w[1])).collect(),
            Source::Task(task) => {
                let mut r = rng(self.seed, Stream::Generate, 1);
                let (mut tok, mut tgt) = (vec![0; self.context], vec![0; self.context]);
                let mut pairs = Vec::new();
                for _ in 0..task_rows {
                    task.sample(&mut r, &mut tok, &mut tgt);
                    pairs.extend(
                        tok.iter().zip(&tgt).filter(|p| *p.1 != crate::nn::loss::IGNORE).map(|(&a, &b)| (a, b)),
                    );
                }
                pairs
            }
        }
    }

    /// The first token of the training data: where writing starts from an empty prompt.
    pub fn first_token(&self) -> u32 {
        let (mut tok, mut tgt) = (vec![0; self.context], vec![0; self.context]);
        match &self.source {
            Source::Stream { train, .. } => train[0],
            Source::Task(task) => {
                task.sample(&mut rng(self.seed, Stream::Generate, 1), &mut tok, &mut tgt);
                tok[0]
            }
        }
    }

    /// A prompt from the validation split, at most `max` tokens: the start of its first whole
    /// line, cut after a space, for text; a task's question up to where the answer begins.
    pub fn val_prompt(&self, max: usize) -> Vec<u32> {
        let (mut tok, mut tgt) = (vec![0; self.context], vec![0; self.context]);
        match &self.source {
            Source::Stream { val, .. } => {
                let is = |i: u32, s: &str| self.symbols.get(i as usize).is_some_and(|x| x == s);
                let start = val.iter().position(|&t| is(t, "\n")).map_or(0, |i| i + 1);
                let line: Vec<u32> =
                    val[start.min(val.len())..].iter().take_while(|&&t| !is(t, "\n")).take(max).copied().collect();
                let cut = line.iter().rposition(|&t| is(t, " ")).filter(|&i| i > 0 && line.len() == max);
                let line = cut.map_or(line.clone(), |i| line[..=i].to_vec());
                if line.is_empty() {
                    val[..max.min(val.len())].to_vec()
                } else {
                    line
                }
            }
            Source::Task(task) => {
                task.sample(&mut rng(self.seed, Stream::ValBatch, 0), &mut tok, &mut tgt);
                let answer = tgt.iter().position(|&t| t != crate::nn::loss::IGNORE).unwrap_or(0);
                tok[..=answer.min(max.saturating_sub(1))].to_vec()
            }
        }
    }

    /// The text of a token sequence.
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter().filter_map(|&i| self.symbols.get(i as usize)).map(String::as_str).collect()
    }
}

fn split_stream(ids: Vec<u32>, context: usize) -> Result<Source> {
    let need = 2 * (context + 1);
    if ids.len() < need {
        return Err(Error::Data(format!(
            "text has {} characters; a context of {context} needs at least {need} (one window of {} for \
             training and one for validation)",
            ids.len(),
            context + 1
        )));
    }
    let val_len = ((ids.len() as f64 * VAL_SHARE) as usize).max(context + 1);
    let cut = ids.len() - val_len;
    // Windows need start < len - T, so each split needs at least T + 1 tokens.
    let (train, val) = ids.split_at(cut.max(context + 1));
    Ok(Source::Stream { train: train.to_vec(), val: val.to_vec() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::loss::IGNORE;

    #[test]
    fn streams_and_tasks_fill_batches_in_vocab() {
        for name in DataSpec::BUILT_IN {
            let d = Dataset::new(&DataSpec::named(name).unwrap(), 16, 3).unwrap();
            let (mut tok, mut tgt) = (vec![0; 4 * 16], vec![0; 4 * 16]);
            d.batch(Split::Train, 0, &mut tok, &mut tgt);
            assert!(tok.iter().all(|&x| (x as usize) < d.vocab_size()), "{name}");
            assert!(tgt.iter().any(|&x| x != IGNORE), "{name}");
            assert!(tgt.iter().filter(|&&x| x != IGNORE).all(|&x| (x as usize) < d.vocab_size()), "{name}");
        }
    }

    #[test]
    fn copy_targets_repeat_the_prompt() {
        let d = Dataset::new(&DataSpec::Copy, 8, 1).unwrap();
        let (mut tok, mut tgt) = (vec![0; 8], vec![0; 8]);
        d.batch(Split::Train, 5, &mut tok, &mut tgt);
        // Sequence: p0 p1 p2 p3 > p0 p1 p2 p3; tokens are its first 8, targets its last 8.
        assert_eq!(tok[4], 10);
        assert_eq!(&tgt[4..8], &tok[0..4]);
        assert!(tgt[..4].iter().all(|&x| x == IGNORE));
    }

    #[test]
    fn reverse_sort_and_modadd_answers_are_right() {
        let (mut tok, mut tgt) = (vec![0; 9], vec![0; 9]);
        Dataset::new(&DataSpec::Reverse, 9, 2).unwrap().batch(Split::Train, 1, &mut tok, &mut tgt);
        let rev: Vec<u32> = tok[..4].iter().rev().copied().collect();
        assert_eq!(&tgt[4..8], &rev[..]);
        assert_eq!(tgt[8], IGNORE, "the padding after the answer is not scored");
        Dataset::new(&DataSpec::Sort, 9, 2).unwrap().batch(Split::Train, 1, &mut tok, &mut tgt);
        let mut sorted = tok[..4].to_vec();
        sorted.sort_unstable();
        assert_eq!(&tgt[4..8], &sorted[..]);
        Dataset::new(&DataSpec::Modadd, 9, 2).unwrap().batch(Split::Train, 1, &mut tok, &mut tgt);
        // Problems at positions 0..4 and 4..8: "a b = c", c scored at the "=" position.
        for p in [0, 4] {
            assert_eq!(tok[p + 2], 23);
            assert_eq!(tgt[p + 2], (tok[p] + tok[p + 1]) % 23);
            assert_eq!([tgt[p], tgt[p + 1]], [IGNORE, IGNORE]);
        }
    }

    #[test]
    fn short_text_is_a_clear_error() {
        let err = Dataset::new(&DataSpec::Text { text: "abc".into() }, 8, 0).unwrap_err().to_string();
        assert!(err.contains("needs at least 18"), "{err}");
        let err = Dataset::new(&DataSpec::Text { text: String::new() }, 8, 0).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
    }

    #[test]
    fn hierarchy_probe_batch_knows_its_chunks() {
        let d = Dataset::new(&DataSpec::Hierarchy, 16, 4).unwrap();
        let (mut tok, mut tgt, mut t2, mut g2) = (vec![0; 48], vec![0; 48], vec![0; 48], vec![0; 48]);
        let chunks = d.val_batch_with_chunks(0, &mut tok, &mut tgt).unwrap();
        d.batch(Split::Val, 0, &mut t2, &mut g2);
        assert_eq!((&tok, &tgt), (&t2, &g2), "the same batch as batch(Val, 0)");
        // Chunks are runs of at most 4 tokens; a separator has a chunk of its own.
        for (row, c) in tok.chunks_exact(16).zip(chunks.chunks_exact(16)) {
            assert!(c.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
            for (i, &x) in row.iter().enumerate() {
                assert!(c.iter().filter(|&&y| y == c[i]).count() <= 4);
                if x == hierarchy::SEPARATOR {
                    assert_eq!(c.iter().filter(|&&y| y == c[i]).count(), 1);
                }
            }
        }
        let g = Dataset::new(&DataSpec::Grammar, 16, 4).unwrap();
        assert!(g.val_batch_with_chunks(0, &mut tok, &mut tgt).is_none());
    }

    #[test]
    fn same_seed_same_batches() {
        let a = Dataset::new(&DataSpec::Grammar, 16, 7).unwrap();
        let b = Dataset::new(&DataSpec::Grammar, 16, 7).unwrap();
        let (mut t1, mut g1, mut t2, mut g2) = (vec![0; 32], vec![0; 32], vec![0; 32], vec![0; 32]);
        a.batch(Split::Val, 2, &mut t1, &mut g1);
        b.batch(Split::Val, 2, &mut t2, &mut g2);
        assert_eq!((t1, g1), (t2, g2));
    }
}
