//! The guided tour: the two papers' claims, one step each. A step sets up its experiment, points at
//! its panel, says what to look for, and shows the verdict the engine measured on the run. The step
//! lives in the address (`#tour=3`), so a teacher can link to it.

use common::protocol::Phase;
use common::settings::Settings;
use engine::session::Verdict;
use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::lab::Lab;

/// Which measured verdict a step shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    Sphere,
    Markov,
    Kernel,
    Brownian,
    Race,
    Joma,
}

pub struct Step {
    pub title: &'static str,
    pub preset: &'static str,
    /// The id of the panel the step points at.
    pub panel: &'static str,
    /// The id of the verdict under that panel, which has the numbers.
    pub verdict: &'static str,
    pub text: &'static str,
    pub look: &'static str,
    pub claim: Claim,
}

pub const STEPS: [Step; 6] = [
    Step {
        title: "Tokens live on a sphere",
        preset: "sphere",
        panel: "panel-sphere",
        verdict: "verdict-sphere",
        text: "LayerNorm subtracts each token's mean and divides by its spread, so every token vector lands on \
               the sphere of radius √d. The view shows one fixed sentence's tokens in 3-D.",
        look: "The dots never leave the ball's surface. Do tokens of the same kind (one colour each) gather as the model \
               learns? The lines under the view measure both.",
        claim: Claim::Sphere,
    },
    Step {
        title: "Attention is a random walk",
        preset: "sphere",
        panel: "panel-attention",
        verdict: "verdict-markov",
        text: "Each row of an attention matrix is where one token looks: non-negative weights that sum to 1. \
               That is the transition matrix of a random walk over the positions; P^k is k steps of it.",
        look: "Bright cells are likely jumps. Raise the power k: the walk forgets where it started.",
        claim: Claim::Markov,
    },
    Step {
        title: "Softmax is a Gaussian kernel",
        preset: "sphere",
        panel: "panel-attention",
        verdict: "verdict-kernel",
        text: "exp(q·k/√d) = exp(-|q-k|²/(2√d)) times factors of |q| and |k|: on a sphere, where every key has \
               the same length, softmax attention is a normalised Gaussian kernel of the distance (q: a token's query, \
               k: another token's key, d: their width).",
        look: "The verdict measures how far the learned heads are from that kernel, and that the identity is exact on the sphere.",
        claim: Claim::Kernel,
    },
    Step {
        title: "Random walk or Brownian motion?",
        preset: "brownian",
        panel: "panel-brownian",
        verdict: "verdict-brownian",
        text: "In the continuum limit a random walk on the sphere is Brownian motion: the mean cosine to the start \
               decays as exp(-(n-1)Dt/R²) (n: the width, D: the diffusion constant, t: the step, R: the sphere's radius). \
               Do the tokens move like that over training?",
        look: "Blue dots (tokens) against the orange closed form and the green simulated walkers; the rings in the \
               sphere view are those walkers (Brownian ghosts).",
        claim: Claim::Brownian,
    },
    Step {
        title: "Second order against Adam",
        preset: "race",
        panel: "panel-loss",
        verdict: "race-verdict",
        text: "CG-FAC and Adam train at the same time on the same data from the same weights.",
        look: "The loss chart compares them per step; the race chart per second of compute.",
        claim: Claim::Race,
    },
    Step {
        title: "JoMA: sparse, then dense",
        preset: "joma",
        panel: "panel-entropy",
        verdict: "verdict-joma-0",
        text: "JoMA predicts that attention first concentrates on the tokens that co-occur most (entropy falls), then \
               spreads again as rarer ones are learned, when the MLP is nonlinear.",
        look: "Each layer's entropy line: a dip and a rebound? The preset's MLP is GELU: switch to identity to compare.",
        claim: Claim::Joma,
    },
];

