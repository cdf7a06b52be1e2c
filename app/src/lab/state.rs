//! The page's state by subject, as `Lab` holds it: the run's curves, how the picture is looked
//! at, the run kept in the browser, and where it computes.

use engine::data::baseline::BaselineLoss;
use engine::session::{BackendChoice, DiagPoint};
use leptos::prelude::*;

use super::{Chain, EarlierRun, InWords};

/// The run's curves over its steps, as the charts draw them.
#[derive(Clone, Copy)]
pub struct Curves {
    /// (completed steps, training loss of that step)
    pub train: RwSignal<Vec<(usize, f32)>>,
    /// (completed steps, validation loss after them)
    pub val: RwSignal<Vec<(usize, f32)>>,
    /// Earlier runs' training curves: (label, points).
    pub earlier: RwSignal<Vec<EarlierRun>>,
    /// (step, mean attention entropy of each layer) of the probe row, at the recorded steps.
    pub entropy: RwSignal<Vec<(usize, Vec<f64>)>>,
    pub diagnostics: RwSignal<Vec<DiagPoint>>,
    /// The last step's per-layer second-order diagnostics, as text.
    pub diag_text: RwSignal<Option<String>>,
    /// The run's count baselines (unigram, bigram), drawn on the loss chart with ln V.
    pub baselines: RwSignal<Option<BaselineLoss>>,
}

impl Curves {
    pub(super) fn new() -> Self {
        Curves {
            train: RwSignal::new(Vec::new()),
            val: RwSignal::new(Vec::new()),
            earlier: RwSignal::new(Vec::new()),
            entropy: RwSignal::new(Vec::new()),
            diagnostics: RwSignal::new(Vec::new()),
            diag_text: RwSignal::new(None),
            baselines: RwSignal::new(None),
        }
    }
}

/// How the picture is looked at.
#[derive(Clone, Copy)]
pub struct View {
    /// Rotation of the sphere view (radians).
    pub yaw: RwSignal<f64>,
    pub pitch: RwSignal<f64>,
    /// The depth the sphere view and the Brownian panel show (0..=L).
    pub depth: RwSignal<usize>,
    /// The attention chain the heatmap and the sphere's arcs show: layer, head and power k.
    pub chain: Chain,
    /// The probe token whose attention row the sphere draws (click it, or pick it from the list).
    pub selected: RwSignal<Option<usize>>,
    /// Counts changes of the page's layout (presenter mode, the window's size): charts redraw at
    /// their new size.
    pub layout: RwSignal<u64>,
}

impl View {
    pub(super) fn new() -> Self {
        View {
            yaw: RwSignal::new(0.6),
            pitch: RwSignal::new(0.35),
            depth: RwSignal::new(0),
            chain: Chain { layer: RwSignal::new(0), head: RwSignal::new(0), k: RwSignal::new(1) },
            selected: RwSignal::new(None),
            layout: RwSignal::new(0),
        }
    }
}

/// The run kept in the browser's storage (IndexedDB).
#[derive(Clone, Copy)]
pub struct Storage {
    /// A run saved in the browser's storage that can be resumed: (step, total, description).
    pub saved: RwSignal<Option<(usize, usize, String)>>,
    /// The step of the last save to the browser's storage.
    pub saved_step: RwSignal<Option<usize>>,
    /// Why the last save (or opening the storage) failed, until a save succeeds.
    pub save_failed: RwSignal<Option<String>>,
}

impl Storage {
    pub(super) fn new() -> Self {
        Storage { saved: RwSignal::new(None), saved_step: RwSignal::new(None), save_failed: RwSignal::new(None) }
    }
}

/// Where the run computes.
#[derive(Clone, Copy)]
pub struct Backend {
    /// The backend the visitor picked.
    pub choice: RwSignal<BackendChoice>,
    /// "Backend: ..." as shown: the one in use and the adapter's name, or why not WebGPU.
    pub line: RwSignal<String>,
    /// What the graphics stack said when the backend line puts it in plainer words.
    pub detail: RwSignal<Option<String>>,
    /// The WebGPU adapter the run is on (None: on the CPU).
    pub on_gpu: RwSignal<Option<String>>,
    /// The GPU adapter this browser offers: Ok((name, software)), or why there is none.
    pub adapter: RwSignal<Option<Result<(String, bool), String>>>,
}

impl Backend {
    pub(super) fn new() -> Self {
        Backend {
            choice: RwSignal::new(BackendChoice::default()),
            line: RwSignal::new(BackendChoice::default().idle_line()),
            detail: RwSignal::new(None),
            on_gpu: RwSignal::new(None),
            adapter: RwSignal::new(None),
        }
    }
}
