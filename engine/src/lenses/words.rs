//! A reading in plain words: one sentence a student can follow, with the numbers the table holds,
//! for the page's model panel and `lab inspect`'s text output alike.

use super::{Comparison, DepthFit, Inspection};

/// "Before each layer …": how long the tokens' vectors grow, how the norm brings them back to the
/// sphere, how far the gain moves them off it, and over how many tokens attention spreads
/// (e^entropy: a head with entropy H looks at about as many tokens as a uniform choice among e^H).
pub fn in_words(r: &Inspection) -> String {
    let span = |v: &mut dyn Iterator<Item = f64>| {
        v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
    };
    let (gain_lo, gain_hi) = span(&mut r.layers.iter().map(|l| 100.0 * l.gain.mean_rel_offset));
    let (ent_lo, ent_hi) = span(&mut r.layers.iter().flat_map(|l| l.heads.iter().map(|h| h.entropy)));
    let norm = &r.norm;
    let norms: Vec<(usize, f64)> = r.layers.iter().map(|l| (l.layer, l.residual_norm)).collect();
    let mut out = format!(
        "Before each {norm}, a token's vector has an average length of {}; the {norm} brings every one back to \
         length √{} = {:.2}, onto the sphere, and its gain then moves them {gain_lo:.0}% to {gain_hi:.0}% off it.",
        lengths(&norms, r.n_layer, norm),
        r.d_model,
        (r.d_model as f64).sqrt()
    );
    if ent_lo.is_finite() {
        out += &format!(
            " Each head's attention spreads over about {:.1} to {:.1} tokens (its entropy, {ent_lo:.2} to {ent_hi:.2} \
             nats, as e to that power): 1 would mean each token looks at a single one.",
            ent_lo.exp(),
            ent_hi.exp()
        );
    }
    out
}

/// How the stream's length goes through depth, as the table has it (`norms`: per depth, its layer
/// and mean length; depth `last` is the final norm): "1.1 at layer 0, growing to 40.8 at layer 11,
/// then 37.8 at the final LayerNorm". The layers add to it, and it may still fall.
fn lengths(norms: &[(usize, f64)], last: usize, norm: &str) -> String {
    let at = |i: usize| match norms[i].0 {
        l if l == last => format!("the final {norm}"),
        l => format!("layer {l}"),
    };
    let (Some(first), Some(end)) = (norms.first().map(|x| x.1), norms.len().checked_sub(1)) else {
        return "of no length yet".into();
    };
    let top = (0..norms.len()).max_by(|&a, &b| norms[a].1.total_cmp(&norms[b].1)).unwrap_or(0);
    let (peak, final_len) = (norms[top].1, norms[end].1);
    match top {
        0 if end == 0 => format!("{first:.1}"),
        0 => format!("{first:.1} at {}, falling to {final_len:.1} at {}", at(0), at(end)),
        t if t == end => format!("{first:.1} at {}, growing to {final_len:.1} at {}", at(0), at(end)),
        t => format!("{first:.1} at {}, growing to {peak:.1} at {}, then {final_len:.1} at {}", at(0), at(t), at(end)),
    }
}

/// "The texts part at token …": where the two texts differ, that the tokens before it stay put
/// (each token sees only the ones before it), how far the shared tokens after it move at the
/// first layer and the last, the head whose entropy changes most, and what each text leads the
/// model to expect next.
pub fn compare_in_words(c: &Comparison) -> String {
    let [a, b] = &c.pieces;
    let k = c.first_change;
    let mut out = match (a.get(k), b.get(k)) {
        (Some(x), Some(y)) => format!("The texts part at token {}: \"{x}\" against \"{y}\".", k + 1),
        _ if a.len() == b.len() => "The two texts are the same tokens.".to_string(),
        _ => format!("One text is the other's first {k} tokens and more."),
    };
    if k > 0 && c.causal {
        out += &format!(
            " The {k} token{} before it {} at exactly the same place on the sphere in both, at every layer: a token \
             sees only the tokens before it.",
            if k == 1 { "" } else { "s" },
            if k == 1 { "stays" } else { "stay" }
        );
    }
    // A model that reads both ways lets the change reach every token, those before it too.
    let (reached, which) = match c.causal {
        true => (c.shared.iter().filter(|(i, _)| *i >= k).count(), "after it"),
        false => (c.shared.len(), "(this model reads both ways, so the change reaches those before it too)"),
    };
    if let (Some(first), Some(last)) = (c.layers.first(), c.layers.last()) {
        if reached > 0 {
            out += &format!(
                " The {reached} shared token{} {which} move by {:.1}° on average at layer 0 and {:.1}° at the last \
                 norm (the most any moves at one layer: {:.1}°).",
                if reached == 1 { "" } else { "s" },
                first.mean_angle,
                last.mean_angle,
                c.layers.iter().map(|l| l.max_angle).fold(0.0, f64::max)
            );
        }
    }
    let change = c
        .layers
        .iter()
        .filter_map(|l| l.most_changed_head().map(|(h, d)| (l.layer, h, d)))
        .max_by(|x, y| x.2.abs().total_cmp(&y.2.abs()));
    if let Some((l, h, d)) = change {
        out += &format!(
            " The head whose attention changes most is layer {l}'s head {h}: its entropy {} by {:.2} nats.",
            if d >= 0.0 { "rises" } else { "falls" },
            d.abs()
        );
    }
    if let (Some(x), Some(y)) = (c.next[0].first(), c.next[1].first()) {
        out += &format!(
            " Next, the first text leads it to expect \"{}\" ({:.0}%), the second \"{}\" ({:.0}%).",
            x.0,
            100.0 * x.1,
            y.0,
            100.0 * y.1
        );
    }
    out
}