/// What a step builds on, in the words of what the steps before it measured: the race's reason
/// (tokens that diffuse make second-order terms matter) holds only if step 4 measured a diffusion.
fn opener(claim: Claim, diffusion: Option<&Verdict>) -> &'static str {
    use engine::session::Agreement;
    match (claim, diffusion.map(|v| v.agreement)) {
        (Claim::Race, Some(Agreement::Agrees)) => {
            "Step 4 measured a diffusion, so by Itô's lemma second-order terms matter, and a second-order optimizer \
             should need fewer steps."
        }
        (Claim::Race, Some(Agreement::Partly)) => {
            "Step 4 measured only part of a diffusion, so the paper's reason for second order (Itô's lemma) holds \
             only in part here; the race tests its prediction directly: does second order need fewer steps?"
        }
        (Claim::Race, Some(_)) => {
            "Step 4 did not measure a diffusion on its run, so the paper's reason for second order (Itô's lemma) is \
             not shown here; the race tests its prediction directly: does second order need fewer steps?"
        }
        (Claim::Race, None) => {
            "The paper argues: if tokens diffuse (step 4 measures it), second-order terms matter by Itô's lemma, and \
             a second-order optimizer should need fewer steps."
        }
        _ => "",
    }
}

/// The step's verdict on the run now shown.
fn verdict(lab: Lab, claim: Claim) -> Option<Verdict> {
    match claim {
        Claim::Race => crate::lab::race::verdict(lab),
        _ => lab.panels.with(|p| {
            let v = &p.as_ref()?.verdicts;
            match claim {
                Claim::Sphere => v.sphere.clone(),
                Claim::Markov => v.markov.clone(),
                Claim::Kernel => v.kernel.clone(),
                Claim::Brownian => v.brownian.clone(),
                Claim::Joma => engine::session::verdicts::joined(&v.joma),
                Claim::Race => None,
            }
        }),
    }
}

/// Opens step `n` (0-based): its experiment, its panel marked, the address.
pub fn open(lab: Lab, step: RwSignal<Option<usize>>, n: usize) {
    let Some(s) = STEPS.get(n) else { return };
    step.set(Some(n));
    if lab.settings.with_untracked(|now| now.preset != s.preset) {
        lab.reset();
        if let Some(settings) = Settings::preset(s.preset) {
            lab.replace_settings(settings);
        }
    }
    focus(s.panel);
}

/// Below this width the stage is one column and the card starts folded (CSS: the same breakpoint).
const PHONE_WIDTH: f64 = 860.0;

/// Marks the step's panel. The stage puts it beside the sphere with the card next to it (CSS), or
/// on a phone the card and then its panel first: the page goes back to its top, where the run
/// controls are.
pub fn focus(panel: &str) {
    let Some(win) = web_sys::window() else { return };
    let Some(doc) = win.document() else { return };
    if let Ok(marked) = doc.query_selector_all(".tour-focus") {
        for i in 0..marked.length() {
            if let Some(e) = marked.item(i).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) {
                let _ = e.class_list().remove_1("tour-focus");
            }
        }
    }
    if let Some(e) = doc.get_element_by_id(panel) {
        let _ = e.class_list().add_1("tour-focus");
    }
    win.scroll_to_with_x_and_y(0.0, 0.0);
}

/// Brings the panel's own verdict (with its numbers) into view and marks it for a moment.
fn show_verdict(id: &str) {
    let Some(e) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id(id)) else { return };
    let opts = web_sys::ScrollIntoViewOptions::new();
    opts.set_block(web_sys::ScrollLogicalPosition::Center);
    e.scroll_into_view_with_scroll_into_view_options(&opts);
    let _ = e.class_list().add_1("pointed");
}

