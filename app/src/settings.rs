//! The experiment a visitor picks: presets and free settings, as one serde struct (it is what the
//! URL holds), and the panel that edits it.

use engine::config::{DataSpec, OptimizerConfig, Schedule};
use engine::{Activation, TrainConfig};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsCast;
use web_sys::HtmlInputElement;

use crate::lab::Lab;

/// Everything that defines a run. Missing fields take the default preset's values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub preset: String,
    /// A built-in data set name, or "text" for `text`.
    pub data: String,
    pub text: String,
    pub d_model: usize,
    pub layers: usize,
    pub heads: usize,
    pub context: usize,
    pub activation: String,
    pub causal: bool,
    pub optimizer: String,
    pub lr: f32,
    pub steps: usize,
    pub batch: usize,
    pub seed: u64,
}

/// A preset: its id (as in the URL), its title, and the story it tells.
pub struct Preset {
    pub id: &'static str,
    pub title: &'static str,
    pub story: &'static str,
}

pub const PRESETS: [Preset; 4] = [
    Preset {
        id: "sphere",
        title: "Tokens on the sphere",
        story: "A 2-layer transformer learns a small grammar. Each LayerNorm puts every token on a sphere; \
                watch the points gather into clusters as training goes on.",
    },
    Preset {
        id: "race",
        title: "Adam against CG-FAC",
        story: "The same model trained by CG-FAC, a second-order method that solves for a curvature-aware step \
                with conjugate gradients. Run it, then switch the optimizer to adam and run again: the earlier \
                curve stays on the loss chart for comparison.",
    },
    Preset {
        id: "joma",
        title: "JoMA: sparse, then dense",
        story: "Data from a hidden hierarchy of chunks, with no nonlinearity (identity activation). JoMA \
                predicts attention first gets sparse (entropy falls), then denser again. Switch the activation \
                to gelu to compare.",
    },
    Preset {
        id: "brownian",
        title: "Brownian or not?",
        story: "Do the tokens wander on the sphere like Brownian motion as the model trains? The panel below the \
                sphere fits a diffusion coefficient D to their mean cosine over training and runs Brownian ghost \
                walkers from the same start points with that D: drift and clustering show up as a poor fit and \
                a large KS distance. Turn on the ghosts in the sphere view to see both.",
    },
];

impl Default for Settings {
    fn default() -> Self {
        Settings::preset("sphere").expect("the default preset exists")
    }
}

impl Settings {
    /// The settings of a named preset; None for an unknown name.
    pub fn preset(id: &str) -> Option<Settings> {
        let d = TrainConfig::browser_default();
        let base = Settings {
            preset: "sphere".into(),
            data: d.data.name().into(),
            text: String::new(),
            d_model: d.model.d_model,
            layers: d.model.layers,
            heads: d.model.heads,
            context: d.model.context,
            activation: "gelu".into(),
            causal: d.model.causal,
            optimizer: d.optimizer.name().into(),
            lr: d.lr,
            steps: d.steps,
            batch: d.batch,
            seed: d.seed,
        };
        match id {
            "sphere" => Some(base),
            "race" => Some(Settings {
                preset: id.into(),
                optimizer: "cgfac".into(),
                lr: OptimizerConfig::named("cgfac").map(|o| o.default_lr()).unwrap_or(0.03),
                steps: 200,
                ..base
            }),
            "joma" => Some(Settings {
                preset: id.into(),
                data: "hierarchy".into(),
                activation: "identity".into(),
                steps: 300,
                ..base
            }),
            "brownian" => Some(Settings { preset: id.into(), steps: 300, ..base }),
            _ => None,
        }
    }

