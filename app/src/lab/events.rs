//! The worker's events, turned into the page's signals.

use super::backend::backend_line;
use super::*;

/// The last few times per step the worker measured: the page shows their median, which a single
/// slow chunk (a save, a frame of the panels) does not move.
const RECENT: usize = 9;

thread_local! {
    static RECENT_MS: std::cell::RefCell<std::collections::VecDeque<f64>> = const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// `ms` added to the recent times; their median.
fn steady_ms(ms: f64) -> f64 {
    RECENT_MS.with_borrow_mut(|r| {
        if r.len() == RECENT {
            r.pop_front();
        }
        r.push_back(ms);
        let mut sorted: Vec<f64> = r.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        sorted[sorted.len() / 2]
    })
}

/// A new run measures its own times.
pub(super) fn forget_times() {
    RECENT_MS.with_borrow_mut(|r| r.clear());
}

impl Lab {
    pub(super) fn on_event(self, event: Event, bulk: Vec<JsValue>) {
        match event {
            Event::Ready { .. } => {
                self.site.loading.set(None);
                CLIENT.with_borrow_mut(|c| {
                    if let Some(c) = c.as_mut() {
                        c.on_ready();
                    }
                });
            }
            Event::Run { config, settings, step, metrics, baselines, prompt } => {
                self.keep_curve();
                self.clear();
                self.curves.baselines.set(Some(baselines));
                self.storage.saved.set(None);
                self.total_steps.set(config.steps);
                self.eval_every.set(config.eval_every);
                // A resumed or loaded run brings its settings; the page's own run echoes them (and then
                // the settings, and so the address, stay as they are).
                if let Some(s) = settings.as_ref().filter(|s| self.settings.with_untracked(|now| now != *s)) {
                    self.replace_settings(s.clone());
                }
                // After the settings: the run's prompt is in its own data's symbols.
                self.writing.prompt.set(prompt);
                // A resumed run goes at its own pace, not as fast as possible.
                if let Some(s) = settings.as_ref() {
                    self.send(Command::SetPace { steps_per_second: s.pace() });
                }
                self.run_settings.set(settings.or_else(|| Some(Settings::from_config(&config))));
                self.run_config.set(Some(*config));
                self.step.set(step);
                self.curves.train.set(metrics.train);
                self.curves.val.set(metrics.val);
                self.curves.diagnostics.set(metrics.diagnostics);
            }
            Event::Adapter { name, software, why } => self.backend.adapter.set(Some(match (name, why) {
                (Some(name), _) => Ok((name, software)),
                (None, why) => Err(why.unwrap_or_default()),
            })),
            Event::Phase { phase } => {
                self.phase.set(phase);
                if phase == Phase::Idle {
                    // Events of a run reset meanwhile may have arrived first.
                    self.clear();
                    self.step.set(0);
                }
            }
            Event::Backend { line, adapter } => {
                let (line, detail) = backend_line(&line);
                self.backend.line.set(line);
                self.backend.detail.set(detail);
                self.backend.on_gpu.set(adapter);
            }
            Event::Progress { step, train, val, diagnostics, diag_text, ms_per_step, steps_per_second, seconds } => {
                self.step.set(step);
                if self.race.with_untracked(|r| !r.is_empty()) {
                    super::race::own_progress(self, &train, &val, seconds);
                }
                if !train.is_empty() {
                    self.curves.train.update(|t| t.extend(train));
                }
                if !val.is_empty() {
                    self.curves.val.update(|v| v.extend(val));
                }
                if !diagnostics.is_empty() {
                    self.curves.diagnostics.update(|d| d.extend(diagnostics));
                }
                if diag_text.is_some() {
                    self.curves.diag_text.set(diag_text);
                }
                self.ms_per_step.set(ms_per_step.map(steady_ms));
                self.steps_per_second.set(steps_per_second);
                if self.phase.get_untracked() == Phase::Running {
                    self.error.set(None);
                }
            }
            Event::Panels { mut panels } => {
                panels.sphere = protocol::floats_of(bulk.first());
                panels.attention = protocol::floats_of(bulk.get(1));
                self.curves.entropy.set(panels.entropy.iter().map(|e| (e.step, e.layers.clone())).collect());
                super::real_model::on_run_panels(self, *panels);
            }
            Event::Opened { id, open, error } => super::real_model::on_opened(self, id, open, error),
            Event::Reading { id, result } => super::real_model::on_reading(self, id, result, &bulk),
            Event::Depth { id, depth } => super::real_model::on_depth(self, id, *depth),
            Event::Compared { id, result } => super::comparing::on_compared(self, id, result),
            Event::LogitLens { id, result } => super::logit_lens::on_lens(self, id, result),
            Event::Measured { id, result } => super::history::on_measured(id, result),
            Event::Samples { id, result } if id >= super::real_model::MODEL_IDS => {
                super::real_model::on_samples(self, id, result)
            }
            Event::Written { written } => self.writing.history.update(|h| {
                h.retain(|w| written.iter().all(|n| n.step != w.step));
                h.extend(written);
            }),
            Event::Samples { id, result } => super::writing::on_samples(self, id, result),
            Event::NonFinite { message, kept, metrics } => {
                self.writing.history.update(|h| h.retain(|w| w.step <= kept));
                self.step.set(kept);
                self.curves.train.set(metrics.train);
                self.curves.val.set(metrics.val);
                self.curves.diagnostics.set(metrics.diagnostics);
                self.error.set(Some(message));
            }
            Event::Notice { text } => self.notice.set(Some(text)),
            Event::Error { text } => self.error.set(Some(text)),
            Event::Saved { step } => {
                self.storage.saved_step.set(Some(step));
                self.storage.save_failed.set(None);
            }
            Event::NotSaved { why } => self.storage.save_failed.set(Some(why)),
            Event::SavedRun { step, total, what } => {
                if self.run_settings.with_untracked(Option::is_none) {
                    self.storage.saved.set(Some((step, total, what)));
                }
            }
            Event::ModelFile { config_json } => {
                let r = match self.download.get_untracked() {
                    Some(Download::Config) => {
                        crate::lab::export::download("config.json", &config_json, "application/json")
                    }
                    _ => crate::lab::export::download_bytes(
                        engine::checkpoint::PAGE_MODEL_FILE,
                        &protocol::bytes_of(bulk.first()),
                        "application/octet-stream",
                    ),
                };
                self.download.set(None);
                self.model_msg.set(r.err().map(Err));
            }
            Event::Upload { result } => self.model_msg.set(Some(result)),
            Event::Summary { summary } => self.summary.set(Some(summary.to_string())),
            // Only scripts' own bench workers answer a bench, and only a training worker's second
            // worker sends shards (to that worker): the page's worker sends neither.
            Event::Bench { .. } | Event::Shards { .. } => {}
            Event::Pace { id, result } => super::pace::on_pace(self, id, result),
        }
    }
}
