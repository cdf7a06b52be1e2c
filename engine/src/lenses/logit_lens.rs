//! The logit lens: the model's own head (its final norm and unembedding; BERT's masked-LM head)
//! read from the stream entering every block, so each depth says what the model would predict if
//! it stopped there. Depth L is the model's output. Early depths are read through a head trained
//! for the last one: a guess at what the stream holds, not what the layer "thinks".

use serde::{Deserialize, Serialize};

use super::reading::Read;
use crate::error::Result;
use crate::pretrained::Pretrained;
use crate::sample::Choice;

/// Candidates kept per depth and position.
pub const LENS_TOP: usize = 5;

/// What the head reads at one depth and position.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LensCell {
    /// The best candidates: (token id, its piece, probability).
    pub top: Vec<(u32, String, f64)>,
    /// Where the model's final answer at this position (its top candidate at depth L) ranks here
    /// (1: first), and its probability.
    pub rank: usize,
    pub p: f64,
}

/// The logit lens of one reading.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogitLens {
    /// Per depth 0..=L, per position.
    pub depths: Vec<Vec<LensCell>>,
    /// Per position: the depth from which the final answer stays the top candidate to the end.
    pub settles: Vec<usize>,
}

/// The logit lens of `r` at every depth.
pub fn logit_lens(p: &Pretrained, r: &Read) -> Result<LogitLens> {
    let (m, v) = (&p.model, p.model.cfg.vocab);
    let layers = m.cfg.layers;
    let answers: Vec<u32> = r.logits.chunks_exact(v).map(argmax).collect();
    let choice = Choice::default();
    let mut depths = Vec::with_capacity(layers + 1);
    for d in 0..=layers {
        let logits = m.lens_logits(&r.cache, d)?;
        let cells: Vec<LensCell> = logits
            .chunks_exact(v)
            .zip(&answers)
            .map(|(row, &answer)| {
                let top = choice.best(row, LENS_TOP).into_iter().map(|(id, q)| (id, p.tokenizer.decode(&[id]), q));
                let (rank, q) = rank_of(row, answer);
                LensCell { top: top.collect(), rank, p: q }
            })
            .collect();
        depths.push(cells);
    }
    let settles = (0..answers.len())
        .map(|i| (0..=layers).rev().take_while(|&d| depths[d][i].rank == 1).last().unwrap_or(layers))
        .collect();
    Ok(LogitLens { depths, settles })
}

/// The first largest entry's index.
fn argmax(row: &[f32]) -> u32 {
    let best = row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &x)| if x > b.1 { (i, x) } else { b });
    best.0 as u32
}

/// Where `id` ranks in `row` (1: first; ties count for it) and its softmax probability.
fn rank_of(row: &[f32], id: u32) -> (usize, f64) {
    let x = row[id as usize];
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &y| m.max(y)) as f64;
    let total: f64 = row.iter().map(|&y| (y as f64 - max).exp()).sum();
    (1 + row.iter().filter(|&&y| y > x).count(), (x as f64 - max).exp() / total)
}

/// "The model's answer after …": at which depth the followed position's final answer becomes the
/// top candidate, and what the first depth read instead.
pub fn lens_in_words(l: &LogitLens, pieces: &[String], position: usize, predicts_next: bool) -> Option<String> {
    let last = l.depths.last()?.get(position)?;
    let answer = last.top.first()?;
    let settles = *l.settles.get(position)?;
    let layers = l.depths.len() - 1;
    let at = |d: usize| if d == layers { "the output".to_string() } else { format!("layer {d}") };
    let first = l.depths[0][position].top.first()?;
    let place = match predicts_next {
        true => format!("after \"{}\"", pieces.get(position)?),
        false => format!("at \"{}\"", pieces.get(position)?),
    };
    let first = format!("entering layer 0 the head reads \"{}\" ({:.0}%)", first.1, 100.0 * first.2);
    let when = match settles {
        0 => "it is already the top candidate entering layer 0, and stays so".to_string(),
        d if d == layers => format!("it is the top candidate only at the output; {first}"),
        d => format!("it becomes the top candidate at {} and stays so; {first}", at(d)),
    };
    Some(format!(
        "Read through the model's own head at every depth (the logit lens), its answer {place}, \"{}\" ({:.0}% at the \
         output): {when}.",
        answer.1,
        100.0 * answer.2
    ))
}
