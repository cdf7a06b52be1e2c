//! The model mode's sections, one on screen at a time beside the sphere and the attention: the
//! reading, the writing, two texts compared, and a training history.

/// A section of the model mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Section {
    #[default]
    Reading,
    Writing,
    Compare,
    History,
}

impl Section {
    pub const ALL: [Section; 4] = [Section::Reading, Section::Writing, Section::Compare, Section::History];

    /// Its tab's id suffix (`#section-{id}`) and the test hooks'.
    pub fn id(self) -> &'static str {
        match self {
            Section::Reading => "reading",
            Section::Writing => "writing",
            Section::Compare => "compare",
            Section::History => "history",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Section::Reading => "Reading",
            Section::Writing => "Writing",
            Section::Compare => "Two texts",
            Section::History => "Training history",
        }
    }

    /// Needs an open model (the history opens its own checkpoints).
    pub fn needs_model(self) -> bool {
        self != Section::History
    }
}
