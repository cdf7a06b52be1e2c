//! Presenter mode, full screen and the keys a teacher drives the page with (never while typing in
//! a form control): space starts and pauses, the right arrow steps, P presenter mode, F full
//! screen, ? the list of keys, Escape closes it.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::lab::Lab;
use crate::views::settings::from_form_control;

/// The page's two switches the keys flip.
#[derive(Clone, Copy)]
pub struct Modes {
    /// Large type, high contrast, only the run and its picture (`data-presenter` on the root).
    pub presenter: RwSignal<bool>,
    /// The list of keys is open.
    pub keys_help: RwSignal<bool>,
}

/// The switches, kept on the root element, and the keys' listener.
pub fn install(lab: Lab) -> Modes {
    let modes = Modes { presenter: RwSignal::new(false), keys_help: RwSignal::new(false) };
    let Modes { presenter, keys_help } = modes;
    Effect::new(move |_| {
        let on = presenter.get();
        if let Some(root) = root() {
            let _ =
                if on { root.set_attribute("data-presenter", "on") } else { root.remove_attribute("data-presenter") };
        }
        lab.view.layout.update(|n| *n += 1);
    });
    // The preset on the root, so presenter mode keeps the panel the preset is about.
    Effect::new(move |_| {
        let preset = lab.settings.with(|s| s.preset.clone());
        if let Some(root) = root() {
            let _ = root.set_attribute("data-preset", &preset);
        }
    });
    let resized = window_event_listener(leptos::ev::resize, move |_| lab.view.layout.update(|n| *n += 1));
    on_cleanup(move || resized.remove());
    let keys = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
        if ev.repeat() || ev.ctrl_key() || ev.meta_key() || ev.alt_key() || from_form_control(&ev) {
            return;
        }
        match ev.key().as_str() {
            " " => lab.toggle(),
            "ArrowRight" if ev.target().is_some_and(|t| t.dyn_ref::<web_sys::HtmlCanvasElement>().is_none()) => {
                lab.step_once()
            }
            "p" | "P" => presenter.update(|p| *p = !*p),
            "f" | "F" => toggle_fullscreen(),
            "?" => keys_help.update(|k| *k = !*k),
            "Escape" => keys_help.set(false),
            _ => return,
        }
        ev.prevent_default();
    });
    on_cleanup(move || keys.remove());
    modes
}

fn root() -> Option<web_sys::Element> {
    web_sys::window()?.document()?.document_element()
}

/// Full screen on, or off when it is on (a browser may refuse it: then nothing happens).
fn toggle_fullscreen() {
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else { return };
    if doc.fullscreen_element().is_some() {
        doc.exit_fullscreen();
    } else if let Some(root) = doc.document_element() {
        let _ = root.request_fullscreen();
    }
}

/// The list of keys (`?`).
#[component]
pub fn KeysHelp(modes: Modes) -> impl IntoView {
    let keys_help = modes.keys_help;
    view! {
        <Show when=move || keys_help.get()>
            <div id="keys-help" class="banner" role="dialog" aria-label="keyboard keys">
                <strong>"Keys"</strong>
                <ul>
                    <li><kbd>"Space"</kbd> " start, pause and resume"</li>
                    <li><kbd>"→"</kbd> " one step (arrows on a slider move the slider; on the sphere they turn it)"</li>
                    <li><kbd>"P"</kbd> " presenter mode: large type, high contrast, only the run and its picture"</li>
                    <li><kbd>"F"</kbd> " full screen"</li>
                    <li><kbd>"?"</kbd> " this list; " <kbd>"Esc"</kbd> " closes it"</li>
                </ul>
                <button type="button" class="small" on:click=move |_| keys_help.set(false)>"Close"</button>
            </div>
        </Show>
    }
}
