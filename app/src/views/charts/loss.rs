//! The loss: training and validation by step, with earlier runs and the no-learning baselines; in a
//! race, every entrant by step and by seconds of compute, and the race's verdict.

use leptos::prelude::*;

use super::plot::{self, Line};
use super::{data, Chart};
use crate::lab::Lab;
use crate::views::panel::{column_heads, verdict_line, Panel};

fn join_losses(points: &[(usize, f32)]) -> String {
    points.iter().map(|(_, l)| format!("{l:.5}")).collect::<Vec<_>>().join(",")
}

/// The race's rivals (entrant 1..) as lines against steps, with their validation points: one
/// colour and one legend entry an entrant.
fn rival_lines(lab: Lab) -> Vec<Line> {
    let pts = |p: &[(usize, f32)]| p.iter().map(|&(s, l)| (s as f64, l as f64)).collect::<Vec<_>>();
    lab.race.with(|r| {
        r.iter()
            .enumerate()
            .skip(1)
            .flat_map(|(i, e)| {
                let line = |points: &[(usize, f32)], dots| Line {
                    label: e.label.clone(),
                    color: plot::entrant_color(i),
                    width: 2,
                    points: pts(points),
                    dots,
                    at_end: false,
                };
                [line(&e.train, false), line(&e.val, true)]
            })
            .collect()
    })
}

#[component]
pub fn LossPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let vocab = move || lab.run_config.with(|c| c.as_ref().map(|c| c.model.vocab));
    let loss_lines = move |dark| {
        // In a race each entrant is one colour and one legend entry (line: training, dots: validation).
        let own = lab.race.with(|r| r.first().map(|e| e.label.clone()));
        let (train_label, val) = match &own {
            Some(l) => (l.clone(), (l.clone(), plot::entrant_color(0))),
            None => ("train loss".to_string(), ("validation loss".to_string(), plot::PALETTE[1])),
        };
        let mut lines = lab.curves.train.with(|t| {
            lab.curves
                .val
                .with(|v| lab.curves.earlier.with(|e| plot::loss_lines(t, &train_label, v, (&val.0, val.1), e, dark)))
        });
        lines.extend(rival_lines(lab));
        let x_max = lab.total_steps.get() as f64;
        if let (Some(b), Some(v)) = (lab.curves.baselines.get(), vocab()) {
            lines.extend(plot::baseline_lines(v, b.unigram, b.bigram, x_max, dark));
        }
        (lines, x_max)
    };
    let overfitting = move || {
        let metrics = engine::session::Metrics {
            train: lab.curves.train.get(),
            val: lab.curves.val.get(),
            diagnostics: Vec::new(),
        };
        metrics.overfitting().map(|o| o.text)
    };
    let race_lines = move |_| {
        lab.race.with(|r| {
            let lines: Vec<Line> = r
                .iter()
                .enumerate()
                .map(|(i, e)| Line {
                    label: e.label.clone(),
                    color: plot::entrant_color(i),
                    width: 2,
                    points: e.by_time.iter().map(|&(t, l)| (t, l as f64)).collect(),
                    dots: false,
                    at_end: false,
                })
                .collect();
            let x_max = r.iter().flat_map(|e| e.by_time.last().map(|p| p.0)).fold(0.0, f64::max);
            (lines, x_max.max(0.1))
        })
    };
    let joined = move |what: fn(&crate::lab::race::Entrant) -> String| {
        move || Some(lab.race.with(|r| r.iter().map(what).collect::<Vec<_>>().join(",")))
    };
    view! {
        <Panel
            name="loss"
            title="Loss"
            explain="Cross-entropy of the next token, in nats: the training loss of every step (line) and the \
                loss on held-out validation batches (dots). ln(vocabulary) is the loss of a uniform guess. \
                Runs you reset or restart stay on the chart (thin lines), so two optimizers can be compared."
        >
            <Chart
                lab=lab
                dark=dark
                id="loss-chart"
                file="spherewalk-loss.png"
                label="training and validation loss by step"
                caption="loss (cross-entropy)"
                y_desc="nats"
                height=360
                lines=loss_lines
                data=vec![
                    data("data-points", move || Some(lab.curves.train.with(Vec::len).to_string())),
                    data("data-train-losses", move || Some(lab.curves.train.with(|t| join_losses(t)))),
                    data("data-val-losses", move || Some(lab.curves.val.with(|v| join_losses(v)))),
                    data("data-baselines", move || {
                        lab.curves.baselines.get().zip(vocab()).map(|(b, v)| format!("{:.5},{:.5},{:.5}", (v as f64).ln(), b.unigram, b.bigram))
                    }),
                ]
            />
            <Show when=move || lab.race.with(|r| !r.is_empty())>
                <Chart
                    lab=lab
                    dark=dark
                    id="race-chart"
                    file="spherewalk-race.png"
                    label="training loss of each race entrant against seconds of compute"
                    caption="race: training loss against compute time"
                    x_desc="seconds"
                    y_desc="nats"
                    lines=race_lines
                    data=vec![
                        data("data-entrants", joined(|e| e.label.clone())),
                        data("data-steps", joined(|e| e.train.len().to_string())),
                        data("data-val-points", joined(|e| e.val.len().to_string())),
                    ]
                />
                {verdict_line("race-verdict".into(), move || crate::lab::race::verdict(lab))}
                <p class="note">
                    "A race: the entrants train at the same time, each in its own worker, on the same data from the "
                    "same initial weights; above against steps (lines: training loss, dots: validation), here against "
                    "seconds of compute (the second-order step costs more per step)."
                </p>
                <div class="table-scroll">
                <table id="race-stats" class="race-stats">
                    {column_heads(&["entrant", "step", "train loss", "validation loss", "seconds"])}
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
                </div>
            </Show>
            <p id="baselines" class="note">
                {move || {
                    lab.curves.baselines.get().zip(vocab()).map(|(b, v)| {
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
        </Panel>
    }
}
