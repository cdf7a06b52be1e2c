//! The model mode's sections, one on screen at a time under the sphere and the attention: the
//! reading, two texts compared, and a training history. (Writing stays with the text and Read,
//! beside the sphere: a class watches what is written there.)

/// A section of the model mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Section {
    #[default]
    Reading,
    Compare,
    History,
}

impl Section {
    pub const ALL: [Section; 3] = [Section::Reading, Section::Compare, Section::History];

    /// Its tab's id suffix (`#section-{id}`) and the test hooks'.
    pub fn id(self) -> &'static str {
        match self {
            Section::Reading => "reading",
            Section::Compare => "compare",
            Section::History => "history",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Section::Reading => "Reading",
            Section::Compare => "Two texts",
            Section::History => "Training history",
        }
    }

    /// Needs an open model (the history opens its own checkpoints).
    pub fn needs_model(self) -> bool {
        self != Section::History
    }
}
