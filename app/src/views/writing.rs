//! "The model writes": the continuation of a prompt at every evaluation, each character underlined
//! as strongly as the probability it was drawn with (a click or a tap: its candidates, in a box as
//! large as the page's text), the earlier samples whole, newest first (step -> text), the controls
//! (prompt, temperature, top-k, "Write more"), and the probe row's next-character view.

use engine::sample::{Prediction, Sample, Step};
use leptos::prelude::*;

use crate::lab::writing::{self, MORE_TOKENS};
use crate::lab::Lab;
use crate::views::panel::Panel;

/// How a character is shown: a newline as a visible mark and a break, a space as itself.
fn shown(text: &str) -> String {
    text.replace('\n', "\u{21b5}\n")
}

/// "e 0.42|a 0.20|..." for the candidates (read by the browser test), and the hover text.
fn candidates(top: &[(String, f64)]) -> (String, String) {
    let data = top.iter().map(|(t, p)| format!("{}:{p:.4}", t.escape_debug())).collect::<Vec<_>>().join("|");
    let hover = top.iter().map(|(t, p)| format!("\"{}\" {:.0}%", t.escape_debug(), p * 100.0)).collect::<Vec<_>>();
    (data, hover.join(", "))
}

/// A character picked for its candidates: what it is, how it came, and what else the model weighed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Picked {
    what: String,
    top: Vec<(String, f64)>,
}

/// One written token: underlined by its probability, its candidates on a click or a tap (and on
/// hover); drawn in one after another.
fn token_view(i: usize, s: &Step, picked: RwSignal<Option<Picked>>) -> impl IntoView {
    let (data, hover) = candidates(&s.top);
    let title = format!("drawn with probability {:.0}%; the model's candidates: {hover}", s.p * 100.0);
    let style = format!("--p: {:.3}; animation-delay: {}ms", s.p, i * 25);
    let what = format!("\"{}\" was drawn with probability {:.0}%", s.text.escape_debug(), s.p * 100.0);
    let top = s.top.clone();
    view! {
        <span
            class="tok"
            style=style
            title=title
            data-p=format!("{:.4}", s.p)
            data-top=data
            on:click=move |_| picked.set(Some(Picked { what: what.clone(), top: top.clone() }))
        >
            {shown(&s.text)}
        </span>
    }
}

pub(crate) fn sample_view(s: &Sample, picked: RwSignal<Option<Picked>>) -> impl IntoView {
    let tokens = s.steps.iter().enumerate().map(|(i, t)| token_view(i, t, picked)).collect_view();
    view! {
        <span class="prompt">{shown(&s.prompt)}</span>
        {tokens}
    }
}

/// One position of the probe row: the next character, coloured by how well it was predicted.
fn prediction_view(p: &Prediction, picked: RwSignal<Option<Picked>>) -> impl IntoView {
    let (data, hover) = candidates(&p.top);
    let title = format!(
        "the model gave \"{}\" {:.0}% (loss {:.2} nats); its candidates: {hover}",
        p.text.escape_debug(),
        p.p * 100.0,
        p.loss
    );
    let what = format!("the model gave \"{}\" {:.0}% before seeing it", p.text.escape_debug(), p.p * 100.0);
    let top = p.top.clone();
    view! {
        <span
            class="pred"
            style=format!("--p: {:.3}", p.p)
            title=title
            data-p=format!("{:.4}", p.p)
            data-top=data
            on:click=move |_| picked.set(Some(Picked { what: what.clone(), top: top.clone() }))
        >
            {shown(&p.text)}
        </span>
    }
}

/// The picked character's candidates, in a box in the page's own type size.
pub(crate) fn candidates_box(id: &'static str, picked: RwSignal<Option<Picked>>) -> impl IntoView {
    move || {
        picked.get().map(|p| {
            let rows = p
                .top
                .iter()
                .map(|(t, q)| view! { <tr><th scope="row">{format!("\"{}\"", shown(t))}</th><td>{format!("{:.1}%", q * 100.0)}</td></tr> })
                .collect_view();
            view! {
                <div id=id class="banner candidates" role="dialog" aria-label="the model's candidates">
                    <p>{p.what.clone()}{"; the model's candidates:"}</p>
                    <table>
                        <tbody>{rows}</tbody>
                    </table>
                    <button type="button" class="small" on:click=move |_| picked.set(None)>"Close"</button>
                </div>
            }
        })
    }
}

