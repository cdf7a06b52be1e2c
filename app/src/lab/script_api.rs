//! `window.spherewalk`: the page's scripting API, for experiments from the browser console.
//!
//! ```js
//! const s = await spherewalk.train({ train: { ...TrainConfig... } }, (e) => console.log(e.event));
//! ```
//! - `train(config, onEvent?)`: runs `config` (what `lab train --config FILE` reads: an experiment
//!   `{version, train, probe, backend}` or a bare training config, as an object or JSON text) in a
//!   worker of its own, and resolves to the summary: the fields of `lab train --json`'s last line.
//!   It rejects with the message on a bad config or a non-finite loss. `onEvent` receives every
//!   event as a plain object (`event`: "progress", "panels" with `sphere` and `attention` as
//!   Float32Arrays, "phase", "backend", "notice", ...).
//! - `bench({d_model, layers, heads, context, batch, steps, optimizer, workers})`: the engine alone
//!   on the CPU path in a worker of its own (each field optional; default the small size d64 L2 H4
//!   T64 B16, 20 Adam steps after a warm-up of at least a second); resolves to `{ms_per_step,
//!   gflops, gemm_gflops, steps, warmup_steps, params, workers}`.
//! - `sample({prompt, tokens, temperature, top_k, top_p, seed, samples})`: what the page's current
//!   model writes (each field optional); resolves to the objects `lab sample --json` prints, one per
//!   sample: `{prompt, seed, text, tokens, steps: [{token, text, p, top: [[text, p], ...]}]}`.
//! - `inspect(text)`: the real model opened in the page ("Open a real model") reads `text`;
//!   resolves to the object `lab inspect --json` prints (`tokens`, `pieces`, `n_layer`, `layers`
//!   with the radius and kernel statistics and the entropy per head, `depth`, `next`), and the
//!   page's views show the reading.
//! - `experiment()`: the page's experiment as JSON text (for `lab train --config`).
//! - `version`: the engine's version.
//! - `testing.slowWorker(factor)`, `testing.trapWorker()` and `testing.trapSecondWorker()`: the
//!   browser tests' hooks on the page's own worker (a worker `factor` times slower; a wasm trap in
//!   it or in its second worker); `testing.attention(layer, head)` (the
//!   latest frame's (T, T) attention, row-major, as the engine sent it) and `testing.frameSteps()`
//!   (the steps of the recorded frames), to check the figures against.

use engine::sample::SampleSpec;
use engine::session::bench::BenchSpec;
use engine::session::Experiment;
use js_sys::{Function, Object, Promise, Reflect};
use leptos::prelude::WithUntracked;
use spherewalk::protocol::{self, Command, Event};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::lab::{Lab, WORKER_URL};

fn set(obj: &Object, key: &str, value: &JsValue) {
    let _ = Reflect::set(obj, &key.into(), value);
}

/// The experiment a script passed, or a JS Error saying what is wrong with it.
fn experiment_of(config: &JsValue) -> Result<Experiment, JsValue> {
    let text = match config.as_string() {
        Some(text) => text,
        None => json_of(config, "the config")?,
    };
    Experiment::from_json(&text).map_err(|e| js_sys::Error::new(&e.to_string()).into())
}

/// How a worker's event settles a script's promise: `None` while it is still running.
type Settle = fn(&Event) -> Option<Result<JsValue, JsValue>>;

