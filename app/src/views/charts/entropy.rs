//! Attention entropy over training: JoMA's sparse-then-dense, with its verdict per layer.

use leptos::prelude::*;

use super::plot;
use super::{data, Chart};
use crate::lab::Lab;
use crate::views::panel::{verdict_line, Panel};

#[component]
pub fn EntropyPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let values = move || {
        lab.curves.entropy.with(|e| {
            let lines = plot::entropy_lines(e);
            let curves: Vec<&[(f64, f64)]> = lines.iter().map(|l| l.points.as_slice()).collect();
            serde_json::to_string(&curves).ok()
        })
    };
    // The layers' verdict lines are made again only when their number changes: each keeps its own
    // pace of change (a class reads it), which a line made anew with every frame would lose.
    let layers = Memo::new(move |_| lab.panels.with(|p| p.as_ref().map_or(0, |p| p.verdicts.joma.len())));
    view! {
        <Panel
            name="entropy"
            title="Entropy over training (JoMA)"
            explain="The mean entropy H = -sum_j P_ij ln P_ij of the attention rows of each layer, over all heads, \
                on the probe row. Uniform causal attention over T positions has (1/T) sum ln i. JoMA (Tian \
                et al., 2023) predicts that attention first becomes sparse (entropy falls) on the tokens that \
                co-occur most, then dense again as less frequent ones are learned, when the MLP is \
                nonlinear (GELU, ReLU); with the identity MLP it keeps falling. Look for a dip and a rebound; \
                the verdict below says whether this run shows one."
        >
            <Chart
                lab=lab
                dark=dark
                id="entropy-chart"
                file="spherewalk-entropy.png"
                label="mean attention entropy of each layer by training step"
                caption="attention entropy of the probe row"
                y_desc="nats"
                lines=move |_| (lab.curves.entropy.with(|e| plot::entropy_lines(e)), lab.total_steps.get() as f64)
                data=vec![data("data-points", move || Some(lab.curves.entropy.with(Vec::len).to_string())), data("data-values", values)]
            />
            <div id="verdict-joma">
                {move || {
                    (0..layers.get())
                        .map(|l| verdict_line(format!("verdict-joma-{l}"), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.joma.get(l).cloned()))))
                        .collect_view()
                }}
            </div>
        </Panel>
    }
}
