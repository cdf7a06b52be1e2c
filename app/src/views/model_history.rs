//! The model mode's training history: which model's checkpoints and which steps, the download
//! plan, Start and Cancel, the chart of each layer's attention entropy against the step (filling
//! in as each checkpoint arrives), the verdict per layer in words (settled when all have come),
//! copies of earlier weights named, and every checkpoint a button that opens it in the lenses.

use leptos::prelude::*;

use crate::lab::history::{self, SIZES};
use crate::lab::real_model;
use crate::lab::Lab;
use crate::views::charts::plot::{Line, PALETTE};
use crate::views::charts::{data, Chart};
use crate::views::panel::Explain;

#[component]
pub fn ModelHistory(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let h = lab.real.history;
    let plan = move || match history::steps(&h.steps.get()) {
        Ok(steps) => history::plan(h.model.get().trim(), &steps),
        Err(e) => e,
    };
    // Each layer's entropy against the step, on a log scale; a copy of earlier weights is not drawn.
    let lines = move |_dark: bool| {
        let lines = h.history.with(|x| {
            x.as_ref().map_or_else(Vec::new, |x| {
                (0..x.layers)
                    .map(|l| Line {
                        label: format!("layer {l}"),
                        color: PALETTE[l % PALETTE.len()],
                        width: 2,
                        points: x
                            .checkpoints
                            .iter()
                            .filter(|c| c.same_as.is_none())
                            .map(|c| (c.step as f64, c.entropy[l]))
                            .collect(),
                        dots: false,
                        at_end: false,
                    })
                    .collect()
            })
        });
        let x_max = h.history.with(|x| x.as_ref().and_then(|x| x.steps.last().map(|&s| s as f64)));
        (lines, x_max.unwrap_or(9.0))
    };
    let values = move || h.history.with(|x| x.as_ref().and_then(|x| serde_json::to_string(&x.entropy).ok()));
    let count = move || h.history.with(|x| x.as_ref().map(|x| x.steps.len().to_string()));
    let open = move |step: u64| {
        lab.real.hub_id.set(format!("{}@step{step}", h.model.get_untracked().trim()));
        real_model::fetch_hub(lab);
    };
    view! {
        <div id="model-history" class="model-block">
            <h3>"Training history: does attention become sparse, then dense?"</h3>
            <p class="caption">
                "Pythia keeps its training as checkpoints: read the same text with each and see how every layer's \
                 attention spreads as the model learns (JoMA: first sparse, then dense again)."
            </p>
            <Explain>
                "Each checkpoint is the model at one step of its training. The page downloads them one after \
                 another (the browser keeps them: a second run, or one after a reload, does not download them \
                 again), reads the text box's text with each, and drops it before the next comes. The chart \
                 shows each layer's attention entropy, in nats: low means each token looks at a few others \
                 (sparse), high means it spreads its attention (dense). The step axis is logarithmic, since \
                 most of the change happens early. Two checkpoints with exactly the same weights are named and \
                 drawn once."
            </Explain>
            <div class="row">
                <label for="history-model">"Model "</label>
                <input
                    id="history-model"
                    type="text"
                    list="history-sizes"
                    spellcheck="false"
                    prop:value=move || h.model.get()
                    on:input=move |ev| h.model.set(event_target_value(&ev))
                />
                <datalist id="history-sizes">
                    {SIZES
                        .iter()
                        .map(|(id, what, mb)| view! { <option value=*id>{format!("{what}, {mb} MB a checkpoint")}</option> })
                        .collect_view()}
                </datalist>
            </div>
            <label for="history-steps">"Steps"</label>
            <input
                id="history-steps"
                type="text"
                spellcheck="false"
                prop:value=move || h.steps.get()
                on:input=move |ev| h.steps.set(event_target_value(&ev))
            />
            <label for="history-text">"The text each checkpoint reads (the model's text box's too)"</label>
            <textarea
                id="history-text"
                rows="1"
                prop:value=move || lab.real.text.get()
                on:input=move |ev| lab.real.text.set(event_target_value(&ev))
            ></textarea>
            <p id="history-plan" class="note">{plan}</p>
            <div class="row">
                <button id="history-start" type="button" on:click=move |_| history::start(lab)>
                    "Start"
                </button>
                <button
                    id="history-cancel"
                    type="button"
                    class="small"
                    disabled=move || h.status.with(Option::is_none)
                    on:click=move |_| history::cancel(lab)
                >
                    "Cancel"
                </button>
                <span id="history-status" class="note" role="status">{move || h.status.get()}</span>
            </div>
            {move || h.error.get().map(|e| view! { <p id="history-error" class="error" role="alert">{e}</p> })}
            <Show when=move || h.notes.with(|n| !n.is_empty())>
                <p id="history-notes" class="note">{move || h.notes.get().join(" ")}</p>
            </Show>
            <Show when=move || h.history.with(Option::is_some)>
                <Chart
                    lab=lab
                    dark=dark
                    id="history-chart"
                    file="spherewalk-history.png"
                    label="each layer's attention entropy against the training step"
                    caption="attention entropy of each layer"
                    y_desc="nats"
                    x_desc="training step (log scale)"
                    log_steps=true
                    lines=lines
                    data=vec![data("data-points", count), data("data-values", values)]
                />
                <ul id="history-verdicts" data-settled=move || h.settled.get().to_string()>
                    {move || {
                        h.history.with(|x| {
                            x.as_ref().map(|x| {
                                x.verdict
                                    .iter()
                                    .map(|v| view! { <li data-kind=v.kind.clone()>{v.sentence.clone()}</li> })
                                    .collect_view()
                            })
                        })
                    }}
                </ul>
                <p id="history-identical" class="note">
                    {move || {
                        h.history.with(|x| {
                            x.as_ref().map(|x| {
                                x.identical
                                    .iter()
                                    .map(|(later, earlier)| {
                                        format!("Step {later} has exactly step {earlier}'s weights: drawn once, and left out of the verdicts. ")
                                    })
                                    .collect::<String>()
                            })
                        })
                    }}
                </p>
                <p class="row" id="history-open">
                    "Open a checkpoint in the lenses: "
                    {move || {
                        h.history.with(|x| {
                            x.as_ref().map(|x| {
                                x.steps
                                    .iter()
                                    .map(|&s| view! { <button type="button" class="small" on:click=move |_| open(s)>{format!("step {s}")}</button> })
                                    .collect_view()
                            })
                        })
                    }}
                </p>
            </Show>
        </div>
    }
}
