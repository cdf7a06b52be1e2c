//! `window.spherewalk`: the page's scripting API, for experiments from the browser console.
//!
//! ```js
//! const s = await spherewalk.train({ train: { ...TrainConfig... } }, (e) => console.log(e.event));
//! ```
//! - `train(config, onEvent?, {signal}?)`: runs `config` (what `lab train --config FILE` reads: an experiment
//!   `{version, train, probe, backend}` or a bare training config, as an object or JSON text) in a
//!   worker of its own, and resolves to the summary: the fields of `lab train --json`'s last line.
//!   It rejects with the message on a bad config (steps over the page's limit of 1,000,000
//!   included), a non-finite loss, or when `signal` (an AbortSignal) aborts. `onEvent` receives every
//!   event as a plain object (`event`: "progress", "panels" with `sphere` and `attention` as
//!   Float32Arrays, "phase", "backend", "notice", ...).
//! - `bench({d_model, layers, heads, context, batch, steps, optimizer, workers})`: the engine alone
//!   on the CPU path in a worker of its own (each field optional; default the small size d64 L2 H4
//!   T64 B16, 20 Adam steps after a warm-up of at least a second); resolves to `{ms_per_step,
//!   gflops, gemm_gflops, steps, warmup_steps, params, workers}`.
//! - `sample({prompt, tokens, temperature, top_k, top_p, seed, samples})`: what the page's current
//!   model writes (each field optional; at most 2000 tokens and 10 samples a call, seeds at most
//!   2^53 - 1); resolves to the objects `lab sample --json` prints, one per sample:
//!   `{prompt, seed, text, tokens, steps: [{token, text, p, top: [[text, p], ...]}]}`.
//!
//! Every call answers with a promise: an argument that is not what the call takes (a function, a
//! Symbol, NaN, a lone surrogate) is a rejection with a sentence, never an exception or a trap.
//! - `inspect(text)`: the real model opened in the page ("Open a real model") reads `text`;
//!   resolves to the object `lab inspect --json` prints (`tokens`, `pieces`, `n_layer`, `layers`
//!   with the radius and kernel statistics and the entropy per head, `depth`, `next`), and the
//!   page's views show the reading.
//! - `history({model, steps, text})`: a model's checkpoints along its training (`model`: a hub id
//!   such as `EleutherAI/pythia-14m`; `steps`: "0, 1000, 143000"; `text`, optional: the text box's
//!   otherwise), fetched, read and dropped one at a time as the page's "Training history" does;
//!   resolves to the object `lab history --json` prints.
//! - `experiment()`: the page's experiment as JSON text (for `lab train --config`).
//! - `version`: the engine's version.
//! - `testing.slowWorker(factor)`, `testing.trapWorker()`, `testing.trapSecondWorker()` and
//!   `testing.trapModelWorker()`: the browser tests' hooks on the page's own workers (a worker
//!   `factor` times slower; a wasm trap in it, in its second worker or in the model worker); `testing.attention(layer, head)` (the
//!   latest frame's (T, T) attention, row-major, as the engine sent it) and `testing.frameSteps()`
//!   (the steps of the recorded frames), to check the figures against.

