//! The page's header: the lab's name and first sentence, where the run computes (the backend's
//! line, choice and warning), the engine's version, the mode switch, and the page's buttons
//! (presenter mode, the guided tour, the keys, the theme).

use leptos::prelude::*;

use crate::lab::{self, InWords, Lab};
use crate::views::presenter::Modes;
use crate::views::{lead, model, theme, tour};

#[component]
pub fn Header(lab: Lab, dark: RwSignal<bool>, modes: Modes, tour_step: RwSignal<Option<usize>>) -> impl IntoView {
    let Modes { presenter, keys_help } = modes;
    view! {
        <header>
            <h1>"Spherewalk"</h1>
            <p class="subtitle" id="lead">
                {move || lead::sentence(&lab.settings.get())}
            </p>
            // The presets on the first screen (the settings below have them too).
            <label for="run-preset" class="experiment-choice">
                "Experiment " {crate::views::settings::preset_picker(lab, "run-preset")}
            </label>
            <p id="backend" class="note" aria-live="polite">
                {move || lab.backend.line.get()}
            </p>
            <label class="backend-choice">
                "Backend "
                <select
                    id="backend-choice"
                    aria-label="where training and reading run"
                    on:change=move |ev| {
                        if let Some(choice) = lab::choice_of(&event_target_value(&ev)) {
                            lab.set_backend(choice);
                        }
                    }
                >
                    {lab::CHOICES
                        .into_iter()
                        .map(|b| {
                            view! {
                                <option value=b.id() selected=move || lab.backend.choice.get() == b>
                                    {b.label()}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            {move || {
                lab.backend.detail
                    .get()
                    .map(|d| {
                        view! {
                            <details id="backend-details" class="note">
                                <summary>"details"</summary>
                                {d}
                            </details>
                        }
                    })
            }}
            <span class="note">"Engine " <code id="version">{engine::VERSION}</code></span>
            <model::ModeSwitch lab=lab />
            <Show when=move || lab.site.offline.get()>
                <span id="offline" class="note" title="this version of the lab is kept in this browser: it opens without a network">
                    "Works offline"
                </span>
            </Show>
            {move || lab.backend_warning().map(|w| view! { <p id="backend-warning" class="error" role="status">{w}</p> })}
            <Show when=move || lab.backend.on_gpu.with(Option::is_some)>
                <p id="gpu-copy" class="note">
                    "On WebGPU the sphere, attention, entropy and Brownian panels are drawn from the weights read back from the GPU at each probe step."
                </p>
            </Show>
            <span class="theme-toggle">
                <button
                    id="presenter"
                    type="button"
                    class="small"
                    aria-pressed=move || presenter.get().to_string()
                    aria-keyshortcuts="P"
                    on:click=move |_| presenter.update(|p| *p = !*p)
                >
                    {move || if presenter.get() { "Leave presenter mode" } else { "Presenter mode" }}
                </button>
                <button id="tour-start" type="button" class="small" on:click=move |_| tour::open(lab, tour_step, 0)>
                    "Guided tour"
                </button>
                <button id="keys" type="button" class="small" aria-keyshortcuts="?" on:click=move |_| keys_help.update(|k| *k = !*k)>
                    "Keys"
                </button>
                <button
                    id="theme"
                    type="button"
                    class="small"
                    aria-label="switch between light and dark theme"
                    on:click=move |_| theme::toggle(dark)
                >
                    {move || if dark.get() { "Light theme" } else { "Dark theme" }}
                </button>
            </span>
        </header>
    }
}
