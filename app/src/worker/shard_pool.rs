//! The training worker's second worker: a second core for the CPU steps (`engine::train::remote`).
//! It is the same worker program; it answers `Command::Shard` with the shards' gradients and the
//! rows their weights' gradients read (`engine::train::shards::ShardOut`). Each step posts it the
//! weights and the batch (transferred, not copied), computes its own half meanwhile, and waits for
//! the other half. Until the second worker is loaded the steps run whole here; if it
//! crashes the session drops it and says so, and the numbers are the same either way.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use engine::train::remote::{ShardFuture, ShardPool, ShardTask};
use engine::train::shards::ShardOut;
use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::protocol::{self, Command, Event, WORKER_URL};

struct Inner {
    worker: web_sys::Worker,
    ready: Cell<bool>,
    /// Why it stopped (a crash, a refused task): every later step is told so.
    failed: RefCell<Option<String>>,
    /// The promise of the task in flight: resolve with the message, reject with why.
    pending: RefCell<Option<(Function, Function)>>,
}

/// A handle on the second worker; every session of the training worker gets one.
#[derive(Clone)]
pub struct SecondWorker(Rc<Inner>);

impl SecondWorker {
    /// Starts the second worker, when this machine has a second core for it.
    pub fn spawn() -> Option<SecondWorker> {
        let scope: web_sys::DedicatedWorkerGlobalScope = js_sys::global().dyn_into().ok()?;
        if scope.navigator().hardware_concurrency() < 2.0 {
            return None;
        }
        let worker = web_sys::Worker::new(WORKER_URL).ok()?;
        let inner =
            Rc::new(Inner { worker, ready: Cell::new(false), failed: RefCell::new(None), pending: RefCell::new(None) });
        let weak = Rc::downgrade(&inner);
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            let Some(inner) = weak.upgrade() else { return };
            let data = ev.data();
            let crashed = Reflect::get(&data, &"crashed".into()).ok().and_then(|c| c.as_string());
            let reply = match crashed {
                Some(what) => Err(format!("it crashed: {what}")),
                None => match protocol::decode::<Event>(&data) {
                    Ok((Event::Ready { .. }, _)) => {
                        inner.ready.set(true);
                        return;
                    }
                    Ok((Event::Shards { .. }, _)) => Ok(data),
                    Ok((Event::Error { text }, _)) => Err(text),
                    Ok(_) => return,
                    Err(e) => Err(e),
                },
            };
            inner.settle(reply);
        });
        inner.worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        // A worker that fails to load (or dies without a word) must not leave a step waiting.
        let weak = Rc::downgrade(&inner);
        let on_error = Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
            // Handled here: unhandled, the error would reach this worker's own global scope, whose
            // listener reports this worker as crashed.
            ev.prevent_default();
            let Some(inner) = weak.upgrade() else { return };
            inner.settle(Err(format!("it failed: {}", ev.message())));
        });
        inner.worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        // The handlers live as long as the worker they listen to (they hold only weak handles).
        on_message.forget();
        on_error.forget();
        Some(SecondWorker(inner))
    }

    /// Waits until it is loaded (true), or has failed or taken 30 s (false).
    pub async fn ready(&self) -> bool {
        let start = crate::js::now_ms();
        while !self.0.ready.get() && !self.is_dead() && crate::js::now_ms() - start < 30_000.0 {
            crate::js::sleep(5.0).await;
        }
        self.0.ready.get() && !self.is_dead()
    }

    /// Whether it crashed or refused a task (then the training worker spawns a new one for its next run).
    pub fn is_dead(&self) -> bool {
        self.0.failed.borrow().is_some()
    }

    pub fn send(&self, command: &Command) {
        if let Ok((msg, transfer)) = protocol::encode(command, vec![]) {
            let _ = self.0.worker.post_message_with_transfer(&msg, &transfer);
        }
    }
}

impl Inner {
    /// Ends the task in flight with `reply`; a failure also marks the worker as stopped.
    fn settle(&self, reply: Result<JsValue, String>) {
        if let Err(why) = &reply {
            self.failed.borrow_mut().get_or_insert_with(|| why.clone());
        }
        let pending = self.pending.borrow_mut().take();
        if let Some((resolve, reject)) = pending {
            let _ = match reply {
                Ok(data) => resolve.call1(&JsValue::NULL, &data),
                Err(why) => reject.call1(&JsValue::NULL, &why.into()),
            };
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}

/// The shards of an `Event::Shards` message.
fn outs_of(data: &JsValue) -> Result<Vec<ShardOut>, String> {
    let (event, bulk) = protocol::decode::<Event>(data)?;
    let Event::Shards { counts } = event else { return Err("not a shard reply".into()) };
    if bulk.len() != 3 * counts.len() {
        return Err("a shard reply without its arrays".into());
    }
    Ok(counts
        .iter()
        .enumerate()
        .map(|(i, &count)| ShardOut {
            grads: protocol::floats_of(bulk.get(3 * i)),
            rows: protocol::floats_of(bulk.get(3 * i + 1)),
            target_p: protocol::floats_of(bulk.get(3 * i + 2)),
            count,
        })
        .collect())
}

impl ShardPool for SecondWorker {
    fn start(&self, task: ShardTask) -> Option<ShardFuture> {
        let inner = &self.0;
        if let Some(why) = inner.failed.borrow().clone() {
            return Some(Box::pin(std::future::ready(Err(why))));
        }
        if !inner.ready.get() || inner.pending.borrow().is_some() {
            return None;
        }
        let command = Command::Shard {
            model: Box::new(task.model),
            batch: task.batch,
            from: task.parts.start,
            to: task.parts.end,
        };
        let bulk = vec![protocol::floats(&task.params), protocol::words(&task.tokens), protocol::words(&task.targets)];
        let (msg, transfer) = protocol::encode(&command, bulk).ok()?;
        let promise = Promise::new(&mut |resolve, reject| *inner.pending.borrow_mut() = Some((resolve, reject)));
        if inner.worker.post_message_with_transfer(&msg, &transfer).is_err() {
            inner.pending.borrow_mut().take();
            return None;
        }
        Some(Box::pin(async move {
            let data = JsFuture::from(promise).await.map_err(|e| e.as_string().unwrap_or_else(|| format!("{e:?}")))?;
            outs_of(&data)
        }))
    }
}
