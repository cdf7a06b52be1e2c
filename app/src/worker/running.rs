//! The running loop: steps for a chunk of time (or one, paced), then posts the new points, the
//! panels and the written text, and ends, pauses or fails the run as the session says.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;

use engine::session::Progress;
use engine::train::interrupt::Interrupt;

use super::mailbox::Mailbox;
use super::{Worker, CHUNK_MS, PANELS_EVERY_MS, PROGRESS_EVERY_MS};
use crate::js::{now_ms, sleep, yield_now};
use crate::protocol::{self, Command, Event, Phase};
use crate::settings;

/// How long a CPU step runs before it lets the worker hear its messages, between two of its pieces
/// (`engine::train::interrupt`): Pause is heard within about this and one piece (a shard's forward
/// or backward pass) instead of a whole step, for a turn of the event loop (a fraction of a
/// millisecond) this often.
const BREAK_EVERY_MS: f64 = 25.0;

/// The commands that end the steps running: a step stops for them and they are handled at once.
pub(super) fn stops_steps(cmd: &Command) -> bool {
    matches!(
        cmd,
        Command::Pause | Command::Reset | Command::Create { .. } | Command::LoadModel { .. } | Command::ResumeSaved
    )
}

/// What the session's CPU steps ask between their pieces: a turn of the event loop when
/// [`BREAK_EVERY_MS`] have passed since the last, then whether a command that ends the steps came.
pub(super) struct Breaks {
    mailbox: Mailbox,
    last: Cell<f64>,
}

impl Breaks {
    pub(super) fn new(mailbox: Mailbox) -> Breaks {
        Breaks { mailbox, last: Cell::new(now_ms()) }
    }
}

impl Interrupt for Breaks {
    fn stop(&self) -> Pin<Box<dyn Future<Output = bool> + '_>> {
        Box::pin(async move {
            if now_ms() - self.last.get() < BREAK_EVERY_MS {
                return false;
            }
            yield_now().await;
            self.last.set(now_ms());
            self.mailbox.holds(stops_steps)
        })
    }
}

impl Worker {
    /// Runs steps for about a chunk's time (or one step when paced), then posts what is due.
    pub(super) async fn chunk(&mut self) {
        if let Some(pace) = self.pace {
            let (from, t0) = self.pace_origin;
            let (now_step, total) =
                self.session.as_ref().map_or((0, 1), |s| (s.step_count(), s.experiment().train.steps));
            let due = t0 + settings::paced_ms(now_step, total, pace) - settings::paced_ms(from, total, pace);
            let wait = due - now_ms();
            if wait > 0.0 {
                sleep(wait.min(50.0)).await;
                return;
            }
            self.advance(1).await;
        } else {
            let started = now_ms();
            while self.phase == Phase::Running && now_ms() - started < CHUNK_MS && !self.mailbox.holds(stops_steps) {
                self.advance(1).await;
            }
        }
        let now = now_ms();
        if now - self.last_progress >= PROGRESS_EVERY_MS {
            self.publish(false);
        }
        if now - self.last_save >= self.save_every() {
            self.save(false).await;
        }
    }

    /// Takes up to `n` steps; ends the run, pauses it or fails it as the session says.
    pub(super) async fn advance(&mut self, n: usize) {
        for _ in 0..n {
            let Some(s) = self.session.as_mut() else { return };
            let t0 = now_ms();
            let progress = s.step().await;
            let spent = now_ms() - t0;
            crate::js::slow_down(spent, self.slowdown);
            let spent = now_ms() - t0;
            let notices = s.take_notices();
            let done = s.is_done();
            let metrics = matches!(progress, Ok(Progress::NonFinite { .. })).then(|| s.metrics().clone());
            for text in notices {
                self.post(Event::Notice { text });
                self.post_backend();
            }
            match progress {
                Ok(Progress::Stepped { recorded, wrote, .. }) => {
                    self.timed.0 += spent;
                    self.timed.1 += 1;
                    self.ms_per_step = Some(spent);
                    self.panels_due |= recorded;
                    self.written_due |= wrote;
                }
                Ok(Progress::Done) => {
                    self.finish().await;
                    return;
                }
                // A command that ends the steps came during this one: it is handled next.
                Ok(Progress::Interrupted { .. }) => return,
                Ok(Progress::NonFinite { message, kept }) => {
                    let metrics = metrics.unwrap_or_default();
                    self.sent = (metrics.train.len(), metrics.val.len(), metrics.diagnostics.len());
                    web_sys::console::warn_1(&format!("Spherewalk: {message}").into());
                    self.post(Event::NonFinite { message, kept, metrics });
                    self.set_phase(Phase::Paused);
                    self.publish(true);
                    self.save(true).await;
                    return;
                }
                Err(e) => {
                    self.set_phase(Phase::Failed);
                    self.publish(true);
                    self.error(format!("training step failed: {e}"));
                    return;
                }
            }
            if done {
                self.finish().await;
                return;
            }
        }
    }

