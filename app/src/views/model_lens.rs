//! The logit lens in the model mode: a depth x position grid of what the model's own head reads
//! from the stream at every depth (the top candidate, shaded by its probability), the followed
//! token's answer in words, and beside the sphere its candidates at the depth slider's layer. The
//! numbers are the engine's (`engine::lenses::logit_lens`).

use engine::lenses::logit_lens::lens_in_words;
use leptos::prelude::*;

use crate::lab::{logit_lens, Lab};
use crate::views::panel::Explain;
use crate::views::token_style::glyph as shown;

/// The lens block of the reading section: the button, the sentence and the grid.
#[component]
pub fn ModelLens(lab: Lab, at: Signal<Option<usize>>) -> impl IntoView {
    let m = lab.real;
    let lens = m.lensing.result;
    let words = move || {
        lens.with(|l| match l {
            Some(Ok(l)) => m.reading.with(|r| {
                let r = r.as_ref()?;
                lens_in_words(l, &r.pieces, at.get()?, r.predicts != "masked")
            }),
            _ => None,
        })
    };
    let grid = move || {
        let pieces = m.reading.with(|r| r.as_ref().map(|r| r.pieces.clone()).unwrap_or_default());
        lens.with(|l| {
            let l = l.as_ref()?.as_ref().ok()?;
            let last = l.depths.len() - 1;
            let heads = pieces.iter().enumerate().map(|(i, p)| {
                view! { <th scope="col" class:picked=move || at.get() == Some(i)>{shown(p)}</th> }
            });
            let rows = l.depths.iter().enumerate().map(|(d, cells)| {
                let cells = cells.iter().enumerate().map(|(i, c)| {
                    let (id, piece, p) = c.top.first().cloned().unwrap_or_default();
                    let title: Vec<String> = c.top.iter().map(|(_, s, q)| format!("\"{}\" {:.0}%", shown(s), 100.0 * q)).collect();
                    view! {
                        <td
                            data-id=id
                            data-p=p
                            data-rank=c.rank
                            class:answer=c.rank == 1
                            class:picked=move || at.get() == Some(i)
                            style=format!("background: color-mix(in srgb, var(--accent) {:.0}%, var(--panel))", 70.0 * p)
                            title=title.join(", ")
                        >
                            {shown(&piece)}
                        </td>
                    }
                });
                let name = if d == last { "out".to_string() } else { d.to_string() };
                view! { <tr><th scope="row">{name}</th>{cells.collect_view()}</tr> }
            });
            Some(view! {
                <p class="caption">
                    "Rows: the depth (out: the model's own output). Columns: the tokens. Each cell: the head's top \
                     candidate there, the darker the likelier; outlined where it is already the final answer. \
                     Hover for the top five."
                </p>
                <table id="model-lens-grid" class="model-table lens-grid">
                    <thead><tr><th scope="col">"depth"</th>{heads.collect_view()}</tr></thead>
                    <tbody>{rows.collect_view()}</tbody>
                </table>
            })
        })
    };
    view! {
        <div id="model-lens-block" class="model-block">
            <h3>"The logit lens: what the model would say at every depth"</h3>
            <p class="caption">
                "The model's own head (its final norm and its unembedding) read from the stream entering each layer, as \
                 if the model stopped there: where does its answer appear?"
            </p>
            <div class="row">
                <button id="model-lens-run" type="button" on:click=move |_| logit_lens::ask(lab)>
                    "Read every depth"
                </button>
            </div>
            <p id="model-lens-words">{words}</p>
            {move || lens.with(|l| match l {
                Some(Err(e)) => Some(view! { <p id="model-lens-error" class="error" role="alert">{e.clone()}</p> }),
                _ => None,
            })}
            {grid}
            <Explain>
                "At every depth the stream is put through the model's final norm and its unembedding, the same head \
                 that makes its predictions at the end (a masked LM's: its masked-LM head). Early layers are read \
                 through a head trained for the last one: what it shows there is the head's reading of the stream, \
                 not what the layer computes, and a layer may hold what the head cannot read (the known caveat of \
                 the logit lens)."
            </Explain>
        </div>
    }
}

/// Beside the sphere: the followed token's candidates at the depth slider's layer, once the lens
/// has been read.
pub fn lens_now(lab: Lab, at: Signal<Option<usize>>) -> impl IntoView {
    let m = lab.real;
    let line = move || {
        let depth = lab.view.depth.get();
        m.lensing.result.with(|l| {
            let l = l.as_ref()?.as_ref().ok()?;
            let last = l.depths.len() - 1;
            let cell = l.depths.get(depth.min(last))?.get(at.get()?)?;
            let top: Vec<String> =
                cell.top.iter().map(|(_, s, q)| format!("\"{}\" {:.0}%", shown(s), 100.0 * q)).collect();
            let place = if depth >= last { "the output".to_string() } else { format!("layer {depth}") };
            Some(format!("The logit lens at {place} (the depth slider): {}", top.join(", ")))
        })
    };
    view! { <p id="model-lens-now" class="note">{line}</p> }
}
