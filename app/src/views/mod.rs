//! The page's views: each draws what `crate::lab` holds and computes nothing of its own.
//!
//! A panel is a [`panel::Panel`] (its heading, "What is this?" and verdicts in words); the panel
//! families have a folder or file each: `sphere`, `charts`, `heatmap`, `writing`, `model`,
//! `settings`, `tour`; `run_bar` the run's controls and numbers. `canvas` gives every drawing its 2-D context (CPU-backed on a software GPU),
//! `canvas_text` the one text size they follow, `token_style` the tokens' glyphs and colours.

pub mod canvas;
pub mod canvas_text;
pub mod charts;
pub mod heatmap;
pub mod lead;
pub mod model;
pub mod panel;
pub mod run_bar;
pub mod settings;
pub mod sphere;
pub mod token_style;
pub mod tour;
pub mod writing;
