//! The plot panels: loss, attention entropy over training (JoMA), second-order diagnostics.

use leptos::html::Canvas;
use leptos::prelude::*;

use crate::charts::{self, Line, PALETTE};
use crate::lab::Lab;
use engine::config::OptimizerConfig;

/// A panel's "What is this?": the explanation, folded until asked for.
#[component]
pub fn Explain(children: Children) -> impl IntoView {
    view! {
        <details class="explain">
            <summary>"What is this?"</summary>
            <p>{children()}</p>
        </details>
    }
}

/// A button that offers a figure (a canvas, by id) as a PNG download.
#[component]
pub fn PngButton(canvas: &'static str, file: &'static str) -> impl IntoView {
    let failed = RwSignal::new(None::<String>);
    view! {
        <button
            id=format!("png-{canvas}")
            type="button"
            class="png"
            aria-label=format!("download this figure as {file}")
            on:click=move |_| failed.set(crate::export::canvas_png(canvas, file).err())
        >
            "PNG"
        </button>
        {move || failed.get().map(|e| view! { <span class="error">{e}</span> })}
    }
}

/// How a verdict came out, as its CSS class and `data-agreement`.
pub fn agreement_tag(agreement: Option<engine::session::Agreement>) -> &'static str {
    use engine::session::Agreement;
    match agreement {
        Some(Agreement::Agrees) => "agrees",
        Some(Agreement::Partly) => "partly",
        Some(Agreement::Disagrees) => "disagrees",
        Some(Agreement::NotYet) | None => "not-yet",
    }
}

/// A panel's claim answered in words (computed by the engine), marked by how it came out.
pub fn verdict_line(
    id: String,
    verdict: impl Fn() -> Option<engine::session::Verdict> + Send + Sync + Copy + 'static,
) -> impl IntoView {
    let tag = move || agreement_tag(verdict().map(|v| v.agreement));
    let settled = move || verdict().is_some_and(|v| v.settled);
    let class = move || format!("verdict {}{}", tag(), if settled() { "" } else { " provisional" });
    view! {
        <Show when=move || verdict().is_some()>
            <p id=id.clone() class=class data-agreement=tag data-settled=move || settled().to_string() role="status">
                {move || verdict().map(|v| v.sentence).unwrap_or_default()}
            </p>
        </Show>
    }
}

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
        lab.layout.track();
        let x_max = lab.total_steps.get() as f64;
        let lines = lines(dark);
        let Some(canvas) = canvas_ref.get() else { return };
        if let Err(e) = charts::draw_lines(canvas, caption, y_desc, &lines, x_max, dark) {
            lab.error.set(Some(format!("could not draw the {caption} chart: {e}")));
        }
    });
}

/// The race's rivals (entrant 1..) as lines against steps, with their validation points.
fn rival_lines(lab: Lab) -> Vec<Line> {
    let pts = |p: &[(usize, f32)]| p.iter().map(|&(s, l)| (s as f64, l as f64)).collect::<Vec<_>>();
    lab.race.with(|r| {
        r.iter()
            .enumerate()
            .skip(1)
            .flat_map(|(i, e)| {
                let line = |what: &str, points: &[(usize, f32)], dots| Line {
                    label: format!("{what}, {}", e.label),
                    color: charts::entrant_color(i),
                    width: 2,
                    points: pts(points),
                    dots,
                };
                [line("train loss", &e.train, false), line("validation", &e.val, true)]
            })
            .collect()
    })
}

