//! Spherewalk's browser lab.
//!
//! A Leptos (CSR) page whose Web Worker trains a small transformer (on the CPU or WebGPU) while the
//! page shows what happens: the loss, the tokens on the LayerNorm sphere, attention as a Markov
//! chain, attention entropy over training, whether the tokens move like Brownian motion, and the
//! second-order optimizers' diagnostics. The page is a view: the worker (`common::worker`, the
//! engine's session) computes every number.
//!
//! Two rooms, both the page's (the worker's side is the library, `common`: what the page and its workers share):
//! - `lab`: the page's state and its link to the worker: the run's signals and commands (`race` a
//!   race's rivals, `writing` what the model writes, `real_model` the second mode, a GPT-2 opened
//!   from its files), and what lives beside the state: `url_state` (the experiment in the address),
//!   `script_api` (`window.spherewalk`), `estimate` (how long a run takes), `export` (downloads).
//! - `views`: what the page draws, one folder or file a panel family: `sphere` (the sphere panel,
//!   its WebGL2 ball, 2-D drawing and replay clock), `charts` (the chart panels, each made of one
//!   `Chart`), `heatmap` (attention as a Markov chain), `writing`, `model` (the real model's panel),
//!   `settings`, `tour`, `lead` (the first screen's words), and what they share: `panel` (a panel's
//!   frame, explanation and verdicts), `canvas`, `canvas_text` and `token_style`.
//!
//! Stable element ids, read by the browser tests (`e2e/*.test.mjs`): `#version`, `#backend`,
//! `#theme`, `#start`, `#step-once`, `#reset`, `#export`, `#status`, `#step`, `#total-steps`,
//! `#train-loss`, `#val-loss`, `#speed`, `#error`, `#notice`, `#url-error`, `#pending`, `#saved`
//! (`data-step`: the step last saved to IndexedDB), `#saved-run`, `#resume-saved`, `#discard-saved`,
//! `#download-model`, `#download-config`, `#model-input`, `#model-note`, `#model-error`, `#preset`
//! and the settings inputs, `#loss-chart` (`data-train-losses`, `data-val-losses`: plotted values,
//! comma-separated), `#sphere` (`data-points`, `data-ghosts`), `#ghosts`, `#attention`,
//! `#sphere` also has `data-labels`, `data-arcs`, `data-arc-row` (the selected token's row of P^k),
//! `data-positions`, `data-screen`, `data-shown-step`, `data-renderer`; `#sphere-token`,
//! `#sphere-play`, `#time`, `#attention` (`data-grid`, `data-hover-p`), `#attention-hover`,
//! `#entropy-chart`, `#diagnostics`, `#brownian-d`, `#brownian-r2`, `#brownian-ks` (`data-value`),
//! `#brownian-note`, `#brownian-chart`, `#writing-sample` (`data-step`, `data-text`; each written
//! character a `.tok` with `data-p` and `data-top` "text:p|..."), `#writing-prompt`,
//! `#writing-temperature`, `#writing-top-k`, `#write-more`, `#writing-more`, `#writing-history`,
//! `#next-char` (`.pred` spans, as `.tok`), `#overfitting`, `#png-<canvas id>` (PNG download of each figure), and the
//! panels `#panel-*`, `#crashed` and `#restart-worker`. `window.spherewalk` is the scripting API
//! (`script_api`; its `bench` times the engine alone in a worker).

mod lab;
mod views;

use leptos::prelude::*;

use crate::views::banners::Banners;
use crate::views::header::Header;
use crate::views::model_file::ModelFile;
use crate::views::presenter::{self, KeysHelp};
use crate::views::run_bar::RunBar;
use crate::views::settings::SettingsPanel;
use crate::views::stage::{self, Below, Stage};
use crate::views::theme;

/// The page, one component a region: the header, the lines that ask for an answer, the run bar,
/// the stage (the first screen), the settings, the model as a file, and the panels below.
#[component]
fn App() -> impl IntoView {
    let (lab, address) = lab::address::open();
    // The English text is fetched as soon as a preset or the data picker asks for it.
    Effect::new(move |_| {
        if lab.settings.with(|s| s.data == "austen") {
            leptos::task::spawn_local(lab.load_corpus());
        }
    });
    let dark = theme::dark_mode_signal();
    let modes = presenter::install(lab);
    let subject = stage::mark_subject(lab, address.tour_step);
    lab::script_api::install(lab);
    view! {
        <main class="lab" class:model-mode=move || lab.real.mode.get() == lab::real_model::Mode::Model>
            <Header lab=lab dark=dark modes=modes tour_step=address.tour_step />
            <KeysHelp modes=modes />
            <Banners lab=lab address=address />
            <RunBar lab=lab />
            <Show when=move || lab.notice.with(Option::is_some)>
                <p id="notice" class="note">{move || lab.notice.get().unwrap_or_default()}</p>
            </Show>
            <Show when=move || lab.error.with(Option::is_some)>
                <p id="error" class="error" role="alert">
                    {move || lab.error.get().unwrap_or_default()}
                </p>
            </Show>
            <Stage lab=lab dark=dark tour_step=address.tour_step subject=subject />
            <SettingsPanel lab=lab />
            <ModelFile lab=lab />
            <Below lab=lab dark=dark subject=subject />
            <output id="summary" hidden data-json=move || lab.summary.get().unwrap_or_default()></output>
        </main>
    }
}

fn main() {
    console_error_panic_hook::set_once();
    // index.html's "Loading Spherewalk…" gives way to the page.
    if let Some(boot) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.get_element_by_id("boot")) {
        boot.remove();
    }
    leptos::mount::mount_to_body(App);
}
