//! Spherewalk's browser lab.
//!
//! A Leptos (CSR) page that trains a small transformer on the CPU inside the page and shows what
//! happens: the loss, the tokens on the LayerNorm sphere, attention as a Markov chain, attention
//! entropy over training, and the second-order optimizers' diagnostics.
//!
//! Modules: `lab` (state and the chunked training loop), `settings` (presets and free settings),
//! `url_state` (the experiment in the address), `sphere_view`, `heatmap`, `panels` and `charts`
//! (the drawings), `export` (the run as JSON).
//!
//! Stable element ids, read by the browser test (`e2e/page.test.mjs`): `#version`, `#backend`,
//! `#start`, `#step-once`, `#reset`, `#export`, `#status`, `#step`, `#total-steps`, `#train-loss`,
//! `#val-loss`, `#speed`, `#error`, `#url-error`, `#preset` and the settings inputs, `#loss-chart`
//! (`data-train-losses`, `data-val-losses`: plotted values, comma-separated), `#sphere`
//! (`data-points`), `#attention`, `#entropy-chart`, `#diagnostics`, and the panels `#panel-*`.

mod charts;
mod export;
mod heatmap;
mod lab;
mod panels;
mod settings;
mod sphere_view;
mod url_state;

use leptos::prelude::*;
use wasm_bindgen::prelude::*;

use crate::heatmap::AttentionPanel;
use crate::lab::{Lab, Phase};
use crate::panels::{DiagnosticsPanel, EntropyPanel, LossPanel};
use crate::settings::SettingsPanel;
use crate::sphere_view::SphereView;

/// A signal that follows the system's light/dark setting, so the drawings redraw in the matching colours.
fn dark_mode_signal() -> RwSignal<bool> {
    let query = web_sys::window().and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten());
    let dark = RwSignal::new(query.as_ref().is_some_and(|q| q.matches()));
    if let Some(query) = query {
        let on_change =
            Closure::<dyn FnMut(web_sys::MediaQueryListEvent)>::new(move |e: web_sys::MediaQueryListEvent| {
                dark.set(e.matches());
            });
        // The page lives as long as the listener: leaking the closure is intended.
        if query.add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref()).is_ok() {
            on_change.forget();
        }
    }
    dark
}

fn fmt_loss(v: Option<f32>) -> String {
    v.map(|l| format!("{l:.4}")).unwrap_or_else(|| "–".to_string())
}

