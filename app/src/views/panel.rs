//! What every panel has: its explanation, its figures' PNG buttons, and its verdicts in words.

use leptos::prelude::*;

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
            on:click=move |_| failed.set(crate::lab::export::canvas_png(canvas, file).err())
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

/// How often a provisional verdict's words may change on screen: a class reads them.
const READ_MS: f64 = 2000.0;

/// `source` as shown: a new provisional verdict waits until [`READ_MS`] after the last one shown;
/// the first, a settled one, or none at all shows at once.
fn readable(
    source: impl Fn() -> Option<engine::session::Verdict> + Send + Sync + Copy + 'static,
) -> RwSignal<Option<engine::session::Verdict>> {
    let shown = RwSignal::new(None);
    let last = StoredValue::new(f64::NEG_INFINITY);
    let waiting = StoredValue::new(false);
    Effect::new(move |_| {
        let v = source();
        let now = common::js::now_ms();
        let at_once = v.as_ref().is_none_or(|v| v.settled) || shown.with_untracked(Option::is_none);
        if at_once || now - last.get_value() >= READ_MS {
            shown.set(v);
            last.set_value(now);
        } else if !waiting.get_value() {
            waiting.set_value(true);
            let wait = READ_MS - (now - last.get_value());
            set_timeout(
                move || {
                    waiting.set_value(false);
                    last.set_value(common::js::now_ms());
                    shown.set(untrack(source));
                },
                std::time::Duration::from_millis(wait.max(0.0) as u64),
            );
        }
    });
    shown
}

/// A panel's claim answered in words (computed by the engine), marked by how it came out and
/// against which paper's claim; its words change at most every two seconds while provisional
/// (`data-conclusion`: the answer alone).
pub fn verdict_line(
    id: String,
    verdict: impl Fn() -> Option<engine::session::Verdict> + Send + Sync + Copy + 'static,
) -> impl IntoView {
    let shown = readable(verdict);
    let tag = move || agreement_tag(shown.with(|v| v.as_ref().map(|v| v.agreement)));
    let settled = move || shown.with(|v| v.as_ref().is_some_and(|v| v.settled));
    let class = move || format!("verdict {}{}", tag(), if settled() { "" } else { " provisional" });
    view! {
        <Show when=move || shown.with(Option::is_some)>
            <p
                id=id.clone()
                class=class
                data-agreement=tag
                data-settled=move || settled().to_string()
                data-conclusion=move || shown.with(|v| v.as_ref().map(|v| v.conclusion.clone()).unwrap_or_default())
                role="status"
            >
                <strong class="verdict-label">{move || shown.with(|v| v.as_ref().map(|v| v.label()).unwrap_or_default())}</strong>
                " "
                <span class="verdict-sentence">{move || shown.with(|v| v.as_ref().map(|v| v.sentence.clone()).unwrap_or_default())}</span>
            </p>
        </Show>
    }
}

/// A panel of the page: `#panel-{name}` with its heading (`#{name}-title`), its "What is this?"
/// and what it shows; `hidden` folds it away while it has nothing to show.
#[component]
pub fn Panel(
    name: &'static str,
    title: &'static str,
    explain: &'static str,
    #[prop(optional, into)] hidden: Signal<bool>,
    children: Children,
) -> impl IntoView {
    view! {
        <section
            id=format!("panel-{name}")
            class="panel"
            class:hidden=move || hidden.get()
            aria-labelledby=format!("{name}-title")
        >
            // The title and "What is this?" share a line while it is closed: the figures start higher.
            <div class="panel-head">
                <h2 id=format!("{name}-title")>{title}</h2>
                <Explain>{explain}</Explain>
            </div>
            {children()}
        </section>
    }
}

/// The symbols a panel shows, each in words (`<dl class="key">`).
pub fn symbol_key(id: &'static str, symbols: &'static [(&'static str, &'static str)]) -> impl IntoView {
    view! {
        <dl id=id class="key">
            {symbols.iter().map(|(name, words)| view! { <dt>{*name}</dt> <dd>{*words}</dd> }).collect_view()}
        </dl>
    }
}

/// What the motion verdicts' symbols mean, over training or through depth (one vocabulary:
/// "diffusion" is Brownian motion's spread, "drift" what is not it).
pub const MOTION_KEY: [(&str, &str); 8] = [
    ("ln E[cos θ]", "the log of the tokens' mean cosine to where they started: a diffusion makes it fall in a straight line"),
    ("R²", "how much of the fall of ln E[cos θ] that straight line explains: 1 all of it, 0 no more than a flat line, below 0 worse"),
    ("KS", "the largest gap between the tokens' angles from the start and simulated Brownian walkers' (Kolmogorov-Smirnov): above the 5% critical value, chance alone rarely makes such a gap"),
    ("D", "the diffusion constant: how fast random steps spread the tokens over the sphere"),
    ("95% interval", "the range that holds D, estimated from the tokens' steps, with 95% confidence"),
    ("root-mean-square error", "how far a model's curves miss the tokens', on average (square root of the mean squared gap)"),
    ("β", "the particles' inverse temperature: how sharply attention pulls each token towards the ones it looks at"),
    ("flow time", "how much of the particles' own time one step of the axis (a training step, or a layer) stands for"),
];

/// A table's header row: one column a name.
pub fn column_heads(names: &'static [&'static str]) -> impl IntoView {
    view! {
        <thead>
            <tr>{names.iter().map(|name| view! { <th scope="col">{*name}</th> }).collect_view()}</tr>
        </thead>
    }
}
