//! The model mode's section tabs: one section on screen at a time (the reading, the writing, two
//! texts, a training history), so the sphere and the attention stay beside what is read.

use leptos::prelude::*;

use crate::lab::model_section::Section;
use crate::lab::Lab;

#[component]
pub fn SectionTabs(lab: Lab) -> impl IntoView {
    let m = lab.real;
    // A chart in a section drawn while hidden has no size: showing it redraws at its size.
    Effect::new(move |prev: Option<Section>| {
        let now = m.section.get();
        if prev.is_some_and(|p| p != now) {
            lab.view.layout.update(|n| *n += 1);
        }
        now
    });
    view! {
        <nav id="model-sections" class="model-sections" role="tablist" aria-label="what to do with the model">
            {Section::ALL
                .into_iter()
                .map(|s| {
                    view! {
                        <button
                            id=format!("section-{}", s.id())
                            type="button"
                            role="tab"
                            aria-controls=format!("section-{}-body", s.id())
                            aria-selected=move || (m.section.get() == s).to_string()
                            title=move || (s.needs_model() && m.opened.with(Option::is_none)).then_some("open a model first")
                            on:click=move |_| m.section.set(s)
                        >
                            {s.label()}
                        </button>
                    }
                })
                .collect_view()}
        </nav>
    }
}
