//! The run kept: saved to IndexedDB on a schedule of wall-clock time (the numbers never depend on
//! it), offered again after a reload, and the model as files.

use engine::checkpoint::Snapshot;
use engine::memory::DEFAULT_BUDGET;
use engine::session::{Experiment, Metrics, Session, Writing};
use engine::Trainer;
use wasm_bindgen::JsValue;

use super::model_io::{self, SavedMeta};
use super::persist;
use super::{Worker, SAVE_EVERY_MS};
use crate::js::now_ms;
use crate::protocol::{self, Event};
use crate::settings::Settings;

impl Worker {
    /// Time between saves: [`SAVE_EVERY_MS`], or ten times what a save takes, so saving never
    /// takes more than a tenth of the run.
    pub(super) fn save_every(&self) -> f64 {
        SAVE_EVERY_MS.max(10.0 * self.save_ms)
    }

    /// Saves the run to IndexedDB (at most every [`Self::save_every`] unless `force`).
    pub(super) async fn save(&mut self, force: bool) {
        let now = now_ms();
        if !force && now - self.last_save < self.save_every() {
            return;
        }
        self.last_save = now;
        // Only the page's own run (it comes with the page's settings) is saved: a script's run
        // (`spherewalk.train`) or a race rival must not replace it in the one saved slot.
        if self.settings.is_none() {
            return;
        }
        let Some(s) = self.session.as_mut() else { return };
        let snap = match s.snapshot().await {
            Ok(snap) => snap,
            Err(e) => return web_sys::console::warn_1(&format!("Spherewalk: could not save the run: {e}").into()),
        };
        let m = s.metrics();
        let meta = SavedMeta {
            engine: engine::VERSION.into(),
            saved_at: js_sys::Date::now(),
            settings: self.settings.clone().unwrap_or_else(|| Settings::from_config(&snap.config)),
            config: snap.config.clone(),
            step: snap.step,
            train: m.train.clone(),
            val: m.val.clone(),
            entropy: s.entropy().iter().map(|e| (e.step, e.layers.clone())).collect(),
            diagnostics: m.diagnostics.clone(),
        };
        let step = snap.step;
        let saved = match model_io::to_record(&snap, &meta) {
            Ok(record) => persist::put(record).await,
            Err(e) => Err(format!("could not save the run: {e}")),
        };
        self.save_ms = now_ms() - now;
        match saved {
            Ok(()) => self.post(Event::Saved { step }),
            Err(why) => self.post(Event::NotSaved { why }),
        }
    }

    pub(super) async fn check_saved(&mut self) {
        match persist::meta().await {
            Ok(Some(meta)) => match model_io::meta_of(&meta) {
                Ok(meta) => {
                    let when = js_sys::Date::new(&meta.saved_at.into());
                    let what = format!(
                        "{} preset, {} lr {}, saved {}",
                        meta.settings.preset,
                        meta.settings.optimizer,
                        meta.settings.lr,
                        String::from(when.to_locale_string("default", &JsValue::UNDEFINED))
                    );
                    self.post(Event::SavedRun { step: meta.step, total: meta.config.steps, what });
                }
                Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
            },
            Ok(None) => {}
            // Blocked or broken storage: the page says so before anyone trains.
            Err(why) => self.post(Event::NotSaved { why: format!("runs cannot be saved in this browser ({why})") }),
        }
    }

    /// Restores the saved run exactly (weights, optimizer state, step, metrics) and continues it.
    pub(super) async fn resume_saved(&mut self) {
        let restored = match persist::get().await {
            Ok(Some(record)) => model_io::from_record(&record),
            Ok(None) => Err("there is no saved run any more".into()),
            Err(e) => Err(e),
        };
        let (snap, meta) = match restored {
            Ok(r) => r,
            Err(e) => return self.error(format!("could not resume the saved run: {e}")),
        };
        let metrics = Metrics { train: meta.train, val: meta.val, diagnostics: meta.diagnostics };
        let mut exp = Experiment::new(snap.config.clone());
        exp.backend = self.backend;
        exp.writing = Writing { every: exp.train.eval_every, ..Writing::default() };
        match Session::restore(exp, snap, metrics, DEFAULT_BUDGET).await {
            Ok(session) => {
                let step = session.step_count();
                self.install(session, Some(meta.settings), true);
                self.post(Event::Notice { text: format!("resumed the saved run at step {step}") });
                // Storage holds this very step until the next save.
                self.post(Event::Saved { step });
            }
            Err(e) => self.error(format!("could not resume the saved run: {e}")),
        }
    }

    pub(super) async fn download_model(&mut self) {
        let Some(s) = self.session.as_mut() else {
            return self.error("no model yet: start or step a run first".into());
        };
        let file = s.snapshot().await.map_err(|e| e.to_string()).and_then(|snap| {
            let settings = self.settings.clone().unwrap_or_else(|| Settings::from_config(&snap.config));
            let file = model_io::model_file(&snap.config, &settings, snap.step, &snap.params)?;
            Ok((file, model_io::config_file(&snap.config, snap.step)))
        });
        match file {
            Ok((file, config_json)) => self.post_with(&Event::ModelFile { config_json }, vec![protocol::bytes(&file)]),
            Err(e) => self.error(format!("could not write the model file: {e}")),
        }
    }

    /// Continues training from uploaded weights (the optimizer starts fresh).
    pub(super) async fn load_model(&mut self, files: Vec<(String, Vec<u8>)>) {
        let loaded = model_io::read_upload(&files).and_then(|up| {
            let name = up.name.clone();
            let trainer =
                Trainer::new(up.config).map_err(|e| format!("{name}: its config does not make a run: {e}"))?;
            let params = engine::checkpoint::flat_from_named(&trainer.model().layout, up.weights, &name)
                .map_err(|e| format!("{e} (does the config belong to this model?)"))?;
            if let Some(i) = params.iter().position(|v| !v.is_finite()) {
                return Err(format!("{name}: weight {i} is not finite; the model cannot be trained on"));
            }
            let total = trainer.config().steps;
            let step = if up.step < total { up.step } else { 0 };
            let snap = Snapshot { params, step, ..trainer.snapshot() };
            let settings = up.settings.unwrap_or_else(|| Settings::from_config(trainer.config()));
            Ok((snap, settings, name, total))
        });
        let (snap, settings, name, total) = match loaded {
            Ok(l) => l,
            Err(e) => {
                web_sys::console::warn_1(&format!("Spherewalk: {e}").into());
                return self.post(Event::Upload { result: Err(e) });
            }
        };
        let (n, step) = (snap.params.len(), snap.step);
        let mut exp = Experiment::new(snap.config.clone());
        exp.backend = self.backend;
        exp.writing = Writing { every: exp.train.eval_every, ..Writing::default() };
        match Session::restore(exp, snap, Metrics::default(), DEFAULT_BUDGET).await {
            Ok(session) => {
                self.install(session, Some(settings), false);
                let text = format!(
                    "loaded {name}: {n} weights at step {step} of {total}; press Resume to train on (the optimizer starts fresh)"
                );
                self.post(Event::Notice { text: text.clone() });
                self.post(Event::Upload { result: Ok(text) });
                self.save(true).await;
            }
            Err(e) => self.post(Event::Upload { result: Err(format!("{name}: {e}")) }),
        }
    }
}
