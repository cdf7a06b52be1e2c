//! How the tokens moved over a run (or through a real model's depth): Brownian motion, or the
//! particles' attention flow.

use super::{sig, Agreement, Claim, Verdict, GOOD_R2, ROUGH_R2};
use crate::session::measures::{Axis, Brownian, Flow};

/// "Brownian or not?" over training, in words (`brownian_over`).
pub fn brownian(b: &Brownian) -> Verdict {
    brownian_over(b, Axis::Training)
}

/// "Brownian or not?" in words: the fit's R², the KS distance against its 5% critical value, the
/// two estimates of D, and what the tokens did instead when they did not diffuse.
pub fn brownian_over(b: &Brownian, axis: Axis) -> Verdict {
    let (tokens, critical) = (b.points, b.ks_critical);
    let fits = b.r_squared.is_finite() && b.r_squared >= GOOD_R2;
    let same_law = b.ks.is_finite() && b.ks <= critical;
    // A jump then a plateau: most of the fall of E[cos θ] happened in the first quarter of the time
    // (diffusion's fall is spread over all of it: a quarter of the time gives well under 80% of it).
    let end = b.times.last().copied().unwrap_or(b.mean_cos.len().saturating_sub(1) as f64);
    let quarter = match b.times.is_empty() {
        true => b.mean_cos.len() / 4,
        false => b.times.iter().position(|&t| t >= 0.25 * end).unwrap_or(0),
    };
    let early = b.mean_cos.get(quarter.max(1)).copied().unwrap_or(1.0);
    let last = b.mean_cos.last().copied().unwrap_or(1.0);
    let jumped = b.mean_cos.len() >= 3 && (1.0 - early) > 0.8 * (1.0 - last) && (1.0 - last) > 0.05;
    let fit_words = if !b.r_squared.is_finite() {
        "the fit has too few frames for an R²".to_string()
    } else if b.r_squared < 0.0 {
        format!(
            "R² = {:.2} is below 0: a flat line explains ln E[cos θ] better than diffusion's steady decay",
            b.r_squared
        )
    } else {
        format!(
            "R² = {:.2} (a straight decay of ln E[cos θ] explains {:.0}% of its variation)",
            b.r_squared,
            100.0 * b.r_squared
        )
    };
    let ks_words = format!(
        "the angles from the start differ from Brownian walkers' by KS = {:.2}, {} the 5% critical value {:.2} for {tokens} tokens",
        b.ks,
        if same_law { "within" } else { "beyond" },
        critical
    );
    let rough = b.r_squared.is_finite() && b.r_squared >= ROUGH_R2;
    let (agreement, head) = match (fits, same_law) {
        (true, true) => (Agreement::Agrees, "Brownian: the tokens spread like a diffusion".to_string()),
        (true, false) => {
            (Agreement::Partly, "Partly Brownian: a diffusion's decay, not its spread of angles".to_string())
        }
        (false, true) if rough => {
            (Agreement::Partly, "Partly Brownian: a diffusion's spread of angles, a rough decay".to_string())
        }
        (false, true) if !jumped => (
            Agreement::Disagrees,
            "Not Brownian: the angles' spread is within chance, but the mean cosine does not decay like a diffusion's"
                .to_string(),
        ),
        (false, _) if jumped => (
            Agreement::Disagrees,
            format!(
                "Not Brownian: the tokens move in one jump {} and then stay put; pure diffusion would keep spreading",
                axis.early()
            ),
        ),
        (false, _) => (Agreement::Disagrees, "Not Brownian: the tokens drift or cluster".to_string()),
    };
    // The second estimate of D, from the increments: a diffusion with one D puts the line's D
    // inside its interval.
    let [lo, hi] = b.diffusion_ci;
    let ml_words = if !(b.diffusion_ml.is_finite() && lo.is_finite() && hi.is_finite()) {
        String::new()
    } else {
        let inside = (lo..=hi).contains(&b.diffusion);
        format!(
            " Is it one diffusion? D from the steps between snapshots = {} (95% interval {}-{}); D fitted to the \
             mean cosine = {} is {} it{}.",
            sig(b.diffusion_ml),
            sig(lo),
            sig(hi),
            sig(b.diffusion),
            if inside { "inside" } else { "outside" },
            if inside { ", as one diffusion would give" } else { ": the motion is not one diffusion" }
        )
    };
    Verdict::new(Claim::Diffusion, agreement, format!("{head}. {fit_words}; {ks_words}.{ml_words}")).concluding(head)
}

/// Brownian motion or the particles' attention flow over training (`flow_over`).
pub fn flow(f: &Flow, brownian: Option<Agreement>) -> Verdict {
    flow_over(f, brownian, Axis::Training)
}