#[component]
pub fn TourPanel(lab: Lab, step: RwSignal<Option<usize>>) -> impl IntoView {
    let current = move || step.get().and_then(|n| STEPS.get(n).map(|s| (n, s)));
    let measured = move || current().and_then(|(_, s)| verdict(lab, s.claim));
    let settled = move || measured().is_some_and(|v| v.settled);
    // The diffusion step's final verdict, kept for the steps that build on it.
    let diffusion = RwSignal::new(None::<Verdict>);
    Effect::new(move |_| {
        if let Some(v) = current().filter(|(_, s)| s.claim == Claim::Brownian).and_then(|_| measured()) {
            if v.settled {
                diffusion.set(Some(v));
            }
        }
    });
    let text = move || {
        current()
            .map(|(_, s)| {
                let before = diffusion.with(|d| opener(s.claim, d.as_ref()));
                if before.is_empty() {
                    s.text.to_string()
                } else {
                    format!("{before} {}", s.text)
                }
            })
            .unwrap_or_default()
    };
    // Folded, the box keeps its title, the conclusion and the buttons. On a phone it starts folded.
    let phone =
        web_sys::window().and_then(|w| w.inner_width().ok()).and_then(|w| w.as_f64()).unwrap_or(0.0) < PHONE_WIDTH;
    let folded = RwSignal::new(phone);
    // The answer alone: the numbers are under the panel, once (the link brings them into view).
    let conclusion = move || match measured() {
        Some(v) if !v.conclusion.is_empty() => format!("{}.", v.conclusion),
        Some(v) if !v.settled => "not decided yet: the run's end decides.".to_string(),
        Some(v) => v.sentence,
        None => "press Start: the verdict appears once the run has measured it.".to_string(),
    };
    let verdict_id = move || current().map(|(_, s)| s.verdict).unwrap_or_default();
    // Each step opens with its text (folded on a phone). When the answer is there and the card
    // cannot hold the text as well (a projector's large type in a narrow column), the text folds
    // away: the title, the answer and the buttons stay whole.
    Effect::new(move |was: Option<(Option<usize>, bool)>| {
        let now = (step.get(), settled());
        if was.is_some_and(|w| w.0 != now.0) {
            folded.set(phone);
        }
        if now.1 && was != Some(now) {
            request_animation_frame(move || {
                let doc = web_sys::window().and_then(|w| w.document());
                let body = doc.and_then(|d| d.query_selector("#tour .tour-body").ok().flatten());
                if body.is_some_and(|b| b.scroll_height() > b.client_height() + 1) {
                    folded.set(true);
                }
            });
        }
        now
    });
    view! {
        <Show when=move || current().is_some()>
            <section
                id="tour"
                class="panel tour"
                class:folded=move || folded.get()
                aria-labelledby="tour-title"
                data-step=move || step.get().map(|n| n + 1)
            >
                <h2 id="tour-title">
                    {move || current().map(|(n, s)| format!("Tour, step {} of {}: {}", n + 1, STEPS.len(), s.title)).unwrap_or_default()}
                </h2>
                <div class="tour-body">
                    <Show when=move || !folded.get()>
                        <p id="tour-text">{text}</p>
                        <p><strong>"Look for: "</strong>{move || current().map(|(_, s)| s.look).unwrap_or_default()}</p>
                    </Show>
                </div>
                <p
                    id="tour-verdict"
                    class=move || if settled() { "" } else { "provisional" }
                    data-settled=move || settled().to_string()
                    data-agreement=move || crate::views::panel::agreement_tag(measured().map(|v| v.agreement))
                    data-conclusion=move || measured().map(|v| v.conclusion).unwrap_or_default()
                >
                    <strong>{move || if settled() { "Measured: " } else { "Measuring: " }}</strong>
                    {conclusion}
                    " "
                    <button
                        id="tour-numbers"
                        type="button"
                        class="link"
                        on:click=move |_| show_verdict(verdict_id())
                    >
                        "the numbers, under the panel"
                    </button>
                </p>
                <div class="row tour-buttons">
                    <button
                        id="tour-run"
                        type="button"
                        class="small"
                        class:running=move || lab.phase.get() == Phase::Running
                        on:click=move |_| lab.toggle()
                    >
                        {move || lab.phase.get().button_text()}
                    </button>
                    <button
                        id="tour-prev"
                        type="button"
                        class="small"
                        disabled=move || step.get().is_none_or(|n| n == 0)
                        on:click=move |_| {
                            if let Some(n) = step.get_untracked() {
                                open(lab, step, n.saturating_sub(1));
                            }
                        }
                    >
                        "Previous"
                    </button>
                    <button
                        id="tour-next"
                        type="button"
                        class="small"
                        disabled=move || step.get().is_none_or(|n| n + 1 >= STEPS.len())
                        on:click=move |_| {
                            if let Some(n) = step.get_untracked() {
                                open(lab, step, n + 1);
                            }
                        }
                    >
                        "Next"
                    </button>
                    <button
                        id="tour-fold"
                        type="button"
                        class="small"
                        aria-expanded=move || (!folded.get()).to_string()
                        on:click=move |_| folded.update(|f| *f = !*f)
                    >
                        {move || if folded.get() { "Show the text" } else { "Fold" }}
                    </button>
                    <button id="tour-leave" type="button" class="small" on:click=move |_| step.set(None)>
                        "Leave the tour"
                    </button>
                </div>
            </section>
        </Show>
    }
}
