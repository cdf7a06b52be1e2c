//! The papers' claims answered in words from a session's measurements, with the numbers that make
//! them meaningful (a tolerance, a critical value). The page shows them beside the panels; the
//! words are computed here, never in the view.
//!
//! - `tokens`: what one probe frame shows (on the sphere, a Markov chain, the Gaussian kernel,
//!   tokens of a kind gathering);
//! - `motion`: how the tokens moved over a run (Brownian motion, or the particles' flow);
//! - `training`: what training did (the race, JoMA's dip and rebound).
//!
//! A verdict about a run states its conclusion only once the run has ended (`Verdict::settle`):
//! before, it says what is measured so far and that the run's end decides, so a class never reads
//! an answer that the end contradicts.

mod motion;
mod tokens;
mod training;

pub use motion::{brownian, brownian_over, flow, flow_over};
pub use tokens::{grouping, kernel, markov_chain, on_sphere};
pub use training::{joma, race};

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    Agrees,
    Partly,
    Disagrees,
    /// Too few measurements yet.
    NotYet,
}

/// What a verdict tests: a paper's claim (or the lab's own question), named on the page beside
/// "Agrees" or "Disagrees" so a reader knows with what.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Claim {
    Sphere,
    Markov,
    Kernel,
    Diffusion,
    Flow,
    Grouping,
    SecondOrder,
    JomaNonlinear,
    JomaLinear,
}

impl Claim {
    /// Whose claim it is.
    pub fn source(self) -> &'static str {
        match self {
            Claim::JomaNonlinear | Claim::JomaLinear => "JoMA",
            Claim::Grouping => "the lab's question",
            _ => "the Brownian paper",
        }
    }

    /// The claim itself, in a few words.
    pub fn says(self) -> &'static str {
        match self {
            Claim::Sphere => "LayerNorm puts every token on a sphere of radius √d",
            Claim::Markov => "attention is a random walk's transition matrix",
            Claim::Kernel => "attention is a Gaussian kernel on the sphere",
            Claim::Diffusion => "tokens move like Brownian motion",
            Claim::Flow => "Brownian motion, not attention's particle flow",
            Claim::Grouping => "tokens of one kind gather",
            Claim::SecondOrder => "a second-order optimizer trains in fewer steps",
            Claim::JomaNonlinear => "with a nonlinear MLP, attention becomes sparse, then dense again",
            Claim::JomaLinear => "with a linear MLP, attention becomes sparse and stays sparse",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The claim it answers.
    pub claim: Claim,
    pub agreement: Agreement,
    /// One or two sentences a class can read: the answer first, then the number behind it.
    pub sentence: String,
    /// Final for this run: it will not change again. An unsettled verdict states no conclusion: it
    /// says what it measured so far (`settle`).
    #[serde(default)]
    pub settled: bool,
    /// The answer alone, the words the sentence opens with ("Not Brownian: the tokens drift or
    /// cluster"): what the tour's card shows. Empty until the verdict is settled.
    #[serde(default)]
    pub conclusion: String,
}

impl Verdict {
    pub fn new(claim: Claim, agreement: Agreement, sentence: String) -> Self {
        Verdict { claim, agreement, sentence, settled: false, conclusion: String::new() }
    }

    /// The verdict's label: how it came out and against which claim ("Agrees with the Brownian
    /// paper (tokens move like Brownian motion)."); while provisional, what it tests.
    pub fn label(&self) -> String {
        let how = match (self.settled, self.agreement) {
            (false, _) => "Testing",
            (true, Agreement::Agrees) => "Agrees with",
            (true, Agreement::Partly) => "Partly agrees with",
            (true, Agreement::Disagrees) => "Disagrees with",
            (true, Agreement::NotYet) => "Too little measured to test",
        };
        format!("{how} {} ({}).", self.claim.source(), self.claim.says())
    }

    /// The answer's words, which the sentence opens with.
    pub fn concluding(mut self, conclusion: impl Into<String>) -> Self {
        self.conclusion = conclusion.into();
        self
    }

    /// Settled when the run has ended (`step >= total`). Before, more steps can turn the answer, so
    /// a verdict with a conclusion withholds it: "Measuring (step 40 of 300): not decided yet (the
    /// run's end decides)." and the numbers measured so far ("Layer 1: " kept in front).
    pub fn settle(&mut self, step: usize, total: usize) {
        self.settled = step >= total;
        if self.settled || self.conclusion.is_empty() {
            return;
        }
        let rest = self.sentence.strip_prefix(self.conclusion.as_str()).unwrap_or(&self.sentence);
        let rest = rest.trim_start_matches(['.', ':', ';', ',']).trim_start();
        let mut chars = rest.chars();
        let rest: String = chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default();
        let about = self.conclusion.split_once(": ").filter(|(l, _)| l.starts_with("Layer ")).map(|(l, _)| l);
        let measuring = format!("Measuring (step {step} of {total}): not decided yet (the run's end decides). {rest}");
        self.sentence = about.map_or(measuring.clone(), |l| format!("{l}: {measuring}"));
        self.agreement = Agreement::NotYet;
        self.conclusion.clear();
    }
}

