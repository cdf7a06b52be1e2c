//! The experiment in the page's address: `#s=<settings as JSON, URI-encoded>`, or the short form
//! `#preset=<id>`. Reading never fails the page: a bad value gives a message and the default.

use common::settings::{Settings, PACES, URL_TEXT_LIMIT};

/// What a link asked for: the settings it gives (every good value kept), a message for the page, and
/// the fields it could not use with why (the form marks them).
pub struct Read {
    pub settings: Settings,
    pub problem: Option<String>,
    /// (field name as in the JSON, the value as the link wrote it, why it was not used)
    pub bad: Vec<(String, String, String)>,
    /// `&tour=N`: the tour step the link opens (1-based), or the text when it is not a number.
    pub tour: Option<Result<usize, String>>,
    /// `&hide=settings,model`: parts of the page a class does not need.
    pub hide: Vec<String>,
    /// `&embed=sphere`: one panel and a compact Start, for an iframe in a slide or a course page.
    pub embed: Option<String>,
}

/// The panels a link can embed alone (`#embed=...`).
pub const EMBEDDABLE: [&str; 4] = ["sphere", "loss", "attention", "writing"];

/// The address's hash.
pub fn hash() -> String {
    web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default()
}

/// The settings the address asks for.
pub fn read() -> Read {
    parse(&hash())
}

/// Whether a hash names an experiment (`s=` or `preset=`), beside a tour step or hidden parts.
pub fn has_experiment(hash: &str) -> bool {
    hash.trim_start_matches('#').split('&').any(|p| p.starts_with("s=") || p.starts_with("preset="))
}

fn whole(settings: Settings, problem: Option<String>) -> Read {
    Read { settings, problem, bad: Vec::new(), tour: None, hide: Vec::new(), embed: None }
}

/// Parses a location hash: `&`-separated parts, the experiment (`s=` or `preset=`), `tour=N`,
/// `hide=a,b` and `embed=panel` in any order; each may be missing.
pub fn parse(hash: &str) -> Read {
    let (mut tour, mut hide, mut embed, mut rest) = (None, Vec::new(), None, Vec::new());
    for part in hash.trim_start_matches('#').split('&').filter(|p| !p.is_empty()) {
        if let Some(n) = part.strip_prefix("tour=") {
            tour = Some(n.parse::<usize>().map_err(|_| decoded(n)));
        } else if let Some(list) = part.strip_prefix("hide=") {
            hide = list.split(',').filter(|h| !h.is_empty()).map(String::from).collect();
        } else if let Some(panel) = part.strip_prefix("embed=") {
            embed = Some(decoded(panel));
        } else {
            rest.push(part);
        }
    }
    let mut read = parse_experiment(&rest.join("&"));
    read.tour = tour;
    read.hide = hide;
    match embed {
        Some(panel) if EMBEDDABLE.contains(&panel.as_str()) => read.embed = Some(panel),
        Some(panel) => {
            let why = format!(
                "the link embeds {panel:?}, which is not a panel that can stand alone ({}); the whole page is shown",
                EMBEDDABLE.join(", ")
            );
            read.problem = Some(read.problem.map_or(why.clone(), |p| format!("{p}; {why}")));
        }
        None => {}
    }
    read
}

/// Parses the experiment part of a hash. A link with one bad value keeps every good one: the fields
/// are applied one at a time to the default, and each one that does not make a usable experiment is
/// left at the default and named.
fn parse_experiment(hash: &str) -> Read {
    if hash.is_empty() {
        return whole(Settings::default(), None);
    }
    let fallback =
        |why: String| whole(Settings::default(), Some(format!("{why}; using the default experiment instead")));
    if let Some(id) = hash.strip_prefix("preset=") {
        let id = decoded(id);
        return match Settings::preset(&id) {
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
        if usable(&s).is_ok() {
            return whole(s, None);
        }
    }
    // The preset first: the other fields are read on top of it.
    let preset = fields.get("preset").and_then(|p| p.as_str()).and_then(Settings::preset);
    let known_preset = preset.is_some();
    let mut settings = preset.unwrap_or_default();
    let mut bad = Vec::new();
    for (key, value) in &fields {
        let mut candidate = serde_json::to_value(&settings).unwrap_or_default();
        candidate[key] = value.clone();
        let tried = serde_json::from_value::<Settings>(candidate)
            .map_err(|e| e.to_string())
            .and_then(|s| usable(&s).map(|_| s));
        match tried {
            Ok(s) => settings = s,
            Err(why) => bad.push((key.clone(), value.to_string(), why)),
        }
    }
    // Values on top of no known preset make a custom experiment.
    if !known_preset && fields.contains_key("preset") {
        settings.preset = "custom".into();
    }
    let problem = (!bad.is_empty()).then(|| {
        let list: Vec<String> = bad.iter().map(|(k, v, why)| format!("{k} = {v} ({why})")).collect();
        format!(
            "the link's settings are not all usable: {}; those keep their default, the rest is as linked",
            list.join("; ")
        )
    });
    Read { settings, problem, bad, tour: None, hide: Vec::new(), embed: None }
}

/// What a link's settings must be beyond a valid experiment: a preset the page has and a pace its
/// selector offers (else the selector would show one pace while the run goes at another).
fn usable(s: &Settings) -> Result<(), String> {
    if s.preset != "custom" && Settings::preset(&s.preset).is_none() {
        return Err(format!("no preset is called {:?}", s.preset));
    }
    if !PACES.contains(&s.steps_per_second) {
        let offered: Vec<String> = PACES.iter().filter(|&&p| p > 0.0).map(|p| p.to_string()).collect();
        return Err(format!("the page goes at {} steps per second, or 0 for as fast as possible", offered.join(", ")));
    }
    s.to_config().map(|_| ())
}

/// A link's text as written before it was percent-encoded (as is, when it is not validly encoded).
fn decoded(text: &str) -> String {
    js_sys::decode_uri_component(text).map(String::from).unwrap_or_else(|_| text.to_string())
}

/// The hash that reproduces `settings` (text longer than the limit is left out), then `extra`
/// (`&tour=N&hide=...`).
pub fn encode(settings: &Settings, extra: &str) -> (String, bool) {
    let mut s = settings.clone();
    if s.data == "austen" {
        s.text.clear();
    }
    let dropped = s.text.chars().count() > URL_TEXT_LIMIT;
    if dropped {
        s.text.clear();
    }
    let json = serde_json::to_string(&s).unwrap_or_default();
    (format!("#s={}{extra}", String::from(js_sys::encode_uri_component(&json))), dropped)
}

/// Writes the settings (and `extra`) into the address bar without adding a history entry.
pub fn write(settings: &Settings, extra: &str) -> bool {
    let (hash, dropped) = encode(settings, extra);
    replace(&hash);
    dropped
}

/// Replaces the address's hash without adding a history entry.
pub fn replace(hash: &str) {
    if let Some(w) = web_sys::window() {
        let current = w.location().hash().unwrap_or_default();
        if current != hash {
            if let Ok(h) = w.history() {
                let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(hash));
            }
        }
    }
}
