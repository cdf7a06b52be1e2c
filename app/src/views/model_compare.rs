//! Two texts side by side in the model mode: a second text, "Compare", both texts' tokens with the
//! ones they do not share marked, the comparison in words, per layer how far the shared tokens'
//! places on the sphere differ and how each text's heads spread their attention, and what the
//! model expects after each. The numbers are the engine's (`engine::lenses::compare`).

use leptos::prelude::*;

use crate::lab::comparing;
use crate::lab::Lab;
use crate::views::panel::Explain;
use crate::views::token_style::glyph as shown;

#[component]
pub fn ModelCompare(lab: Lab) -> impl IntoView {
    let c = lab.real.comparing;
    // One text's tokens, those not shared with the other marked, and what the model expects after it.
    let side = move |t: usize| {
        c.result.with(|r| {
            r.as_ref().map(|r| {
                let shared: Vec<usize> = r.shared.iter().map(|p| if t == 0 { p.0 } else { p.1 }).collect();
                let pieces = r.pieces[t]
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        let class = if shared.contains(&i) { "piece" } else { "piece changed" };
                        view! { <span class=class>{shown(p)}</span> }
                    })
                    .collect_view();
                let next: Vec<String> =
                    r.next[t].iter().map(|(tok, p)| format!("\"{}\" {:.0}%", shown(tok), 100.0 * p)).collect();
                view! {
                    <div class="compare-side">
                        <h4>{if t == 0 { "The first text" } else { "The second text" }}</h4>
                        <p class="pieces">{pieces}</p>
                        // A model that reads both ways does not write: nothing comes next.
                        {(!next.is_empty()).then(|| view! { <p class="note compare-next">{format!("Next it expects: {}", next.join(", "))}</p> })}
                    </div>
                }
            })
        })
    };
    let rows = move || {
        c.result.with(|r| {
            r.as_ref().map(|r| {
                let last = r.layers.len().saturating_sub(1);
                r.layers
                    .iter()
                    .map(|l| {
                        let name = if l.layer == last { "final".to_string() } else { l.layer.to_string() };
                        let entropy = match (l.mean_entropy(), l.most_changed_head()) {
                            (Some([a, b]), Some((h, d))) => view! {
                                <td>{format!("{a:.2} → {b:.2}")}</td>
                                <td>{format!("head {h}: {d:+.2}")}</td>
                            }
                            .into_any(),
                            _ => view! { <td>"-"</td> <td>"-"</td> }.into_any(),
                        };
                        view! {
                            <tr data-mean=l.mean_angle.to_string() data-max=l.max_angle.to_string()>
                                <th scope="row">{name}</th>
                                <td>{format!("{:.1}°", l.mean_angle)}</td>
                                <td>{format!("{:.1}°", l.max_angle)}</td>
                                {entropy}
                            </tr>
                        }
                    })
                    .collect_view()
            })
        })
    };
    view! {
        <div id="model-compare" class="model-block">
            <h3>"Two texts side by side"</h3>
            <p class="caption">
                "Change a word and see how far the change travels: both texts go through the same model, and \
                 each shared token is measured in one and in the other."
            </p>
            <Explain>
                "The model reads both texts. The tokens they share are paired up in order (as a diff pairs \
                 lines). At every layer, each pair's two places on the sphere are compared by the angle \
                 between them: 0° the same place, 90° unrelated. A token only sees the tokens before it, so \
                 everything before the first change stays exactly in place; after it, the angle says how \
                 much of the change reached that token. Each head's entropy says how widely it spreads its \
                 attention, in one text and in the other."
            </Explain>
            <label for="model-text-b">"A second text"</label>
            <textarea
                id="model-text-b"
                rows="2"
                prop:value=move || c.text.get()
                on:input=move |ev| c.type_text(event_target_value(&ev))
            ></textarea>
            <div class="row">
                <button id="model-compare-run" type="button" on:click=move |_| comparing::compare(lab)>
                    "Compare"
                </button>
            </div>
            {move || c.error.get().map(|e| view! { <p id="model-compare-error" class="error" role="alert">{e}</p> })}
            <Show when=move || c.result.with(Option::is_some)>
                <div id="model-compare-sides" class="compare-sides">{move || side(0)} {move || side(1)}</div>
                <p id="model-compare-words">
                    {move || c.result.with(|r| r.as_ref().map(engine::lenses::words::compare_in_words))}
                </p>
                <table id="model-compare-layers" class="model-table">
                    <caption>
                        "Every layer: how far the shared tokens after the change sit from their place in the \
                         first text (mean angle), the most any shared token moved, each text's mean entropy over \
                         heads, and the head whose entropy changes most"
                    </caption>
                    <thead>
                        <tr>
                            <th scope="col">"layer"</th>
                            <th scope="col" title="the mean angle between a shared token's two places, over the tokens after the change">"moved"</th>
                            <th scope="col" title="the largest angle between a shared token's two places">"most"</th>
                            <th scope="col" title="the mean over heads of the attention's entropy in nats: the first text, then the second">"entropy"</th>
                            <th scope="col" title="the head whose entropy changes most, second text minus first">"changes most"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </Show>
        </div>
    }
}
