//! The page's second mode on screen: the switch between training and a real model, and the panel
//! that opens a GPT-2 (by its hub id or from files), takes a text, and shows what the engine
//! measured: the BPE pieces, every layer's radius check and heads, the depth verdicts and what the
//! model expects and writes next. The sphere and the heatmap beside it draw the same reading.

use leptos::prelude::*;

use crate::lab::backend::reading_place;
use crate::lab::hub;
use crate::lab::model_section::Section;
use crate::lab::real_model::{self, Mode};
use crate::lab::Lab;
use crate::views::model_compare::ModelCompare;
use crate::views::model_history::ModelHistory;
use crate::views::model_lens::{lens_now, ModelLens};
use crate::views::model_sections::SectionTabs;
use crate::views::model_writing::ModelWriting;
use crate::views::panel::{symbol_key, verdict_line, Explain, MOTION_KEY};
// Spaces made visible in a BPE piece (GPT-2's pieces carry their leading space).
use crate::views::token_style::glyph as shown;

/// The layer table's columns, and each one in words (the key under it and the heads' hover).
const LAYER_COLUMNS: [&str; 6] = ["layer", "|x|", "off the sphere", "after the gain", "entropy", "kernel TV"];
const LAYER_KEY: [&str; 6] = [
    "0 is the first block's norm; final is the norm after the last block",
    "how long a token's vector is, on average, just before the layer's norm",
    "after the norm, how far the farthest token is from the sphere, as a fraction of its radius (1e-5: one part in 100,000)",
    "how far the norm's own scale and shift then move the tokens off the sphere, on average",
    "how spread out each head's attention is, in nats: 0 looks at one token, ln n at all n equally; the mean over heads, and lowest to highest",
    "how different each head's attention is from a Gaussian kernel on the sphere (total variation): 0 the same, 1 nothing in common",
];

/// The header's switch between the page's two modes: one button, for the mode not shown.
#[component]
pub fn ModeSwitch(lab: Lab) -> impl IntoView {
    let training = move || lab.real.mode.get() == Mode::Train;
    view! {
        <Show
            when=training
            fallback=move || {
                view! {
                    <button id="mode-train" type="button" class="small" on:click=move |_| real_model::set_mode(lab, Mode::Train)>
                        "Back to training"
                    </button>
                }
            }
        >
            <button
                id="mode-model"
                type="button"
                class="small"
                title="Open a real model (GPT-2, or another of its family) and read a text through every lens"
                on:click=move |_| real_model::set_mode(lab, Mode::Model)>
                "Open a real model"
            </button>
        </Show>
    }
}