#[component]
fn App() -> impl IntoView {
    let (initial, url_problem) = url_state::read();
    if let Some(p) = &url_problem {
        web_sys::console::warn_1(&format!("Spherewalk: {p}").into());
    }
    let lab = Lab::new(initial);
    let url_error = RwSignal::new(url_problem);
    let url_note = RwSignal::new(false);
    let export_json = RwSignal::new(String::new());
    let dark = dark_mode_signal();

    // The address follows the settings, so a copied link reproduces the experiment.
    Effect::new(move |_| {
        let dropped = lab.settings.with(url_state::write);
        url_note.set(dropped);
    });

    // A hash typed or pasted into the address bar of the open page applies at once.
    let hash = window_event_listener(leptos::ev::hashchange, move |_| {
        let (settings, problem) = url_state::read();
        url_error.set(problem);
        lab.settings.set(settings);
    });
    on_cleanup(move || hash.remove());

    // Space starts and pauses, except while typing in a form control.
    let keys = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
        if ev.key() == " " && !ev.repeat() && !settings::from_form_control(&ev) {
            ev.prevent_default();
            lab.toggle();
        }
    });
    on_cleanup(move || keys.remove());

    let last_train = move || lab.train.with(|t| t.last().map(|p| p.1));
    let last_val = move || lab.val.with(|v| v.last().map(|p| p.1));
    let step = move || lab.train.with(|t| t.last().map(|p| p.0).unwrap_or(0));
    let pending = move || {
        let running = lab.run_settings.get();
        running.is_some() && running.as_ref() != Some(&lab.settings.get())
    };
    let on_export = move |_| {
        let json = export_json_text(lab);
        export_json.set(json.clone());
        if let Err(e) = export::download("spherewalk-run.json", &json, "application/json") {
            lab.error.set(Some(format!("export failed: {e}")));
        }
    };

    view! {
        <main class="lab">
            <header>
                <h1>"Spherewalk"</h1>
                <p class="subtitle">
                    "A small transformer, trained in your browser. Engine "
                    <code id="version">{engine::VERSION}</code>
                </p>
                <p id="backend" class="note">"Backend: CPU (WebGPU backend not built yet)"</p>
            </header>

            <Show when=move || url_error.with(Option::is_some)>
                <p id="url-error" class="error" role="alert">
                    {move || url_error.get().unwrap_or_default()}
                    " "
                    <button type="button" class="link" on:click=move |_| url_error.set(None)>"Dismiss"</button>
                </p>
            </Show>
            <Show when=move || url_note.get()>
                <p id="url-note" class="note">
                    "Your text is too long for the link: a copied link keeps the settings but not the text."
                </p>
            </Show>

            <SettingsPanel lab=lab />

            <section class="controls" aria-label="run controls">
                <button
                    id="start"
                    type="button"
                    class:running=move || lab.phase.get() == Phase::Running
                    aria-keyshortcuts="Space"
                    on:click=move |_| lab.toggle()
                >
                    {move || lab.phase.get().button_text()}
                </button>
                <button
                    id="step-once"
                    type="button"
                    disabled=move || lab.phase.get() == Phase::Running
                    on:click=move |_| lab.step_once()
                >
                    "Step"
                </button>
                <button id="reset" type="button" on:click=move |_| lab.reset()>"Reset"</button>
                <button id="export" type="button" on:click=on_export>"Export JSON"</button>
                <span class="experiment">
                    {move || lab.total_steps.get()} " steps, validation every " {move || lab.eval_every.get()}
                    " steps"
                </span>
                <Show when=pending>
                    <span id="pending" class="note">"settings changed: Reset or Restart to apply them"</span>
                </Show>
            </section>

            <dl class="stats" aria-live="off">
                <div>
                    <dt>"status"</dt>
                    <dd id="status" data-phase=move || lab.phase.get().status_text()>
                        {move || lab.phase.get().status_text()}
                    </dd>
                </div>
                <div>
                    <dt>"step"</dt>
                    <dd>
                        <span id="step">{step}</span>
                        " / "
                        <span id="total-steps">{move || lab.total_steps.get()}</span>
                    </dd>
                </div>
                <div>
                    <dt>"train loss"</dt>
                    <dd id="train-loss">{move || fmt_loss(last_train())}</dd>
                </div>
                <div>
                    <dt>"validation loss"</dt>
                    <dd id="val-loss">{move || fmt_loss(last_val())}</dd>
                </div>
                <div>
                    <dt>"time per step"</dt>
                    <dd id="speed">
                        {move || lab.ms_per_step.get().map(|ms| format!("{ms:.1} ms")).unwrap_or_else(|| "–".to_string())}
                    </dd>
                </div>
            </dl>

            <Show when=move || lab.error.with(Option::is_some)>
                <p id="error" class="error" role="alert">
                    {move || lab.error.get().unwrap_or_default()}
                </p>
            </Show>

            <LossPanel lab=lab dark=dark />
            <div class="pair">
                <SphereView lab=lab dark=dark />
                <AttentionPanel lab=lab dark=dark />
            </div>
            <EntropyPanel lab=lab dark=dark />
            <DiagnosticsPanel lab=lab dark=dark />
            <output id="export-json" hidden data-json=move || export_json.get()></output>
        </main>
    }
}

fn export_json_text(lab: Lab) -> String {
    export::run_json(lab)
}

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}
