//! A reading in plain words: one sentence a student can follow, with the numbers the table holds,
//! for the page's model panel and `lab inspect`'s text output alike.

use super::Inspection;

/// "Before each layer …": how long the tokens' vectors grow, how the norm brings them back to the
/// sphere, how far the gain moves them off it, and over how many tokens attention spreads
/// (e^entropy: a head with entropy H looks at about as many tokens as a uniform choice among e^H).
pub fn in_words(r: &Inspection) -> String {
    let span = |v: &mut dyn Iterator<Item = f64>| {
        v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
    };
    let (len_lo, len_hi) = span(&mut r.layers.iter().map(|l| l.residual_norm));
    let (gain_lo, gain_hi) = span(&mut r.layers.iter().map(|l| 100.0 * l.gain.mean_rel_offset));
    let (ent_lo, ent_hi) = span(&mut r.layers.iter().flat_map(|l| l.heads.iter().map(|h| h.entropy)));
    let norm = &r.norm;
    let mut out = format!(
        "Before each {norm}, a token's vector is {len_lo:.1} to {len_hi:.1} long on average (it grows as the layers \
         add to it); the {norm} brings every one back to length √{} = {:.2}, onto the sphere, and its gain then moves \
         them {gain_lo:.0}% to {gain_hi:.0}% off it.",
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
