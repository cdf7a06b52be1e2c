//! What kind of character a token is (vowel, consonant, space, ...): the sphere view colours tokens
//! by kind, and `science::grouping` measures whether tokens of one kind gather.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Vowel,
    Consonant,
    Space,
    Punctuation,
    Digit,
    Other,
}

impl Kind {
    pub const ALL: [Kind; 6] = [Kind::Vowel, Kind::Consonant, Kind::Space, Kind::Punctuation, Kind::Digit, Kind::Other];

    /// The kind of a token's text; a token of several characters (or none) is a space when blank.
    pub fn of(symbol: &str) -> Kind {
        let mut chars = symbol.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return if symbol.trim().is_empty() { Kind::Space } else { Kind::Other };
        };
        match c.to_ascii_lowercase() {
            'a' | 'e' | 'i' | 'o' | 'u' | 'y' => Kind::Vowel,
            c if c.is_alphabetic() => Kind::Consonant,
            c if c.is_whitespace() => Kind::Space,
            c if c.is_ascii_digit() => Kind::Digit,
            c if c.is_ascii_punctuation() => Kind::Punctuation,
            _ => Kind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Vowel => "vowel (and y)",
            Kind::Consonant => "consonant",
            Kind::Space => "space, newline",
            Kind::Punctuation => "punctuation",
            Kind::Digit => "digit",
            Kind::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_fall_into_their_kinds() {
        let kinds: Vec<Kind> =
            ["a", "Y", "b", " ", "\n", ",", "7", "é", "ab", ""].iter().map(|s| Kind::of(s)).collect();
        use Kind::*;
        assert_eq!(kinds, [Vowel, Vowel, Consonant, Space, Space, Punctuation, Digit, Consonant, Other, Space]);
    }
}
