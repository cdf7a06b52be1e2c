//! The theme: the visitor's choice (kept in localStorage) or else the system's light/dark setting.
//! The page's colours follow `data-theme` on the root element; the drawings redraw in matching colours.

use leptos::prelude::*;
use wasm_bindgen::prelude::*;

const THEME_KEY: &str = "spherewalk-theme";

fn stored_theme() -> Option<String> {
    web_sys::window()?.local_storage().ok()??.get_item(THEME_KEY).ok()?
}

/// Whether the page is dark, kept on the root's `data-theme` and following the system's setting
/// until the visitor picks one.
pub fn dark_mode_signal() -> RwSignal<bool> {
    let query = web_sys::window().and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten());
    let chosen = stored_theme();
    let dark = RwSignal::new(match chosen.as_deref() {
        Some("dark") => true,
        Some("light") => false,
        _ => query.as_ref().is_some_and(|q| q.matches()),
    });
    Effect::new(move |_| {
        let theme = if dark.get() { "dark" } else { "light" };
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ = root.set_attribute("data-theme", theme);
        }
    });
    if let Some(query) = query {
        let on_change =
            Closure::<dyn FnMut(web_sys::MediaQueryListEvent)>::new(move |e: web_sys::MediaQueryListEvent| {
                if stored_theme().is_none() {
                    dark.set(e.matches());
                }
            });
        // The page lives as long as the listener: leaking the closure is intended.
        if query.add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref()).is_ok() {
            on_change.forget();
        }
    }
    dark
}

/// The visitor's pick, the other theme, kept for the next visit.
pub fn toggle(dark: RwSignal<bool>) {
    let next = !dark.get_untracked();
    dark.set(next);
    if let Some(store) = web_sys::window().and_then(|w| w.local_storage().ok().flatten()) {
        let _ = store.set_item(THEME_KEY, if next { "dark" } else { "light" });
    }
}
