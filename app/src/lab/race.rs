//! The "Adam against CG-FAC" race: the page's own worker trains the preset's optimizer (its panels
//! follow that run) while one more worker per rival trains the same model on the same data from the
//! same initialisation (the same seed), at the same time. The loss chart draws every entrant against
//! steps, the race chart against seconds of compute, each labelled by optimizer and learning rate.

use std::cell::RefCell;

use common::protocol::{self, Command, Event, Phase};
use engine::config::OptimizerConfig;
use engine::session::Experiment;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::{Lab, WORKER_URL};

/// The rivals of the race preset's own optimizer.
pub const RIVALS: [&str; 1] = ["adam"];

/// One entrant's curves as the charts draw them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Entrant {
    pub label: String,
    pub train: Vec<(usize, f32)>,
    pub val: Vec<(usize, f32)>,
    /// (seconds of compute, loss of the latest step then).
    pub by_time: Vec<(f64, f32)>,
    pub phase: Phase,
}

struct Rival {
    worker: web_sys::Worker,
    ready: bool,
    pending: Vec<Command>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
}

thread_local! {
    static RIVALS_RUNNING: RefCell<Vec<Rival>> = const { RefCell::new(Vec::new()) };
}

pub fn label(optimizer: &str, lr: f32) -> String {
    format!("{optimizer} lr {lr}")
}

fn post(worker: &web_sys::Worker, cmd: &Command) {
    if let Ok((msg, transfer)) = protocol::encode(cmd, vec![]) {
        let _ = worker.post_message_with_transfer(&msg, &transfer);
    }
}

/// Sends `cmd` to every rival (queued until its worker listens).
pub fn send(cmd: Command) {
    RIVALS_RUNNING.with_borrow_mut(|rivals| {
        for r in rivals.iter_mut() {
            if r.ready {
                post(&r.worker, &cmd);
            } else {
                r.pending.push(cmd.clone());
            }
        }
    });
}

/// Ends the race's rival workers.
pub fn stop(lab: Lab) {
    RIVALS_RUNNING.with_borrow_mut(|rivals| rivals.drain(..).for_each(|r| r.worker.terminate()));
    lab.race.update(|r| r.truncate(1));
}

/// Starts the rivals of `experiment` (the preset's own run); `run`: training at once (else one
/// step at a time, as the page's Step button says).
pub fn start(lab: Lab, experiment: &Experiment, run: bool) {
    stop(lab);
    let own = label(experiment.train.optimizer.name(), experiment.train.lr);
    lab.race.set(vec![Entrant { label: own, ..Entrant::default() }]);
    for (i, name) in RIVALS.into_iter().enumerate() {
        let Ok(optimizer) = OptimizerConfig::named(name) else { continue };
        let mut exp = experiment.clone();
        exp.train.lr = optimizer.default_lr();
        exp.train.optimizer = optimizer;
        let index = i + 1;
        lab.race.update(|r| r.push(Entrant { label: label(name, exp.train.lr), ..Entrant::default() }));
        let worker = match web_sys::Worker::new(WORKER_URL) {
            Ok(w) => w,
            Err(e) => return lab.error.set(Some(format!("the race could not start: {}", common::js::error_text(&e)))),
        };
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let Ok((event, _)) = protocol::decode::<Event>(&ev.data()) else { return };
            match event {
                Event::Ready { .. } => {
                    let pending = RIVALS_RUNNING.with_borrow_mut(|rivals| {
                        rivals.get_mut(i).map(|r| {
                            r.ready = true;
                            std::mem::take(&mut r.pending)
                        })
                    });
                    RIVALS_RUNNING.with_borrow(|rivals| {
                        if let Some(r) = rivals.get(i) {
                            pending.unwrap_or_default().iter().for_each(|c| post(&r.worker, c));
                        }
                    });
                }
                Event::Progress { train, val, seconds, .. } => {
                    lab.race.update(|r| r.get_mut(index).into_iter().for_each(|e| e.add(&train, &val, seconds)))
                }
                Event::Phase { phase } => lab.race.update(|r| {
                    if let Some(e) = r.get_mut(index) {
                        e.phase = phase;
                    }
                }),
                Event::Error { text } | Event::NonFinite { message: text, .. } => {
                    lab.notice.set(Some(format!("race entrant {name}: {text}")))
                }
                _ => {}
            }
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        let pace = Command::SetPace { steps_per_second: lab.settings.with_untracked(|s| s.pace()) };
        let create = Command::Create { experiment: Box::new(exp), settings: None, run, second_worker: false };
        RIVALS_RUNNING.with_borrow_mut(|rivals| {
            rivals.push(Rival { worker, ready: false, pending: vec![pace, create], _on_message: on_message })
        });
    }
}

impl Entrant {
    /// New points of a progress event, at `seconds` of compute.
    fn add(&mut self, train: &[(usize, f32)], val: &[(usize, f32)], seconds: f64) {
        if let Some(&(_, loss)) = train.last() {
            self.by_time.push((seconds, loss));
        }
        self.train.extend_from_slice(train);
        self.val.extend_from_slice(val);
    }
}

/// The page's own run's progress, as entrant 0 of a race in progress.
pub fn own_progress(lab: Lab, train: &[(usize, f32)], val: &[(usize, f32)], seconds: f64) {
    lab.race.update(|r| r.first_mut().into_iter().for_each(|e| e.add(train, val, seconds)));
}

/// The race's verdict, computed by the engine from every entrant's curves: its conclusion once both
/// have trained every step, before that the losses so far.
pub fn verdict(lab: Lab) -> Option<engine::session::Verdict> {
    let total = lab.total_steps.get();
    lab.race.with(|r| {
        let curves: Vec<_> = r.iter().map(|e| (e.label.clone(), e.train.clone(), e.by_time.clone())).collect();
        engine::session::verdicts::race(&curves, total)
    })
}
