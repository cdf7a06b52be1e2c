//! The line beside the pace control: how long the run will take at its pace (with its slow start)
//! or on the browser's CPU (`engine::session::duration`: its steps, validation, probe frames and
//! writing), and a warning when the size is slow in a browser.

use engine::session::duration::Work;
use engine::session::Experiment;
use leptos::prelude::*;

use crate::lab::Lab;

/// What the run will take: steps at the pace, and a warning when the size is slow in a browser.
pub fn estimate(lab: Lab) -> String {
    let s = lab.settings.get();
    let steps = s.steps;
    let eval = (steps / 20).max(1);
    // The run's whole schedule: validation, probe frames and a sample at every evaluation.
    let work = s.to_config().ok().map(|mut c| {
        c.model.vocab = c.model.vocab.max(64);
        let mut exp = Experiment::new(c);
        exp.writing = lab.writing.schedule(exp.train.eval_every);
        Work::of(&exp)
    });
    let per_step_s = work.as_ref().map(Work::page_step_seconds);
    let run_s = work.as_ref().map(Work::page_seconds);
    let machine_rate = per_step_s.map(|t| 1.0 / t.max(1e-6));
    let time = |secs: f64| {
        if secs < 90.0 {
            format!("{secs:.0} s")
        } else if secs < 5400.0 {
            format!("{:.0} min", secs / 60.0)
        } else {
            format!("{:.1} h", secs / 3600.0)
        }
    };
    let mut out = match (s.pace(), machine_rate) {
        (Some(p), Some(m)) if p > m => format!(
            "{steps} steps (validation every {eval}): this size runs at about {m:.1} steps/s on the browser's CPU, \
             so about {}",
            time(run_s.unwrap_or(0.0))
        ),
        (Some(p), _) => format!(
            "{steps} steps (validation every {eval}) at {p} steps/s, a third of it for the first {}: about {}",
            common::settings::slow_steps(steps),
            time(common::settings::paced_ms(steps, steps, p) / 1000.0)
        ),
        (None, Some(_)) => format!(
            "{steps} steps (validation every {eval}) as fast as possible: about {} on the browser's CPU",
            time(run_s.unwrap_or(0.0))
        ),
        (None, None) => format!("{steps} steps (validation every {eval}) as fast as possible"),
    };
    if lab.site.loading.with(Option::is_some) {
        out.push_str(", once the engine has loaded");
    }
    if let Some(t) = per_step_s.filter(|&t| t > 0.25) {
        out.push_str(&format!(". Slow size: about {t:.1} s a step in the browser"));
    }
    // Once steps are measured, what is left at the measured rate (this machine, this run).
    let running = lab.phase.get() == common::protocol::Phase::Running;
    if let (true, Some(rate)) = (running, lab.steps_per_second.get().filter(|r| *r > 0.0)) {
        let left = steps.saturating_sub(lab.step.get());
        let rate = s.pace().map_or(rate, |p| p.min(rate));
        out.push_str(&format!(". Measured {rate:.1} steps/s: about {} left", time(left as f64 / rate)));
    }
    out
}