/// Runs `command` in a new worker of its own once it is ready; every event goes to `on_event` and
/// `settle` decides when the promise is done. A crash or an error event rejects it.
fn in_worker(command: Command, on_event: JsValue, settle: Settle) -> Promise {
    let worker = match web_sys::Worker::new(WORKER_URL) {
        Ok(w) => w,
        Err(e) => return Promise::reject(&e),
    };
    let on_event = on_event.dyn_into::<Function>().ok();
    Promise::new(&mut |resolve, reject| {
        let (w, command) = (worker.clone(), command.clone());
        let on_event = on_event.clone();
        let finish = {
            let w = w.clone();
            move |f: &Function, v: &JsValue| {
                w.terminate();
                let _ = f.call1(&JsValue::NULL, v);
            }
        };
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let data = ev.data();
            if let Some(what) = Reflect::get(&data, &"crashed".into()).ok().and_then(|c| c.as_string()) {
                return finish(&reject, &js_sys::Error::new(&format!("the worker crashed: {what}")).into());
            }
            let (event, bulk) = match protocol::decode::<Event>(&data) {
                Ok(m) => m,
                Err(e) => return finish(&reject, &js_sys::Error::new(&e).into()),
            };
            if let (Some(f), Ok(value)) = (&on_event, protocol::to_js(&event)) {
                if let (Event::Panels { .. }, Some(obj)) = (&event, value.dyn_ref::<Object>()) {
                    set(obj, "sphere", bulk.first().unwrap_or(&JsValue::NULL));
                    set(obj, "attention", bulk.get(1).unwrap_or(&JsValue::NULL));
                }
                let _ = f.call1(&JsValue::NULL, &value);
            }
            match &event {
                Event::Ready { .. } => {
                    if let Ok((msg, transfer)) = protocol::encode(&command, vec![]) {
                        let _ = w.post_message_with_transfer(&msg, &transfer);
                    }
                }
                Event::Error { text } | Event::NonFinite { message: text, .. } => {
                    finish(&reject, &js_sys::Error::new(text).into())
                }
                _ => match settle(&event) {
                    Some(Ok(v)) => finish(&resolve, &v),
                    Some(Err(e)) => finish(&reject, &e),
                    None => {}
                },
            }
        });
        worker.set_onmessage(Some(&on_message.into_js_value().unchecked_into()));
    })
}

fn to_js_result<T: serde::Serialize>(value: &T) -> Result<JsValue, JsValue> {
    protocol::to_js(value).map_err(|e| js_sys::Error::new(&e).into())
}

/// Runs `config` in a new worker; the promise settles with the summary or the error.
fn train(config: JsValue, on_event: JsValue) -> Promise {
    let experiment = match experiment_of(&config) {
        Ok(e) => e,
        Err(e) => return Promise::reject(&e),
    };
    let command = Command::Create { experiment: Box::new(experiment), settings: None, run: true, second_worker: true };
    in_worker(command, on_event, |event| match event {
        Event::Summary { summary } => Some(to_js_result(summary)),
        _ => None,
    })
}

/// Times the CPU path in a new worker: `{d_model, layers, heads, context, batch, steps, optimizer,
/// workers}`, each optional; resolves to `{ms_per_step, gflops, gemm_gflops, steps, warmup_steps,
/// params, workers}`.
fn bench(spec: JsValue) -> Promise {
    // Through JSON text, so a misspelt field is an error and a cycle never reaches the wasm.
    let spec = json_of(&spec, "the bench settings").map_err(|e| spherewalk::js::error_text(&e)).and_then(|text| {
        serde_json::from_str::<BenchSpec>(&text).map_err(|e| format!("the bench settings cannot be read: {e}"))
    });
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return Promise::reject(&js_sys::Error::new(&e).into()),
    };
    in_worker(Command::Bench { spec }, JsValue::UNDEFINED, |event| match event {
        Event::Bench { result } => Some(to_js_result(result)),
        _ => None,
    })
}

/// A script's argument as JSON text: `JSON.stringify` throws on a cycle and has a depth of its own,
/// so a value that cannot be read is refused here, before any of it reaches the wasm's serde (which
/// overflowed the wasm stack on a cycle and left the page unusable); serde_json's own depth limit
/// refuses what is deeply nested but finite.
fn json_of(value: &JsValue, what: &str) -> Result<String, JsValue> {
    if value.is_undefined() || value.is_null() {
        return Ok("{}".into());
    }
    js_sys::JSON::stringify(value).map(String::from).map_err(|e| {
        js_sys::Error::new(&format!("{what} cannot be read as JSON: {}", spherewalk::js::error_text(&e))).into()
    })
}

