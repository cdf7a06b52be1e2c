//! What training did: the race (second order against its rival, at equal steps and seconds) and
//! JoMA's dip and rebound of each layer's attention entropy.

use super::{Agreement, Claim, Verdict};
use crate::science::joma::{self, CurveShape};
use crate::session::measures::EntropyPoint;

/// The race: the first entrant (the page's own run, second order) against the others, at the same
/// step and at the same seconds of compute. `curves`: (label, (step, loss) points, (seconds, loss));
/// settled once both have trained `total` steps.
#[allow(clippy::type_complexity)]
pub fn race(curves: &[(String, Vec<(usize, f32)>, Vec<(f64, f32)>)], total: usize) -> Option<Verdict> {
    let [own, rival, ..] = curves else { return None };
    let steps = own.1.len().min(rival.1.len());
    if steps < 10 {
        return None;
    }
    // Mean of the last tenth of the points up to the common step: one step's loss is noisy.
    let late = |pts: &[(usize, f32)]| {
        let tail = &pts[steps - (steps / 10).max(1)..steps];
        tail.iter().map(|p| p.1 as f64).sum::<f64>() / tail.len() as f64
    };
    let (a, b) = (late(&own.1), late(&rival.1));
    let at_time = |pts: &[(f64, f32)], t: f64| pts.iter().take_while(|p| p.0 <= t).last().map(|p| p.1 as f64);
    let t = own.2.last().map(|p| p.0).unwrap_or(0.0).min(rival.2.last().map(|p| p.0).unwrap_or(0.0));
    let by_time = match (at_time(&own.2, t), at_time(&rival.2, t)) {
        (Some(x), Some(y)) if t > 0.0 => format!(
            " After {t:.1} s of compute: {} at {x:.3}, {} at {y:.3} ({}).",
            own.0,
            rival.0,
            if x < y { "ahead in time too" } else { "behind in time: its steps cost more" }
        ),
        _ => String::new(),
    };
    let ahead = a < b;
    let head = if ahead { "Fewer steps with second order" } else { "Second order is not ahead in steps" };
    let mut v = Verdict::new(
        Claim::SecondOrder,
        if ahead { Agreement::Agrees } else { Agreement::Disagrees },
        format!(
            "{head}: after {steps} steps {} is at loss {a:.3}, {} at {b:.3} (the mean of the last tenth).{by_time}",
            own.0, rival.0
        ),
    )
    .concluding(head);
    let done = |pts: &[(usize, f32)]| pts.last().map_or(0, |p| p.0);
    v.settle(done(&own.1).min(done(&rival.1)), total);
    Some(v)
}

