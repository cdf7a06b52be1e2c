//! The lines across the page that ask for an answer: a new version of the lab, a crashed worker, a
//! saved run waiting, a link that could not be used, a text too long for the link.

use leptos::prelude::*;

use crate::lab::address::Address;
use crate::lab::Lab;

#[component]
pub fn Banners(lab: Lab, address: Address) -> impl IntoView {
    let Address { error: url_error, too_long, .. } = address;
    view! {
        <Show when=move || lab.site.update.get()>
            <p id="update" class="note banner" role="status">
                "A new version of the lab is ready. "
                <button id="take-update" type="button" on:click=move |_| lab.site.take_update()>
                    "Reload"
                </button>
            </p>
        </Show>
        <Show when=move || lab.crashed.with(Option::is_some)>
            <div id="crashed" class="error banner" role="alert">
                {move || lab.crashed.get().unwrap_or_default()}
                " "
                <button id="restart-worker" type="button" on:click=move |_| lab.restart_and_resume()>
                    "Restart and resume"
                </button>
            </div>
        </Show>
        <Show when=move || lab.storage.saved.with(Option::is_some)>
            <div id="saved-run" class="note banner" role="status">
                {move || {
                    lab.storage.saved
                        .get()
                        .map(|(step, total, what)| format!("A saved run is waiting: step {step} of {total} ({what}). "))
                        .unwrap_or_default()
                }}
                <button id="resume-saved" type="button" on:click=move |_| lab.resume_saved()>
                    "Resume saved run"
                </button>
                " "
                <button id="discard-saved" type="button" class="link" on:click=move |_| lab.discard_saved()>
                    "Discard"
                </button>
            </div>
        </Show>
        <Show when=move || url_error.with(Option::is_some)>
            <p id="url-error" class="error" role="alert">
                {move || url_error.get().unwrap_or_default()}
                " "
                <button type="button" class="link" on:click=move |_| url_error.set(None)>"Dismiss"</button>
            </p>
        </Show>
        <Show when=move || too_long.get()>
            <p id="url-note" class="note">
                "Your text is too long for the link: a copied link keeps the settings but not the text."
            </p>
        </Show>
    }
}
