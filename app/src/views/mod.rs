//! The page's views: each draws what `crate::lab` holds and computes nothing of its own.
//!
//! A panel is a [`panel::Panel`] (its heading, "What is this?" and verdicts in words); the panel
//! families have a folder or file each: `sphere`, `charts`, `heatmap`, `writing`, `model`,
//! `settings`, `tour`; `header` the page's header, `banners` the lines that ask for an answer,
//! `run_bar` the run's controls and numbers, `stage` what the first screen holds beside the sphere
//! (and `Below`, the panels under it), `model_file` the model as a file; `presenter` presenter
//! mode and the keys, `theme` light and dark. `canvas` gives every drawing its 2-D context (CPU-backed on a software GPU),
//! `canvas_text` the one text size they follow, `token_style` the tokens' glyphs and colours.

pub mod banners;
pub mod canvas;
pub mod canvas_text;
pub mod charts;
pub mod header;
pub mod heatmap;
pub mod lead;
pub mod model;
pub mod model_compare;
pub mod model_file;
pub mod model_history;
pub mod model_lens;
pub mod model_sections;
pub mod model_writing;
pub mod panel;
pub mod presenter;
pub mod run_bar;
pub mod settings;
pub mod sphere;
pub mod stage;
pub mod theme;
pub mod token_style;
pub mod tour;
pub mod writing;
