//! A worker of the page and the listeners that keep it talking: its messages go to a handler, an
//! error that ends it to another, and what is sent before its wasm listens waits for it.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// A worker and the listeners that keep it talking.
pub(crate) struct Client {
    worker: web_sys::Worker,
    ready: bool,
    /// Messages sent before the worker's wasm listened (they would be dropped).
    pending: Vec<(JsValue, js_sys::Array)>,
    _on_message: Closure<dyn FnMut(web_sys::MessageEvent)>,
    _on_error: Closure<dyn FnMut(web_sys::ErrorEvent)>,
}

impl Client {
    /// Starts the worker at `url`; its messages go to `on_message`, an error that ends it to `on_crash`.
    pub(crate) fn spawn(
        url: &str,
        mut on_message: impl FnMut(JsValue) + 'static,
        mut on_crash: impl FnMut(String) + 'static,
    ) -> Result<Client, String> {
        let worker = web_sys::Worker::new(url).map_err(|e| common::js::error_text(&e))?;
        let on_message = Closure::<dyn FnMut(web_sys::MessageEvent)>::new(move |ev: web_sys::MessageEvent| {
            on_message(ev.data());
        });
        let on_error = Closure::<dyn FnMut(web_sys::ErrorEvent)>::new(move |ev: web_sys::ErrorEvent| {
            ev.prevent_default();
            on_crash(ev.message());
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(Client { worker, ready: false, pending: Vec::new(), _on_message: on_message, _on_error: on_error })
    }

    /// Posts the message now, or once the worker has said it listens.
    pub(crate) fn deliver(&mut self, msg: JsValue, transfer: js_sys::Array) {
        if self.ready {
            if let Err(e) = self.worker.post_message_with_transfer(&msg, &transfer) {
                web_sys::console::error_1(&e);
            }
        } else {
            self.pending.push((msg, transfer));
        }
    }

    /// The worker listens: what waited goes now.
    pub(crate) fn on_ready(&mut self) {
        self.ready = true;
        for (msg, transfer) in std::mem::take(&mut self.pending) {
            let _ = self.worker.post_message_with_transfer(&msg, &transfer);
        }
    }

    /// Stops the worker (after a crash, its listener stays until a new one replaces it).
    pub(crate) fn stop(&mut self) {
        self.worker.terminate();
        self.ready = false;
    }
}