/// Brownian motion or the particles' attention flow: which model of the two comes closer, read
/// with the diffusion verdict (`brownian`), so "closer than the particles" never reads as
/// "Brownian" when the diffusion fit itself failed.
pub fn flow_over(f: &Flow, brownian: Option<Agreement>, axis: Axis) -> Verdict {
    let numbers = format!(
        "Root-mean-square error over both curves (mean cosine to the start, mean inner product of pairs) {:.3} for \
         Brownian motion (its own D = {}, fitted to both curves) against {:.3} for particles moved by attention \
         (β = {:.2}, {} flow time per {}); at the last snapshot the angles to the start differ from the \
         flow's by KS {:.2}, {} the 5% critical value {:.2}, over the first {} tokens.",
        f.rmse_brownian,
        sig(f.diffusion),
        f.rmse_particles,
        f.beta,
        sig(f.time_scale),
        axis.unit(),
        f.ks_particles,
        if f.ks_particles <= f.ks_critical { "within" } else { "beyond" },
        f.ks_critical,
        f.points
    );
    let limit = if f.time_at_limit {
        " The flow's fit uses all the flow time it was given: the tokens move further from their start than the flow \
         takes them."
    } else {
        ""
    };
    let (agreement, head) = match (f.better == "particles", brownian) {
        (true, _) => (Agreement::Disagrees, "Particles, not Brownian motion: the attention flow comes closer"),
        (false, Some(Agreement::Agrees)) => (Agreement::Agrees, "Brownian motion, not particles"),
        (false, _) => (
            Agreement::Partly,
            "Brownian motion comes closer than the particles' flow, but neither fits well (the diffusion verdict \
             above stands)",
        ),
    };
    Verdict::new(Claim::Flow, agreement, format!("{head}. {numbers}{limit}")).concluding(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::science::stats::ks_critical;

    fn fit(r_squared: f64, ks: f64, mean_cos: Vec<f64>) -> Brownian {
        let times = (0..mean_cos.len()).map(|t| t as f64).collect();
        let (diffusion, diffusion_ml, diffusion_ci) = (1e-3, 1.1e-3, [0.9e-3, 1.3e-3]);
        Brownian {
            r_squared,
            ks,
            mean_cos,
            times,
            points: 32,
            ks_critical: ks_critical(32, 32),
            diffusion,
            diffusion_ml,
            diffusion_ci,
            ..Brownian::default()
        }
    }

    #[test]
    fn the_ks_critical_value_is_the_textbook_one() {
        // c(0.05) sqrt((n+m)/(nm)): 0.340 for 32 and 32, 0.043 for 2000 and 2000.
        assert!((ks_critical(32, 32) - 0.3395).abs() < 1e-3);
        assert!((ks_critical(2000, 2000) - 0.0429).abs() < 1e-3);
    }

    #[test]
    fn brownian_verdicts_follow_the_numbers() {
        let good = brownian(&fit(0.97, 0.2, vec![1.0, 0.9, 0.8, 0.7]));
        assert_eq!(good.agreement, Agreement::Agrees);
        assert!(good.sentence.starts_with("Brownian") && good.sentence.contains("within the 5% critical value 0.34"));
        assert!(
            good.sentence.contains(
                "D from the steps between snapshots = 1.10e-3 (95% interval 9.00e-4-1.30e-3); D fitted to the mean \
                 cosine = 1.00e-3 is inside it"
            ),
            "{}",
            good.sentence
        );
        let two =
            Brownian { diffusion_ml: 2e-4, diffusion_ci: [1.5e-4, 2.5e-4], ..fit(0.97, 0.2, vec![1.0, 0.9, 0.8, 0.7]) };
        assert!(brownian(&two).sentence.contains("is outside it: the motion is not one diffusion"));
        // The bug report's case: from 1 at the first frame a jump to cos ~0.5, flat after, R^2 < 0.
        let jump = brownian(&fit(-18.8, 0.438, vec![1.0, 0.52, 0.5, 0.5, 0.49]));
        assert_eq!(jump.agreement, Agreement::Disagrees);
        assert!(jump.sentence.contains("one jump early in training"), "{}", jump.sentence);
        assert!(jump.sentence.contains("R² = -18.80 is below 0: a flat line explains"), "{}", jump.sentence);
        assert!(jump.sentence.contains("beyond the 5% critical value"), "{}", jump.sentence);
        let drift = brownian(&fit(0.5, 0.6, vec![1.0, 0.95, 0.8, 0.5]));
        assert_eq!(drift.agreement, Agreement::Disagrees);
        assert!(!drift.sentence.contains("jump"));
        assert_eq!(brownian(&fit(0.95, 0.6, vec![0.9, 0.8, 0.7])).agreement, Agreement::Partly);
        // The JoMA preset's case: R² far below 0 with a KS inside its critical value is not "partly".
        let flat = brownian(&fit(-5.02, 0.1, vec![1.0, 0.99, 0.97, 0.98, 0.9]));
        assert_eq!(flat.agreement, Agreement::Disagrees, "{}", flat.sentence);
        assert!(flat.sentence.contains("does not decay like a diffusion's"), "{}", flat.sentence);
        assert_eq!(brownian(&fit(0.6, 0.1, vec![1.0, 0.95, 0.9, 0.85])).agreement, Agreement::Partly);
    }

    #[test]
    fn the_flow_verdict_reads_with_the_diffusion_verdict() {
        let f = |better: &str| Flow { better: better.into(), points: 32, ..Flow::default() };
        assert_eq!(flow(&f("particles"), Some(Agreement::Agrees)).agreement, Agreement::Disagrees);
        assert_eq!(flow(&f("brownian"), Some(Agreement::Agrees)).agreement, Agreement::Agrees);
        // The bug report's contradiction: "Not Brownian" above "Brownian motion fits better".
        let closer = flow(&f("brownian"), Some(Agreement::Disagrees));
        assert_eq!(closer.agreement, Agreement::Partly);
        assert!(closer.sentence.contains("neither fits well"), "{}", closer.sentence);
        // One test, one answer: the Brownian walkers' KS is the diffusion verdict's; this one
        // states only the flow's, against its critical value.
        let two = Flow { ks_brownian: 0.45, ks_particles: 0.2, ks_critical: 0.41, ..f("brownian") };
        let s = flow(&two, Some(Agreement::Agrees)).sentence;
        assert!(s.contains("differ from the flow's by KS 0.20, within the 5% critical value 0.41"), "{s}");
        assert!(!s.contains("0.45") && s.matches("KS").count() == 1, "{s}");
    }
}
