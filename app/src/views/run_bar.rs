//! The run bar: Start (which says so while the engine is still loading), Step, Reset and the pace
//! with the run's estimated duration, then the run's numbers: status, step, losses (the
//! validation loss beside what guessing scores) and time per step.

use common::protocol::Phase;
use leptos::prelude::*;

use crate::lab::{estimate, Lab};
use crate::views::lead;

fn fmt_loss(v: Option<f32>) -> String {
    v.map(|l| format!("{l:.4}")).unwrap_or_else(|| "–".to_string())
}

#[component]
pub fn RunBar(lab: Lab) -> impl IntoView {
    // Until the engine is there nothing trains, whatever was pressed: the page says so.
    let status = move || if lab.site.loading.with(Option::is_some) { "loading" } else { lab.phase.get().status_text() };
    let last_train = move || lab.curves.train.with(|t| t.last().map(|p| p.1));
    let last_val = move || lab.curves.val.with(|v| v.last().map(|p| p.1));
    let step = move || lab.step.get();
    let pending = move || lab.pending();
    // The loss of a uniform guess and the full yardsticks sentence, once the run knows its data.
    let yardsticks = move || {
        let vocab = lab.run_config.with(|c| c.as_ref().map(|c| c.model.vocab))?;
        Some(lead::yardsticks(vocab, &lab.curves.baselines.get()?))
    };
    view! {
        <section class="controls" aria-label="run controls">
            <button
                id="start"
                type="button"
                class:running=move || lab.phase.get() == Phase::Running
                data-loading=move || lab.site.loading.with(Option::is_some).then_some("")
                aria-keyshortcuts="Space"
                on:click=move |_| lab.toggle()
            >
                {move || match lab.site.loaded_text() {
                    Some(got) if lab.phase.get() == Phase::Running => format!("Starts once loaded ({got})"),
                    Some(got) => format!("Loading the engine ({got})"),
                    None => lab.phase.get().button_text().to_string(),
                }}
            </button>
            {move || {
                lab.site
                    .loading
                    .get()
                    .map(|(got, total)| {
                        view! {
                            <progress
                                id="engine-progress"
                                aria-label="the engine's download"
                                max=move || total.max(1.0)
                                value=move || (total > 0.0).then_some(got)
                            ></progress>
                        }
                    })
            }}
            <button
                id="step-once"
                type="button"
                disabled=move || lab.phase.get() == Phase::Running
                on:click=move |_| lab.step_once()
            >
                "Step"
            </button>
            <button id="reset" type="button" on:click=move |_| lab.reset()>"Reset"</button>
            <label for="pace">
                "Pace "
                <select
                    id="pace"
                    aria-describedby="estimate"
                    on:change=move |ev| {
                        if let Ok(p) = event_target_value(&ev).parse::<f64>() {
                            lab.set_pace(p);
                        }
                    }
                >
                    {common::settings::PACES
                        .into_iter()
                        .map(|p| {
                            let label = if p > 0.0 { format!("{p} steps/s") } else { "as fast as possible".to_string() };
                            view! {
                                <option value=p.to_string() selected=move || lab.settings.with(|s| s.steps_per_second == p)>
                                    {label}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <span
                id="estimate"
                class="experiment"
                data-work=move || estimate::measured(lab).and_then(|(w, _)| serde_json::to_string(&w).ok())
                data-rates=move || estimate::measured(lab).and_then(|(_, r)| serde_json::to_string(&r).ok())
            >
                {move || estimate::estimate(lab)}
            </span>
            <Show when=pending>
                <span id="pending" class="note">
                    {move || {
                        if lab.only_lr_changed() && lab.phase.get() == Phase::Paused {
                            "the new learning rate applies when you press Resume or Step"
                        } else {
                            "settings changed: Reset or Restart to apply them"
                        }
                    }}
                </span>
            </Show>
        </section>

        <dl class="stats" aria-live="off">
            <div>
                <dt>"status"</dt>
                <dd id="status" data-phase=status>
                    {status}
                </dd>
            </div>
            <div>
                <dt>"step"</dt>
                <dd>
                    <span id="step">{step}</span>
                    " / "
                    <span id="total-steps">{move || lab.total_steps.get()}</span>
                </dd>
            </div>
            <div>
                <dt>"train loss"</dt>
                <dd id="train-loss">{move || fmt_loss(last_train())}</dd>
            </div>
            <div>
                <dt id="yardsticks" title=move || yardsticks().map(|(_, long)| long)>
                    "validation loss"
                    {move || yardsticks().map(|(guess, _)| format!(" (guessing: {guess:.2})"))}
                </dt>
                <dd id="val-loss">{move || fmt_loss(last_val())}</dd>
            </div>
            <div>
                <dt>"time per step"</dt>
                <dd id="speed" data-steps-per-second=move || lab.steps_per_second.get().map(|v| format!("{v:.2}"))>
                    {move || lab.ms_per_step.get().map(|ms| format!("{ms:.1} ms")).unwrap_or_else(|| "–".to_string())}
                </dd>
            </div>
        </dl>

        <Show when=move || lab.site.loading.with(Option::is_some) && lab.phase.get() == Phase::Running>
            <p id="starts-when-loaded" class="note" role="status">
                "The run starts as soon as the engine has loaded."
            </p>
        </Show>
    }
}
