//! Where a run's tokens come from: a built-in seeded data set, or the visitor's own text.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Where the tokens come from. Built-in sets are generated from the run's seed; nothing is downloaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum DataSpec {
    /// Character-level sentences from a seeded probabilistic grammar (agreement, nesting).
    Grammar,
    /// JoMA's latent hierarchical generative model: known chunks of tokens.
    Hierarchy,
    Copy,
    Reverse,
    Sort,
    /// `a b = (a + b) mod p`, packed several to a sequence.
    Modadd,
    /// The user's own text, character level.
    Text {
        text: String,
    },
}

impl DataSpec {
    pub const BUILT_IN: [&'static str; 6] = ["grammar", "hierarchy", "copy", "reverse", "sort", "modadd"];

    /// A built-in name; anything else is an error that lists the names.
    pub fn named(name: &str) -> Result<Self> {
        Ok(match name {
            "grammar" => DataSpec::Grammar,
            "hierarchy" => DataSpec::Hierarchy,
            "copy" => DataSpec::Copy,
            "reverse" => DataSpec::Reverse,
            "sort" => DataSpec::Sort,
            "modadd" => DataSpec::Modadd,
            _ => {
                return Err(Error::Data(format!(
                    "unknown data set {name:?}; built-in sets are {}, or give a path to a .txt file",
                    Self::BUILT_IN.join(", ")
                )))
            }
        })
    }

    pub fn name(&self) -> &str {
        match self {
            DataSpec::Grammar => "grammar",
            DataSpec::Hierarchy => "hierarchy",
            DataSpec::Copy => "copy",
            DataSpec::Reverse => "reverse",
            DataSpec::Sort => "sort",
            DataSpec::Modadd => "modadd",
            DataSpec::Text { .. } => "text",
        }
    }
}
