//! The stage: what the first screen holds. Beside the run's sphere, the panel the experiment is
//! about (its subject): the tour step's panel, else the running preset's (the Brownian panel,
//! JoMA's entropy, the race's loss and race charts, the English text's loss and writing), else,
//! with a real model open, the model's panel. The tour's card sits beside them in the same grid, so it never covers a
//! panel and its buttons never leave the screen. The style sheet lays the stage out from the
//! root's `data-subject`.

use leptos::prelude::*;

use crate::lab::real_model::Mode;
use crate::lab::Lab;
use crate::views::charts::{BrownianPanel, DiagnosticsPanel, EntropyPanel, LossPanel};
use crate::views::heatmap::AttentionPanel;
use crate::views::model::ModelPanel;
use crate::views::sphere::SphereView;
use crate::views::tour;
use crate::views::writing::WritingPanel;

/// The id of the panel the experiment on screen is about, if any.
pub fn subject(lab: Lab, tour_step: Option<usize>) -> Option<&'static str> {
    if lab.real.mode.get() == Mode::Model {
        return Some("panel-model");
    }
    if let Some(step) = tour_step.and_then(|n| tour::STEPS.get(n)) {
        return Some(step.panel);
    }
    lab.settings.with(|s| match s.preset.as_str() {
        "brownian" => Some("panel-brownian"),
        "joma" => Some("panel-entropy"),
        // The English preset's story is told by its loss chart; the writing follows in its column.
        "race" | "english" => Some("panel-loss"),
        _ => None,
    })
}

/// Keeps the root's `data-subject` on the subject and `data-tour` on while the tour is open (the
/// style sheet's hooks: on a phone the tour's card and its panel come first).
pub fn mark_subject(lab: Lab, tour_step: RwSignal<Option<usize>>) -> Memo<Option<&'static str>> {
    let current = Memo::new(move |_| subject(lab, tour_step.get()));
    Effect::new(move |_| {
        let (s, touring) = (current.get(), tour_step.get().is_some());
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ = match s {
                Some(s) => root.set_attribute("data-subject", s),
                None => root.remove_attribute("data-subject"),
            };
            let _ = if touring { root.set_attribute("data-tour", "") } else { root.remove_attribute("data-tour") };
        }
    });
    current
}

/// The first screen's grid: the sphere, the model's panel in the model mode, the loss and the
/// writing, the attention, the tour's card, and the subject's panel when it lives elsewhere.
/// `Below` draws the Brownian and entropy panels below when they are not the subject.
#[component]
pub fn Stage(
    lab: Lab,
    dark: RwSignal<bool>,
    tour_step: RwSignal<Option<usize>>,
    subject: Memo<Option<&'static str>>,
) -> impl IntoView {
    view! {
        // At 1280x800 the sphere, the loss and the attention share the first screen.
        <div class="stage">
            <SphereView lab=lab dark=dark />
            <Show when=move || lab.real.mode.get() == Mode::Model>
                <ModelPanel lab=lab dark=dark />
            </Show>
            <div class="stage-column">
                <LossPanel lab=lab dark=dark />
                <WritingPanel lab=lab />
            </div>
            <AttentionPanel lab=lab dark=dark />
            <tour::TourPanel lab=lab step=tour_step />
            <Show when=move || subject.get() == Some("panel-brownian")>
                <BrownianPanel lab=lab dark=dark />
            </Show>
            <Show when=move || subject.get() == Some("panel-entropy")>
                <EntropyPanel lab=lab dark=dark />
            </Show>
        </div>
    }
}

/// The panels below the first screen: the Brownian and entropy panels (unless the stage holds
/// them) and the optimizers' diagnostics.
#[component]
pub fn Below(lab: Lab, dark: RwSignal<bool>, subject: Memo<Option<&'static str>>) -> impl IntoView {
    view! {
        <Show when=move || subject.get() != Some("panel-brownian")>
            <BrownianPanel lab=lab dark=dark />
        </Show>
        <Show when=move || subject.get() != Some("panel-entropy")>
            <EntropyPanel lab=lab dark=dark />
        </Show>
        <DiagnosticsPanel lab=lab dark=dark />
    }
}
