//! A model's training history: the same texts read by checkpoints taken along its training (as
//! Pythia publishes its revisions), and per checkpoint and layer the attention entropy JoMA plots
//! (the mean over heads and query positions of -sum_j P_ij ln P_ij, nats) with its spread over the
//! texts, beside the lab's other lenses through depth. Per layer a verdict: does the entropy fall
//! to a minimum and rise again (sparse, then dense: JoMA's claim), only fall, only rise, or
//! neither. Checkpoints with identical weights are found by a hash of the weights and said, and
//! only the first of them counts: a copy is no stretch of training.
//!
//! Shapes: K checkpoints, L layers, N texts.

use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use super::Inspection;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::pretrained::Pretrained;

/// Less than this change in a layer's entropy (nats) is no fall and no rise; nor is less than
/// half the spread over the texts at a checkpoint (the texts then disagree more than it moves).
pub const MIN_CHANGE: f64 = 0.05;

/// One checkpoint read: its step, where it came from, its weights' hash, and what it measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub step: u64,
    pub name: String,
    /// A hash of every weight's bits (`weights_hash`), as 16 hex digits.
    pub hash: String,
    /// The model's family and sizes: every checkpoint of a history is of one model.
    #[serde(default)]
    pub model: String,
    /// The earlier checkpoint (its step) with exactly these weights, if any.
    pub same_as: Option<u64>,
    /// Per layer, over the texts: the mean attention entropy (nats) and its spread (largest minus
    /// smallest over the texts).
    pub entropy: Vec<f64>,
    pub spread: Vec<f64>,
    /// Per depth 0..=L, the mean length of the stream's vectors before the norm.
    pub residual_norm: Vec<f64>,
    /// Per layer, the heads' mean total variation from their Gaussian kernel.
    pub kernel_tv: Vec<f64>,
    /// The largest relative distance of any token from the sphere after any norm.
    pub off_sphere: f64,
    /// Brownian motion's D through depth (per layer), the mean over the texts where it was fitted.
    pub diffusion: Option<f64>,
}

/// How one layer's entropy went over training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerVerdict {
    pub layer: usize,
    /// "falls then rises", "only falls", "only rises", "neither", or "one checkpoint" (no change can
    /// be seen in one).
    pub kind: String,
    pub sentence: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub model: String,
    pub texts: usize,
    pub layers: usize,
    /// Every checkpoint's step, in order; `entropy[k][l]` is checkpoint k's layer l.
    pub steps: Vec<u64>,
    pub entropy: Vec<Vec<f64>>,
    pub spread: Vec<Vec<f64>>,
    pub checkpoints: Vec<Checkpoint>,
    /// Pairs of steps whose weights are identical (the later, the earlier).
    pub identical: Vec<(u64, u64)>,
    pub verdict: Vec<LayerVerdict>,
}