/// "Attention weighs each key by …": how far each head's attention is from the Gaussian kernel on
/// the sphere, as the share of attention the two place differently (total variation).
pub fn kernel_in_words(r: &Inspection) -> Option<String> {
    let tv: Vec<f64> = r.layers.iter().flat_map(|l| l.heads.iter().map(|h| h.kernel_tv_mean)).collect();
    if tv.is_empty() {
        return None;
    }
    let mean = tv.iter().sum::<f64>() / tv.len() as f64;
    let (lo, hi) = tv.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    Some(format!(
        "If every key had the same length, a head's attention would be a Gaussian kernel: a weight that falls with \
         the distance between the query and the key on the sphere. Here a head's attention and its kernel place \
         {:.0}% of the attention differently on average ({:.0}% to {:.0}% over the {} heads): the keys' lengths differ.",
        100.0 * mean,
        100.0 * lo,
        100.0 * hi,
        tv.len()
    ))
}

/// "Read the layers as time …": the depth fits in words, with R², the KS distance against what
/// chance allows, and which of Brownian motion and the particles' flow comes closer. One word, one
/// meaning: "diffusion" is Brownian motion's steady spread, "drift" only ever what is not it.
pub fn depth_in_words(d: &DepthFit) -> Option<String> {
    let b = d.brownian.as_ref()?;
    let steady = if !b.r_squared.is_finite() {
        "there are too few layers for a straight line".to_string()
    } else if b.r_squared < 0.0 {
        format!("a straight line explains ln E[cos θ] worse than a flat one (R² = {:.2})", b.r_squared)
    } else {
        format!(
            "a straight line explains {:.0}% of how ln E[cos θ] falls (R² = {:.2})",
            100.0 * b.r_squared,
            b.r_squared
        )
    };
    let spread = format!(
        "their angles from the start are spread {} Brownian walkers' (KS = {:.2}, {} the 5% critical value {:.2})",
        if b.ks <= b.ks_critical { "like" } else { "unlike" },
        b.ks,
        if b.ks <= b.ks_critical { "within" } else { "beyond" },
        b.ks_critical
    );
    let mut out = format!(
        "Read the layers as time, one tick per layer. If each layer moved the tokens by random steps (Brownian \
         motion, a diffusion), the log of their mean cosine to where they started, ln E[cos θ], would fall in a \
         straight line. Here {steady}, and {spread}."
    );
    if let Some(f) = &d.flow {
        out += &format!(
            " Attention pulling the tokens towards each other (the particles' flow) {} Brownian motion: its curves \
             miss by {:.3} against {:.3}.",
            if f.rmse_particles < f.rmse_brownian { "comes closer than" } else { "comes no closer than" },
            f.rmse_particles,
            f.rmse_brownian
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{Brownian, Flow};

    #[test]
    fn the_length_sentence_follows_the_table_up_and_down() {
        // GPT-2 small's stream (lab inspect's table): it grows through the blocks, and falls before
        // the final norm; BERT's falls at the end too.
        let gpt2 = [(0, 1.1), (6, 22.4), (11, 40.8), (12, 37.8)];
        assert_eq!(
            lengths(&gpt2, 12, "LayerNorm"),
            "1.1 at layer 0, growing to 40.8 at layer 11, then 37.8 at the final LayerNorm"
        );
        assert_eq!(
            lengths(&[(0, 2.0), (1, 3.5), (2, 5.0)], 2, "RMSNorm"),
            "2.0 at layer 0, growing to 5.0 at the final RMSNorm"
        );
        assert_eq!(
            lengths(&[(0, 11.0), (1, 10.6)], 1, "LayerNorm"),
            "11.0 at layer 0, falling to 10.6 at the final LayerNorm"
        );
    }

    #[test]
    fn the_depth_sentence_carries_the_fits_numbers() {
        let b = Brownian { r_squared: 0.8123, ks: 0.31, ks_critical: 0.24, ..Brownian::default() };
        let f = Flow { rmse_particles: 0.0412, rmse_brownian: 0.0877, ..Flow::default() };
        let d = DepthFit { brownian: Some(b.clone()), flow: Some(f), ..DepthFit::default() };
        let s = depth_in_words(&d).unwrap();
        assert!(s.contains("a straight line explains 81% of how ln E[cos θ] falls (R² = 0.81)"), "{s}");
        assert!(s.contains("spread unlike Brownian walkers' (KS = 0.31, beyond the 5% critical value 0.24)"), "{s}");
        assert!(!s.contains("drift"), "{s}");
        assert!(s.contains("comes closer than Brownian motion: its curves miss by 0.041 against 0.088"), "{s}");
        let worse = DepthFit { brownian: Some(Brownian { r_squared: -2.19, ks: 0.1, ..b }), ..DepthFit::default() };
        let s = depth_in_words(&worse).unwrap();
        assert!(s.contains("worse than a flat one (R² = -2.19)") && s.contains("spread like Brownian"), "{s}");
        assert_eq!(depth_in_words(&DepthFit::default()), None);
    }
}
