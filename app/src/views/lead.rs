//! The first screen's words: what the model is learning, in one line a visitor reads before
//! anything else, and what a good loss is (the baselines beside the loss numbers).

use common::settings::Settings;
use engine::data::baseline::BaselineLoss;

/// What the data set is, as a sentence's object.
fn data_words(data: &str) -> &'static str {
    match data {
        "grammar" => "a made-up grammar",
        "hierarchy" => "nested chunks of a hidden hierarchy",
        "austen" => "Pride and Prejudice",
        "text" => "your text",
        "copy" => "a copying task",
        "reverse" => "a reversing task",
        "sort" => "a sorting task",
        "modadd" => "modular sums",
        _ => "its data",
    }
}

/// "A 2-layer transformer learns to predict the next character of ...": one line beside the title
/// (each token is one character; the sphere's caption says each dot is one).
pub fn sentence(s: &Settings) -> String {
    format!("A {}-layer transformer learns to predict the next character of {}.", s.layers, data_words(&s.data))
}

/// The validation loss's yardsticks: a uniform guess among the `vocab` characters (ln V), and the
/// sentence with letter frequencies alone (the unigram loss) too.
pub fn yardsticks(vocab: usize, b: &BaselineLoss) -> (f64, String) {
    let guess = (vocab.max(1) as f64).ln();
    (guess, format!("a uniform guess scores {guess:.2}, letter frequencies alone {:.2}", b.unigram))
}
