//! Verdicts that wait instead of see-sawing. A class reads the words, not the "so far": a
//! provisional verdict whose numbers do not decide yet says "Measuring" with its running numbers;
//! once they decide, its conclusion is shown, and it changes at most once more before the run ends
//! (the final, settled verdict is always shown as it is). A conclusion that the latest numbers
//! lean against, but do not decide against (or after its one change), is kept and says so.

use std::collections::BTreeMap;

use super::{Agreement, Verdict, Verdicts};

/// How many times a shown provisional conclusion may change before the run ends.
const CHANGES: u32 = 1;

/// One verdict's history over a run: the conclusion shown, and how often it changed.
#[derive(Clone, Debug, Default)]
pub struct Steady {
    shown: Option<(Agreement, String)>,
    changes: u32,
}

impl Steady {
    /// `v` as the page should show it now, given what it showed before.
    pub fn pass(&mut self, v: Verdict) -> Verdict {
        if v.settled || v.conclusion.is_empty() || v.agreement == Agreement::NotYet {
            if v.settled && !v.conclusion.is_empty() {
                self.shown = Some((v.agreement, v.conclusion.clone()));
            }
            return v;
        }
        match &self.shown {
            None if !v.decisive => measuring(v),
            Some((_, shown)) if *shown == v.conclusion => v,
            Some(_) if !v.decisive || self.changes >= CHANGES => self.held(v),
            _ => {
                if self.shown.is_some() {
                    self.changes += 1;
                }
                self.shown = Some((v.agreement, v.conclusion.clone()));
                v
            }
        }
    }

    /// The conclusion shown before, kept, with today's numbers and what they lean to.
    fn held(&self, v: Verdict) -> Verdict {
        let (agreement, shown) = self.shown.clone().expect("held only after a conclusion was shown");
        let (prefix, rest) = parts(&v);
        let sentence = format!(
            "{prefix}{shown} (the latest numbers lean to \"{}\", not decisively: the run's end decides){rest}",
            v.conclusion
        );
        Verdict { agreement, sentence, conclusion: shown, decisive: false, ..v }
    }
}

/// "So far (step 40 of 300): " and what follows the conclusion in `v`'s sentence.
fn parts(v: &Verdict) -> (&str, &str) {
    let at = v.sentence.find(&v.conclusion).unwrap_or(0);
    let (prefix, rest) = v.sentence.split_at(at);
    (prefix, rest.strip_prefix(v.conclusion.as_str()).unwrap_or(rest))
}

/// A verdict whose numbers do not decide yet: its running numbers, no conclusion (what it is about,
/// "Layer 1: ", kept).
fn measuring(v: Verdict) -> Verdict {
    let (prefix, rest) = parts(&v);
    let step = prefix.trim_start_matches("So far ").trim_end_matches(": ");
    let rest = rest.trim_start_matches(['.', ':', ';', ',']).trim_start();
    let about = v.conclusion.split_once(": ").filter(|(l, _)| l.starts_with("Layer ")).map(|(l, _)| format!("{l}: "));
    let sentence = format!("{}Measuring {step}: not decided yet. {rest}", about.unwrap_or_default())
        .replace("Measuring : ", "Measuring: ");
    Verdict { agreement: Agreement::NotYet, sentence, conclusion: String::new(), ..v }
}

/// The session's memory of every verdict it showed, by name (a JoMA layer is one each).
#[derive(Clone, Debug, Default)]
pub struct Steadiness {
    by_name: BTreeMap<String, Steady>,
}

impl Steadiness {
    /// Every provisional verdict of `v` as the page should show it, after those shown before.
    pub fn pass(&mut self, v: &mut Verdicts) {
        let mut one = |name: &str, slot: &mut Option<Verdict>| {
            if let Some(x) = slot.take() {
                *slot = Some(self.by_name.entry(name.to_string()).or_default().pass(x));
            }
        };
        one("kernel", &mut v.kernel);
        one("brownian", &mut v.brownian);
        one("grouping", &mut v.grouping);
        for (l, layer) in v.joma.iter_mut().enumerate() {
            let x = std::mem::replace(layer, Verdict::new(Agreement::NotYet, String::new()));
            *layer = self.by_name.entry(format!("joma {l}")).or_default().pass(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn so_far(agreement: Agreement, conclusion: &str, decisive: bool, step: usize) -> Verdict {
        let mut v =
            Verdict::new(agreement, format!("{conclusion}. R² = 0.{step}; KS 0.1.")).concluding(conclusion, decisive);
        v.settle(step, 300);
        v
    }

    /// A see-saw of the kind a tour run showed: Partly, Not, Partly, Brownian, Not, ... The class
    /// sees "Measuring" until the numbers decide, then at most one change before the end.
    #[test]
    fn a_see_sawing_verdict_waits_then_changes_at_most_once_before_it_settles() {
        use Agreement::*;
        let seen = [
            (Partly, "Partly Brownian", false),
            (Disagrees, "Not Brownian", false),
            (Partly, "Partly Brownian", true),
            (Agrees, "Brownian", false),
            (Disagrees, "Not Brownian", true),
            (Partly, "Partly Brownian", true),
            (Disagrees, "Not Brownian", true),
            (Agrees, "Brownian", true),
        ];
        let mut s = Steady::default();
        let shown: Vec<Verdict> =
            seen.iter().enumerate().map(|(i, &(a, c, d))| s.pass(so_far(a, c, d, 10 * (i + 1)))).collect();
        assert_eq!(shown[0].agreement, NotYet);
        assert_eq!(shown[0].sentence, "Measuring (step 10 of 300): not decided yet. R² = 0.10; KS 0.1.");
        assert!(shown[1].sentence.starts_with("Measuring (step 20 of 300)"));
        let conclusions: Vec<&str> = shown.iter().map(|v| v.conclusion.as_str()).collect();
        assert_eq!(
            conclusions,
            [
                "",
                "",
                "Partly Brownian",
                "Partly Brownian",
                "Not Brownian",
                "Not Brownian",
                "Not Brownian",
                "Not Brownian"
            ]
        );
        assert_eq!(shown[3].agreement, Partly, "a lean that does not decide keeps the conclusion shown");
        assert!(shown[3].sentence.contains("Partly Brownian (the latest numbers lean to \"Brownian\", not decisively"));
        assert!(shown[5]
            .sentence
            .starts_with("So far (step 60 of 300): Not Brownian (the latest numbers lean to \"Partly Brownian\""));
        // The run's end shows the verdict as it is, whatever was shown before.
        let mut end = Verdict::new(Agrees, "Brownian. R² = 0.95.".into()).concluding("Brownian", true);
        end.settle(300, 300);
        assert_eq!(s.pass(end.clone()), end);
    }

    #[test]
    fn identities_and_verdicts_without_a_conclusion_pass_as_they_are() {
        let mut s = Steady::default();
        let plain = Verdict::new(Agreement::Agrees, "x".into());
        assert_eq!(s.pass(plain.clone()), plain);
        let not_yet =
            Verdict::new(Agreement::NotYet, "Layer 0: too few frames yet.".into()).concluding("Layer 0", false);
        assert_eq!(s.pass(not_yet.clone()), not_yet);
    }
}
