//! Spherewalk's browser lab.
//!
//! A Leptos (CSR) page whose Web Worker trains a small transformer (on the CPU or WebGPU) while the
//! page shows what happens: the loss, the tokens on the LayerNorm sphere, attention as a Markov
//! chain, attention entropy over training, whether the tokens move like Brownian motion, and the
//! second-order optimizers' diagnostics. The page is a view: the worker (`spherewalk::worker`, the
//! engine's session) computes every number.
//!
//! Two rooms, both the page's (the worker's side is the library, `spherewalk`):
//! - `lab`: the page's state and its link to the worker: the run's signals and commands (`race` a
//!   race's rivals, `writing` what the model writes, `real_model` the second mode, a GPT-2 opened
//!   from its files), and what lives beside the state: `url_state` (the experiment in the address),
//!   `script_api` (`window.spherewalk`), `estimate` (how long a run takes), `export` (downloads).
//! - `views`: what the page draws, one folder or file a panel family: `sphere` (the sphere panel,
//!   its WebGL2 ball, 2-D drawing and replay clock), `charts` (the chart panels, each made of one
//!   `Chart`), `heatmap` (attention as a Markov chain), `writing`, `model` (the real model's panel),
//!   `settings`, `tour`, `lead` (the first screen's words), and what they share: `panel` (a panel's
//!   frame, explanation and verdicts), `canvas`, `canvas_text` and `token_style`.
//!
//! Stable element ids, read by the browser tests (`e2e/*.test.mjs`): `#version`, `#backend`,
//! `#theme`, `#start`, `#step-once`, `#reset`, `#export`, `#status`, `#step`, `#total-steps`,
//! `#train-loss`, `#val-loss`, `#speed`, `#error`, `#notice`, `#url-error`, `#pending`, `#saved`
//! (`data-step`: the step last saved to IndexedDB), `#saved-run`, `#resume-saved`, `#discard-saved`,
//! `#download-model`, `#download-config`, `#model-input`, `#model-note`, `#model-error`, `#preset`
//! and the settings inputs, `#loss-chart` (`data-train-losses`, `data-val-losses`: plotted values,
//! comma-separated), `#sphere` (`data-points`, `data-ghosts`), `#ghosts`, `#attention`,
//! `#sphere` also has `data-labels`, `data-arcs`, `data-arc-row` (the selected token's row of P^k),
//! `data-positions`, `data-screen`, `data-shown-step`, `data-renderer`; `#sphere-token`,
//! `#sphere-play`, `#time`, `#attention` (`data-grid`, `data-hover-p`), `#attention-hover`,
//! `#entropy-chart`, `#diagnostics`, `#brownian-d`, `#brownian-r2`, `#brownian-ks` (`data-value`),
//! `#brownian-note`, `#brownian-chart`, `#writing-sample` (`data-step`, `data-text`; each written
//! character a `.tok` with `data-p` and `data-top` "text:p|..."), `#writing-prompt`,
//! `#writing-temperature`, `#writing-top-k`, `#write-more`, `#writing-more`, `#writing-history`,
//! `#next-char` (`.pred` spans, as `.tok`), `#overfitting`, `#png-<canvas id>` (PNG download of each figure), and the
//! panels `#panel-*`, `#crashed` and `#restart-worker`. `window.spherewalk` is the scripting API
//! (`script_api`; its `bench` times the engine alone in a worker).

mod lab;
mod views;

use leptos::prelude::*;
use wasm_bindgen::prelude::*;

use crate::lab::{export, script_api, url_state, Download, Lab};
use crate::views::charts::{BrownianPanel, DiagnosticsPanel, EntropyPanel, LossPanel};
use crate::views::heatmap::AttentionPanel;
use crate::views::run_bar::RunBar;
use crate::views::settings::{self as settings_panel, SettingsPanel};
use crate::views::sphere::SphereView;
use crate::views::writing::WritingPanel;
use crate::views::{lead, tour};

const THEME_KEY: &str = "spherewalk-theme";

fn stored_theme() -> Option<String> {
    web_sys::window()?.local_storage().ok()??.get_item(THEME_KEY).ok()?
}

