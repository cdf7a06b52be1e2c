//! The experiment in the page's address: `#s=<settings as JSON, URI-encoded>`, or the short form
//! `#preset=<id>`. Reading never fails the page: a bad value gives a message and the default.

use spherewalk::settings::{Settings, URL_TEXT_LIMIT};

/// What a link asked for: the settings it gives (every good value kept), a message for the page, and
/// the fields it could not use with why (the form marks them).
pub struct Read {
    pub settings: Settings,
    pub problem: Option<String>,
    /// (field name as in the JSON, the value as the link wrote it, why it was not used)
    pub bad: Vec<(String, String, String)>,
}

/// The settings the address asks for.
pub fn read() -> Read {
    let hash = web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default();
    parse(&hash)
}

fn whole(settings: Settings, problem: Option<String>) -> Read {
    Read { settings, problem, bad: Vec::new() }
}

/// Parses a location hash (with or without its leading `#`). A link with one bad value keeps every
/// good one: the fields are applied one at a time to the default, and each one that does not make a
/// usable experiment is left at the default and named.
pub fn parse(hash: &str) -> Read {
    let hash = hash.trim_start_matches('#');
    if hash.is_empty() {
        return whole(Settings::default(), None);
    }
    let fallback =
        |why: String| whole(Settings::default(), Some(format!("{why}; using the default experiment instead")));
    if let Some(id) = hash.strip_prefix("preset=") {
        return match Settings::preset(id) {
            Some(s) => whole(s, None),
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
    let fields = match serde_json::from_str::<serde_json::Value>(&json) {
        Ok(serde_json::Value::Object(fields)) => fields,
        Ok(_) => return fallback("the link's settings could not be read (not a JSON object)".into()),
        Err(e) => return fallback(format!("the link's settings could not be read ({e})")),
    };
    // The whole link when it is usable as it stands (fields that only fit together, like d_model 30
    // with heads 3, are good together).
    if let Ok(s) = serde_json::from_str::<Settings>(&json) {
        if s.to_config().is_ok() {
            return whole(s, None);
        }
    }
    // The preset first: the other fields are read on top of it.
    let preset = fields.get("preset").and_then(|p| p.as_str()).and_then(Settings::preset);
    let mut settings = preset.unwrap_or_default();
    let mut bad = Vec::new();
    for (key, value) in &fields {
        let mut candidate = serde_json::to_value(&settings).unwrap_or_default();
        candidate[key] = value.clone();
        let tried = serde_json::from_value::<Settings>(candidate)
            .map_err(|e| e.to_string())
            .and_then(|s| s.to_config().map(|_| s));
        match tried {
            Ok(s) => settings = s,
            Err(why) => bad.push((key.clone(), value.to_string(), why)),
        }
    }
    let problem = (!bad.is_empty()).then(|| {
        let list: Vec<String> = bad.iter().map(|(k, v, why)| format!("{k} = {v} ({why})")).collect();
        format!(
            "the link's settings are not all usable: {}; those keep their default, the rest is as linked",
            list.join("; ")
        )
    });
    Read { settings, problem, bad }
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
