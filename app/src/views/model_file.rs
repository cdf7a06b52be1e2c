//! The model as a file: the run exported as JSON, where the browser keeps it, the model and its
//! config downloaded, a model uploaded.

use leptos::prelude::*;

use crate::lab::{export, Download, Lab};

/// What storage holds of the run: the last save, or why a save failed (then what is still kept).
fn saved_line(step: Option<usize>, failed: Option<String>) -> String {
    match (step, failed) {
        (_, None) => step.map(|s| format!("saved in this browser at step {s}")).unwrap_or_default(),
        (Some(s), Some(why)) => format!("{why}; the save of step {s} is kept"),
        (None, Some(why)) => why,
    }
}

/// Largest file the page reads into memory for an upload.
const MAX_UPLOAD: f64 = 256.0 * 1024.0 * 1024.0;

#[component]
pub fn ModelFile(lab: Lab) -> impl IntoView {
    let model_msg = lab.model_msg;
    let export_json = RwSignal::new(String::new());
    let on_model_file = move |ev: leptos::ev::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(list) = input.files() else { return };
        let files: Vec<web_sys::File> = (0..list.length()).filter_map(|i| list.get(i)).collect();
        input.set_value("");
        leptos::task::spawn_local(async move {
            let mut read = Vec::new();
            for f in files {
                if f.size() > MAX_UPLOAD {
                    model_msg.set(Some(Err(format!("{} is over 256 MB", f.name()))));
                    return;
                }
                match wasm_bindgen_futures::JsFuture::from(f.array_buffer()).await {
                    Ok(buf) => read.push((f.name(), js_sys::Uint8Array::new(&buf).to_vec())),
                    Err(_) => {
                        model_msg.set(Some(Err(format!("could not read {}", f.name()))));
                        return;
                    }
                }
            }
            model_msg.set(None);
            lab.load_model(read);
        });
    };
    let on_export = move |_| {
        let json = lab.run_json();
        export_json.set(json.clone());
        if let Err(e) = export::download("spherewalk-run.json", &json, "application/json") {
            lab.error.set(Some(format!("export failed: {e}")));
        }
    };
    view! {
        <section class="controls model" aria-label="the model as a file">
            <button id="export" type="button" on:click=on_export>"Export JSON"</button>
            <span
                id="saved"
                class="note"
                class:save-failed=move || lab.storage.save_failed.with(Option::is_some)
                data-step=move || lab.storage.saved_step.get().map(|s| s.to_string())
            >
                {move || saved_line(lab.storage.saved_step.get(), lab.storage.save_failed.get())}
            </span>
            <button id="download-model" type="button" on:click=move |_| lab.ask_download(Download::Model)>
                "Download model"
            </button>
            <button id="download-config" type="button" on:click=move |_| lab.ask_download(Download::Config)>
                "Download config"
            </button>
            <label for="model-input">
                "Upload model (.safetensors, with its config.json unless it came from this page) "
                <input id="model-input" type="file" multiple accept=".safetensors,.json" on:change=on_model_file />
            </label>
            {move || match model_msg.get() {
                Some(Ok(note)) => view! { <p id="model-note" class="note">{note}</p> }.into_any(),
                Some(Err(e)) => view! { <p id="model-error" class="error" role="alert">{e}</p> }.into_any(),
                None => ().into_any(),
            }}
        </section>
        <output id="export-json" hidden data-json=move || export_json.get()></output>
    }
}
