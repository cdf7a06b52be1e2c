//! A seeded probabilistic grammar of English-like sentences, character level. Its dependencies reach
//! further than one character: subject-verb agreement across relative clauses, nested up to depth 2
//! ("the dog that sees the cats runs."), so a bigram model cannot get it right and attention can.

use rand::Rng;

use crate::rng::Rng as R;

struct Number {
    dets: &'static [&'static str],
    nouns: &'static [&'static str],
    intransitive: &'static [&'static str],
    transitive: &'static [&'static str],
}

const SINGULAR: Number = Number {
    dets: &["the", "a", "every", "one"],
    nouns: &["cat", "dog", "bird", "child", "teacher", "robot", "fox"],
    intransitive: &["runs", "sleeps", "sings", "waits", "laughs"],
    transitive: &["sees", "likes", "follows", "knows", "helps"],
};

const PLURAL: Number = Number {
    dets: &["the", "some", "two", "many"],
    nouns: &["cats", "dogs", "birds", "children", "teachers", "robots", "foxes"],
    intransitive: &["run", "sleep", "sing", "wait", "laugh"],
    transitive: &["see", "like", "follow", "know", "help"],
};

const ADJECTIVES: &[&str] = &["small", "red", "old", "quiet", "happy"];

fn pick<'a>(rng: &mut R, words: &[&'a str]) -> &'a str {
    words[rng.random_range(0..words.len())]
}

fn number(rng: &mut R) -> &'static Number {
    if rng.random_bool(0.5) {
        &SINGULAR
    } else {
        &PLURAL
    }
}

fn noun_phrase(rng: &mut R, num: &Number, depth: usize, out: &mut String) {
    out.push_str(pick(rng, num.dets));
    out.push(' ');
    if rng.random_bool(0.3) {
        out.push_str(pick(rng, ADJECTIVES));
        out.push(' ');
    }
    out.push_str(pick(rng, num.nouns));
    if depth < 2 && rng.random_bool(0.3) {
        // Subject relative clause: its verb agrees with the head noun.
        out.push_str(" that ");
        verb_phrase(rng, num, depth + 1, out);
    }
}

fn verb_phrase(rng: &mut R, num: &Number, depth: usize, out: &mut String) {
    if rng.random_bool(0.5) {
        out.push_str(pick(rng, num.intransitive));
    } else {
        out.push_str(pick(rng, num.transitive));
        out.push(' ');
        let object = number(rng);
        noun_phrase(rng, object, depth + 1, out);
    }
}

/// At least `chars` characters of sentences, each ending in ". ".
pub fn generate(rng: &mut R, chars: usize) -> String {
    let mut out = String::with_capacity(chars + 128);
    while out.len() < chars {
        let subject = number(rng);
        noun_phrase(rng, subject, 0, &mut out);
        out.push(' ');
        verb_phrase(rng, subject, 0, &mut out);
        out.push_str(". ");
    }
    out
}
