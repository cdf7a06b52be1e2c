//! "Brownian or not?": do the tokens move over training like a diffusion on the sphere (the mean
//! cosine, the displacement, two estimates of D, KS against simulated walkers), or like particles
//! that attention pulls into clusters?

use leptos::prelude::*;

use super::plot::{Line, PALETTE};
use super::{data, Chart};
use crate::lab::Lab;
use crate::views::panel::{symbol_key, verdict_line, Panel, MOTION_KEY};

/// "Brownian or not?": E[cos theta] over training for the tokens, the closed form with the fitted D,
/// and Brownian ghost walkers from the same start points; D, R^2 and KS.
#[component]
pub fn BrownianPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    use engine::session::Brownian as Analysis;
    let current = Memo::new(move |_| lab.panels.with(|s| s.as_ref().and_then(|s| s.brownian.clone())));
    // The depth slider moved: the worker analyses that depth now, also while paused.
    Effect::new(move |prev: Option<usize>| {
        let depth = lab.view.depth.get();
        if prev.is_some_and(|p| p != depth) {
            lab.send(common::protocol::Command::SetDepth { depth });
        }
        depth
    });
    // Both charts: the tokens (dots), the closed form with the fitted D and the simulated walkers,
    // from the first frame on.
    let lines = move |curves: Curves| {
        move |_| match current.get() {
            Some(Ok(a)) => brownian_lines(&a, curves),
            _ => (Vec::new(), 1.0),
        }
    };
    let value =
        move |f: fn(&Analysis) -> f64| move || current.with(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(f));
    let shown = |v: Option<f64>, digits: usize| v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "–".into());
    let d = value(|a| a.diffusion);
    let r2 = value(|a| a.r_squared);
    let ks = value(|a| a.ks);
    let ks_critical = value(|a| a.ks_critical);
    let d_ml = value(|a| a.diffusion_ml);
    let ci = move || current.with(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(|a| a.diffusion_ci));
    let points = move || current.with(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(|a| a.points));
    let flow = Memo::new(move |_| lab.panels.with(|s| s.as_ref().and_then(|s| s.flow.clone())));
    let flow_chart = move |_| match flow.get() {
        Some(Ok(f)) => flow_lines(&f),
        _ => (Vec::new(), 1.0),
    };
    let flow_text = move || match flow.get() {
        None => "Fitted when the run ends (it takes about a second).".to_string(),
        Some(Err(e)) => format!("No particle fit: {e}"),
        Some(Ok(f)) => format!("Fitted on the first {} tokens at depth {}.", f.points, f.depth),
    };
    let flow_value = move |g: fn(&engine::session::Flow) -> String| {
        move || flow.with(|f| f.as_ref().and_then(|f| f.as_ref().ok()).map(g))
    };
    view! {
        <Panel
            name="brownian"
            title="Brownian or not?"
            explain="Treat the probe's tokens (every probe row, pooled) at the sphere view's depth, snapshot after snapshot of training, as \
                particles on the sphere of radius R in n = d_model dimensions. For Brownian motion with \
                diffusion coefficient D, the mean cosine to the start decays as E[cos θ] = exp(-(n-1) D t / R²), \
                and the mean squared displacement (chord) grows as MSD = 2R²(1 - E[cos θ]) towards 2R². \
                We fit D by least squares on ln E[cos θ] (R² says how straight that line is), then run Brownian \
                walkers from the same start points with the fitted D and compare the distributions of angles \
                from the start at the last snapshot (KS distance: 0 identical, 1 disjoint, beside its 5% \
                critical value). A second estimate of D comes from every token's steps between snapshots \
                (maximum likelihood, with a 95% interval): one diffusion gives the same D both ways. A good \
                fit, a small KS and agreeing estimates mean the tokens move like a diffusion; otherwise they \
                drift or cluster. Turn on the ghosts in the sphere view to see the walkers beside the tokens."
        >
            // The chart first: the verdict and the numbers grow as the run goes, under it.
            <Chart
                lab=lab
                dark=dark
                id="brownian-chart"
                file="spherewalk-brownian.png"
                label="mean cosine to the start over training: tokens, closed form and Brownian walkers"
                caption="E[cos θ] from the first frame"
                y_desc="E[cos θ]"
                lines=lines(Curves::Cosine)
                data=vec![data("data-points", move || Some(current.with(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map_or(0, |a| a.times.len())).to_string()))]
            />
            <p class="stats-line">
                "Does the mean cosine fall like a diffusion's? D fitted to it = " <span id="brownian-d" data-value=move || d().map(|v| v.to_string())>{move || d().map(|v| format!("{v:.3e}")).unwrap_or_else(|| "–".into())}</span>
                " per step; R² = " <span id="brownian-r2" data-value=move || r2().map(|v| v.to_string())>{move || shown(r2(), 3)}</span>
                "; KS = " <span id="brownian-ks" data-value=move || ks().map(|v| v.to_string())>{move || shown(ks(), 3)}</span>
                " (5% critical value " {move || shown(ks_critical(), 2)} ")"
            </p>
            <p class="stats-line">
                "Is it one diffusion? D from the steps between snapshots = "
                <span id="brownian-d-ml" data-value=move || d_ml().map(|v| v.to_string())>{move || d_ml().map(|v| format!("{v:.3e}")).unwrap_or_else(|| "–".into())}</span>
                ", 95% interval "
                <span id="brownian-d-ci" data-value=move || ci().map(|[a, b]| format!("{a},{b}"))>
                    {move || ci().map(|[a, b]| format!("{a:.3e} to {b:.3e}")).unwrap_or_else(|| "–".into())}
                </span>
                {move || points().map(|n| format!(" ({n} tokens pooled)")).unwrap_or_default()}
            </p>
            {verdict_line("verdict-brownian".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.brownian.clone())))}
            {symbol_key("brownian-key", &MOTION_KEY)}
            <p id="brownian-note" class="note">
                {move || match current.get() {
                    None => "Train a little: the analysis needs three snapshots of the probe row.".to_string(),
                    Some(Err(e)) => format!("No fit yet: {e}"),
                    Some(Ok(a)) => format!(
                        "depth {}: {} snapshots over {:.0} steps",
                        a.depth,
                        a.times.len() + 1,
                        a.times.last().copied().unwrap_or(0.0)
                    ),
                }}
            </p>
            <Chart
                lab=lab
                dark=dark
                id="brownian-msd-chart"
                file="spherewalk-msd.png"
                label="mean squared displacement from the start over training: tokens, closed form and Brownian walkers"
                caption="mean squared displacement from the first frame"
                y_desc="MSD"
                lines=lines(Curves::Msd)
            />
            <h3>"Brownian motion or interacting particles?"</h3>
            <p class="note">
                "Independent Brownian motions pull token pairs apart: their mean inner product decays to 0. Tokens moved by "
                "attention as interacting particles (Geshkovski et al.) are pulled together into clusters: it grows towards 1. "
                "Both models start from the first snapshot's tokens and are fitted to the same two curves; the particles "
                "(diamonds in the sphere view, with the ghosts on) are where the fitted flow takes the tokens."
            </p>
            <p
                id="brownian-flow"
                class="stats-line"
                data-better=flow_value(|f| f.better.clone())
                data-depth=flow_value(|f| f.depth.to_string())
                data-rmse-brownian=flow_value(|f| f.rmse_brownian.to_string())
                data-rmse-particles=flow_value(|f| f.rmse_particles.to_string())
                data-beta=flow_value(|f| f.beta.to_string())
            >
                {flow_text}
            </p>
            {verdict_line("verdict-flow".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.flow.clone())))}
            <Chart
                lab=lab
                dark=dark
                id="brownian-flow-chart"
                file="spherewalk-particles.png"
                label="mean inner product of token pairs over training: tokens, Brownian motion and the particles' attention flow"
                caption="how clustered: mean inner product of token pairs"
                y_desc="mean <u_i, u_j>"
                lines=flow_chart
                data=vec![data("data-points", move || Some(flow.with(|f| f.as_ref().and_then(|f| f.as_ref().ok()).map_or(0, |f| f.times.len())).to_string()))]
            />
        </Panel>
    }
}

