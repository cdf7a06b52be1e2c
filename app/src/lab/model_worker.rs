//! The page's link to the model worker (`common::reader`): started the first time the page
//! opens a model, told where to read (the Backend choice), and answered through the same events
//! as the training worker. When it crashes the page says so; the next model opened starts a new one.

use std::cell::{Cell, RefCell};

use common::protocol::{self, Command, Event, READER_URL};
use leptos::prelude::*;
use wasm_bindgen::JsValue;

use super::{real_model, Client, Lab};

thread_local! {
    static MODEL: RefCell<Option<Client>> = const { RefCell::new(None) };
    /// The worker crashed: its client (whose listener reported it) is replaced on the next send.
    static DEAD: Cell<bool> = const { Cell::new(false) };
}

/// Sends `cmd` (with its bulk arrays) to the model worker, starting it first if needed.
pub fn send(lab: Lab, cmd: Command, bulk: Vec<JsValue>) {
    if DEAD.replace(false) {
        MODEL.with_borrow_mut(Option::take);
    }
    if MODEL.with_borrow(Option::is_none) {
        match Client::spawn(READER_URL, move |data| on_message(lab, data), move |what| on_crash(lab, what)) {
            Ok(c) => MODEL.with_borrow_mut(|m| *m = Some(c)),
            Err(e) => return real_model::failed(lab, format!("the model worker could not start: {e}")),
        }
        send(lab, Command::SetBackend { choice: lab.backend.choice.get_untracked() }, vec![]);
    }
    let (msg, transfer) = match protocol::encode(&cmd, bulk) {
        Ok(m) => m,
        Err(e) => return real_model::failed(lab, e),
    };
    MODEL.with_borrow_mut(|m| {
        if let Some(m) = m.as_mut() {
            m.deliver(msg, transfer);
        }
    });
}

/// Stops the worker in the middle of what it does: a computation in a worker hears no message
/// until it ends, so a long reading is cancelled by ending its worker. The next send starts anew.
pub fn stop() {
    if let Some(mut m) = MODEL.with_borrow_mut(Option::take) {
        m.stop();
    }
    DEAD.set(false);
}

/// The Backend choice reaches the model worker too, when it runs.
pub fn set_backend(lab: Lab) {
    if MODEL.with_borrow(Option::is_some) && !DEAD.get() {
        send(lab, Command::SetBackend { choice: lab.backend.choice.get_untracked() }, vec![]);
    }
}

fn on_message(lab: Lab, data: JsValue) {
    if let Some(what) = js_sys::Reflect::get(&data, &"crashed".into()).ok().and_then(|c| c.as_string()) {
        return on_crash(lab, what);
    }
    match protocol::decode::<Event>(&data) {
        Ok((Event::Ready { .. }, _)) => MODEL.with_borrow_mut(|m| {
            if let Some(m) = m.as_mut() {
                m.on_ready();
            }
        }),
        Ok((Event::Error { text }, _)) => real_model::failed(lab, text),
        Ok((event, bulk)) => lab.on_event(event, bulk),
        Err(e) => web_sys::console::warn_1(&format!("Spherewalk: {e}").into()),
    }
}

/// The model worker died: the model is gone with it; what waited on it is told, the next model
/// opened starts a new worker.
fn on_crash(lab: Lab, what: String) {
    web_sys::console::error_1(&format!("Spherewalk: the model worker crashed: {what}").into());
    // Its listener is what runs now: the client stays until the next send replaces it.
    MODEL.with_borrow_mut(|m| {
        if let Some(m) = m.as_mut() {
            m.stop();
        }
    });
    DEAD.set(true);
    real_model::on_worker_lost(lab, format!("The model's worker crashed ({what}): open the model again."));
}