/// `spherewalk.sample(spec)`: the page's model writes.
fn sample(lab: Lab, spec: JsValue) -> Promise {
    let spec = json_of(&spec, "the sample settings").and_then(|text| {
        serde_json::from_str::<SampleSpec>(&text)
            .map_err(|e| js_sys::Error::new(&format!("the sample settings cannot be read: {e}")).into())
    });
    let spec = match spec.and_then(|s| s.validate().map(|()| s).map_err(|e| js_sys::Error::new(&e.to_string()).into()))
    {
        Ok(s) => s,
        Err(e) => return Promise::reject(&e),
    };
    Promise::new(&mut |resolve, reject| crate::lab::writing::script_sample(lab, spec.clone(), resolve, reject))
}

pub fn install(lab: Lab) {
    let api = Object::new();
    set(&api, "version", &engine::VERSION.into());
    let train = Closure::<dyn Fn(JsValue, JsValue) -> Promise>::new(train);
    set(&api, "train", &train.into_js_value());
    let bench = Closure::<dyn Fn(JsValue) -> Promise>::new(bench);
    set(&api, "bench", &bench.into_js_value());
    let sample = Closure::<dyn Fn(JsValue) -> Promise>::new(move |spec| sample(lab, spec));
    set(&api, "sample", &sample.into_js_value());
    let inspect = Closure::<dyn Fn(String) -> Promise>::new(move |text: String| {
        Promise::new(&mut |resolve, reject| crate::lab::real_model::script_read(lab, text.clone(), resolve, reject))
    });
    set(&api, "inspect", &inspect.into_js_value());
    let experiment = Closure::<dyn Fn() -> Result<String, JsValue>>::new(move || {
        lab.experiment().map(|e| e.to_json()).map_err(|e| js_sys::Error::new(&e).into())
    });
    set(&api, "experiment", &experiment.into_js_value());
    let testing = Object::new();
    let slow = Closure::<dyn Fn(f64)>::new(move |factor: f64| lab.send(Command::Slowdown { factor }));
    set(&testing, "slowWorker", &slow.into_js_value());
    let trap = Closure::<dyn Fn()>::new(move || lab.send(Command::Trap));
    set(&testing, "trapWorker", &trap.into_js_value());
    let trap_second = Closure::<dyn Fn()>::new(move || lab.send(Command::TrapSecond));
    set(&testing, "trapSecondWorker", &trap_second.into_js_value());
    // The engine's numbers behind the figures, as the worker sent them, for the test to check the
    // drawings against: one head's attention matrix of the latest frame, and the recorded steps.
    let attention = Closure::<dyn Fn(usize, usize) -> JsValue>::new(move |layer: usize, head: usize| {
        lab.panels.with_untracked(|p| match p {
            Some(p) if layer < p.layers && head < p.heads => {
                js_sys::Float32Array::from(p.attention_of(layer, head)).into()
            }
            _ => JsValue::NULL,
        })
    });
    set(&testing, "attention", &attention.into_js_value());
    let steps = Closure::<dyn Fn() -> Vec<u32>>::new(move || {
        lab.panels
            .with_untracked(|p| p.as_ref().map(|p| p.steps.iter().map(|&s| s as u32).collect()).unwrap_or_default())
    });
    set(&testing, "frameSteps", &steps.into_js_value());
    // The engine's summary of the page's last run (null before one has ended).
    let summary = Closure::<dyn Fn() -> JsValue>::new(move || {
        lab.summary.with_untracked(|s| s.as_deref().and_then(|s| js_sys::JSON::parse(s).ok()).unwrap_or(JsValue::NULL))
    });
    set(&testing, "summary", &summary.into_js_value());
    set(&api, "testing", &testing);
    if let Some(w) = web_sys::window() {
        set(&w, "spherewalk", &api);
    }
}
