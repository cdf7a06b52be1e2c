//! Downloads: text, bytes and canvases offered as files (the run's JSON is `Lab::run_json`).

use leptos::prelude::*;
use wasm_bindgen::JsCast;

/// Offers `text` as a file download.
pub fn download(name: &str, text: &str, mime: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&text.into());
    download_parts(name, &parts, mime)
}

/// Offers `bytes` as a file download.
pub fn download_bytes(name: &str, bytes: &[u8], mime: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes).into());
    download_parts(name, &parts, mime)
}

/// Clicks a download link to `url` (an object or data URL).
pub fn click_link(name: &str, url: &str) -> Result<(), String> {
    let document = web_sys::window().and_then(|w| w.document()).ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(|_| "no anchor")?.dyn_into().map_err(|_| "no anchor")?;
    a.set_href(url);
    a.set_download(name);
    a.click();
    Ok(())
}

/// Offers a canvas as a PNG download; returns the data URL.
pub fn canvas_png(canvas_id: &str, name: &str) -> Result<String, String> {
    let canvas: web_sys::HtmlCanvasElement = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.get_element_by_id(canvas_id))
        .and_then(|e| e.dyn_into().ok())
        .ok_or_else(|| format!("no figure {canvas_id}"))?;
    let url = canvas.to_data_url().map_err(|_| "the figure cannot be turned into a PNG".to_string())?;
    click_link(name, &url)?;
    Ok(url)
}

fn download_parts(name: &str, parts: &js_sys::Array, mime: &str) -> Result<(), String> {
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_u8_array_sequence_and_options(parts, &options)
        .map_err(|_| "could not make the download".to_string())?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| "could not make the download URL")?;
    click_link(name, &url)?;
    // Chromium starts the download after the click returns: free the URL a little later.
    set_timeout(
        move || {
            let _ = web_sys::Url::revoke_object_url(&url);
        },
        std::time::Duration::from_secs(5),
    );
    Ok(())
}