    /// Settings describing an engine config (a model uploaded without the page's settings).
    pub fn from_config(c: &TrainConfig) -> Settings {
        let (data, text) = match &c.data {
            DataSpec::Text { text } => ("text".to_string(), text.clone()),
            other => (other.name().to_string(), String::new()),
        };
        Settings {
            preset: "custom".into(),
            data,
            text,
            d_model: c.model.d_model,
            layers: c.model.layers,
            heads: c.model.heads,
            context: c.model.context,
            activation: serde_json::to_value(c.model.activation)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "gelu".into()),
            causal: c.model.causal,
            optimizer: c.optimizer.name().into(),
            lr: c.lr,
            steps: c.steps,
            batch: c.batch,
            seed: c.seed,
        }
    }

    /// The engine's training configuration, or the engine's message for what is wrong.
    pub fn to_config(&self) -> Result<TrainConfig, String> {
        let mut c = TrainConfig::browser_default();
        c.model.d_model = self.d_model;
        c.model.heads = self.heads;
        c.model.layers = self.layers;
        c.model.context = self.context;
        c.model.d_ff = 4 * self.d_model;
        c.model.activation = self.activation.parse::<Activation>().map_err(|e| e.to_string())?;
        c.model.causal = self.causal;
        c.model.seed = self.seed;
        c.seed = self.seed;
        c.data = if self.data == "text" {
            DataSpec::Text { text: self.text.clone() }
        } else {
            DataSpec::named(&self.data).map_err(|e| e.to_string())?
        };
        c.optimizer = OptimizerConfig::named(&self.optimizer).map_err(|e| e.to_string())?;
        c.lr = self.lr;
        c.steps = self.steps;
        c.batch = self.batch;
        c.eval_every = (self.steps / 20).max(1);
        c.schedule = Schedule::WarmupCosine { warmup: (self.steps / 10).clamp(1, 20), min_ratio: 0.1 };
        if self.steps == 0 {
            return Err("invalid configuration: steps must be positive, got 0".into());
        }
        if self.d_model < 3 {
            return Err(format!("invalid configuration: the sphere view needs d_model >= 3, got {}", self.d_model));
        }
        // The vocabulary comes from the data when the run starts; check the rest now.
        let mut check = c.clone();
        check.model.vocab = 1;
        check.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

fn parse_or<T: std::str::FromStr>(s: &str, old: T) -> T {
    s.trim().parse().unwrap_or(old)
}

/// A labelled number input bound to one field of the settings.
fn number_field(
    lab: Lab,
    id: &'static str,
    label: &'static str,
    get: fn(&Settings) -> String,
    set: fn(&mut Settings, &str),
) -> impl IntoView {
    view! {
        <label for=id>
            {label}
            <input
                id=id
                type="text"
                inputmode="decimal"
                prop:value=move || lab.settings.with(get)
                on:change=move |ev| {
                    let v = event_target_value(&ev);
                    lab.settings.update(|s| {
                        set(s, &v);
                        s.preset = "custom".into();
                    });
                }
            />
        </label>
    }
}

/// Reads an uploaded file: it must be non-empty UTF-8 text without NUL bytes.
async fn read_text_file(file: web_sys::File) -> Result<String, String> {
    let name = file.name();
    if file.size() == 0.0 {
        return Err(format!("{name} is empty; upload a .txt file with at least a few sentences"));
    }
    if file.size() > 4.0 * 1024.0 * 1024.0 {
        return Err(format!("{name} is {:.1} MB; the lab takes text files up to 4 MB", file.size() / 1048576.0));
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
        <section id="panel-settings" class="panel" aria-labelledby="settings-title">
            <h2 id="settings-title">"Experiment"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "Pick a preset, or set the data, the model and the optimizer yourself. Settings apply when a run "
                    "starts (Start, Step, or after Reset). The whole experiment lives in the page's address: copy "
                    "the link to share it. Keyboard: space starts and pauses."
                </p>
            </details>
            <label for="preset" class="wide">
                "Preset"
                <select
                    id="preset"
                    prop:value=move || lab.settings.with(|s| s.preset.clone())
                    on:change=move |ev| {
                        let id = event_target_value(&ev);
                        if let Some(s) = Settings::preset(&id) {
                            lab.settings.set(s);
                        }
                    }
                >
                    {PRESETS.iter().map(|p| view! { <option value=p.id>{p.title}</option> }).collect_view()}
                    <option value="custom">"Custom"</option>
                </select>
            </label>
            <p id="preset-story" class="story">{story}</p>
            <div class="grid">
                <label for="data">
                    "Data"
                    <select
                        id="data"
                        prop:value=move || lab.settings.with(|s| s.data.clone())
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            lab.settings.update(|s| {
                                s.data = v;
                                s.preset = "custom".into();
                            });
                        }
                    >
                        {DataSpec::BUILT_IN.iter().map(|n| view! { <option value=*n>{*n}</option> }).collect_view()}
                        <option value="text">"your text"</option>
                    </select>
                </label>
                {number_field(lab, "d-model", "d_model", |s| s.d_model.to_string(), |s, v| s.d_model = parse_or(v, s.d_model))}
                {number_field(lab, "layers", "layers", |s| s.layers.to_string(), |s, v| s.layers = parse_or(v, s.layers))}
                {number_field(lab, "heads", "heads", |s| s.heads.to_string(), |s, v| s.heads = parse_or(v, s.heads))}
                {number_field(lab, "context", "context", |s| s.context.to_string(), |s, v| s.context = parse_or(v, s.context))}
                <label for="activation">
                    "Activation"
                    <select
                        id="activation"
                        prop:value=move || lab.settings.with(|s| s.activation.clone())
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            lab.settings.update(|s| {
                                s.activation = v;
                                s.preset = "custom".into();
                            });
                        }
                    >
                        <option value="gelu">"gelu"</option>
                        <option value="relu">"relu"</option>
                        <option value="identity">"identity"</option>
                    </select>
                </label>
                <label for="causal">
                    "Attention"
                    <select
                        id="causal"
                        prop:value=move || if lab.settings.with(|s| s.causal) { "causal" } else { "bidirectional" }
                        on:change=move |ev| {
                            let v = event_target_value(&ev) == "causal";
                            lab.settings.update(|s| {
                                s.causal = v;
                                s.preset = "custom".into();
                            });
                        }
                    >
                        <option value="causal">"causal"</option>
                        <option value="bidirectional">"bidirectional"</option>
                    </select>
                </label>
                <label for="optimizer">
                    "Optimizer"
                    <select
                        id="optimizer"
                        prop:value=move || lab.settings.with(|s| s.optimizer.clone())
                        on:change=move |ev| {
                            let v = event_target_value(&ev);
                            lab.settings.update(|s| {
                                if let Ok(o) = OptimizerConfig::named(&v) {
                                    s.lr = o.default_lr();
                                }
                                s.optimizer = v;
                                s.preset = "custom".into();
                            });
                        }
                    >
                        <option value="sgd">"sgd"</option>
                        <option value="adam">"adam"</option>
                        <option value="kfac">"kfac"</option>
                        <option value="cgfac">"cgfac"</option>
                    </select>
                </label>
                {number_field(lab, "lr", "learning rate", |s| s.lr.to_string(), |s, v| s.lr = parse_or(v, s.lr))}
                {number_field(lab, "steps", "steps", |s| s.steps.to_string(), |s, v| s.steps = parse_or(v, s.steps))}
                {number_field(lab, "batch", "batch", |s| s.batch.to_string(), |s, v| s.batch = parse_or(v, s.batch))}
                {number_field(lab, "seed", "seed", |s| s.seed.to_string(), |s, v| s.seed = parse_or(v, s.seed))}
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
        </section>
    }
}

/// Number of characters in the longest text the URL keeps.
pub const URL_TEXT_LIMIT: usize = 2000;

/// Whether a keyboard event comes from a form control (then space must not toggle training).
pub fn from_form_control(ev: &web_sys::KeyboardEvent) -> bool {
    ev.target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|e| matches!(e.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT" | "BUTTON"))
}