#[component]
pub fn ModelPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let m = lab.real;
    let on_files = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(list) = input.files() else { return };
        let files = (0..list.length()).filter_map(|i| list.get(i)).collect();
        input.set_value("");
        real_model::open_files(lab, files);
    };
    let opened_line = move || {
        m.opened.get().map(|o| {
            format!(
                "{}: {} layers, {} heads, width {}, context {} tokens, {:.1}M weights, running in this tab. {}: {}.",
                o.name,
                o.layers,
                o.heads,
                o.d_model,
                o.context,
                o.params as f64 / 1e6,
                o.family,
                o.block
            )
        })
    };
    // Where the files came from: a link's ?hub= may name any server, so the page says which.
    let source_line = move || {
        m.source.get().map(|s| match s.as_str() {
            "your files" => "From your files.".to_string(),
            h if h == hub::host_of(hub::HUB) => format!("Files from {h}."),
            h => format!("Files from {h}, not from {}: this page's link names another hub.", hub::host_of(hub::HUB)),
        })
    };
    let progress_line = move || {
        m.progress.get().map(|p| match p.total {
            Some(t) => format!("{}: {:.1} of {:.1} MB", p.what, p.loaded / 1e6, t / 1e6),
            None if p.loaded > 0.0 => format!("{}: {:.1} MB", p.what, p.loaded / 1e6),
            None => p.what,
        })
    };
    // The piece whose candidates are shown: the one picked, else the last; a new reading resets it.
    let picked = RwSignal::new(None::<usize>);
    Effect::new(move |_| {
        m.reading.track();
        picked.set(None);
    });
    // A masked LM's (BERT's) first mask, else the last token.
    let at = move || {
        picked.get().or_else(|| {
            m.reading.with(|r| r.as_ref().map(|r| r.masks.first().copied().unwrap_or(r.pieces.len().saturating_sub(1))))
        })
    };
    let fills = move || m.opened.with(|o| o.as_ref().and_then(|o| o.fills.clone()));
    let pieces = move || {
        m.reading.with(|r| {
            r.as_ref().map(|r| {
                let piece = |(i, p): (usize, &String)| {
                    view! {
                        <button
                            type="button"
                            class="piece"
                            aria-pressed=move || (at() == Some(i)).to_string()
                            on:click=move |_| picked.set(Some(i))
                        >
                            {shown(p)}
                        </button>
                    }
                };
                r.pieces.iter().enumerate().map(piece).collect_view()
            })
        })
    };
    let next_line = move || {
        let i = at()?;
        m.reading.with(|r| {
            let r = r.as_ref()?;
            let (next, piece) = (r.next.get(i)?, r.pieces.get(i)?);
            let c: Vec<String> = next.iter().map(|(t, p)| format!("\"{}\" {:.0}%", shown(t), 100.0 * p)).collect();
            // A masked token is named without the space before it (shown as ␣ elsewhere).
            let (c, bare, piece) = (c.join(", "), shown(piece.trim()), shown(piece));
            Some(match (r.predicts.as_str(), r.masks.contains(&i)) {
                ("masked", true) => format!("At \"{bare}\" (token {}) the model fills in: {c}", i + 1),
                ("masked", false) => format!(
                    "Were \"{bare}\" (token {}) masked, the model would put there: {c}. It reads the text both ways at \
                     once: put {} in the text where it should fill in.",
                    i + 1,
                    fills().unwrap_or_default()
                ),
                _ => format!("After \"{piece}\" (token {}) the model expects: {c}", i + 1),
            })
        })
    };
    let rows = move || {
        m.reading.with(|r| {
            r.as_ref().map(|r| {
                r.layers
                    .iter()
                    .map(|l| {
                        let name = if l.layer == r.n_layer { "final".to_string() } else { l.layer.to_string() };
                        let ent: Vec<f64> = l.heads.iter().map(|h| h.entropy).collect();
                        let tv: Vec<f64> = l.heads.iter().map(|h| h.kernel_tv_mean).collect();
                        // The mean over heads, and beneath it the lowest to the highest.
                        let span = |v: &[f64]| match v.is_empty() {
                            true => view! { "-" }.into_any(),
                            false => {
                                let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |a, &x| (a.0.min(x), a.1.max(x)));
                                let mean = v.iter().sum::<f64>() / v.len() as f64;
                                view! { {format!("{mean:.2}")} <span class="range">{format!("{lo:.2}-{hi:.2}")}</span> }
                                    .into_any()
                            }
                        };
                        view! {
                            <tr>
                                <th scope="row">{name}</th>
                                <td>{format!("{:.1}", l.residual_norm)}</td>
                                <td>{format!("{:.1e}", l.radius.max_rel_err)}</td>
                                <td>{format!("{:.0}%", 100.0 * l.gain.mean_rel_offset)}</td>
                                <td>{span(&ent)}</td>
                                <td>{span(&tv)}</td>
                            </tr>
                        }
                    })
                    .collect_view()
            })
        })
    };
    let panels_verdict = move |f: fn(&engine::session::Verdicts) -> Option<engine::session::Verdict>| {
        move || {
            m.reading
                .with(Option::is_some)
                .then(|| lab.panels.with(|p| p.as_ref().and_then(|p| f(&p.verdicts))))
                .flatten()
        }
    };
    view! {
        <section id="panel-model" class="panel model-open" aria-label="a real model">
            // The model, its text and what it reads it as; beside the sphere and the attention.
            <div class="model-head">
                <h2>
                    {move || {
                        m.opened.with(|o| o.as_ref().map_or("A real model".to_string(), |o| format!("A real model: {}", o.family)))
                    }}
                </h2>
                <Explain>
                    "A trained transformer reads your text as tokens (pieces of words). Each layer adds to every \
                     token's vector, then a norm pulls it back onto a sphere: the dots on the ball. Each head's \
                     attention is a table of who looks at whom, and every row adds up to 1, so it is a random walk \
                     among the tokens. The numbers below measure how close this comes to the papers' picture: \
                     tokens on a sphere, attention as a Gaussian kernel, depth as time in a Brownian motion."
                </Explain>
                <p class="caption model-intro">
                    "A model as Hugging Face keeps it (config.json, model.safetensors and tokenizer.json): GPT-2, \
                     Pythia (GPT-NeoX), SmolLM2 or TinyLlama (Llama), Qwen2, BERT. Fetch it by its id (add @ and a revision, \
                     such as Pythia's @step3000, for a checkpoint of its training) or pick its files from your disk. It \
                     runs here, in this tab: on the CPU, or on WebGPU as the Backend above says when the GPU can hold \
                     its weights; the browser keeps the files for the next visit."
                </p>
                <div class="row model-fetch">
                    <label for="hub-id">"Model id "</label>
                    <input
                        id="hub-id"
                        type="text"
                        list="hub-suggestions"
                        spellcheck="false"
                        prop:value=move || m.hub_id.get()
                        on:input=move |ev| m.hub_id.set(event_target_value(&ev))
                    />
                    <datalist id="hub-suggestions">
                        {hub::SUGGESTED
                            .iter()
                            .map(|(id, what)| view! { <option value=*id>{*what}</option> })
                            .collect_view()}
                    </datalist>
                    <button id="hub-fetch" type="button" on:click=move |_| real_model::fetch_hub(lab)>
                        "Fetch"
                    </button>
                    <button
                        id="model-refetch"
                        type="button"
                        class="small"
                        title="drop the copies this browser keeps of this model's files and fetch them from the hub again"
                        on:click=move |_| real_model::fetch_again(lab)
                    >
                        "Fetch again"
                    </button>
                    <label for="model-files">" or your files "</label>
                    <input id="model-files" type="file" multiple accept=".json,.safetensors,.txt,.bin" on:change=on_files />
                </div>
                <Show when=move || m.progress.with(Option::is_some)>
                    <div class="row" id="model-download">
                        <progress
                            id="model-progress"
                            max=move || m.progress.with(|p| p.as_ref().and_then(|p| p.total).unwrap_or(1.0))
                            value=move || m.progress.with(|p| p.as_ref().map_or(0.0, |p| p.loaded))
                        ></progress>
                        <span class="note">{progress_line}</span>
                        <button id="model-cancel" type="button" on:click=move |_| real_model::cancel(lab)>
                            "Cancel"
                        </button>
                    </div>
                </Show>
                <Show when=move || m.busy.with(Option::is_some)>
                    <p id="model-busy" class="note" role="status">
                        {move || m.busy.get().unwrap_or_default() + "... "}
                        <Show when=move || m.working()>
                            <button
                                id="model-stop"
                                type="button"
                                class="small"
                                title="stop the model's worker and open the model again: the text stays"
                                on:click=move |_| crate::lab::stopping::stop_work(lab)
                            >
                                "Cancel"
                            </button>
                        </Show>
                    </p>
                </Show>
                {move || match m.message.get() {
                    Some(Ok(note)) => view! { <p id="model-message" class="note">{note}</p> }.into_any(),
                    Some(Err(e)) => view! { <p id="model-error" class="error" role="alert">{e}</p> }.into_any(),
                    None => ().into_any(),
                }}
                <Show when=move || m.opened.with(Option::is_some)>
                    <p id="model-opened">{opened_line}</p>
                    <p id="model-source" class="note">{source_line}</p>
                    <label for="model-text">"The text it reads"</label>
                    <textarea
                        id="model-text"
                        rows="2"
                        prop:value=move || m.text.get()
                        on:input=move |ev| m.text.set(event_target_value(&ev))
                    ></textarea>
                    <div class="row">
                        <button id="model-read" type="button" on:click=move |_| real_model::read(lab)>
                            "Read"
                        </button>
                    </div>
                    <Show
                        when=move || fills().is_none()
                        fallback=move || {
                            view! {
                                <p id="model-fills" class="note">
                                    {move || format!(
                                        "{} reads the whole text at once, both ways, so it does not write left to right: \
                                         put {} in the text and Read, and it says what it would put there.",
                                        m.opened.with(|o| o.as_ref().map(|o| o.family.clone()).unwrap_or_default()),
                                        fills().unwrap_or_default()
                                    )}
                                </p>
                            }
                        }
                    >
                        <ModelWriting lab=lab />
                    </Show>
                </Show>
                <Show when=move || m.reading.with(Option::is_some)>
                    <p class="caption">
                        {move || match fills() {
                            None => "The tokens as the model's tokenizer cuts them (␣ is a space); pick one for what the model expects after it:".to_string(),
                            Some(mask) => format!("The tokens as the model's tokenizer cuts them (␣ is a space); pick one for what the model would put there ({mask} is a gap it fills in):"),
                        }}
                    </p>
                    <p id="model-tokens" class="pieces">{pieces}</p>
                    <p id="model-next">{next_line}</p>
                    {lens_now(lab, Signal::derive(at))}
                    <p id="model-on" class="note">
                        {move || m.reading.with(|r| r.as_ref().map(|r| reading_place(&r.on).0))}
                    </p>
                    {move || {
                        m.reading
                            .with(|r| r.as_ref().and_then(|r| reading_place(&r.on).1))
                            .map(|why| {
                                view! {
                                    <details id="model-on-details" class="note">
                                        <summary>"details"</summary>
                                        {why}
                                    </details>
                                }
                            })
                    }}
                </Show>
            </div>
            // One section at a time, under the stage on a wide screen.
            <div class="model-body">
                <SectionTabs lab=lab />
                <div id="section-reading-body" class="model-section" hidden=move || m.section.get() != Section::Reading>
                    <Show when=move || m.reading.with(Option::is_some)>
                        <div class="model-blocks">
                        <div id="model-layers-block" class="model-block">
                            <h3>"Layer by layer: the sphere and the heads"</h3>
                            <p id="model-words">
                                {move || m.reading.with(|r| r.as_ref().map(engine::lenses::words::in_words))}
                            </p>
                            <table id="model-layers" class="model-table">
                                <caption>
                                    "Every layer: the stream's length before the norm, how close the norm puts each token to \
                                     the sphere (largest relative error), how far the gain then moves them, and per head the \
                                     attention's entropy (nats) and its distance to the Gaussian kernel (mean, lowest-highest)"
                                </caption>
                                <thead>
                                    <tr>
                                        {LAYER_COLUMNS
                                            .iter()
                                            .zip(LAYER_KEY)
                                            .map(|(name, words)| view! { <th scope="col" title=words>{*name}</th> })
                                            .collect_view()}
                                    </tr>
                                </thead>
                                <tbody>{rows}</tbody>
                            </table>
                            <dl id="model-layers-key" class="key">
                                {LAYER_COLUMNS
                                    .iter()
                                    .zip(LAYER_KEY)
                                    .skip(1)
                                    .map(|(name, words)| view! { <dt>{*name}</dt> <dd>{words}</dd> })
                                    .collect_view()}
                            </dl>
                            <Explain>
                                "Every layer starts with a norm: LayerNorm takes away each token's mean and divides by its \
                                 spread, RMSNorm only divides, and either way the token lands on a sphere of radius √d. \
                                 The table says how long the vectors grew before that, how exactly they land, and how far the \
                                 norm's learned gain moves them off again; then how each head spreads its attention."
                            </Explain>
                            <div class="row">
                                <button id="model-download-json" type="button" class="small" on:click=move |_| real_model::download_reading(lab, false)>
                                    "Download reading (JSON)"
                                </button>
                                <button id="model-download-csv" type="button" class="small" on:click=move |_| real_model::download_reading(lab, true)>
                                    "Layer table (CSV)"
                                </button>
                            </div>
                        </div>
                        <div id="model-kernel-block" class="model-block">
                            <h3>"Attention as a kernel on the sphere"</h3>
                            <p id="model-kernel-words">
                                {move || m.reading.with(|r| r.as_ref().and_then(engine::lenses::words::kernel_in_words))}
                            </p>
                            {verdict_line("model-kernel".into(), panels_verdict(|v| v.kernel.clone()))}
                            <dl class="key">
                                <dt>"Gaussian kernel"</dt>
                                <dd>"a weight that falls off with the distance between two points on the sphere, like a bell curve"</dd>
                                <dt>"total variation"</dt>
                                <dd>"the share of attention two tables place differently: 0 the same, 1 nothing in common"</dd>
                            </dl>
                            <Explain>
                                "Softmax attention weighs key j by e to the power q·k_j/√d. On the sphere, q·k = (|q|² + |k|² - |q - k|²)/2, \
                                 so the weight is a bell curve in the distance |q - k|, times a factor for the key's own length. \
                                 When all keys have the same length the factor cancels in each row and attention is exactly \
                                 the Gaussian kernel: the Brownian paper's starting point."
                            </Explain>
                        </div>
                        <div id="model-depth-block" class="model-block">
                            <h3>"Depth as time: Brownian motion or particles?"</h3>
                            <p id="model-depth-words">
                                {move || m.reading.with(|r| r.as_ref().and_then(|r| engine::lenses::words::depth_in_words(&r.depth)))}
                            </p>
                            {verdict_line("model-brownian".into(), panels_verdict(|v| v.brownian.clone()))}
                            {verdict_line("model-flow".into(), panels_verdict(|v| v.flow.clone()))}
                            {symbol_key("model-depth-key", &MOTION_KEY)}
                            <Explain>
                                "Each token's place on the sphere after every layer is a path, as if the layers were moments \
                                 of time. Brownian motion (random steps) makes the mean cosine between a token and its start \
                                 decay steadily; attention as interacting particles pulls the tokens together instead. Both \
                                 are fitted to the same two curves, and the one that misses them by less comes closer."
                            </Explain>
                        </div>
                        <ModelLens lab=lab at=Signal::derive(at) />
                        </div>
                    </Show>
                </div>
                <div id="section-compare-body" class="model-section" hidden=move || m.section.get() != Section::Compare>
                    <Show when=move || m.opened.with(Option::is_some) fallback=|| view! { <p class="note">"Open a model above: then it reads two texts side by side."</p> }>
                        <ModelCompare lab=lab />
                    </Show>
                </div>
                <div id="section-history-body" class="model-section" hidden=move || m.section.get() != Section::History>
                    <ModelHistory lab=lab dark=dark />
                </div>
            </div>
        </section>
    }
}
