//! The panel that edits the settings (`common::settings`).

use common::settings::{self, Settings, PRESETS};
use engine::config::{DataSpec, OptimizerConfig};
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;

use crate::lab::Lab;
use crate::views::panel::Panel;

/// Sets one field from the form's text, or says what is wrong with the text.
type Setter = fn(&mut Settings, &str) -> Result<(), String>;

/// A labelled number input bound to one field of the settings. A bad entry keeps the visitor's text,
/// is marked in place with its message, and changes nothing until it is fixed.
fn number_field(
    lab: Lab,
    id: &'static str,
    label: &'static str,
    get: fn(&Settings) -> String,
    set: Setter,
) -> impl IntoView {
    let bad = RwSignal::new(None::<(String, String)>);
    // A value of the link that could not be used is marked here too (the JSON names use `_`);
    // settings replaced whole (a preset, a tour step, a link) clear what the visitor typed.
    Effect::new(move |seen: Option<u64>| {
        let replaced = lab.replaced.get();
        let key = id.replace('-', "_");
        let linked = lab.link_errors.with(|e| e.iter().find(|(k, _, _)| *k == key).cloned());
        if let Some((_, value, why)) = linked {
            bad.set(Some((value.trim_matches('"').to_string(), format!("from the link: {why}"))));
        } else if seen.is_some_and(|n| n != replaced) {
            bad.set(None);
        }
        replaced
    });
    let error_id = format!("{id}-error");
    view! {
        <label for=id class:invalid=move || bad.with(Option::is_some)>
            {label}
            <input
                id=id
                type="text"
                inputmode="decimal"
                aria-invalid=move || bad.with(Option::is_some).to_string()
                aria-describedby=error_id.clone()
                prop:value=move || bad.with(|b| b.as_ref().map(|b| b.0.clone())).unwrap_or_else(|| lab.settings.with(get))
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    let mut next = lab.settings.get_untracked();
                    match set(&mut next, &v) {
                        Ok(()) => {
                            bad.set(None);
                            next.preset = "custom".into();
                            lab.settings.set(next);
                        }
                        Err(message) => bad.set(Some((v, message))),
                    }
                }
            />
            <span id=error_id class="field-error" role="alert">
                {move || bad.with(|b| b.as_ref().map(|b| b.1.clone()).unwrap_or_default())}
            </span>
        </label>
    }
}

/// A number field bound to `settings.$field`, read from the form's text by `$parse`.
macro_rules! number {
    ($lab:expr, $id:literal, $label:literal, $field:ident, $parse:expr) => {
        number_field(
            $lab,
            $id,
            $label,
            |s| s.$field.to_string(),
            |s, v| {
                s.$field = $parse(v)?;
                Ok(())
            },
        )
    };
}

/// The values and texts of a choice whose texts are its values.
fn options(values: &[&str]) -> Vec<(String, String)> {
    values.iter().map(|v| (v.to_string(), v.to_string())).collect()
}

/// A select field bound to one setting: choosing makes the experiment custom.
fn choice_field(
    lab: Lab,
    id: &'static str,
    label: &'static str,
    get: fn(&Settings) -> String,
    set: fn(&mut Settings, String),
    choices: Vec<(String, String)>,
) -> impl IntoView {
    view! {
        <label for=id>
            {label}
            <select
                id=id
                prop:value=move || lab.settings.with(get)
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    lab.settings.update(|s| {
                        set(s, v);
                        s.preset = "custom".into();
                    });
                }
            >
                {choices.into_iter().map(|(value, text)| view! { <option value=value>{text}</option> }).collect_view()}
            </select>
        </label>
    }
}

fn count(label: &'static str, max: usize) -> impl Fn(&str) -> Result<usize, String> {
    move |v| settings::parse_count(label, v, max)
}

/// Reads an uploaded file: it must be non-empty UTF-8 text without NUL bytes.
async fn read_text_file(file: web_sys::File) -> Result<String, String> {
    let name = file.name();
    if file.size() == 0.0 {
        return Err(format!("{name} is empty; upload a .txt file with at least a few sentences"));
    }
    // In bytes: rounded to MB, a file just over the limit would read as "4.0 MB, up to 4 MB".
    const LIMIT: f64 = 4.0 * 1024.0 * 1024.0;
    if file.size() > LIMIT {
        return Err(format!("{name} is {} bytes; the lab takes text files up to 4 MiB ({LIMIT} bytes)", file.size()));
    }
    let buffer = wasm_bindgen_futures::JsFuture::from(file.array_buffer())
        .await
        .map_err(|_| format!("could not read {name}"))?;
    let bytes = js_sys::Uint8Array::new(&buffer).to_vec();
    if bytes.contains(&0) {
        return Err(format!("{name} looks like a binary file (it has NUL bytes); upload plain UTF-8 text"));
    }
    String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8 text; upload plain UTF-8 text"))
}