/// One curve of the Brownian panel's charts, in the palette's `color`.
fn curve(label: String, color: usize, points: Vec<(f64, f64)>, dots: bool) -> Line {
    Line { label, color: PALETTE[color], width: 2, points, dots, at_end: false }
}

/// The particles chart: the tokens' mean pairwise inner product (dots) and each fitted model's.
fn flow_lines(f: &engine::session::Flow) -> (Vec<Line>, f64) {
    // Every curve starts at the first frame, from the tokens' own value.
    let pts = |ys: &[f64]| {
        std::iter::once((0.0, f.inner_start)).chain(f.times.iter().copied().zip(ys.iter().copied())).collect()
    };
    let lines = vec![
        curve("tokens".into(), 0, pts(&f.mean_inner), true),
        curve(
            format!("Brownian motion fitted to both curves, D = {:.2e}", f.diffusion),
            2,
            pts(&f.brownian_inner),
            false,
        ),
        curve(format!("particles' attention flow, β = {:.2}", f.beta), 3, pts(&f.particles_inner), false),
    ];
    (lines, f.times.last().copied().unwrap_or(1.0))
}

/// Which of the Brownian panel's two charts.
#[derive(Clone, Copy)]
enum Curves {
    Cosine,
    Msd,
}

/// The lines of one Brownian chart and its x range: every curve starts at the first frame, where
/// the cosine is 1 and the displacement 0.
fn brownian_lines(a: &engine::session::Brownian, curves: Curves) -> (Vec<Line>, f64) {
    let (start, tokens, closed, walkers, closed_label) = match curves {
        Curves::Cosine => (
            1.0,
            &a.mean_cos,
            &a.closed_form,
            &a.walkers_cos,
            format!("closed form exp(-(n-1)Dt/R^2), D = {:.2e}", a.diffusion),
        ),
        Curves::Msd => {
            (0.0, &a.msd, &a.msd_closed_form, &a.msd_walkers, "closed form 2R^2(1 - exp(-(n-1)Dt/R^2))".to_string())
        }
    };
    let pts =
        |ys: &[f64]| std::iter::once((0.0, start)).chain(a.times.iter().copied().zip(ys.iter().copied())).collect();
    let lines = vec![
        curve("tokens".into(), 0, pts(tokens), true),
        curve(closed_label, 1, pts(closed), false),
        curve("Brownian walkers (simulated)".into(), 2, pts(walkers), false),
    ];
    (lines, a.times.last().copied().unwrap_or(1.0))
}
