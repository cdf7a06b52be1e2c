//! Small bridges to the browser that work both on the page and in the worker (no `window` there).

use std::cell::RefCell;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

/// Milliseconds from the global `performance` clock (page or worker).
pub fn now_ms() -> f64 {
    Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<web_sys::Performance>().ok())
        .map(|p| p.now())
        .unwrap_or(0.0)
}

/// A test's slower machine: busy for `factor - 1` times `spent` milliseconds, as the work that
/// took `spent` would on a machine `factor` times slower (`TestHook::Slowdown`).
pub fn slow_down(spent: f64, factor: f64) {
    let until = now_ms() + spent * (factor - 1.0);
    while now_ms() < until {}
}

/// Waits `ms` milliseconds without blocking.
pub async fn sleep(ms: f64) {
    let promise = Promise::new(&mut |resolve, _| {
        let set_timeout =
            Reflect::get(&js_sys::global(), &"setTimeout".into()).ok().and_then(|f| f.dyn_into::<Function>().ok());
        if let Some(f) = set_timeout {
            let _ = f.call2(&JsValue::NULL, &resolve, &JsValue::from_f64(ms.max(0.0)));
        }
    });
    let _ = JsFuture::from(promise).await;
}

/// The port [`yield_now`] posts to, and the resolver its message calls.
type Channel = (web_sys::MessagePort, std::rc::Rc<RefCell<Option<Function>>>);

thread_local! {
    /// A message channel whose messages resume [`yield_now`]: unlike `setTimeout(0)` it is not
    /// clamped to 4 ms when nested.
    static CHANNEL: RefCell<Option<Channel>> = const { RefCell::new(None) };
}

/// Lets the event loop run (incoming messages are handled) and resumes at once after.
pub async fn yield_now() {
    let (port, slot) = CHANNEL.with_borrow_mut(|c| {
        c.get_or_insert_with(|| {
            let channel = web_sys::MessageChannel::new().expect("MessageChannel exists in workers and pages");
            let slot = std::rc::Rc::new(RefCell::new(None::<Function>));
            let s = slot.clone();
            let on = Closure::<dyn FnMut()>::new(move || {
                if let Some(f) = s.borrow_mut().take() {
                    let _ = f.call0(&JsValue::NULL);
                }
            });
            channel.port1().set_onmessage(Some(on.as_ref().unchecked_ref()));
            // The channel lives as long as the page or worker.
            on.forget();
            (channel.port2(), slot)
        })
        .clone()
    });
    let promise = Promise::new(&mut |resolve, _| {
        *slot.borrow_mut() = Some(resolve);
        let _ = port.post_message(&JsValue::UNDEFINED);
    });
    let _ = JsFuture::from(promise).await;
}

/// A JS error's message, or the value as text.
pub fn error_text(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The text at `url` (relative to the page), fetched with the global `fetch`.
pub async fn fetch_text(url: &str) -> Result<String, String> {
    let global = js_sys::global();
    let fetch = Reflect::get(&global, &"fetch".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("this browser has no fetch")?;
    let promise = fetch.call1(&global, &url.into()).map_err(|e| error_text(&e))?;
    let response = JsFuture::from(Promise::from(promise)).await.map_err(|e| error_text(&e))?;
    if !Reflect::get(&response, &"ok".into()).ok().and_then(|ok| ok.as_bool()).unwrap_or(false) {
        let status = Reflect::get(&response, &"status".into()).ok().and_then(|s| s.as_f64()).unwrap_or(0.0);
        return Err(format!("the server answered {status}"));
    }
    let text = Reflect::get(&response, &"text".into())
        .ok()
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("the response has no text")?;
    let promise = text.call0(&response).map_err(|e| error_text(&e))?;
    let body = JsFuture::from(Promise::from(promise)).await.map_err(|e| error_text(&e))?;
    body.as_string().ok_or_else(|| "the response is not text".into())
}