/// The presets as a `<select>` (the settings' and the run bar's, the first screen's: both set the
/// same settings).
pub fn preset_picker(lab: Lab, id: &'static str) -> impl IntoView {
    view! {
        <select
            id=id
            prop:value=move || lab.settings.with(|s| s.preset.clone())
            on:change=move |ev| {
                let id = event_target_value(&ev);
                if let Some(s) = Settings::preset(&id) {
                    lab.replace_settings(s);
                }
            }
        >
            {PRESETS.iter().map(|p| view! { <option value=p.id>{p.title}</option> }).collect_view()}
            <option value="custom">"Custom"</option>
        </select>
    }
}

#[component]
pub fn SettingsPanel(lab: Lab) -> impl IntoView {
    let upload_note = RwSignal::new(None::<Result<String, String>>);
    let on_file = move |ev: leptos::ev::Event| {
        let input: HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|f| f.get(0)) else { return };
        input.set_value("");
        leptos::task::spawn_local(async move {
            match read_text_file(file).await {
                Ok(text) => {
                    let n = text.chars().count();
                    lab.settings.update(|s| {
                        s.data = "text".into();
                        s.text = text;
                        s.preset = "custom".into();
                    });
                    upload_note.set(Some(Ok(format!("loaded {n} characters"))));
                }
                Err(e) => upload_note.set(Some(Err(e))),
            }
        });
    };
    let is_text = move || lab.settings.with(|s| s.data == "text");
    let story = move || {
        lab.settings
            .with(|s| PRESETS.iter().find(|p| p.id == s.preset).map(|p| p.story).unwrap_or("Your own settings."))
    };

    view! {
        <Panel
            name="settings"
            title="Experiment"
            explain="Pick a preset, or set the data, the model and the optimizer yourself. Settings apply when a run \
                starts (Start, Step, or after Reset). The whole experiment lives in the page's address: copy \
                the link to share it. Keyboard: space starts and pauses."
        >
            <label for="preset" class="wide">
                "Preset"
                {preset_picker(lab, "preset")}
            </label>
            <p id="preset-story" class="story">{story}</p>
            <div class="grid">
                {choice_field(
                    lab,
                    "data",
                    "Data",
                    |s| s.data.clone(),
                    |s, v| s.data = v,
                    DataSpec::BUILT_IN
                        .iter()
                        .map(|n| (n.to_string(), n.to_string()))
                        .chain([("austen".into(), "English (Pride and Prejudice)".into()), ("text".into(), "your text".into())])
                        .collect(),
                )}
                {number!(lab, "d-model", "d_model", d_model, count("d_model", 1024))}
                {number!(lab, "layers", "layers", layers, count("layers", 32))}
                {number!(lab, "heads", "heads", heads, count("heads", 1024))}
                {number!(lab, "context", "context", context, count("context", 1024))}
                {choice_field(lab, "activation", "Activation", |s| s.activation.clone(), |s, v| s.activation = v, options(&["gelu", "relu", "identity"]))}
                {choice_field(
                    lab,
                    "causal",
                    "Attention",
                    |s| if s.causal { "causal" } else { "bidirectional" }.to_string(),
                    |s, v| s.causal = v == "causal",
                    options(&["causal", "bidirectional"]),
                )}
                {choice_field(
                    lab,
                    "optimizer",
                    "Optimizer",
                    |s| s.optimizer.clone(),
                    |s, v| {
                        // A new optimizer starts at its own default learning rate.
                        if let Ok(o) = OptimizerConfig::named(&v) {
                            s.lr = o.default_lr();
                        }
                        s.optimizer = v;
                    },
                    options(&OptimizerConfig::NAMES),
                )}
                {number!(lab, "lr", "learning rate", lr, settings::parse_lr)}
                {number!(lab, "steps", "steps", steps, count("steps", settings::MAX_STEPS))}
                {number!(lab, "batch", "batch", batch, count("batch", 1024))}
                {number!(lab, "seed", "seed", seed, settings::parse_seed)}
            </div>
            <Show when=is_text>
                <label for="text-input" class="wide">
                    "Your text (character level)"
                    <textarea
                        id="text-input"
                        rows="4"
                        placeholder="Paste a few paragraphs of text here"
                        prop:value=move || lab.settings.with(|s| s.text.clone())
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            lab.settings.update(|s| {
                                s.text = v;
                                s.preset = "custom".into();
                            });
                        }
                    ></textarea>
                </label>
            </Show>
            <label for="file-input" class="wide">
                "Or upload a .txt file"
                <input id="file-input" type="file" accept=".txt,text/plain" on:change=on_file />
            </label>
            {move || {
                upload_note
                    .get()
                    .map(|r| match r {
                        Ok(m) => view! { <p id="upload-note" class="note">{m}</p> }.into_any(),
                        Err(m) => view! { <p id="upload-error" class="error" role="alert">{m}</p> }.into_any(),
                    })
            }}
        </Panel>
    }
}

/// Whether a keyboard event comes from a form control (then space must not toggle training).
pub fn from_form_control(ev: &web_sys::KeyboardEvent) -> bool {
    ev.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|e| matches!(e.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT" | "BUTTON"))
}
