//! A model's files from a hub (Hugging Face, or the server a link's `?hub=` names): each one
//! streamed with progress and a cancel, given up when the server stops sending, checked before it
//! is kept in the browser's Cache API (an HTML page for a JSON file, a download cut short, a
//! safetensors file of another length than its header says are never kept), and read back from
//! that cache on the next visit, where a broken copy is dropped and fetched again.

use js_sys::{Array, Function, Promise, Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use super::real_model::Progress;
use super::Lab;
use leptos::prelude::*;

/// Where "Fetch" finds a model id's files; a link's `?hub=` replaces it (the tests serve a
/// fixture under the same path layout from their own server).
pub const HUB: &str = "https://huggingface.co";
/// The browser cache the fetched files are kept in.
const CACHE: &str = "spherewalk-models";
/// A server that sends nothing for this long has stopped: the download is given up.
pub const STALL_MS: f64 = 20_000.0;

/// Models the page suggests, with what they are and what they download (model.safetensors).
pub const SUGGESTED: [(&str, &str); 7] = [
    ("openai-community/gpt2", "GPT-2 small, 124M weights, 548 MB"),
    ("EleutherAI/pythia-14m", "Pythia 14M (GPT-NeoX), 53 MB; @stepN for its training checkpoints"),
    ("EleutherAI/pythia-70m", "Pythia 70M (GPT-NeoX), 166 MB"),
    ("EleutherAI/pythia-160m", "Pythia 160M (GPT-NeoX), 375 MB"),
    ("HuggingFaceTB/SmolLM2-135M", "SmolLM2 135M (Llama), 269 MB"),
    ("Qwen/Qwen2.5-0.5B", "Qwen2.5 0.5B (Qwen2), 988 MB; near the tab's 3 GB while it opens"),
    ("google-bert/bert-base-uncased", "BERT base (the Brownian paper's model), 440 MB; fills in [MASK]"),
];

/// Where a model's files are: `id` or `id@revision` (a branch or a Pythia checkpoint such as
/// `step3000`), under the hub's `resolve/<revision>/`.
pub fn files_base(id: &str) -> Result<String, String> {
    let (name, revision) = id.split_once('@').unwrap_or((id, "main"));
    let fine = |s: &str, extra: &[char]| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c) || extra.contains(&c))
    };
    if !fine(name, &['/']) || name.contains("..") || name.starts_with('/') {
        return Err(format!("\"{name}\" is not a model id; type one such as openai-community/gpt2"));
    }
    if !fine(revision, &[]) || revision.contains("..") {
        return Err(format!("\"{revision}\" is not a revision; use a branch such as main, or Pythia's step3000"));
    }
    Ok(format!("{}/{name}/resolve/{revision}", hub()))
}

