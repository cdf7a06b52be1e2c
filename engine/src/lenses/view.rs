//! A loaded model's reading as the page's own views draw it: one frame of `session::Panels` (the
//! tokens on the sphere at every depth in one 3-D principal view of all depths, every head's attention)
//! with the verdicts in words, so the sphere and the heatmap show GPT-2 as they show the lab's runs.
//! The depth fits take most of the time, so they come second (`Reading::fit_depth`): the page
//! draws every layer first.

use super::reading::{depth, measure, read, tokens, DepthFit, Inspection, Read};
use crate::error::Result;
use crate::memory;
use crate::model::Cache;
use crate::pretrained::Pretrained;
use crate::science::markov::{self, Validity};
use crate::science::{cache as lens, sphere};
use crate::session::{Agreement, Claim, Panels, Verdict, Verdicts};

/// A text read: the inspection and its panels, and the forward pass they came from (for the depth
/// fits still to come).
pub struct Reading {
    pub inspection: Inspection,
    pub panels: Panels,
    cache: Cache<f32>,
}

impl Reading {
    /// Brownian motion and the particles' flow through depth, and their verdicts.
    pub fn fit_depth(&self, p: &Pretrained) -> DepthFit {
        depth(&p.model, &self.cache)
    }
}

/// Puts the depth fits and their verdicts into an inspection and its panels.
pub fn with_depth(inspection: &mut Inspection, panels: &mut Panels, fit: DepthFit) {
    panels.verdicts.brownian = fit.verdicts.first().cloned();
    panels.verdicts.flow = fit.verdicts.get(1).cloned();
    inspection.depth = fit;
}

/// The tokens of `text`, refused when the page cannot hold their reading: the pass and every head's
/// attention drawn (`memory::check_draw`). A long text on a model with a long context is refused
/// here, in words, instead of taking the tab past its memory.
pub fn tokens_to_draw(p: &Pretrained, text: &str, budget: u64) -> Result<Vec<u32>> {
    let ids = tokens(p, text)?;
    memory::check_draw(&p.model.cfg, p.model.bf16_bytes(), ids.len(), budget)?;
    Ok(ids)
}

/// The inspection of `text` and its panels, from one forward pass on the CPU, with the depth fits.
pub fn view(p: &Pretrained, text: &str, budget: u64) -> Result<(Inspection, Panels)> {
    let mut r = first_view(p, read(p, text, budget)?)?;
    let fit = r.fit_depth(p);
    with_depth(&mut r.inspection, &mut r.panels, fit);
    Ok((r.inspection, r.panels))
}

/// The inspection of a forward pass (`inspect::read`, or the GPU's) and its panels, all but the
/// depth fits (`Reading::fit_depth`).
pub fn first_view(p: &Pretrained, r: Read) -> Result<Reading> {
    let inspection = measure(p, &r)?;
    let cache = r.cache;
    let cfg = &p.model.cfg;
    let (t, dim) = (cache.t, cfg.d_model);
    let mut out = Panels {
        layers: cfg.layers,
        heads: cfg.heads,
        context: t,
        d_model: dim,
        vocab: cfg.vocab,
        tokens: inspection.tokens.clone(),
        symbols: inspection.pieces.clone(),
        steps: vec![0],
        ..Panels::default()
    };
    // One view for every depth: the principal directions of all depths' tokens together, so a
    // token moves on screen only as it moves in the model (a view per depth turns with the depth).
    let frames = (0..=cfg.layers).map(|depth| lens::sphere_points(cfg, &cache, depth)).collect::<Result<Vec<_>>>()?;
    let view = sphere::project3(&frames.concat(), dim, None)?;
    for points in &frames {
        out.explained.push(sphere::share_along(points, dim, &view.components));
    }
    out.sphere.extend(view.points.iter().flat_map(|p| p.map(|x| x as f32)));
    let mut worst_row = 0.0f64;
    for block in &cache.blocks {
        out.attention.extend_from_slice(&block.att);
        for p in block.att.chunks_exact(t * t) {
            let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
            if let Validity::Ok { max_row_error } = markov::check(&p, t, 1e-4) {
                worst_row = worst_row.max(max_row_error);
            } else {
                worst_row = f64::INFINITY;
            }
        }
    }
    out.verdicts = Verdicts {
        sphere: Some(on_sphere(&inspection)),
        markov: Some(markov_chain(worst_row, t, &inspection)),
        kernel: Some(kernel(&inspection)),
        ..Verdicts::default()
    };
    Ok(Reading { inspection, panels: out, cache })
}

fn settled(claim: Claim, agreement: Agreement, sentence: String) -> Verdict {
    Verdict { settled: true, ..Verdict::new(claim, agreement, sentence) }
}