/// Every verdict the panels show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdicts {
    pub sphere: Option<Verdict>,
    pub markov: Option<Verdict>,
    pub kernel: Option<Verdict>,
    pub brownian: Option<Verdict>,
    /// Brownian motion or the particles' attention flow: fitted once the run has ended.
    pub flow: Option<Verdict>,
    /// Do tokens of the same kind gather (what the class sees in the sphere view)?
    pub grouping: Option<Verdict>,
    /// Per layer: does the attention entropy dip and rebound?
    pub joma: Vec<Verdict>,
}

impl Verdicts {
    /// Marks what is final at `step` of `total`. The sphere and Markov checks are identities that
    /// hold frame by frame, final once measured; every other verdict answers a question about the
    /// whole run, which later steps can turn (a JoMA rebound at step 240, a diffusion fit that
    /// settles at step 76), so it is final only when the run has ended.
    pub fn settle(&mut self, step: usize, total: usize) {
        for v in [&mut self.sphere, &mut self.markov].into_iter().flatten() {
            v.settled = true;
        }
        let open = [&mut self.kernel, &mut self.brownian, &mut self.flow, &mut self.grouping];
        for v in open.into_iter().flatten().chain(self.joma.iter_mut()) {
            v.settle(step, total);
        }
    }
}

/// R² from which the straight decay of ln E[cos θ] counts as explaining the tokens' motion.
pub const GOOD_R2: f64 = 0.9;
/// Below this R² the decay is not a diffusion's whatever the KS distance says (a KS test over a few
/// dozen tokens cannot tell laws apart well): never "partly Brownian" with R² = -5.
pub const ROUGH_R2: f64 = 0.5;

/// Three significant digits, in scientific notation when small or large.
pub(crate) fn sig(x: f64) -> String {
    if x != 0.0 && !(1e-2..1e3).contains(&x.abs()) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

/// Several layers' verdicts as one (the tour's JoMA step): the last layer's agreement, settled when
/// all are (a conclusion only then).
pub fn joined(layers: &[Verdict]) -> Option<Verdict> {
    let last = layers.last()?;
    let settled = layers.iter().all(|v| v.settled);
    let sentences: Vec<&str> = layers.iter().map(|v| v.sentence.as_str()).collect();
    let conclusions: Vec<&str> = layers.iter().map(|v| v.conclusion.as_str()).filter(|c| !c.is_empty()).collect();
    Some(Verdict {
        claim: last.claim,
        agreement: if settled { last.agreement } else { Agreement::NotYet },
        sentence: sentences.join(" "),
        settled,
        conclusion: if settled { conclusions.join("; ") } else { String::new() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_identities_and_ended_runs_are_settled() {
        let v = |a| Some(Verdict::new(Claim::Diffusion, a, "Brownian: x. R² = 0.5.".into()).concluding("Brownian: x"));
        let mut all = Verdicts {
            sphere: v(Agreement::Agrees),
            markov: v(Agreement::Agrees),
            kernel: v(Agreement::Partly),
            brownian: v(Agreement::Disagrees),
            flow: v(Agreement::Partly),
            grouping: v(Agreement::Agrees),
            joma: vec![Verdict::new(Claim::JomaNonlinear, Agreement::NotYet, "too few".into())],
        };
        let mut ended = all.clone();
        all.settle(120, 300);
        assert!(all.sphere.as_ref().unwrap().settled && all.markov.as_ref().unwrap().settled);
        for v in [&all.kernel, &all.brownian, &all.flow, &all.grouping].map(|v| v.as_ref().unwrap()) {
            // Before the run's end: the numbers, and no conclusion in words or in agreement.
            assert!(!v.settled && v.conclusion.is_empty() && v.agreement == Agreement::NotYet, "{v:?}");
            assert_eq!(v.sentence, "Measuring (step 120 of 300): not decided yet (the run's end decides). R² = 0.5.");
        }
        assert!(!all.joma[0].settled && all.joma[0].sentence == "too few");
        ended.settle(300, 300);
        let b = ended.brownian.as_ref().unwrap();
        assert!(b.settled && b.sentence == "Brownian: x. R² = 0.5." && b.agreement == Agreement::Disagrees);
    }

    #[test]
    fn a_label_names_the_claim_it_answers_and_decides_nothing_before_it_settles() {
        let mut v = Verdict::new(Claim::JomaNonlinear, Agreement::Partly, "Layer 0: no rebound.".into());
        assert_eq!(v.label(), "Testing JoMA (with a nonlinear MLP, attention becomes sparse, then dense again).");
        v.settled = true;
        assert!(v.label().starts_with("Partly agrees with JoMA (with a nonlinear MLP"), "{}", v.label());
        let d = Verdict { settled: true, ..Verdict::new(Claim::Diffusion, Agreement::Disagrees, String::new()) };
        assert_eq!(d.label(), "Disagrees with the Brownian paper (tokens move like Brownian motion).");
    }
}