#[component]
pub fn WritingPanel(lab: Lab) -> impl IntoView {
    let w = lab.writing;
    let picked = RwSignal::new(None::<Picked>);
    let latest = move || w.history.with(|h| h.last().cloned());
    let on_prompt = move |ev| {
        w.prompt.set(event_target_value(&ev));
        writing::apply(lab);
    };
    let on_temperature = move |ev| {
        if let Ok(t) = event_target_value(&ev).parse::<f64>() {
            w.temperature.set(t);
            writing::apply(lab);
        }
    };
    let on_top_k = move |ev| {
        if let Ok(k) = event_target_value(&ev).parse::<usize>() {
            w.top_k.set(k);
            writing::apply(lab);
        }
    };
    view! {
        <Panel
            name="writing"
            title="The model writes"
            explain="At step 0 and at every evaluation the model continues the prompt (underlined) one character at a \
                time, each drawn at random from the probabilities it predicts at this temperature: the thicker a \
                character's underline, the surer the model was; click or tap it for the other characters it \
                considered. Earlier samples stay below, newest first, so you can see the text improve."
        >
            <Show when=move || w.error.with(Option::is_some)>
                <p id="writing-error" class="error" role="alert">{move || w.error.get().unwrap_or_default()}</p>
            </Show>
            <p
                id="writing-sample"
                class="writing"
                aria-live="polite"
                data-step=move || latest().map(|l| l.step.to_string())
                data-text=move || latest().map(|l| l.sample.text)
            >
                {move || match latest() {
                    Some(l) => {
                        view! {
                            <span class="writing-step">{format!("step {}: ", l.step)}</span>
                            {sample_view(&l.sample, picked)}
                        }
                            .into_any()
                    }
                    None => "Start the run: the model writes at step 0 and at every evaluation.".into_any(),
                }}
            </p>
            {candidates_box("writing-candidates", picked)}
            <div class="writing-controls">
                <label>
                    "Prompt "
                    <input
                        id="writing-prompt"
                        type="text"
                        maxlength="200"
                        prop:value=move || w.prompt.get()
                        on:change=on_prompt
                    />
                </label>
                <label>
                    "Temperature "
                    <input
                        id="writing-temperature"
                        type="range"
                        min="0"
                        max="2"
                        step="0.1"
                        prop:value=move || w.temperature.get().to_string()
                        on:change=on_temperature
                    />
                    <output>{move || format!("{:.1}", w.temperature.get())}</output>
                </label>
                <label>
                    "Top-k "
                    <select id="writing-top-k" on:change=on_top_k>
                        {[0usize, 3, 5, 10, 20]
                            .into_iter()
                            .map(|k| {
                                let label = if k == 0 { "all".to_string() } else { k.to_string() };
                                view! { <option value=k.to_string() selected=move || w.top_k.get() == k>{label}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <button
                    id="write-more"
                    type="button"
                    disabled=move || lab.run_config.with(Option::is_none)
                    on:click=move |_| writing::write_more(lab)
                >
                    {format!("Write more ({MORE_TOKENS} characters)")}
                </button>
            </div>
            <Show when=move || w.more.with(Option::is_some)>
                <p id="writing-more" class="writing" data-text=move || w.more.with(|m| m.as_ref().map(|m| m.text.clone()))>
                    {move || w.more.with(|m| m.as_ref().map(|m| sample_view(m, picked)))}
                </p>
            </Show>
            <details id="writing-history" open>
                <summary>"Earlier samples"</summary>
                <ol>
                    {move || {
                        w.history
                            .get()
                            .into_iter()
                            .rev()
                            .skip(1)
                            .take(6)
                            .map(|h| {
                                view! {
                                    <li data-step=h.step.to_string()>
                                        <span class="writing-step">{format!("step {}: ", h.step)}</span>
                                        {shown(&h.sample.text)}
                                    </li>
                                }
                            })
                            .collect_view()
                    }}
                </ol>
            </details>
            <h3>"Next character, on the probe row"</h3>
            <p class="note">
                "The validation text the sphere shows, each character coloured by the probability the model gave it "
                "before seeing it: blue it expected, orange it did not."
            </p>
            <p id="next-char" class="writing">
                {move || latest().map(|l| l.predictions.iter().map(|p| prediction_view(p, picked)).collect_view())}
            </p>
        </Panel>
    }
}
