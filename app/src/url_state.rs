//! The experiment in the page's address: `#s=<settings as JSON, URI-encoded>`, or the short form
//! `#preset=<id>`. Reading never fails the page: a bad value gives a message and the default.

use spherewalk::settings::{Settings, URL_TEXT_LIMIT};

/// The settings the address asks for, and a message when it asked for something unusable.
pub fn read() -> (Settings, Option<String>) {
    let hash = web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default();
    parse(&hash)
}

/// Parses a location hash (with or without its leading `#`).
pub fn parse(hash: &str) -> (Settings, Option<String>) {
    let hash = hash.trim_start_matches('#');
    if hash.is_empty() {
        return (Settings::default(), None);
    }
    let fallback = |why: String| (Settings::default(), Some(format!("{why}; using the default experiment instead")));
    if let Some(id) = hash.strip_prefix("preset=") {
        return match Settings::preset(id) {
            Some(s) => (s, None),
            None => fallback(format!("the link names an unknown preset {id:?}")),
        };
    }
    let Some(value) = hash.strip_prefix("s=") else {
        return fallback(
            "the link's settings are not in a form this page knows (expected #s=... or #preset=...)".into(),
        );
    };
    let json = match js_sys::decode_uri_component(value) {
        Ok(s) => String::from(s),
        Err(_) => return fallback("the link's settings are not validly URI-encoded".into()),
    };
    let settings: Settings = match serde_json::from_str(&json) {
        Ok(s) => s,
        Err(e) => return fallback(format!("the link's settings could not be read ({e})")),
    };
    match settings.to_config() {
        Ok(_) => (settings, None),
        Err(e) => fallback(format!("the link's settings are not usable: {e}")),
    }
}

/// The hash that reproduces `settings` (text longer than the limit is left out).
pub fn encode(settings: &Settings) -> (String, bool) {
    let mut s = settings.clone();
    let dropped = s.text.chars().count() > URL_TEXT_LIMIT;
    if dropped {
        s.text.clear();
    }
    let json = serde_json::to_string(&s).unwrap_or_default();
    (format!("#s={}", String::from(js_sys::encode_uri_component(&json))), dropped)
}

/// Writes the settings into the address bar without adding a history entry.
pub fn write(settings: &Settings) -> bool {
    let (hash, dropped) = encode(settings);
    if let Some(w) = web_sys::window() {
        let current = w.location().hash().unwrap_or_default();
        if current != hash {
            if let Ok(h) = w.history() {
                let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&hash));
            }
        }
    }
    dropped
}
