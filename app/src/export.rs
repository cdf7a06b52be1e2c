//! Export of a run as one JSON document (settings, the engine's config, metrics), downloaded as a file.

use leptos::prelude::*;
use wasm_bindgen::JsCast;

use crate::lab::Lab;

/// The run as JSON text.
pub fn run_json(lab: Lab) -> String {
    let settings = lab.run_settings.get_untracked().unwrap_or_else(|| lab.settings.get_untracked());
    let config = lab.run_config.get_untracked().or_else(|| settings.to_config().ok());
    let doc = serde_json::json!({
        "spherewalk": engine::VERSION,
        "backend": "cpu",
        "settings": settings,
        "config": config,
        "metrics": {
            "train_loss": lab.train.get_untracked(),
            "val_loss": lab.val.get_untracked(),
            "attention_entropy": lab.entropy.get_untracked(),
            "second_order": lab.diagnostics.get_untracked(),
            "ms_per_step": lab.ms_per_step.get_untracked(),
        },
    });
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Offers `text` as a file download.
pub fn download(name: &str, text: &str, mime: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&text.into());
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| "could not make the download".to_string())?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| "could not make the download URL")?;
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(|_| "no anchor")?.dyn_into().map_err(|_| "no anchor")?;
    a.set_href(&url);
    a.set_download(name);
    a.click();
    // Chromium starts the download after the click returns: free the URL a little later.
    set_timeout(
        move || {
            let _ = web_sys::Url::revoke_object_url(&url);
        },
        std::time::Duration::from_secs(5),
    );
    Ok(())
}