/// JoMA: with a nonlinear MLP, attention entropy first falls (sparse), then rises again (dense).
pub fn joma(entropy: &[EntropyPoint], nonlinear: bool) -> Vec<Verdict> {
    let layers = entropy.first().map_or(0, |e| e.layers.len());
    let steps: Vec<usize> = entropy.iter().map(|e| e.step).collect();
    let claim = if nonlinear { Claim::JomaNonlinear } else { Claim::JomaLinear };
    (0..layers)
        .map(|l| {
            let curve: Vec<f64> = entropy.iter().map(|e| e.layers[l]).collect();
            if curve.len() < 3 {
                return Verdict::new(claim, Agreement::NotYet, format!("Layer {l}: too few frames yet."));
            }
            let Ok(s) = joma::summarize(&curve, Some(&steps)) else {
                return Verdict::new(claim, Agreement::NotYet, format!("Layer {l}: no finite entropy curve yet."));
            };
            let numbers = format!(
                "entropy {:.2} → lowest {:.2} at step {} → {:.2} nats (changes under {} nats count as flat)",
                s.initial,
                s.min,
                s.min_step,
                s.last,
                joma::SHAPE_TOL
            );
            let (agreement, words) = match (s.shape, nonlinear) {
                (CurveShape::DipAndRebound, true) => {
                    (Agreement::Agrees, "sparse, then dense again, as JoMA predicts for a nonlinear MLP")
                }
                (CurveShape::DipAndRebound, false) => (
                    Agreement::Disagrees,
                    "sparse, then dense again, although JoMA predicts that only with a nonlinear MLP",
                ),
                (CurveShape::Falling, true) => (Agreement::Partly, "sparser and staying sparse: no rebound"),
                (CurveShape::Falling, false) => {
                    (Agreement::Agrees, "sparser and staying sparse, as JoMA predicts without a nonlinearity")
                }
                (CurveShape::Rising, _) => (Agreement::Disagrees, "denser from the start: no sparse phase"),
                (CurveShape::Flat, _) => (Agreement::Disagrees, "about as dense as it started: no clear phase"),
            };
            let head = format!("Layer {l}: {words}");
            Verdict::new(claim, agreement, format!("{head}; {numbers}.")).concluding(head)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::verdicts::joined;

    fn curve(values: &[f64]) -> Vec<EntropyPoint> {
        values
            .iter()
            .enumerate()
            .map(|(i, &h)| EntropyPoint { step: 10 * i, layers: vec![h], heads: vec![h] })
            .collect()
    }

    #[test]
    fn race_verdicts_compare_at_equal_steps_and_seconds() {
        let curve = |f: fn(usize) -> f32| (0..40).map(|s| (s + 1, f(s))).collect::<Vec<_>>();
        let times = |dt: f64, f: fn(usize) -> f32| (0..40).map(|s| ((s + 1) as f64 * dt, f(s))).collect::<Vec<_>>();
        let fast: fn(usize) -> f32 = |s| 3.0 - 0.05 * s as f32;
        let slow: fn(usize) -> f32 = |s| 3.0 - 0.02 * s as f32;
        let v = race(
            &[("cgfac".into(), curve(fast), times(0.1, fast)), ("adam".into(), curve(slow), times(0.01, slow))],
            40,
        )
        .unwrap();
        assert_eq!(v.agreement, Agreement::Agrees);
        assert!(v.settled);
        // Last tenth of 40 steps: steps 37..40 (indices 36..39): 3 - 0.05 * 37.5 = 1.125.
        assert!(
            v.sentence.contains("cgfac is at loss 1.125") && v.sentence.contains("adam at 2.250"),
            "{}",
            v.sentence
        );
        assert!(
            v.sentence.contains("After 0.4 s of compute") && v.sentence.contains("behind in time"),
            "{}",
            v.sentence
        );
        let v = race(&[("cgfac".into(), curve(slow), vec![]), ("adam".into(), curve(fast), vec![])], 200).unwrap();
        // Before both have trained every step: the losses so far, and no answer yet.
        assert_eq!(v.agreement, Agreement::NotYet);
        assert!(!v.settled && v.conclusion.is_empty());
        assert!(
            v.sentence.starts_with(
                "Measuring (step 40 of 200): not decided yet (the run's end decides). After 40 steps cgfac is at loss"
            ),
            "{}",
            v.sentence
        );
        assert!(race(&[("cgfac".into(), curve(fast), vec![])], 40).is_none());
    }

    #[test]
    fn joma_verdicts_follow_the_curve_and_the_mlp() {
        let dip = curve(&[2.5, 2.0, 1.6, 1.9, 2.2]);
        let v = &joma(&dip, true)[0];
        assert_eq!(v.agreement, Agreement::Agrees);
        assert!(v.sentence.contains("lowest 1.60 at step 20"), "{}", v.sentence);
        assert_eq!(joma(&dip, false)[0].agreement, Agreement::Disagrees);
        assert_eq!(joma(&curve(&[2.5, 2.0, 1.6, 1.6]), true)[0].agreement, Agreement::Partly);
        assert_eq!(joma(&curve(&[2.5, 2.5, 2.51]), true)[0].agreement, Agreement::Disagrees);
        assert_eq!(joma(&curve(&[2.5, 2.0]), true)[0].agreement, Agreement::NotYet);
        let mut layers = joma(&curve(&[2.5, 2.0, 1.6, 1.9, 2.2]), true);
        layers.extend(joma(&curve(&[2.5, 2.0, 1.6, 1.6]), true));
        let mut ended = layers.clone();
        layers.iter_mut().for_each(|v| v.settle(40, 300));
        let one = joined(&layers).unwrap();
        assert_eq!((one.agreement, one.conclusion.as_str()), (Agreement::NotYet, ""));
        // (Both curves are a layer 0 of their own run.)
        assert!(
            !one.settled && one.sentence.matches("Layer 0: Measuring (step 40 of 300): not decided yet").count() == 2
        );
        ended.iter_mut().for_each(|v| v.settle(300, 300));
        let one = joined(&ended).unwrap();
        assert_eq!(one.agreement, Agreement::Partly);
        assert!(one.settled && one.conclusion.matches("Layer 0: ").count() == 2, "{}", one.conclusion);
    }
}
