//! This computer's rates for the estimate beside the pace control: whenever the run that Start
//! would make changes (and no run is going), the training worker times that run's kinds of work
//! on this machine (`engine::session::duration::measure`, well under a second for the page's
//! sizes), and the estimate prices the run's schedule with them. Nothing is fitted to another CPU.

use common::js::sleep;
use common::protocol::{Command, Phase};
use engine::session::duration::{Rates, Work};
use leptos::prelude::*;

use super::Lab;

/// Settings typed one key at a time are measured once, when the typing stops.
const SETTLE_MS: f64 = 300.0;

/// The run's work and this machine's rates, or why they could not be measured.
pub type Measure = Result<(Work, Rates), String>;

#[derive(Clone, Copy)]
pub struct Pace {
    /// The last measure: for which run (its key), and what it found.
    measured: RwSignal<Option<(String, Measure)>>,
    /// The measure asked of the worker and not yet answered: its number and its run's key.
    asked: RwSignal<Option<(u64, String)>>,
}

impl Pace {
    pub fn new() -> Pace {
        Pace { measured: RwSignal::new(None), asked: RwSignal::new(None) }
    }

    /// The measure of the run Start would make now, once it is measured.
    pub fn current(self, lab: Lab) -> Option<Measure> {
        let key = key_of(lab);
        self.measured.with(|m| m.as_ref().filter(|(k, _)| *k == key).map(|(_, m)| m.clone()))
    }

    /// The last measure made, of whichever run: a run that is going keeps its line (its writing
    /// prompt, set as it starts, makes it another run to the estimate, measured once it stops).
    pub fn last(self) -> Option<Measure> {
        self.measured.with(|m| m.as_ref().map(|(_, m)| m.clone()))
    }

    /// A crashed worker answers nothing: the next worker is asked again.
    pub fn forget_asked(self) {
        self.asked.set(None);
    }
}

/// What identifies a run for the estimate: the settings (the pace apart: "as fast as possible" is
/// what is priced) and what its schedule writes.
fn key_of(lab: Lab) -> String {
    let mut s = lab.settings.get();
    s.steps_per_second = 0.0;
    let w = lab.writing;
    let writing = (w.prompt.get(), w.temperature.get(), w.top_k.get());
    serde_json::to_string(&(s, writing)).unwrap_or_default()
}

/// Keeps the measure current: asks the worker whenever the run Start would make changes, the
/// engine is loaded and no run is going.
pub fn keep_measured(lab: Lab) {
    let pace = lab.pace;
    let next = StoredValue::new(0u64);
    Effect::new(move |_| {
        let key = key_of(lab);
        let idle = lab.phase.get() != Phase::Running && lab.site.loading.with(Option::is_none);
        let known = pace.measured.with_untracked(|m| m.as_ref().is_some_and(|(k, _)| *k == key))
            || pace.asked.with_untracked(|a| a.as_ref().is_some_and(|(_, k)| *k == key));
        if !idle || known {
            return;
        }
        next.update_value(|n| *n += 1);
        let id = next.get_value();
        pace.asked.set(Some((id, key.clone())));
        leptos::task::spawn_local(async move {
            sleep(SETTLE_MS).await;
            if pace.asked.with_untracked(|a| a.as_ref().map(|a| a.0)) != Some(id) {
                return;
            }
            // Started meanwhile: measured again when the run stops, never between its steps.
            if lab.phase.get_untracked() == Phase::Running {
                return pace.asked.set(None);
            }
            if lab.settings.with_untracked(|s| s.data == "austen") {
                lab.load_corpus().await;
            }
            match lab.experiment() {
                Ok(experiment) => lab.send(Command::MeasurePace { experiment: Box::new(experiment), id }),
                Err(e) => {
                    pace.asked.set(None);
                    pace.measured.set(Some((key, Err(e))));
                }
            }
        });
    });
}

/// The worker's answer: kept when it answers the last question asked.
pub(super) fn on_pace(lab: Lab, id: u64, result: Measure) {
    let pace = lab.pace;
    let Some((asked, key)) = pace.asked.get_untracked() else { return };
    if asked == id {
        pace.asked.set(None);
        pace.measured.set(Some((key, result)));
    }
}
