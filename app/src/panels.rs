//! The plot panels: loss, attention entropy over training (JoMA), second-order diagnostics.

use leptos::html::Canvas;
use leptos::prelude::*;

use crate::charts::{self, Line, PALETTE};
use crate::lab::Lab;

fn join_losses(points: &[(usize, f32)]) -> String {
    points.iter().map(|(_, l)| format!("{l:.5}")).collect::<Vec<_>>().join(",")
}

/// Redraws a plotters chart whenever `lines` changes; failures go to the page's error line.
fn chart_effect(
    lab: Lab,
    canvas_ref: NodeRef<Canvas>,
    dark: RwSignal<bool>,
    caption: &'static str,
    y_desc: &'static str,
    lines: impl Fn(bool) -> Vec<Line> + 'static,
) {
    Effect::new(move |_| {
        let dark = dark.get();
        let x_max = lab.total_steps.get() as f64;
        let lines = lines(dark);
        let Some(canvas) = canvas_ref.get() else { return };
        if let Err(e) = charts::draw_lines(canvas, caption, y_desc, &lines, x_max, dark) {
            lab.error.set(Some(format!("could not draw the {caption} chart: {e}")));
        }
    });
}

#[component]
pub fn LossPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    chart_effect(lab, canvas_ref, dark, "loss (cross-entropy)", "nats", move |dark| {
        lab.train.with(|t| lab.val.with(|v| lab.earlier.with(|e| charts::loss_lines(t, v, e, dark))))
    });
    view! {
        <section id="panel-loss" class="panel" aria-labelledby="loss-title">
            <h2 id="loss-title">"Loss"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "Cross-entropy of the next token, in nats: the training loss of every step (line) and the "
                    "loss on held-out validation batches (dots). ln(vocabulary) is the loss of a uniform guess. "
                    "Runs you reset or restart stay on the chart (thin lines), so two optimizers can be compared."
                </p>
            </details>
            <canvas
                id="loss-chart"
                node_ref=canvas_ref
                width="760"
                height="360"
                role="img"
                aria-label="training and validation loss by step"
                data-points=move || lab.train.with(Vec::len)
                data-train-losses=move || lab.train.with(|t| join_losses(t))
                data-val-losses=move || lab.val.with(|v| join_losses(v))
            ></canvas>
        </section>
    }
}

#[component]
pub fn EntropyPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    chart_effect(lab, canvas_ref, dark, "attention entropy of the probe row", "nats", move |_| {
        lab.entropy.with(|e| charts::entropy_lines(e))
    });
    view! {
        <section id="panel-entropy" class="panel" aria-labelledby="entropy-title">
            <h2 id="entropy-title">"Entropy over training (JoMA)"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "The mean entropy H = -sum_j P_ij ln P_ij of the attention rows of each layer, over all heads, "
                    "on the probe row. Uniform causal attention over T positions has (1/T) sum ln i. JoMA (Tian "
                    "et al., 2023) predicts that attention first becomes sparse (entropy falls) on the tokens that "
                    "co-occur most, then dense again as less frequent ones are learned: look for a dip and a "
                    "rebound, clearest with the identity activation on the hierarchy data."
                </p>
            </details>
            <canvas
                id="entropy-chart"
                node_ref=canvas_ref
                width="760"
                height="300"
                role="img"
                aria-label="mean attention entropy of each layer by training step"
                data-points=move || lab.entropy.with(Vec::len)
            ></canvas>
        </section>
    }
}

#[component]
pub fn DiagnosticsPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    chart_effect(lab, canvas_ref, dark, "CG iterations per layer (mean)", "iterations", move |_| {
        lab.diagnostics.with(|d| {
            vec![Line {
                label: "mean CG iterations".into(),
                color: PALETTE[2],
                width: 2,
                points: d.iter().map(|p| (p.step as f64, p.mean_iterations)).collect(),
                dots: false,
            }]
        })
    });
    let second_order = move || {
        lab.run_settings
            .with(|s| s.as_ref().map(|s| s.optimizer.clone()))
            .unwrap_or_else(|| lab.settings.with(|s| s.optimizer.clone()))
    };
    view! {
        <section
            id="panel-diagnostics"
            class="panel"
            aria-labelledby="diagnostics-title"
            class:hidden=move || !matches!(second_order().as_str(), "kfac" | "cgfac")
        >
            <h2 id="diagnostics-title">"Second-order diagnostics"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "K-FAC and CG-FAC precondition the gradient with a Kronecker-factored curvature (A = E[a a^T] "
                    "of each layer's inputs, G = E[g g^T] of its output gradients). CG-FAC solves (A ⊗ G + λI) x = g "
                    "with conjugate gradients instead of inverting the factors: shown are the CG iterations, the "
                    "final relative residual |r|/|r0|, the damping λ and how often a layer fell back to the plain "
                    "gradient. Few iterations and small residuals mean the solve is easy."
                </p>
            </details>
            <pre id="diagnostics" aria-live="off">
                {move || lab.diag_text.get().unwrap_or_else(|| "no second-order step yet".into())}
            </pre>
            <canvas
                id="diagnostics-chart"
                node_ref=canvas_ref
                width="760"
                height="260"
                role="img"
                aria-label="mean conjugate-gradient iterations by training step"
                data-points=move || lab.diagnostics.with(Vec::len)
            ></canvas>
        </section>
    }
}