use common::protocol::{self, Command, Event, TestHook};
use engine::sample::SampleSpec;
use engine::session::bench::BenchSpec;
use engine::session::Experiment;
use js_sys::{Function, Object, Promise, Reflect};
use leptos::prelude::WithUntracked;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::lab::{Lab, WORKER_URL};
use common::settings::MAX_STEPS;

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
/// `settle` decides when the promise is done. A crash or an error event rejects it, and so does
/// `signal`, which stops the worker.
fn in_worker(command: Command, on_event: JsValue, signal: Option<web_sys::AbortSignal>, settle: Settle) -> Promise {
    let worker = match web_sys::Worker::new(WORKER_URL) {
        Ok(w) => w,
        Err(e) => return Promise::reject(&e),
    };
    let on_event = on_event.dyn_into::<Function>().ok();
    Promise::new(&mut |resolve, reject| {
        if let Some(signal) = &signal {
            let (w, reject) = (worker.clone(), reject.clone());
            let stop = Closure::<dyn FnMut()>::new(move || {
                w.terminate();
                let _ = reject.call1(&JsValue::NULL, &refusal("stopped: the script's signal aborted the run"));
            });
            signal.set_onabort(Some(stop.as_ref().unchecked_ref()));
            // It lives as long as the signal may fire.
            stop.forget();
        }
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

/// Runs `config` in a new worker; the promise settles with the summary or the error. `options`
/// may hold `signal`, an AbortSignal that stops the run (the promise then rejects).
fn train(config: JsValue, on_event: JsValue, options: JsValue) -> Promise {
    let experiment = match experiment_of(&config) {
        Ok(e) => e,
        Err(e) => return Promise::reject(&e),
    };
    if experiment.train.steps > MAX_STEPS {
        return Promise::reject(&refusal(&format!(
            "steps = {} is over the page's limit of {MAX_STEPS} (the settings' own); for more, use lab train",
            experiment.train.steps
        )));
    }
    if !on_event.is_undefined() && !on_event.is_null() && !on_event.is_function() {
        return Promise::reject(&refusal(&format!(
            "the second argument must be a function, not {}",
            kind_of(&on_event)
        )));
    }
    let signal = Reflect::get(&options, &"signal".into()).ok().and_then(|s| s.dyn_into::<web_sys::AbortSignal>().ok());
    if signal.as_ref().is_some_and(web_sys::AbortSignal::aborted) {
        return Promise::reject(&refusal("stopped: the script's signal had aborted before the run began"));
    }
    let command = Command::Create { experiment: Box::new(experiment), settings: None, run: true, second_worker: true };
    in_worker(command, on_event, signal, |event| match event {
        Event::Summary { summary } => Some(to_js_result(summary)),
        _ => None,
    })
}

/// Times the CPU path in a new worker: `{d_model, layers, heads, context, batch, steps, optimizer,
/// workers}`, each optional; resolves to `{ms_per_step, gflops, gemm_gflops, steps, warmup_steps,
/// params, workers}`.
fn bench(spec: JsValue) -> Promise {
    // Through JSON text, so a misspelt field is an error and a cycle never reaches the wasm.
    let spec = json_of(&spec, "the bench settings").map_err(|e| common::js::error_text(&e)).and_then(|text| {
        serde_json::from_str::<BenchSpec>(&text).map_err(|e| format!("the bench settings cannot be read: {e}"))
    });
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return Promise::reject(&js_sys::Error::new(&e).into()),
    };
    in_worker(Command::Bench { spec }, JsValue::UNDEFINED, None, |event| match event {
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
    if !value.is_object() || value.is_function() {
        return Err(refusal(&format!("{what} must be an object of settings, not {}", kind_of(value))));
    }
    let text = js_sys::JSON::stringify(value)
        .map_err(|e| refusal(&format!("{what} cannot be read as JSON: {}", common::js::error_text(&e))))?;
    // A value JSON has no text for (a toJSON that returns nothing) stringifies to undefined.
    text.as_string().ok_or_else(|| refusal(&format!("{what} has no JSON text (its toJSON gives nothing)")))
}

/// What a script passed, in words.
fn kind_of(value: &JsValue) -> String {
    if value.is_function() {
        "a function".into()
    } else if value.is_symbol() {
        "a Symbol".into()
    } else if value.is_string() {
        "a string".into()
    } else if let Some(n) = value.as_f64() {
        format!("the number {n}")
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

fn refusal(why: &str) -> JsValue {
    js_sys::Error::new(why).into()
}

/// Refuses a number JSON cannot carry (NaN and the infinities become null in JSON) and a string
/// that is not text (a lone surrogate, half of a UTF-16 pair), naming the field.
fn plain_fields(value: &JsValue, what: &str) -> Result<(), JsValue> {
    let Some(obj) = value.dyn_ref::<Object>() else { return Ok(()) };
    // Through Reflect, which catches: a Proxy's traps may throw.
    let unreadable = |e: JsValue| refusal(&format!("{what} cannot be read: {}", common::js::error_text(&e)));
    for key in Reflect::own_keys(obj).map_err(unreadable)?.iter().filter(JsValue::is_string) {
        let name = key.as_string().unwrap_or_default();
        let v = Reflect::get(obj, &key).map_err(unreadable)?;
        if let Some(n) = v.as_f64().filter(|n| !n.is_finite()) {
            return Err(refusal(&format!("{what}: {name} is {n}; give a finite number")));
        }
        if v.dyn_ref::<js_sys::JsString>().is_some_and(|s| !s.is_valid_utf16()) {
            return Err(refusal(&format!(
                "{what}: {name} holds a lone surrogate (half of a UTF-16 pair), which is not text"
            )));
        }
    }
    Ok(())
}

/// The most a script's `sample` may ask for: what the page itself writes at most ("Write more"
/// writes 200 characters), with room for a study, and a worker that answers Pause within seconds.
const SCRIPT_TOKENS: usize = 2000;
const SCRIPT_SAMPLES: usize = 10;
/// JavaScript's largest exact integer: a larger seed would come back changed.
const MAX_SEED: u64 = (1 << 53) - 1;

/// `spherewalk.sample(spec)`: the page's model writes.
fn sample(lab: Lab, spec: JsValue) -> Promise {
    let spec = plain_fields(&spec, "the sample settings")
        .and_then(|()| json_of(&spec, "the sample settings"))
        .and_then(|text| {
            serde_json::from_str::<SampleSpec>(&text)
                .map_err(|e| refusal(&format!("the sample settings cannot be read: {e}")))
        });
    let spec = spec.and_then(|s| {
        s.validate().map_err(|e| refusal(&e.to_string()))?;
        if s.tokens > SCRIPT_TOKENS || s.samples > SCRIPT_SAMPLES {
            return Err(refusal(&format!(
                "the page writes at most {SCRIPT_TOKENS} tokens and {SCRIPT_SAMPLES} samples a call (asked: {} and {}); \
                 for more, use lab sample",
                s.tokens, s.samples
            )));
        }
        if s.seed.saturating_add(s.samples as u64 - 1) > MAX_SEED {
            return Err(refusal(&format!(
                "seed {} (and the samples after it) must stay at most 2^53 - 1 = {MAX_SEED}, JavaScript's largest exact \
                 integer",
                s.seed
            )));
        }
        Ok(s)
    });
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return Promise::reject(&e),
    };
    Promise::new(&mut |resolve, reject| crate::lab::writing::script_sample(lab, spec.clone(), resolve, reject))
}

pub fn install(lab: Lab) {
    let api = Object::new();
    set(&api, "version", &engine::VERSION.into());
    let train = Closure::<dyn Fn(JsValue, JsValue, JsValue) -> Promise>::new(train);
    set(&api, "train", &train.into_js_value());
    let bench = Closure::<dyn Fn(JsValue) -> Promise>::new(bench);
    set(&api, "bench", &bench.into_js_value());
    let sample = Closure::<dyn Fn(JsValue) -> Promise>::new(move |spec| sample(lab, spec));
    set(&api, "sample", &sample.into_js_value());
    let inspect = Closure::<dyn Fn(JsValue) -> Promise>::new(move |text: JsValue| {
        let text = match text.dyn_ref::<js_sys::JsString>() {
            Some(t) if !t.is_valid_utf16() => {
                return Promise::reject(&refusal(
                    "the text holds a lone surrogate (half of a UTF-16 pair), which is not text",
                ))
            }
            Some(t) => String::from(t),
            None => return Promise::reject(&refusal(&format!("inspect(text) takes a string, not {}", kind_of(&text)))),
        };
        Promise::new(&mut |resolve, reject| crate::lab::real_model::script_read(lab, text.clone(), resolve, reject))
    });
    set(&api, "inspect", &inspect.into_js_value());
    let history = Closure::<dyn Fn(JsValue) -> Promise>::new(move |spec: JsValue| {
        let field = |name: &str| js_sys::Reflect::get(&spec, &name.into()).ok().and_then(|v| v.as_string());
        let Some(model) = field("model") else {
            return Promise::reject(&refusal("history(spec) takes {model, steps, text}: model is a hub id"));
        };
        let Some(steps) = field("steps") else {
            return Promise::reject(&refusal("history(spec) takes {model, steps, text}: steps is a string of steps"));
        };
        // The text, when given, is a string of text: not a number, not a lone surrogate.
        let text = match js_sys::Reflect::get(&spec, &"text".into()).unwrap_or(JsValue::UNDEFINED) {
            t if t.is_undefined() => None,
            t => match t.dyn_ref::<js_sys::JsString>() {
                Some(s) if s.is_valid_utf16() => Some(String::from(s)),
                Some(_) => {
                    return Promise::reject(&refusal(
                        "history(spec): text holds a lone surrogate (half of a UTF-16 pair), which is not text",
                    ))
                }
                None => {
                    return Promise::reject(&refusal(&format!("history(spec): text is {}, not a string", kind_of(&t))))
                }
            },
        };
        Promise::new(&mut |resolve, reject| {
            crate::lab::history::script(lab, model.clone(), steps.clone(), text.clone(), resolve, reject)
        })
    });
    set(&api, "history", &history.into_js_value());
    let experiment = Closure::<dyn Fn() -> Result<String, JsValue>>::new(move || {
        lab.experiment().map(|e| e.to_json()).map_err(|e| js_sys::Error::new(&e).into())
    });
    set(&api, "experiment", &experiment.into_js_value());
    let testing = Object::new();
    let slow = Closure::<dyn Fn(f64)>::new(move |factor: f64| lab.send(Command::Test(TestHook::Slowdown { factor })));
    set(&testing, "slowWorker", &slow.into_js_value());
    let trap = Closure::<dyn Fn()>::new(move || lab.send(Command::Test(TestHook::Trap)));
    set(&testing, "trapWorker", &trap.into_js_value());
    let trap_second = Closure::<dyn Fn()>::new(move || lab.send(Command::Test(TestHook::TrapSecond)));
    set(&testing, "trapSecondWorker", &trap_second.into_js_value());
    let trap_model =
        Closure::<dyn Fn()>::new(move || super::model_worker::send(lab, Command::Test(TestHook::Trap), vec![]));
    set(&testing, "trapModelWorker", &trap_model.into_js_value());
    let slow_model = Closure::<dyn Fn(f64)>::new(move |factor: f64| {
        super::model_worker::send(lab, Command::Test(TestHook::Slowdown { factor }), vec![])
    });
    set(&testing, "slowModelWorker", &slow_model.into_js_value());
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
