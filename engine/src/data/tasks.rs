//! Algorithmic tasks with a known answer: copy, reverse, sort, modular addition. Only the answer's
//! positions are scored (the prompt is random and cannot be predicted).

use rand::Rng;

use crate::config::DataSpec;
use crate::loss::IGNORE;
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
    pub fn sample(self, rng: &mut R, tokens: &mut [u32], targets: &mut [u32]) {
        let t = tokens.len();
        let mut seq = vec![PAD; t + 1];
        let mut scored = vec![false; t + 1];
        match self {
            Task::Modadd => {
                // Packed problems "a b = c"; only c is scored.
                for start in (0..).map(|i| i * 4).take_while(|s| s + 4 <= t + 1) {
                    let (a, b) = (rng.random_range(0..MODULUS), rng.random_range(0..MODULUS));
                    seq[start..start + 4].copy_from_slice(&[a, b, EQUALS, (a + b) % MODULUS]);
                    scored[start + 3] = true;
                }
                // Any tail shorter than a problem stays EQUALS-free padding; use 0s, unscored.
                seq.iter_mut().filter(|x| **x == PAD).for_each(|x| *x = 0);
            }
            _ => {
                let m = t / 2;
                let prompt: Vec<u32> = (0..m).map(|_| rng.random_range(0..DIGITS)).collect();
                let mut answer = prompt.clone();
                match self {
                    Task::Reverse => answer.reverse(),
                    Task::Sort => answer.sort_unstable(),
                    _ => {}
                }
                seq[..m].copy_from_slice(&prompt);
                seq[m] = SEP;
                seq[m + 1..2 * m + 1].copy_from_slice(&answer);
                scored[m + 1..2 * m + 1].iter_mut().for_each(|s| *s = true);
            }
        }
        tokens.copy_from_slice(&seq[..t]);
        for (i, tgt) in targets.iter_mut().enumerate() {
            *tgt = if scored[i + 1] { seq[i + 1] } else { IGNORE };
        }
    }
}