    /// Brings every step's report into the metrics (a GPU run reports a round of steps at a time)
    /// before the page is told the run stopped; a non-finite step found there pauses the run as
    /// a step would.
    pub(super) async fn settle(&mut self) {
        let Some(s) = self.session.as_mut() else { return };
        match s.flush().await {
            Ok(true) => self.advance(1).await,
            Ok(false) => {}
            Err(e) => self.error(format!("could not read the last steps back: {e}")),
        }
    }

    /// The run is complete: its last points, its summary, then "done" (so a page that sees "done"
    /// has everything).
    pub(super) async fn finish(&mut self) {
        self.publish(true);
        if let Some(s) = self.session.as_mut() {
            let summary = s.summary(self.timed.0 / 1000.0, self.timed.1);
            match serde_json::to_value(summary) {
                Ok(summary) => self.post(Event::Summary { summary }),
                Err(e) => self.error(format!("could not summarise the run: {e}")),
            }
        }
        self.set_phase(Phase::Done);
        self.save(true).await;
    }

    /// Posts the new loss points, and the panels when a frame was recorded (or `force`).
    pub(super) fn publish(&mut self, force: bool) {
        let Some(s) = self.session.as_mut() else { return };
        let m = s.metrics();
        let (t, v, d) = self.sent;
        let diag_text = s.diagnostics().map(|d| diag_text(d, &s.experiment().train.optimizer, s.step_count()));
        let event = Event::Progress {
            step: s.step_count(),
            train: m.train[t.min(m.train.len())..].to_vec(),
            val: m.val[v.min(m.val.len())..].to_vec(),
            diagnostics: m.diagnostics[d.min(m.diagnostics.len())..].to_vec(),
            diag_text,
            ms_per_step: self.ms_per_step,
            steps_per_second: (self.timed.0 > 0.0).then(|| self.timed.1 as f64 * 1000.0 / self.timed.0),
            seconds: self.timed.0 / 1000.0,
        };
        self.sent = (m.train.len(), m.val.len(), m.diagnostics.len());
        self.mailbox.post(&event, vec![], self.epoch);
        if self.written_due {
            let after = self.written_sent;
            let written: Vec<_> = s.written().iter().filter(|w| after.is_none_or(|a| w.step > a)).cloned().collect();
            self.written_sent = written.last().map(|w| w.step).or(after);
            self.written_due = false;
            self.mailbox.post(&Event::Written { written }, vec![], self.epoch);
        }
        let now = now_ms();
        self.last_progress = now;
        // At most a fifth of the run goes to the panels: at d128 L4 T64 they take about 250 ms in
        // wasm, and every 250 ms they halved the training rate.
        if force || (self.panels_due && now - self.last_panels >= PANELS_EVERY_MS.max(4.0 * self.panels_ms)) {
            match s.panels(self.depth) {
                Ok(mut panels) => {
                    let bulk = vec![protocol::floats(&panels.sphere), protocol::floats(&panels.attention)];
                    panels.sphere = Vec::new();
                    panels.attention = Vec::new();
                    self.mailbox.post(&Event::Panels { panels: Box::new(panels) }, bulk, self.epoch);
                }
                Err(e) => self.post(Event::Error { text: format!("could not draw the panels: {e}") }),
            }
            self.panels_due = false;
            // A forced one may carry the run's one-off flow fit (a second): not the usual cost.
            if !force {
                self.panels_ms = now_ms() - now;
            }
            self.last_panels = now_ms();
        }
    }
}

/// The second-order diagnostics of the last step as text.
fn diag_text(
    d: &engine::optim::second_order::Diagnostics,
    optimizer: &engine::config::OptimizerConfig,
    step: usize,
) -> String {
    let layers = d
        .layers
        .iter()
        .map(|l| {
            format!(
                "{}: {} CG iterations, residual {:.1e}{}",
                l.name,
                l.cg.iterations,
                l.cg.rel_residual,
                if l.fell_back { " (fell back to the gradient)" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        "{} after step {step}: damping {:.1e}, KL-clip scale {:.3}, fallbacks {} this step, {} in all\n{layers}",
        optimizer.name(),
        d.damping,
        d.kl_scale,
        d.fallbacks_this_step,
        d.fallbacks_total
    )
}