/// The radius check before and after LayerNorm's gain, over every depth.
fn on_sphere(r: &Inspection) -> Verdict {
    let worst = r.layers.iter().map(|l| l.radius.max_rel_err).fold(0.0, f64::max);
    let off = r.layers.iter().max_by(|a, b| a.gain.mean_rel_offset.total_cmp(&b.gain.mean_rel_offset));
    let (most, at) = off.map_or((0.0, 0), |l| (l.gain.mean_rel_offset, l.layer));
    let dims: Vec<String> = off.map_or(vec![], |l| l.gain_dims.iter().take(3).map(|d| d.0.to_string()).collect());
    let agrees = worst < 0.05;
    let norm = &r.norm;
    settled(
        Claim::Sphere,
        if agrees { Agreement::Agrees } else { Agreement::Disagrees },
        format!(
            "{}: after {norm} every one of the {} tokens is within {worst:.1e} (relative) of the sphere of radius \
             √{} = {:.2}, at all {} depths. {norm}'s gain and bias then move them off it, most at {}: {:.0}% on \
             average, mostly along dimensions {}.",
            if agrees { "On the sphere" } else { "Off the sphere" },
            r.tokens.len(),
            r.d_model,
            (r.d_model as f64).sqrt(),
            r.n_layer + 1,
            if at == r.n_layer { format!("the final {norm}") } else { format!("layer {at}") },
            100.0 * most,
            dims.join(", ")
        ),
    )
}

fn markov_chain(worst: f64, t: usize, r: &Inspection) -> Verdict {
    match worst.is_finite() {
        true => settled(
            Claim::Markov,
            Agreement::Agrees,
            format!(
                "A Markov chain: every row of every head's {t} x {t} attention is non-negative and sums to 1 within \
                 {worst:.1e}, so P is the transition matrix of a random walk over the text's tokens.{}",
                both_ways(r)
            ),
        ),
        false => settled(
            Claim::Markov,
            Agreement::Disagrees,
            "Not a Markov matrix: a head's attention fails the check.".into(),
        ),
    }
}

/// Softmax against the Gaussian kernel over every head, and the key-norm factor between them.
fn kernel(r: &Inspection) -> Verdict {
    let heads: Vec<_> = r.layers.iter().flat_map(|l| l.heads.iter().map(move |h| (l.layer, h))).collect();
    let mean = heads.iter().map(|(_, h)| h.kernel_tv_mean).sum::<f64>() / heads.len().max(1) as f64;
    let closest = heads.iter().min_by(|a, b| a.1.kernel_tv_mean.total_cmp(&b.1.kernel_tv_mean));
    let farthest = heads.iter().max_by(|a, b| a.1.kernel_tv_mean.total_cmp(&b.1.kernel_tv_mean));
    let name = |x: Option<&(usize, &super::reading::HeadLens)>| {
        x.map_or(String::new(), |(l, h)| format!("layer {l} head {} ({:.2})", h.head, h.kernel_tv_mean))
    };
    let agreement = match mean {
        m if m < 0.05 => Agreement::Agrees,
        m if m < 0.25 => Agreement::Partly,
        _ => Agreement::Disagrees,
    };
    settled(
        Claim::Kernel,
        agreement,
        format!(
            "The heads differ from the row-normalised Gaussian kernel of their own queries and keys by a mean total \
             variation of {mean:.2} (0 identical, 1 disjoint); closest {}, farthest {}. What separates them is the \
             keys' length: the kernel weighs each key by exp(-|k|² / 2√d) on top of softmax.",
            name(closest),
            name(farthest)
        ),
    )
}

/// For a model that attends both ways: where its heads' walks settle (their stationary
/// distributions, averaged over the heads that have one).
fn both_ways(r: &Inspection) -> String {
    let heads: Vec<&[f64]> = r
        .layers
        .iter()
        .flat_map(|l| l.heads.iter().map(|h| h.stationary.as_slice()))
        .filter(|s| !s.is_empty())
        .collect();
    let all = r.layers.iter().map(|l| l.heads.len()).sum::<usize>();
    if heads.is_empty() {
        return String::new();
    }
    let t = r.tokens.len();
    let mean: Vec<f64> = (0..t).map(|i| heads.iter().map(|s| s[i]).sum::<f64>() / heads.len() as f64).collect();
    let mut order: Vec<usize> = (0..t).collect();
    order.sort_by(|&a, &b| mean[b].total_cmp(&mean[a]));
    let most: Vec<String> = order
        .iter()
        .take(3)
        .map(|&i| format!("\"{}\" (token {}, {:.2})", r.pieces[i].trim(), i + 1, mean[i]))
        .collect();
    format!(
        " Attention runs both ways, so each head is a walk over all {t} tokens with a stationary distribution π \
         (πP = π; unique for {} of the {all} heads): averaged over them the walk settles most on {}, against {:.2} \
         for a walk that favoured no token.",
        heads.len(),
        most.join(", "),
        1.0 / t as f64
    )
}
