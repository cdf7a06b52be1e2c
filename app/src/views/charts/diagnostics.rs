//! The second-order optimizers' diagnostics: CG iterations, residuals, damping and fallbacks.

use engine::config::OptimizerConfig;
use leptos::prelude::*;

use super::plot::{Line, PALETTE};
use super::{data, Chart};
use crate::lab::Lab;
use crate::views::panel::Panel;

#[component]
pub fn DiagnosticsPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let lines = move |_| {
        let line = lab.curves.diagnostics.with(|d| Line {
            label: "mean CG iterations".into(),
            color: PALETTE[2],
            width: 2,
            points: d.iter().map(|p| (p.step as f64, p.mean_iterations)).collect(),
            dots: false,
            at_end: false,
        });
        (vec![line], lab.total_steps.get() as f64)
    };
    let second_order = move || {
        lab.run_settings
            .with(|s| s.as_ref().map(|s| s.optimizer.clone()))
            .unwrap_or_else(|| lab.settings.with(|s| s.optimizer.clone()))
    };
    view! {
        <Panel
            name="diagnostics"
            title="Second-order diagnostics"
            explain="K-FAC and CG-FAC precondition the gradient with a Kronecker-factored curvature (A = E[a a^T] \
                of each layer's inputs, G = E[g g^T] of its output gradients). CG-FAC solves (A ⊗ G + λI) x = g \
                with conjugate gradients instead of inverting the factors: shown are the CG iterations, the \
                final relative residual |r|/|r0|, the damping λ and how often a layer fell back to the plain \
                gradient. Few iterations and small residuals mean the solve is easy."
            hidden=Signal::derive(move || !OptimizerConfig::named(&second_order()).is_ok_and(|o| o.second_order().is_some()))
        >
            <pre id="diagnostics" aria-live="off">
                {move || lab.curves.diag_text.get().unwrap_or_else(|| "no second-order step yet".into())}
            </pre>
            <Chart
                lab=lab
                dark=dark
                id="diagnostics-chart"
                file="spherewalk-diagnostics.png"
                label="mean conjugate-gradient iterations by training step"
                caption="CG iterations per layer (mean)"
                y_desc="iterations"
                height=260
                lines=lines
                data=vec![data("data-points", move || Some(lab.curves.diagnostics.with(Vec::len).to_string()))]
            />
        </Panel>
    }
}
