//! The page as a web site: the engine on its way (the worker's loader counts its download), the
//! copy kept for offline use and a new build waiting (both from `public/boot.js`, which registers
//! the service worker before the wasm runs).

use js_sys::Reflect;
use leptos::prelude::*;
use wasm_bindgen::prelude::*;

/// The training worker, started through the loader that reports its download.
pub const TRAINING_WORKER_URL: &str = "./worker_loader.js?progress";

#[derive(Clone, Copy)]
pub struct Site {
    /// The engine's download while it is on its way: (bytes arrived, bytes in all; 0 when the
    /// host does not say); None once the worker listens.
    pub loading: RwSignal<Option<(f64, f64)>>,
    /// This build is kept by the service worker: the page opens with the network off.
    pub offline: RwSignal<bool>,
    /// A new build of the lab is installed and waits for the visitor's reload.
    pub update: RwSignal<bool>,
}

impl Site {
    pub fn new() -> Self {
        let site = Site {
            loading: RwSignal::new(Some((0.0, 0.0))),
            offline: RwSignal::new(false),
            update: RwSignal::new(false),
        };
        // boot.js may have said so before the page's wasm ran: ask, then listen.
        let boot = || web_sys::window().and_then(|w| Reflect::get(&w, &"spherewalkBoot".into()).ok());
        let flag = move |name: &str| boot().and_then(|b| Reflect::get(&b, &name.into()).ok()).and_then(|v| v.as_bool());
        let read = move || {
            site.offline.set(flag("offline").unwrap_or(false));
            site.update.set(flag("updateReady").unwrap_or(false));
        };
        read();
        for event in ["spherewalk-offline", "spherewalk-update"] {
            let on = Closure::<dyn FnMut()>::new(read);
            if let Some(w) = web_sys::window() {
                let _ = w.add_event_listener_with_callback(event, on.as_ref().unchecked_ref());
            }
            // The listener lives as long as the page.
            on.forget();
        }
        site
    }

    /// The worker's loader said how much has arrived.
    pub fn on_loading(self, data: &JsValue) -> bool {
        let Some(l) = Reflect::get(data, &"loading".into()).ok().filter(|l| l.is_object()) else { return false };
        let num = |k: &str| Reflect::get(&l, &k.into()).ok().and_then(|v| v.as_f64()).unwrap_or(0.0);
        if self.loading.get_untracked().is_some() {
            self.loading.set(Some((num("got"), num("total"))));
        }
        true
    }

    /// "2.1 of 3.9 MB" (or "2.1 MB" when the total is not known).
    pub fn loaded_text(self) -> Option<String> {
        let (got, total) = self.loading.get()?;
        let mb = |b: f64| format!("{:.1}", b / 1e6);
        Some(if total > 0.0 { format!("{} of {} MB", mb(got), mb(total)) } else { format!("{} MB", mb(got)) })
    }

    /// Takes the new build: the service worker replaces this one and the page reloads.
    pub fn take_update(self) {
        let take = web_sys::window()
            .and_then(|w| Reflect::get(&w, &"spherewalkBoot".into()).ok())
            .and_then(|b| Reflect::get(&b, &"update".into()).ok())
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok());
        match take {
            Some(f) => {
                let _ = f.call0(&JsValue::NULL);
            }
            None => {
                if let Some(w) = web_sys::window() {
                    let _ = w.location().reload();
                }
            }
        }
    }
}

impl Default for Site {
    fn default() -> Self {
        Self::new()
    }
}