/// A hash of every weight's bits: the same weights, whatever file they came from, hash the same.
pub fn weights_hash(model: &Model<f32>) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    model.params.len().hash(&mut h);
    for x in &model.params {
        x.to_bits().hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// One checkpoint (`p`, at `step`, from `name`) and its readings of the texts, summed up.
pub fn checkpoint(step: u64, name: &str, p: &Pretrained, readings: &[Inspection]) -> Result<Checkpoint> {
    let m = &p.model.cfg;
    let model = format!(
        "{} of {} layers, width {}, {} heads and {} tokens",
        p.family.name(),
        m.layers,
        m.d_model,
        m.heads,
        m.vocab
    );
    let first = readings.first().ok_or_else(|| Error::Config("a history needs at least one text".into()))?;
    let n = readings.len() as f64;
    let layers = first.n_layer;
    let per_text = |l: usize| -> Vec<f64> {
        readings
            .iter()
            .map(|r| {
                let heads = &r.layers[l].heads;
                heads.iter().map(|h| h.entropy).sum::<f64>() / heads.len().max(1) as f64
            })
            .collect()
    };
    let (mut entropy, mut spread) = (Vec::with_capacity(layers), Vec::with_capacity(layers));
    for l in 0..layers {
        let e = per_text(l);
        entropy.push(e.iter().sum::<f64>() / n);
        spread.push(
            e.iter().copied().fold(f64::NEG_INFINITY, f64::max) - e.iter().copied().fold(f64::INFINITY, f64::min),
        );
    }
    let mean_over = |f: &dyn Fn(&Inspection) -> f64| readings.iter().map(f).sum::<f64>() / n;
    let residual_norm = (0..=layers).map(|l| mean_over(&|r| r.layers[l].residual_norm)).collect();
    let kernel_tv = (0..layers)
        .map(|l| {
            mean_over(&|r| {
                let heads = &r.layers[l].heads;
                heads.iter().map(|h| h.kernel_tv_mean).sum::<f64>() / heads.len().max(1) as f64
            })
        })
        .collect();
    let off_sphere = readings.iter().flat_map(|r| r.layers.iter().map(|l| l.radius.max_rel_err)).fold(0.0, f64::max);
    let fitted: Vec<f64> = readings.iter().filter_map(|r| r.depth.brownian.as_ref().map(|b| b.diffusion)).collect();
    let diffusion = (!fitted.is_empty()).then(|| fitted.iter().sum::<f64>() / fitted.len() as f64);
    Ok(Checkpoint {
        step,
        name: name.to_string(),
        hash: weights_hash(&p.model),
        model,
        same_as: None,
        entropy,
        spread,
        residual_norm,
        kernel_tv,
        off_sphere,
        diffusion,
    })
}

/// The checkpoints in order of their steps, identical ones found, and a verdict per layer.
pub fn history(model: &str, texts: usize, mut checkpoints: Vec<Checkpoint>) -> Result<History> {
    checkpoints.sort_by_key(|c| c.step);
    if let Some(w) = checkpoints.windows(2).find(|w| w[0].step == w[1].step) {
        return Err(Error::Config(format!("{} and {} are both step {}", w[0].name, w[1].name, w[0].step)));
    }
    if let Some((a, b)) =
        checkpoints.first().and_then(|a| checkpoints.iter().find(|b| b.model != a.model).map(|b| (a, b)))
    {
        return Err(Error::Config(format!(
            "{} is a {} where {} is a {}: a history is one model's training, every checkpoint the same model",
            b.name, b.model, a.name, a.model
        )));
    }
    let layers = checkpoints.first().map_or(0, |c| c.entropy.len());
    if let Some(c) = checkpoints.iter().find(|c| c.entropy.len() != layers) {
        return Err(Error::Config(format!(
            "{} has {} layers where the first checkpoint has {layers}: every checkpoint must be the same model",
            c.name,
            c.entropy.len()
        )));
    }
    let mut identical = Vec::new();
    for k in 0..checkpoints.len() {
        let earlier = checkpoints[..k].iter().find(|c| c.hash == checkpoints[k].hash && c.same_as.is_none());
        if let Some(e) = earlier.map(|e| e.step) {
            checkpoints[k].same_as = Some(e);
            identical.push((checkpoints[k].step, e));
        }
    }
    let unique: Vec<&Checkpoint> = checkpoints.iter().filter(|c| c.same_as.is_none()).collect();
    let verdict = (0..layers).map(|l| layer_verdict(l, &unique)).collect();
    Ok(History {
        model: model.to_string(),
        texts,
        layers,
        steps: checkpoints.iter().map(|c| c.step).collect(),
        entropy: checkpoints.iter().map(|c| c.entropy.clone()).collect(),
        spread: checkpoints.iter().map(|c| c.spread.clone()).collect(),
        checkpoints,
        identical,
        verdict,
    })
}

/// Layer `l`'s entropy over the distinct checkpoints: from the first to its lowest, then to the
/// last; a fall or a rise counts from [`MIN_CHANGE`] nats, or half the largest spread over the
/// texts when that is more.
fn layer_verdict(l: usize, cs: &[&Checkpoint]) -> LayerVerdict {
    let e: Vec<f64> = cs.iter().map(|c| c.entropy[l]).collect();
    let spread = cs.iter().map(|c| c.spread[l]).fold(0.0, f64::max);
    let least = MIN_CHANGE.max(spread / 2.0);
    let Some(m) = (0..e.len()).min_by(|&a, &b| e[a].total_cmp(&e[b])) else {
        return LayerVerdict {
            layer: l,
            kind: "one checkpoint".into(),
            sentence: format!("Layer {l}: no checkpoint."),
        };
    };
    if e.len() == 1 {
        let sentence = format!(
            "Layer {l}'s attention entropy is {:.2} nats at step {}, the only distinct checkpoint: a change needs two \
             or more.",
            e[0], cs[0].step
        );
        return LayerVerdict { layer: l, kind: "one checkpoint".into(), sentence };
    }
    let last = e.len() - 1;
    let (fall, rise) = (e[0] - e[m], e[last] - e[m]);
    let texts = match spread > 0.0 {
        true => format!(
            " (a change counts from {least:.2} nats; the texts differ by up to {spread:.2} nats at one checkpoint)"
        ),
        false => format!(" (a change counts from {least:.2} nats)"),
    };
    let step = |k: usize| cs[k].step;
    let (kind, words) = match (fall >= least, rise >= least) {
        (true, true) => (
            "falls then rises",
            format!(
                "falls by {fall:.2} nats from {:.2} at step {} to {:.2} at step {}, then rises by {rise:.2} to {:.2} at \
                 step {}: sparse, then dense again, as JoMA says",
                e[0],
                step(0),
                e[m],
                step(m),
                e[last],
                step(last)
            ),
        ),
        (true, false) => (
            "only falls",
            format!(
                "falls by {fall:.2} nats from {:.2} at step {} to {:.2} at step {}{}: sparse, not dense again",
                e[0],
                step(0),
                e[m],
                step(m),
                match m == last {
                    true => ", the last checkpoint".to_string(),
                    false => format!(", and rises by only {rise:.2} after it (by step {} it is {:.2})", step(last), e[last]),
                }
            ),
        ),
        (false, true) => (
            "only rises",
            format!(
                "does not fall (its lowest, {:.2} at step {}, is within {least:.2} of the start); it rises by {rise:.2} \
                 to {:.2} at step {}",
                e[m],
                step(m),
                e[last],
                step(last)
            ),
        ),
        (false, false) => (
            "neither",
            format!(
                "stays within {least:.2} nats of {:.2} from step {} to step {}: neither sparse nor dense again",
                e[0],
                step(0),
                step(last)
            ),
        ),
    };
    LayerVerdict { layer: l, kind: kind.into(), sentence: format!("Layer {l}'s attention entropy {words}{texts}.") }
}

/// The step in a checkpoint's path: its last folder name that ends in `stepN` (Pythia's revisions
/// are named so: `…/resolve/step3000`), or None when N is no whole number of 64 bits. A name
/// whose `step` is followed by more than digits (`step1e3`) is not a step.
pub fn step_in_name(path: &str) -> Option<u64> {
    fn digits(part: &str) -> Option<&str> {
        let d = &part[part.rfind("step")? + 4..];
        (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())).then_some(d)
    }
    path.rsplit(['/', '\\']).find_map(digits).and_then(|d| d.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(step: u64, hash: &str, entropy: &[f64]) -> Checkpoint {
        Checkpoint {
            step,
            name: format!("step{step}"),
            hash: hash.into(),
            model: "GPT-NeoX of 2 layers, width 64, 4 heads and 320 tokens".into(),
            same_as: None,
            entropy: entropy.to_vec(),
            spread: vec![0.01; entropy.len()],
            residual_norm: vec![],
            kernel_tv: vec![],
            off_sphere: 0.0,
            diffusion: None,
        }
    }

    #[test]
    fn each_layer_s_course_is_named_and_copies_do_not_count() {
        let h = history(
            "m",
            1,
            vec![
                at(2000, "c", &[1.0, 1.02, 2.0, 2.0]),
                at(0, "a", &[2.0, 2.0, 2.0, 1.0]),
                at(1000, "b", &[0.5, 1.0, 2.02, 1.5]),
                // A copy of step 1000's weights served as step 3000: not a flat stretch.
                at(3000, "b", &[0.5, 1.0, 2.02, 1.5]),
            ],
        )
        .unwrap();
        assert_eq!(h.steps, vec![0, 1000, 2000, 3000]);
        assert_eq!(h.identical, vec![(3000, 1000)]);
        assert_eq!(h.checkpoints[3].same_as, Some(1000));
        let kinds: Vec<&str> = h.verdict.iter().map(|v| v.kind.as_str()).collect();
        assert_eq!(kinds, ["falls then rises", "only falls", "neither", "only rises"]);
        assert!(
            h.verdict[0].sentence.starts_with(
                "Layer 0's attention entropy falls by 1.50 nats from 2.00 at step 0 to 0.50 at step 1000, then rises by \
                 0.50 to 1.00 at step 2000"
            ),
            "{}",
            h.verdict[0].sentence
        );
        // Layer 1 ends at its lowest among the distinct checkpoints (the copy at 3000 is left out).
        assert!(
            h.verdict[1].sentence.contains("rises by only 0.02 after it (by step 2000 it is 1.02)"),
            "{}",
            h.verdict[1].sentence
        );
        // A fall of 0.1 nats where the texts disagree by 0.4 is no fall.
        let noisy = |step, hash, e| Checkpoint { spread: vec![0.4], ..at(step, hash, &[e]) };
        let h = history("m", 2, vec![noisy(0, "a", 1.0), noisy(1, "b", 0.9), noisy(2, "c", 1.0)]).unwrap();
        assert_eq!(h.verdict[0].kind, "neither", "{}", h.verdict[0].sentence);
        assert!(h.verdict[0].sentence.contains("a change counts from 0.20 nats"), "{}", h.verdict[0].sentence);
        assert!(history("m", 1, vec![at(5, "a", &[1.0]), at(5, "b", &[1.0])]).is_err());
        assert!(history("m", 1, vec![at(5, "a", &[1.0]), at(6, "b", &[1.0, 2.0])]).is_err());
    }

    #[test]
    fn one_distinct_checkpoint_gets_no_verdict_on_a_change() {
        // One checkpoint, or two that are the same weights: nothing can have fallen or risen.
        for cs in [vec![at(7, "a", &[1.5])], vec![at(7, "a", &[1.5]), at(9, "a", &[1.5])]] {
            let h = history("m", 1, cs).unwrap();
            assert_eq!(h.verdict[0].kind, "one checkpoint");
            assert_eq!(
                h.verdict[0].sentence,
                "Layer 0's attention entropy is 1.50 nats at step 7, the only distinct checkpoint: a change needs two \
                 or more."
            );
        }
    }

    #[test]
    fn steps_come_from_revision_folders() {
        assert_eq!(step_in_name("hub/EleutherAI/pythia-14m/resolve/step3000"), Some(3000));
        assert_eq!(step_in_name("/tmp/pythia-14m-step0/"), Some(0));
        assert_eq!(step_in_name("ckpt/step512/model"), Some(512));
        assert_eq!(step_in_name("pythia-14m/main"), None);
        // Not steps: a number that is not whole, one past 64 bits (not the earlier folder's).
        assert_eq!(step_in_name("pythia-14m/step1e3"), None);
        assert_eq!(step_in_name("pythia-14m/step5/step99999999999999999999"), None);
    }

    #[test]
    fn checkpoints_of_two_models_are_no_history() {
        let wider = Checkpoint {
            model: "GPT-NeoX of 2 layers, width 128, 4 heads and 320 tokens".into(),
            ..at(2, "b", &[1.0, 1.0])
        };
        let e = history("pythia", 1, vec![at(1, "a", &[1.0, 1.0]), wider]).unwrap_err().to_string();
        assert!(e.contains("step2 is a GPT-NeoX of 2 layers, width 128"), "{e}");
        assert!(e.contains("where step1 is a GPT-NeoX of 2 layers, width 64"), "{e}");
    }
}
