//! How a token looks in the figures: a readable glyph for its text, its kind, and colour-blind-safe
//! colours (Okabe and Ito's eight hues for kinds; a viridis ramp for ordered values).

pub use engine::data::kind::Kind;

/// A kind's colour, Okabe and Ito's: orange, blue, bluish green, vermillion, reddish purple, sky
/// blue; they stay apart for every common colour-vision deficiency, so "tokens of the same kind
/// gather" can be seen by everyone.
pub fn kind_color(kind: Kind) -> (u8, u8, u8) {
    match kind {
        Kind::Vowel => (0xe6, 0x9f, 0x00),
        Kind::Consonant => (0x00, 0x72, 0xb2),
        Kind::Space => (0x00, 0x9e, 0x73),
        Kind::Punctuation => (0xd5, 0x5e, 0x00),
        Kind::Digit => (0xcc, 0x79, 0xa7),
        Kind::Other => (0x56, 0xb4, 0xe9),
    }
}

/// The token's text as a label: space, newline and tab get glyphs that cannot be mistaken for
/// letters, other invisible characters their code point.
pub fn glyph(symbol: &str) -> String {
    symbol
        .chars()
        .map(|c| match c {
            ' ' => "␣".to_string(),
            '\n' => "↵".to_string(),
            '\t' => "⇥".to_string(),
            c if c.is_control() => format!("U+{:04X}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

/// Viridis (perceptually uniform, readable in grey and with colour-vision deficiencies) for v in 0..=1.
pub fn viridis(v: f64) -> (u8, u8, u8) {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let x = if v.is_finite() { v.clamp(0.0, 1.0) } else { 0.0 } * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

pub fn css((r, g, b): (u8, u8, u8)) -> String {
    format!("rgb({r}, {g}, {b})")
}