#[component]
pub fn LossPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    chart_effect(lab, canvas_ref, dark, "loss (cross-entropy)", "nats", move |dark| {
        let own = lab.race.with(|r| r.first().map(|e| e.label.clone()));
        let (train_label, val_label) = match &own {
            Some(l) => (format!("train loss, {l}"), format!("validation, {l}")),
            None => ("train loss".to_string(), "validation loss".to_string()),
        };
        let mut lines = lab.train.with(|t| {
            lab.val.with(|v| lab.earlier.with(|e| charts::loss_lines(t, &train_label, v, &val_label, e, dark)))
        });
        lines.extend(rival_lines(lab));
        let vocab = lab.run_config.with(|c| c.as_ref().map(|c| c.model.vocab));
        if let (Some(b), Some(v)) = (lab.baselines.get(), vocab) {
            lines.extend(charts::baseline_lines(v, b.unigram, b.bigram, lab.total_steps.get() as f64, dark));
        }
        lines
    });
    let overfitting = move || {
        let metrics = engine::session::Metrics { train: lab.train.get(), val: lab.val.get(), diagnostics: Vec::new() };
        metrics.overfitting().map(|o| o.text)
    };
    let race_ref = NodeRef::<Canvas>::new();
    Effect::new(move |_| {
        let dark = dark.get();
        lab.layout.track();
        let Some(canvas) = race_ref.get() else { return };
        let (lines, x_max) = lab.race.with(|r| {
            let lines: Vec<Line> = r
                .iter()
                .enumerate()
                .map(|(i, e)| Line {
                    label: e.label.clone(),
                    color: charts::entrant_color(i),
                    width: 2,
                    points: e.by_time.iter().map(|&(t, l)| (t, l as f64)).collect(),
                    dots: false,
                })
                .collect();
            let x_max = r.iter().flat_map(|e| e.by_time.last().map(|p| p.0)).fold(0.0, f64::max);
            (lines, x_max)
        });
        if lines.is_empty() {
            return;
        }
        if let Err(e) = charts::draw_lines_against(
            canvas,
            "race: training loss against compute time",
            "seconds",
            "nats",
            &lines,
            x_max.max(0.1),
            dark,
        ) {
            lab.error.set(Some(format!("could not draw the race chart: {e}")));
        }
    });
    view! {
        <section id="panel-loss" class="panel" aria-labelledby="loss-title">
            <h2 id="loss-title">"Loss"</h2>
            <Explain>
                    "Cross-entropy of the next token, in nats: the training loss of every step (line) and the "
                    "loss on held-out validation batches (dots). ln(vocabulary) is the loss of a uniform guess. "
                    "Runs you reset or restart stay on the chart (thin lines), so two optimizers can be compared."
            </Explain>
            <PngButton canvas="loss-chart" file="spherewalk-loss.png" />
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
                data-baselines=move || {
                    lab.baselines.get().zip(lab.run_config.with(|c| c.as_ref().map(|c| c.model.vocab))).map(|(b, v)| {
                        format!("{:.5},{:.5},{:.5}", (v as f64).ln(), b.unigram, b.bigram)
                    })
                }
            ></canvas>
            <p id="baselines" class="note">
                {move || {
                    lab.baselines.get().zip(lab.run_config.with(|c| c.as_ref().map(|c| c.model.vocab))).map(|(b, v)| {
                        format!(
                            "Without learning: a uniform guess among the {v} symbols scores {:.2}, letter frequencies \
                             (unigram) {:.2}, the previous symbol alone (bigram) {:.2}.",
                            (v as f64).ln(),
                            b.unigram,
                            b.bigram
                        )
                    })
                }}
            </p>
            <Show when=move || overfitting().is_some()>
                <p id="overfitting" class="error" role="status">{move || overfitting().unwrap_or_default()}</p>
            </Show>
            <Show when=move || lab.race.with(|r| !r.is_empty())>
                <p class="note">
                    "A race: the entrants train at the same time, each in its own worker, on the same data from the "
                    "same initial weights. Above against steps (sample efficiency), below against seconds of compute "
                    "(the second-order step costs more per step)."
                </p>
                <PngButton canvas="race-chart" file="spherewalk-race.png" />
                <canvas
                    id="race-chart"
                    node_ref=race_ref
                    width="760"
                    height="300"
                    role="img"
                    aria-label="training loss of each race entrant against seconds of compute"
                    data-entrants=move || lab.race.with(|r| r.iter().map(|e| e.label.clone()).collect::<Vec<_>>().join(","))
                    data-steps=move || lab.race.with(|r| r.iter().map(|e| e.train.len().to_string()).collect::<Vec<_>>().join(","))
                    data-val-points=move || lab.race.with(|r| r.iter().map(|e| e.val.len().to_string()).collect::<Vec<_>>().join(","))
                ></canvas>
                {verdict_line("race-verdict".into(), move || crate::lab::race::verdict(lab))}
                <table id="race-stats" class="race-stats">
                    <thead>
                        <tr>
                            <th scope="col">"entrant"</th>
                            <th scope="col">"step"</th>
                            <th scope="col">"train loss"</th>
                            <th scope="col">"validation loss"</th>
                            <th scope="col">"seconds"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {move || {
                            lab.race
                                .get()
                                .into_iter()
                                .map(|e| {
                                    let last = |p: &[(usize, f32)]| p.last().map(|x| format!("{:.4}", x.1)).unwrap_or("–".into());
                                    view! {
                                        <tr>
                                            <th scope="row">{e.label.clone()}</th>
                                            <td>{e.train.last().map_or(0, |x| x.0)}</td>
                                            <td>{last(&e.train)}</td>
                                            <td>{last(&e.val)}</td>
                                            <td>{e.by_time.last().map(|x| format!("{:.1}", x.0)).unwrap_or("–".into())}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()
                        }}
                    </tbody>
                </table>
            </Show>
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
            <Explain>
                    "The mean entropy H = -sum_j P_ij ln P_ij of the attention rows of each layer, over all heads, "
                    "on the probe row. Uniform causal attention over T positions has (1/T) sum ln i. JoMA (Tian "
                    "et al., 2023) predicts that attention first becomes sparse (entropy falls) on the tokens that "
                    "co-occur most, then dense again as less frequent ones are learned, when the MLP is "
                    "nonlinear (GELU, ReLU); with the identity MLP it keeps falling. Look for a dip and a rebound; "
                    "the verdict below says whether this run shows one."
            </Explain>
            <PngButton canvas="entropy-chart" file="spherewalk-entropy.png" />
            <canvas
                id="entropy-chart"
                node_ref=canvas_ref
                width="760"
                height="300"
                role="img"
                aria-label="mean attention entropy of each layer by training step"
                data-points=move || lab.entropy.with(Vec::len)
                data-values=move || {
                    lab.entropy.with(|e| {
                        let lines = charts::entropy_lines(e);
                        let curves: Vec<&[(f64, f64)]> = lines.iter().map(|l| l.points.as_slice()).collect();
                        serde_json::to_string(&curves).unwrap_or_default()
                    })
                }
            ></canvas>
            <div id="verdict-joma">
                {move || {
                    let n = lab.panels.with(|p| p.as_ref().map_or(0, |p| p.verdicts.joma.len()));
                    (0..n)
                        .map(|l| verdict_line(format!("verdict-joma-{l}"), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.joma.get(l).cloned()))))
                        .collect_view()
                }}
            </div>
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
            class:hidden=move || !OptimizerConfig::named(&second_order()).is_ok_and(|o| o.second_order().is_some())
        >
            <h2 id="diagnostics-title">"Second-order diagnostics"</h2>
            <Explain>
                    "K-FAC and CG-FAC precondition the gradient with a Kronecker-factored curvature (A = E[a a^T] "
                    "of each layer's inputs, G = E[g g^T] of its output gradients). CG-FAC solves (A ⊗ G + λI) x = g "
                    "with conjugate gradients instead of inverting the factors: shown are the CG iterations, the "
                    "final relative residual |r|/|r0|, the damping λ and how often a layer fell back to the plain "
                    "gradient. Few iterations and small residuals mean the solve is easy."
            </Explain>
            <pre id="diagnostics" aria-live="off">
                {move || lab.diag_text.get().unwrap_or_else(|| "no second-order step yet".into())}
            </pre>
            <PngButton canvas="diagnostics-chart" file="spherewalk-diagnostics.png" />
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

/// "Brownian or not?": E[cos theta] over training for the tokens, the closed form with the fitted D,
/// and Brownian ghost walkers from the same start points; D, R^2 and KS.
#[component]
pub fn BrownianPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    use engine::session::Brownian as Analysis;
    let canvas_ref = NodeRef::<Canvas>::new();
    let current = Memo::new(move |_| lab.panels.with(|s| s.as_ref().and_then(|s| s.brownian.clone())));
    // The depth slider moved: the worker analyses that depth now, also while paused.
    Effect::new(move |prev: Option<usize>| {
        let depth = lab.depth.get();
        if prev.is_some_and(|p| p != depth) {
            lab.send(spherewalk::protocol::Command::SetDepth { depth });
        }
        depth
    });
    // Both charts: the tokens (dots), the closed form with the fitted D and the simulated walkers,
    // from the first frame on.
    let chart = move |canvas_ref: NodeRef<Canvas>, title: &'static str, y: &'static str, curves: Curves| {
        Effect::new(move |_| {
            let dark = dark.get();
            lab.layout.track();
            let Some(canvas) = canvas_ref.get() else { return };
            let (lines, x_max) = match current.get() {
                Some(Ok(a)) => brownian_lines(&a, curves),
                _ => (Vec::new(), 1.0),
            };
            if let Err(e) = charts::draw_lines(canvas, title, y, &lines, x_max, dark) {
                lab.error.set(Some(format!("could not draw the chart \"{title}\": {e}")));
            }
        });
    };
    chart(canvas_ref, "E[cos θ] from the first frame", "E[cos θ]", Curves::Cosine);
    let msd_ref = NodeRef::<Canvas>::new();
    chart(msd_ref, "mean squared displacement from the first frame", "MSD", Curves::Msd);
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
    let flow_ref = NodeRef::<Canvas>::new();
    Effect::new(move |_| {
        let dark = dark.get();
        lab.layout.track();
        let Some(canvas) = flow_ref.get() else { return };
        let (lines, x_max) = match flow.get() {
            Some(Ok(f)) => flow_lines(&f),
            _ => (Vec::new(), 1.0),
        };
        if let Err(e) = charts::draw_lines(
            canvas,
            "how clustered: mean inner product of token pairs",
            "mean <u_i, u_j>",
            &lines,
            x_max,
            dark,
        ) {
            lab.error.set(Some(format!("could not draw the particles chart: {e}")));
        }
    });
    let flow_text = move || match flow.get() {
        None => "Fitted when the run ends (it takes about a second).".to_string(),
        Some(Err(e)) => format!("No particle fit: {e}"),
        Some(Ok(f)) => format!("Fitted on the first {} tokens at depth {}.", f.points, f.depth),
    };
    let flow_value = move |g: fn(&engine::session::Flow) -> String| {
        move || flow.with(|f| f.as_ref().and_then(|f| f.as_ref().ok()).map(g))
    };
    view! {
        <section id="panel-brownian" class="panel" aria-labelledby="brownian-title">
            <h2 id="brownian-title">"Brownian or not?"</h2>
            <Explain>
                    "Treat the probe's tokens (every probe row, pooled) at the sphere view's depth, snapshot after snapshot of training, as "
                    "particles on the sphere of radius R in n = d_model dimensions. For Brownian motion with "
                    "diffusion coefficient D, the mean cosine to the start decays as E[cos θ] = exp(-(n-1) D t / R²), "
                    "and the mean squared displacement (chord) grows as MSD = 2R²(1 - E[cos θ]) towards 2R². "
                    "We fit D by least squares on ln E[cos θ] (R² says how straight that line is), then run Brownian "
                    "walkers from the same start points with the fitted D and compare the distributions of angles "
                    "from the start at the last snapshot (KS distance: 0 identical, 1 disjoint, beside its 5% "
                    "critical value). A second estimate of D comes from every token's steps between snapshots "
                    "(maximum likelihood, with a 95% interval): one diffusion gives the same D both ways. A good "
                    "fit, a small KS and agreeing estimates mean the tokens move like a diffusion; otherwise they "
                    "drift or cluster. Turn on the ghosts in the sphere view to see the walkers beside the tokens."
            </Explain>
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
            <PngButton canvas="brownian-chart" file="spherewalk-brownian.png" />
            <canvas
                id="brownian-chart"
                node_ref=canvas_ref
                width="760"
                height="300"
                role="img"
                aria-label="mean cosine to the start over training: tokens, closed form and Brownian walkers"
                data-points=move || current.with(|a| a.as_ref().and_then(|a| a.as_ref().ok()).map(|a| a.times.len()).unwrap_or(0))
            ></canvas>
            <PngButton canvas="brownian-msd-chart" file="spherewalk-msd.png" />
            <canvas
                id="brownian-msd-chart"
                node_ref=msd_ref
                width="760"
                height="300"
                role="img"
                aria-label="mean squared displacement from the start over training: tokens, closed form and Brownian walkers"
            ></canvas>
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
            <PngButton canvas="brownian-flow-chart" file="spherewalk-particles.png" />
            <canvas
                id="brownian-flow-chart"
                node_ref=flow_ref
                width="760"
                height="300"
                role="img"
                aria-label="mean inner product of token pairs over training: tokens, Brownian motion and the particles' attention flow"
                data-points=move || flow.with(|f| f.as_ref().and_then(|f| f.as_ref().ok()).map(|f| f.times.len()).unwrap_or(0))
            ></canvas>
        </section>
    }
}

/// One curve of the Brownian panel's charts, in the palette's `color`.
fn curve(label: String, color: usize, points: Vec<(f64, f64)>, dots: bool) -> Line {
    Line { label, color: PALETTE[color], width: 2, points, dots }
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