/// The theme: the visitor's choice (kept in localStorage) or else the system's light/dark setting.
/// The page's colours follow `data-theme` on the root element; the drawings redraw in matching colours.
fn dark_mode_signal() -> RwSignal<bool> {
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

/// What storage holds of the run: the last save, or why a save failed (then what is still kept).
fn saved_line(step: Option<usize>, failed: Option<String>) -> String {
    match (step, failed) {
        (_, None) => step.map(|s| format!("saved in this browser at step {s}")).unwrap_or_default(),
        (Some(s), Some(why)) => format!("{why}; the save of step {s} is kept"),
        (None, Some(why)) => why,
    }
}

#[component]
fn App() -> impl IntoView {
    let mut link = url_state::read();
    // A tour step: its experiment, unless the link gives one of its own.
    let tour_step = RwSignal::new(None::<usize>);
    match link.tour.clone() {
        Some(Ok(n)) if (1..=tour::STEPS.len()).contains(&n) => {
            tour_step.set(Some(n - 1));
            if !url_state::has_experiment(&url_state::hash()) {
                link.settings = spherewalk::settings::Settings::preset(tour::STEPS[n - 1].preset).unwrap_or_default();
            }
        }
        Some(n) => {
            let n = n.map_or_else(|text| format!("{text:?}"), |n| n.to_string());
            link.problem = Some(format!("the link opens tour step {n}; the tour has steps 1 to {}", tour::STEPS.len()))
        }
        None => {}
    }
    if let Some(p) = &link.problem {
        web_sys::console::warn_1(&format!("Spherewalk: {p}").into());
    }
    let hide = StoredValue::new(link.hide.clone());
    let embed = StoredValue::new(link.embed.clone());
    if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
        let _ = root.set_attribute("data-hide", &link.hide.join(" "));
        if let Some(panel) = &link.embed {
            let _ = root.set_attribute("data-embed", panel);
        }
    }
    let lab = Lab::new(link.settings);
    lab.link_errors.set(link.bad);
    // The English text is fetched as soon as a preset or the data picker asks for it.
    Effect::new(move |_| {
        if lab.settings.with(|s| s.data == "austen") {
            leptos::task::spawn_local(lab.load_corpus());
        }
    });
    let url_error = RwSignal::new(link.problem);
    // What the address keeps beside the experiment: the tour step and the hidden parts.
    let extra = move || {
        let mut e = tour_step.get_untracked().map(|n| format!("&tour={}", n + 1)).unwrap_or_default();
        hide.with_value(|h| {
            if !h.is_empty() {
                e.push_str(&format!("&hide={}", h.join(",")));
            }
        });
        embed.with_value(|p| {
            if let Some(p) = p {
                e.push_str(&format!("&embed={p}"));
            }
        });
        e
    };
    let url_note = RwSignal::new(false);
    let export_json = RwSignal::new(String::new());
    let dark = dark_mode_signal();

    // The address follows the settings the visitor changes, so a copied link reproduces the
    // experiment; settings that came from the address itself leave it as it is.
    let from_link = StoredValue::new(true);
    Effect::new(move |_| {
        let settings = lab.settings.get();
        if from_link.get_value() {
            from_link.set_value(false);
            return;
        }
        url_note.set(url_state::write(&settings, &extra()));
    });
    // Moving through the tour writes its step into the address (a teacher links to it).
    Effect::new(move |prev: Option<Option<usize>>| {
        let now = tour_step.get();
        if prev.is_some_and(|p| p != now) {
            match now {
                Some(_) => url_state::replace(&format!("#{}", extra().trim_start_matches('&'))),
                None => {
                    url_state::write(&lab.settings.get_untracked(), &extra());
                }
            }
        }
        if let Some(n) = now {
            // After the page is drawn: the step's panel in view.
            let panel = tour::STEPS[n].panel;
            request_animation_frame(move || tour::focus(panel));
        }
        now
    });

    // A hash typed or pasted into the address bar of the open page applies at once.
    let hash = window_event_listener(leptos::ev::hashchange, move |_| {
        let link = url_state::read();
        url_error.set(link.problem);
        from_link.set_value(true);
        lab.replace_settings(link.settings);
        lab.link_errors.set(link.bad);
    });
    on_cleanup(move || hash.remove());

    let presenter = RwSignal::new(false);
    let keys_help = RwSignal::new(false);
    Effect::new(move |_| {
        let on = presenter.get();
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ =
                if on { root.set_attribute("data-presenter", "on") } else { root.remove_attribute("data-presenter") };
        }
        lab.layout.update(|n| *n += 1);
    });
    // The preset on the root, so presenter mode keeps the panel the preset is about.
    Effect::new(move |_| {
        let preset = lab.settings.with(|s| s.preset.clone());
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ = root.set_attribute("data-preset", &preset);
        }
    });
    let resized = window_event_listener(leptos::ev::resize, move |_| lab.layout.update(|n| *n += 1));
    on_cleanup(move || resized.remove());
    // The keys (never while typing in a form control): space starts and pauses, the right arrow
    // steps, P presenter mode, F full screen, ? the list of keys, Escape closes it.
    let keys = window_event_listener(leptos::ev::keydown, move |ev: web_sys::KeyboardEvent| {
        if ev.repeat() || ev.ctrl_key() || ev.meta_key() || ev.alt_key() || settings_panel::from_form_control(&ev) {
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

    let model_msg = lab.model_msg;
    let on_download_model = move |_| lab.ask_download(Download::Model);
    let on_download_config = move |_| lab.ask_download(Download::Config);
    let on_model_file = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(list) = input.files() else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        input.set_value("");
        leptos::task::spawn_local(async move {
            let mut read = Vec::new();
            for f in files {
                if f.size() > 256.0 * 1024.0 * 1024.0 {
                    model_msg.set(Some(Err(format!("{} is over 256 MB", f.name()))));
                    return;
                }
                match wasm_bindgen_futures::JsFuture::from(f.array_buffer()).await {
                    Ok(buf) => read.push((f.name(), js_sys::Uint8Array::new(&buf).to_vec())),
                    Err(_) => {
                        model_msg.set(Some(Err(format!("could not read {}", f.name()))));
                        return;
                    }
                }
            }
            model_msg.set(None);
            lab.load_model(read);
        });
    };
    let toggle_theme = move |_| {
        let next = !dark.get_untracked();
        dark.set(next);
        if let Some(store) = web_sys::window().and_then(|w| w.local_storage().ok().flatten()) {
            let _ = store.set_item(THEME_KEY, if next { "dark" } else { "light" });
        }
    };
    script_api::install(lab);
    let on_export = move |_| {
        let json = lab.run_json();
        export_json.set(json.clone());
        if let Err(e) = export::download("spherewalk-run.json", &json, "application/json") {
            lab.error.set(Some(format!("export failed: {e}")));
        }
    };

    view! {
        <main class="lab" class:model-mode=move || lab.real.mode.get() == lab::real_model::Mode::Model>
            <header>
                <h1>"Spherewalk"</h1>
                <p class="subtitle" id="lead">
                    {move || lead::sentence(&lab.settings.get())}
                </p>
                <p id="backend" class="note" aria-live="polite">
                    {move || lab.backend_line.get()}
                </p>
                <label class="backend-choice">
                    "Backend "
                    <select
                        id="backend-choice"
                        aria-label="where training and reading run"
                        on:change=move |ev| {
                            if let Some(choice) = lab::BackendChoice::from_id(&event_target_value(&ev)) {
                                lab.set_backend(choice);
                            }
                        }
                    >
                        {lab::BackendChoice::ALL
                            .into_iter()
                            .map(|b| {
                                view! {
                                    <option value=b.id() selected=move || lab.backend.get() == b>
                                        {b.label()}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                {move || {
                    lab.backend_detail
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
                <Show when=move || lab.site.offline.get()>
                    <span id="offline" class="note" title="this version of the lab is kept in this browser: it opens without a network">
                        "Works offline"
                    </span>
                </Show>
                <views::model::ModeSwitch lab=lab />
                {move || lab.backend_warning().map(|w| view! { <p id="backend-warning" class="error" role="status">{w}</p> })}
                <Show when=move || lab.on_gpu.with(Option::is_some)>
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
                        on:click=toggle_theme
                    >
                        {move || if dark.get() { "Light theme" } else { "Dark theme" }}
                    </button>
                </span>
            </header>
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

            <Show when=move || lab.site.update.get()>
                <p id="update" class="note banner" role="status">
                    "A new version of the lab is ready. "
                    <button id="take-update" type="button" on:click=move |_| lab.site.take_update()>
                        "Reload"
                    </button>
                </p>
            </Show>
            <tour::TourPanel lab=lab step=tour_step />
            <Show when=move || lab.crashed.with(Option::is_some)>
                <div id="crashed" class="error banner" role="alert">
                    {move || lab.crashed.get().unwrap_or_default()}
                    " "
                    <button id="restart-worker" type="button" on:click=move |_| lab.restart_and_resume()>
                        "Restart and resume"
                    </button>
                </div>
            </Show>
            <Show when=move || lab.saved.with(Option::is_some)>
                <div id="saved-run" class="note banner" role="status">
                    {move || {
                        lab.saved
                            .get()
                            .map(|(step, total, what)| {
                                format!("A saved run is waiting: step {step} of {total} ({what}). ")
                            })
                            .unwrap_or_default()
                    }}
                    <button id="resume-saved" type="button" on:click=move |_| lab.resume_saved()>
                        "Resume saved run"
                    </button>
                    " "
                    <button id="discard-saved" type="button" class="link" on:click=move |_| lab.discard_saved()>
                        "Discard"
                    </button>
                </div>
            </Show>

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


            <RunBar lab=lab />
            <Show when=move || lab.notice.with(Option::is_some)>
                <p id="notice" class="note">{move || lab.notice.get().unwrap_or_default()}</p>
            </Show>
            <Show when=move || lab.error.with(Option::is_some)>
                <p id="error" class="error" role="alert">
                    {move || lab.error.get().unwrap_or_default()}
                </p>
            </Show>

            // The picture first: at 1280x800 the sphere, the loss and the attention share the first screen.
            <div class="stage">
                <SphereView lab=lab dark=dark />
                <Show when=move || lab.real.mode.get() == lab::real_model::Mode::Model>
                    <views::model::ModelPanel lab=lab />
                </Show>
                <div class="stage-column">
                    <LossPanel lab=lab dark=dark />
                    <WritingPanel lab=lab />
                </div>
                <AttentionPanel lab=lab dark=dark />
            </div>
            <SettingsPanel lab=lab />
            <section class="controls model" aria-label="the model as a file">
                <button id="export" type="button" on:click=on_export>"Export JSON"</button>
                <span
                    id="saved"
                    class="note"
                    class:save-failed=move || lab.save_failed.with(Option::is_some)
                    data-step=move || lab.saved_step.get().map(|s| s.to_string())
                >
                    {move || saved_line(lab.saved_step.get(), lab.save_failed.get())}
                </span>
                <button id="download-model" type="button" on:click=on_download_model>"Download model"</button>
                <button id="download-config" type="button" on:click=on_download_config>"Download config"</button>
                <label for="model-input">
                    "Upload model (.safetensors, with its config.json unless it came from this page) "
                    <input id="model-input" type="file" multiple accept=".safetensors,.json" on:change=on_model_file />
                </label>
                {move || match model_msg.get() {
                    Some(Ok(note)) => view! { <p id="model-note" class="note">{note}</p> }.into_any(),
                    Some(Err(e)) => view! { <p id="model-error" class="error" role="alert">{e}</p> }.into_any(),
                    None => ().into_any(),
                }}
            </section>
            <BrownianPanel lab=lab dark=dark />
            <EntropyPanel lab=lab dark=dark />
            <DiagnosticsPanel lab=lab dark=dark />
            <output id="export-json" hidden data-json=move || export_json.get()></output>
            <output id="summary" hidden data-json=move || lab.summary.get().unwrap_or_default()></output>
        </main>
    }
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

fn main() {
    console_error_panic_hook::set_once();
    // index.html's "Loading Spherewalk…" gives way to the page.
    if let Some(boot) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id("boot")) {
        boot.remove();
    }
    leptos::mount::mount_to_body(App);
}