/// The hub's address: `?hub=` of the page's link, or Hugging Face.
pub fn hub() -> String {
    let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
    web_sys::UrlSearchParams::new_with_str(&search)
        .ok()
        .and_then(|p| p.get("hub"))
        .unwrap_or_else(|| HUB.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// The host a URL names ("huggingface.co", "127.0.0.1:8765").
pub fn host_of(url: &str) -> String {
    web_sys::Url::new(url).map(|u| u.host()).unwrap_or_else(|_| url.to_string())
}

/// What a file must be before it is kept: Ok, or why not.
pub type Check<'a> = &'a dyn Fn(&[u8]) -> Result<(), String>;
/// What the download's announced length (None: not said) must allow, before its body is read.
pub type Announced<'a> = &'a dyn Fn(Option<f64>) -> Result<(), String>;

/// A file downloaded (or read from the cache): its bytes, and a note for the visitor.
pub struct Got {
    pub bytes: Uint8Array,
    pub note: Option<String>,
}

/// One file: from the browser's cache if a sound copy is there, else fetched (and then kept; a
/// refusal to keep it is a note, not a failure). None when the hub has no such file (404).
pub async fn download(
    lab: Lab,
    url: &str,
    what: &str,
    controller: &web_sys::AbortController,
    check: Check<'_>,
    announced: Announced<'_>,
) -> Result<Option<Got>, String> {
    let window = web_sys::window().ok_or("no window")?;
    let text = |e: JsValue| common::js::error_text(&e);
    let cancelled = || "cancelled: nothing was opened".to_string();
    let (cache, mut note) = match window.caches() {
        Ok(c) => match JsFuture::from(c.open(CACHE)).await {
            Ok(c) => (Some(c.unchecked_into::<web_sys::Cache>()), None),
            Err(e) => (None, Some(no_copy(what, &text(e)))),
        },
        Err(e) => (None, Some(no_copy(what, &text(e)))),
    };
    if let Some(cache) = &cache {
        if let Ok(hit) = JsFuture::from(cache.match_with_str(url)).await {
            if let Ok(response) = hit.dyn_into::<web_sys::Response>() {
                let progress =
                    Progress { what: format!("{what} (from the browser's cache)"), loaded: 0.0, total: None };
                lab.real.progress.set(Some(progress));
                let buf = JsFuture::from(response.array_buffer().map_err(text)?).await.map_err(text)?;
                let bytes = Uint8Array::new(&buf);
                match check(&bytes.to_vec()) {
                    Ok(()) => return Ok(Some(Got { bytes, note: None })),
                    // A broken copy (cut short by a full disk, say) is dropped and fetched again.
                    Err(why) => {
                        let _ = JsFuture::from(cache.delete_with_str(url)).await;
                        note =
                            Some(format!("The copy of {what} kept in this browser was broken ({why}): fetched again."));
                    }
                }
            }
        }
    }
    // Cancel shows from the start: a server may keep the visitor waiting before a byte comes.
    lab.real.progress.set(Some(Progress { what: what.to_string(), loaded: 0.0, total: None }));
    let init = web_sys::RequestInit::new();
    init.set_signal(Some(&controller.signal()));
    let stalled =
        || format!("the server stopped sending {what} (nothing for {} s): try again later", STALL_MS / 1000.0);
    let response = within(window.fetch_with_str_and_init(url, &init), controller).await.map_err(|e| match e {
        Waited::Stalled => stalled(),
        Waited::Failed(_) if controller.signal().aborted() => cancelled(),
        Waited::Failed(e) => format!("could not fetch {url}: {} (no network, or the hub refused)", text(e)),
    })?;
    let response: web_sys::Response = response.unchecked_into();
    if response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("{url} answered {} {}: is the model id right?", response.status(), response.status_text()));
    }
    let header = |name: &str| response.headers().get(name).ok().flatten();
    // A compressed answer's length is not the file's.
    let total = header("content-length").filter(|_| header("content-encoding").is_none()).and_then(|v| v.parse().ok());
    if let Err(why) = announced(total) {
        controller.abort();
        return Err(why);
    }
    let body = response.body().ok_or("the response has no body")?;
    let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let mut chunks: Vec<Uint8Array> = Vec::new();
    let mut loaded = 0.0;
    loop {
        let part = within(reader.read(), controller).await.map_err(|e| match e {
            Waited::Stalled => stalled(),
            Waited::Failed(_) if controller.signal().aborted() => cancelled(),
            Waited::Failed(e) => format!("the download of {what} broke off: {}", text(e)),
        })?;
        if Reflect::get(&part, &"done".into()).ok().and_then(|d| d.as_bool()).unwrap_or(true) {
            break;
        }
        let chunk: Uint8Array = Reflect::get(&part, &"value".into()).map_err(text)?.unchecked_into();
        loaded += chunk.length() as f64;
        // A body past its announced length, or without one, is held to what its length would have
        // had to allow: a download that never ends stops at the limit, not when the tab dies.
        if total.is_none_or(|t| loaded > t) {
            if let Err(why) = announced(Some(loaded)) {
                controller.abort();
                return Err(format!("{why} (after {loaded} bytes of {what}, with no end announced: nothing was kept)"));
            }
        }
        chunks.push(chunk);
        lab.real.progress.set(Some(Progress { what: what.to_string(), loaded, total }));
    }
    if let Some(t) = total.filter(|&t| t != loaded) {
        return Err(format!("the download of {what} broke off after {loaded} of {t} bytes: nothing was kept"));
    }
    let whole = Uint8Array::new_with_length(loaded as u32);
    let mut at = 0;
    for c in &chunks {
        whole.set(c, at);
        at += c.length();
    }
    check(&whole.to_vec()).map_err(|why| format!("{why} (nothing was kept)"))?;
    if let Some(cache) = &cache {
        let kept = match web_sys::Response::new_with_opt_buffer_source(Some(&whole)) {
            Ok(copy) => JsFuture::from(cache.put_with_str(url, &copy)).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = kept {
            let why = match e.dyn_ref::<web_sys::DomException>().map(|d| d.name()) {
                Some(n) if n == "QuotaExceededError" => "no room: the browser's storage for this site is full".into(),
                _ => text(e),
            };
            note = Some(format!("The browser would not keep {what} ({why}): the next visit fetches it again."));
        }
    }
    Ok(Some(Got { bytes: whole, note }))
}

fn no_copy(what: &str, why: &str) -> String {
    format!("This browser keeps no copy of {what} ({why}: site data may be blocked): the next visit fetches it again.")
}

/// Drops the copies of `urls` kept in the browser (a model that would not open, or "Fetch again").
pub async fn forget(urls: &[String]) {
    let Some(caches) = web_sys::window().and_then(|w| w.caches().ok()) else { return };
    let Ok(cache) = JsFuture::from(caches.open(CACHE)).await else { return };
    let cache: web_sys::Cache = cache.unchecked_into();
    for url in urls {
        let _ = JsFuture::from(cache.delete_with_str(url)).await;
    }
}

enum Waited {
    Stalled,
    Failed(JsValue),
}

/// `promise`, or `Stalled` when it has not settled within [`STALL_MS`] (then the download is
/// aborted).
async fn within(promise: Promise, controller: &web_sys::AbortController) -> Result<JsValue, Waited> {
    const STALL: &str = "spherewalk-stalled";
    let window = web_sys::window();
    let mut timeout = None;
    let timer = Promise::new(&mut |_, reject| {
        let later = Function::new_with_args("reject, why", "return () => reject(why)");
        let fire = later.call2(&JsValue::NULL, &reject, &STALL.into()).ok().and_then(|f| f.dyn_into::<Function>().ok());
        if let (Some(w), Some(f)) = (&window, fire) {
            timeout = w.set_timeout_with_callback_and_timeout_and_arguments_0(&f, STALL_MS as i32).ok();
        }
    });
    let settled = JsFuture::from(Promise::race(&Array::of2(&promise, &timer))).await;
    if let (Some(w), Some(id)) = (&window, timeout) {
        w.clear_timeout_with_handle(id);
    }
    match settled {
        Ok(v) => Ok(v),
        Err(e) if e.as_string().as_deref() == Some(STALL) => {
            controller.abort();
            Err(Waited::Stalled)
        }
        Err(e) => Err(Waited::Failed(e)),
    }
}
