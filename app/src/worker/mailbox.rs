//! What every worker of the page needs around its own work: the page's commands queued as they
//! arrive (the worker takes them one at a time, in order), its events posted back, and its crash
//! (a panic, a wasm trap, a failed allocation) told to the page by listeners that never call into
//! the wasm, which a trap leaves unusable.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use js_sys::{Function, Promise};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

use crate::protocol::{self, Command, Event};

/// A command, its bulk arrays and the page's run epoch.
pub type Message = (Command, Vec<JsValue>, u64);

#[derive(Default)]
struct Inbox {
    queue: VecDeque<Message>,
    wake: Option<Function>,
}

/// The worker's side of its messages.
#[derive(Clone)]
pub struct Mailbox {
    pub scope: DedicatedWorkerGlobalScope,
    inbox: Rc<RefCell<Inbox>>,
}

impl Mailbox {
    /// Starts listening in this worker, with its crashes told to the page as `{crashed: why}`.
    pub fn open() -> Mailbox {
        let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
        for (event, what) in
            [("error", "e.message"), ("unhandledrejection", "e.reason && (e.reason.message || e.reason)")]
        {
            let body = format!("postMessage({{crashed: String({what})}})");
            let listener = Function::new_with_args("e", &body);
            let _ = scope.add_event_listener_with_callback(event, &listener);
        }
        std::panic::set_hook(Box::new(|info| {
            console_error_panic_hook::hook(info);
            let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
            let msg = js_sys::Object::new();
            let _ = js_sys::Reflect::set(&msg, &"crashed".into(), &format!("the engine panicked: {info}").into());
            let _ = scope.post_message(&msg);
        }));
        let inbox = Rc::new(RefCell::new(Inbox::default()));
        let (rx, post_scope) = (inbox.clone(), scope.clone());
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let epoch = protocol::epoch_of(&ev.data());
            match protocol::decode::<Command>(&ev.data()) {
                Ok((cmd, bulk)) => {
                    let wake = {
                        let mut inbox = rx.borrow_mut();
                        inbox.queue.push_back((cmd, bulk, epoch));
                        inbox.wake.take()
                    };
                    if let Some(w) = wake {
                        let _ = w.call0(&JsValue::NULL);
                    }
                }
                Err(e) => {
                    let text = format!("the worker got a message it does not know: {e}");
                    post(&post_scope, &Event::Error { text }, vec![], epoch)
                }
            }
        });
        scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        // The worker lives as long as its listener.
        on_message.forget();
        Mailbox { scope, inbox }
    }

    /// The next command already here, if any.
    pub fn try_next(&self) -> Option<Message> {
        self.inbox.borrow_mut().queue.pop_front()
    }

    /// Whether a command already here is one `f` picks.
    pub fn holds(&self, f: impl Fn(&Command) -> bool) -> bool {
        self.inbox.borrow().queue.iter().any(|(cmd, _, _)| f(cmd))
    }

    /// Waits for the next command.
    pub async fn next(&self) -> Message {
        loop {
            if let Some(m) = self.try_next() {
                return m;
            }
            let inbox = self.inbox.clone();
            let promise = Promise::new(&mut |resolve, _| inbox.borrow_mut().wake = Some(resolve));
            let _ = JsFuture::from(promise).await;
        }
    }

    pub fn post(&self, event: &Event, bulk: Vec<JsValue>, epoch: u64) {
        post(&self.scope, event, bulk, epoch)
    }
}

fn post(scope: &DedicatedWorkerGlobalScope, event: &Event, bulk: Vec<JsValue>, epoch: u64) {
    match protocol::encode_at(event, bulk, epoch) {
        Ok((msg, transfer)) => {
            if let Err(e) = scope.post_message_with_transfer(&msg, &transfer) {
                web_sys::console::error_1(&e);
            }
        }
        Err(e) => web_sys::console::error_1(&e.into()),
    }
}
