//! The line beside the pace control: how long the run will take at its pace (with its slow start)
//! or as fast as this computer goes (its schedule's work, `engine::session::duration`, priced at
//! the rates the worker measured here: `pace`), and a warning when the size is slow in a browser.

use engine::session::duration::{Rates, Work};

use crate::lab::Lab;
use leptos::prelude::*;

/// What the run will take: steps at the pace, and a warning when the size is slow in a browser.
pub fn estimate(lab: Lab) -> String {
    let s = lab.settings.get();
    let steps = s.steps;
    let eval = (steps / 20).max(1);
    let loading = lab.site.loading.with(Option::is_some);
    let running = lab.phase.get() == common::protocol::Phase::Running;
    let measured = lab.pace.current(lab).or_else(|| running.then(|| lab.pace.last()).flatten()).and_then(Result::ok);
    let per_step_s = measured.as_ref().map(|(w, r)| w.step_seconds(r));
    let run_s = measured.as_ref().map(|(w, r)| w.seconds(r)).unwrap_or(0.0);
    let machine_rate = per_step_s.map(|t| 1.0 / t.max(1e-6));
    let mut out = match (s.pace(), machine_rate) {
        (Some(p), Some(m)) if p > m => format!(
            "{steps} steps (validation every {eval}): this size runs at about {m:.1} steps/s on this computer \
             (measured), so about {}",
            time(run_s)
        ),
        (Some(p), _) => format!(
            "{steps} steps (validation every {eval}) at {p} steps/s, a third of it for the first {}: about {}",
            common::settings::slow_steps(steps),
            time(common::settings::paced_ms(steps, steps, p) / 1000.0)
        ),
        (None, Some(_)) => {
            format!(
                "{steps} steps (validation every {eval}) as fast as possible: about {}, measured on this computer",
                time(run_s)
            )
        }
        (None, None) if loading => {
            format!("{steps} steps (validation every {eval}) as fast as possible: measured on this computer")
        }
        (None, None) if running => format!("{steps} steps (validation every {eval}) as fast as possible"),
        (None, None) => match lab.pace.current(lab) {
            Some(Err(e)) => format!("{steps} steps (validation every {eval}) as fast as possible (not measured: {e})"),
            _ => format!("{steps} steps (validation every {eval}) as fast as possible: measuring this computer..."),
        },
    };
    if loading {
        out.push_str(", once the engine has loaded");
    }
    if let Some(t) = per_step_s.filter(|&t| t > 0.25) {
        out.push_str(&format!(". Slow size: about {t:.1} s a step in the browser"));
    }
    // Once steps are measured, what is left at the measured rate (this machine, this run).
    if let (true, Some(rate)) = (running, lab.steps_per_second.get().filter(|r| *r > 0.0)) {
        let left = steps.saturating_sub(lab.step.get());
        let rate = s.pace().map_or(rate, |p| p.min(rate));
        out.push_str(&format!(". Measured {rate:.1} steps/s: about {} left", time(left as f64 / rate)));
    }
    out
}

/// The measured work and rates behind the line, for `#estimate`'s `data-work` and `data-rates`
/// (the browser tests price the schedule themselves from them).
pub fn measured(lab: Lab) -> Option<(Work, Rates)> {
    lab.pace.current(lab).and_then(Result::ok)
}

fn time(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else if secs < 5400.0 {
        format!("{:.0} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}
