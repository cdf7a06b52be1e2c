//! The model mode's writing: how the model draws its tokens (temperature, top-k, top-p, seed),
//! "Write", and what it wrote, each token underlined by its probability with the candidates it
//! weighed on a click or a tap, as the training mode's writing shows them.

use leptos::prelude::*;

use crate::lab::real_model::{self, WRITE_TOKENS};
use crate::lab::Lab;
use crate::views::writing::{candidates_box, sample_view, Picked};

#[component]
pub fn ModelWriting(lab: Lab) -> impl IntoView {
    let m = lab.real;
    let d = m.drawing;
    let picked = RwSignal::new(None::<Picked>);
    let greedy = move || d.temperature.get() == 0.0;
    let parsed = |ev: &leptos::ev::Event| event_target_value(ev).trim().parse::<f64>().ok();
    view! {
        <div class="row model-writing">
            <button id="model-write" type="button" on:click=move |_| real_model::write(lab)>
                {format!("Write {WRITE_TOKENS} tokens")}
            </button>
            <label title="0 always takes the most likely token; 1 draws from the model's own probabilities; above 1 flattens them">
                "Temperature "
                <input
                    id="model-temperature"
                    type="range"
                    min="0"
                    max="2"
                    step="0.1"
                    prop:value=move || d.temperature.get().to_string()
                    on:change=move |ev| {
                        if let Some(t) = parsed(&ev) {
                            d.temperature.set(t)
                        }
                    }
                />
                <output>{move || if greedy() { "0 (the most likely)".to_string() } else { format!("{:.1}", d.temperature.get()) }}</output>
            </label>
            <label title="draw among the k most likely tokens only (at temperature 0 only the most likely is taken)">
                "Top-k "
                <select
                    id="model-top-k"
                    disabled=greedy
                    on:change=move |ev| {
                        if let Some(k) = parsed(&ev) {
                            d.top_k.set(k as usize)
                        }
                    }
                >
                    {[0usize, 5, 10, 40, 100]
                        .into_iter()
                        .map(|k| {
                            let label = if k == 0 { "all".to_string() } else { k.to_string() };
                            view! { <option value=k.to_string() selected=move || d.top_k.get() == k>{label}</option> }
                        })
                        .collect_view()}
                </select>
            </label>
            <label title="draw among the fewest most likely tokens whose probabilities add up to p">
                "Top-p "
                <select
                    id="model-top-p"
                    disabled=greedy
                    on:change=move |ev| {
                        if let Some(p) = parsed(&ev) {
                            d.top_p.set(p)
                        }
                    }
                >
                    {[1.0f64, 0.95, 0.9, 0.8, 0.5]
                        .into_iter()
                        .map(|p| view! { <option value=p.to_string() selected=move || d.top_p.get() == p>{p.to_string()}</option> })
                        .collect_view()}
                </select>
            </label>
            <label title="the same seed and settings write the same text">
                "Seed "
                <input
                    id="model-seed"
                    type="number"
                    min="0"
                    step="1"
                    disabled=greedy
                    prop:value=move || d.seed.get().to_string()
                    on:change=move |ev| {
                        if let Ok(s) = event_target_value(&ev).trim().parse::<u64>() {
                            d.seed.set(s)
                        }
                    }
                />
            </label>
        </div>
        {move || {
            m.written
                .get()
                .map(|w| {
                    view! {
                        <p id="model-written" class="writing" data-text=w.text.clone() aria-live="polite">
                            {sample_view(&w, picked)}
                        </p>
                    }
                })
        }}
        {candidates_box("model-candidates", picked)}
    }
}
