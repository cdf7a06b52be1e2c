//! Algorithmic tasks with a known answer: copy, reverse, sort, modular addition. Only the answer's
//! positions are scored (the prompt is random and cannot be predicted).

use rand::Rng;

use crate::config::DataSpec;
use crate::nn::loss::IGNORE;
use crate::rng::Rng as R;

const DIGITS: u32 = 10;
const SEP: u32 = DIGITS;
const PAD: u32 = DIGITS + 1;
const MODULUS: u32 = 23;
const EQUALS: u32 = MODULUS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Copy,
    Reverse,
    Sort,
    Modadd,
}

/// Position `pos` of the (T + 1)-long sequence is an input at `pos` and a target at `pos - 1`.
fn put(tokens: &mut [u32], targets: &mut [u32], pos: usize, val: u32, scored: bool) {
    if pos < tokens.len() {
        tokens[pos] = val;
    }
    if pos > 0 {
        targets[pos - 1] = if scored { val } else { IGNORE };
    }
}

impl Task {
    pub fn from_spec(spec: &DataSpec) -> Option<Task> {
        match spec {
            DataSpec::Copy => Some(Task::Copy),
            DataSpec::Reverse => Some(Task::Reverse),
            DataSpec::Sort => Some(Task::Sort),
            DataSpec::Modadd => Some(Task::Modadd),
            _ => None,
        }
    }

    pub fn symbols(self) -> Vec<String> {
        match self {
            Task::Modadd => (0..MODULUS).map(|i| i.to_string()).chain(["=".to_string()]).collect(),
            _ => (0..DIGITS).map(|i| i.to_string()).chain([">".to_string(), ".".to_string()]).collect(),
        }
    }

    /// Smallest context the task fits in.
    pub fn min_context(self) -> usize {
        match self {
            Task::Modadd => 3,
            _ => 2,
        }
    }

    /// Fills one row: `tokens` and `targets` of length T (the sequence is T + 1 long, shifted).
    /// Writes in place, without allocating: the training step calls this for every row.
    pub fn sample(self, rng: &mut R, tokens: &mut [u32], targets: &mut [u32]) {
        let t = tokens.len();
        match self {
            Task::Modadd => {
                // Packed problems "a b = c"; only c is scored; a tail too short for a problem is 0s.
                let problems = (t + 1) / 4;
                for p in 0..problems {
                    let (a, b) = (rng.random_range(0..MODULUS), rng.random_range(0..MODULUS));
                    for (i, (v, scored)) in
                        [(a, false), (b, false), (EQUALS, false), ((a + b) % MODULUS, true)].into_iter().enumerate()
                    {
                        put(tokens, targets, 4 * p + i, v, scored);
                    }
                }
                (4 * problems..=t).for_each(|pos| put(tokens, targets, pos, 0, false));
            }
            _ => {
                let m = t / 2;
                let mut counts = [0usize; DIGITS as usize];
                for pos in 0..m {
                    let d = rng.random_range(0..DIGITS);
                    counts[d as usize] += 1;
                    put(tokens, targets, pos, d, false);
                }
                put(tokens, targets, m, SEP, false);
                let mut sorted = counts.iter().enumerate().flat_map(|(d, &c)| std::iter::repeat_n(d as u32, c));
                for i in 0..m {
                    let v = match self {
                        Task::Copy => tokens[i],
                        Task::Reverse => tokens[m - 1 - i],
                        _ => sorted.next().expect("m digits were counted"),
                    };
                    put(tokens, targets, m + 1 + i, v, true);
                }
                (2 * m + 1..=t).for_each(|pos| put(tokens, targets, pos, PAD, false));
            }
        }
    }
}
