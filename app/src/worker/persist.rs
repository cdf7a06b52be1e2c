//! "Lose nothing": the run in progress (config, metrics, weights and optimizer state) saved to the
//! browser's IndexedDB by the worker as it trains, and read back when the page opens.
//!
//! The object store [`STORE`] of the database [`DB`] holds one run: under [`KEY`] its `meta` (JSON
//! text: settings, config, step and metrics) and how many parts its `model` and `optimizer` bytes
//! (safetensors, as the engine's checkpoint folder has them) were cut into; each part under its own
//! key. Chromium refuses a value over 127 MiB (a d1024 run's optimizer state is more), so the bytes
//! go in parts of [`PART_BYTES`]. One transaction replaces the whole run: storage holds the old run
//! or the new one, never half of each, and a save counts only once that transaction completes.

use std::cell::RefCell;

use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbDatabase, IdbRequest, IdbTransaction, IdbTransactionMode};

const DB: &str = "spherewalk";
const STORE: &str = "runs";
const KEY: &str = "current";
/// The most bytes one stored value holds.
const PART_BYTES: usize = 32 << 20;

thread_local! {
    static DATABASE: RefCell<Option<IdbDatabase>> = const { RefCell::new(None) };
}

/// A saved run as bytes and text, ready for IndexedDB.
pub struct Record {
    pub meta: String,
    pub model: Vec<u8>,
    pub optimizer: Vec<u8>,
}

fn js_err(what: &str, e: JsValue) -> String {
    let name = Reflect::get(&e, &"name".into()).ok().and_then(|n| n.as_string()).unwrap_or_default();
    let detail = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    match name.as_str() {
        "QuotaExceededError" if detail.is_empty() => format!("{what}: the browser's storage for this site is full"),
        "QuotaExceededError" => format!("{what}: the browser's storage for this site is full ({detail})"),
        "SecurityError" | "InvalidStateError" | "NotAllowedError" => {
            format!("{what}: this browser does not let the page store data ({name}: {detail})")
        }
        // Chromium's answer when the visitor blocks site data.
        "UnknownError" if detail.contains("denied permission") => {
            format!("{what}: this browser does not let the page store data (site data is blocked in its settings)")
        }
        "" => format!("{what}: {detail}"),
        _ => format!("{what}: {name}: {detail}"),
    }
}

/// Waits for an IndexedDB request to succeed and returns its result.
async fn done(req: &IdbRequest) -> Result<JsValue, JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        let r = req.clone();
        let ok = Closure::once_into_js(move |_: JsValue| {
            let _ = resolve.call1(&JsValue::NULL, &r.result().unwrap_or(JsValue::UNDEFINED));
        });
        let r = req.clone();
        let bad = Closure::once_into_js(move |_: JsValue| {
            let why = r.error().ok().flatten().map(JsValue::from);
            let _ = reject.call1(&JsValue::NULL, &why.unwrap_or_else(|| "the storage request failed".into()));
        });
        req.set_onsuccess(Some(ok.unchecked_ref()));
        req.set_onerror(Some(bad.unchecked_ref()));
    });
    JsFuture::from(promise).await
}

/// Waits until `tx` is committed: a write is stored only then (a put's request can succeed in a
/// transaction that aborts afterwards, for one when the quota is exceeded).
async fn committed(tx: &IdbTransaction) -> Result<(), JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        let ok = Closure::once_into_js(move |_: JsValue| {
            let _ = resolve.call0(&JsValue::NULL);
        });
        let t = tx.clone();
        let bad = Closure::once_into_js(move |_: JsValue| {
            let why = t.error().map(JsValue::from);
            let _ = reject.call1(&JsValue::NULL, &why.unwrap_or_else(|| "the storage transaction failed".into()));
        });
        tx.set_oncomplete(Some(ok.unchecked_ref()));
        tx.set_onabort(Some(bad.unchecked_ref()));
    });
    JsFuture::from(promise).await.map(|_| ())
}

async fn database() -> Result<IdbDatabase, String> {
    if let Some(db) = DATABASE.with_borrow(|d| d.clone()) {
        return Ok(db);
    }
    // The worker's global scope, or the page's window: both have `indexedDB`.
    let factory = Reflect::get(&js_sys::global(), &"indexedDB".into())
        .ok()
        .and_then(|f| f.dyn_into::<web_sys::IdbFactory>().ok())
        .ok_or("IndexedDB is not available in this browser")?;
    let open = factory.open_with_u32(DB, 1).map_err(|e| js_err("could not open the browser storage", e))?;
    let req = open.clone();
    let upgrade = Closure::once_into_js(move |_: JsValue| {
        if let Ok(db) = req.result().and_then(|r| r.dyn_into::<IdbDatabase>()) {
            if !db.object_store_names().contains(STORE) {
                let _ = db.create_object_store(STORE);
            }
        }
    });
    open.set_onupgradeneeded(Some(upgrade.unchecked_ref()));
    let db: IdbDatabase = done(&open)
        .await
        .map_err(|e| js_err("could not open the browser storage", e))?
        .dyn_into()
        .map_err(|e| js_err("browser storage", e))?;
    DATABASE.with_borrow_mut(|d| *d = Some(db.clone()));
    Ok(db)
}

fn transaction(
    db: &IdbDatabase,
    mode: IdbTransactionMode,
) -> Result<(IdbTransaction, web_sys::IdbObjectStore), String> {
    let tx = db.transaction_with_str_and_mode(STORE, mode).map_err(|e| js_err("browser storage", e))?;
    let store = tx.object_store(STORE).map_err(|e| js_err("browser storage", e))?;
    Ok((tx, store))
}

fn part_key(what: &str, i: usize) -> JsValue {
    JsValue::from_str(&format!("{KEY}/{what}/{i}"))
}

/// Saves `record`, replacing any earlier one; Ok once storage holds it.
pub async fn put(record: Record) -> Result<(), String> {
    let fail = |e| js_err("could not save the run", e);
    let db = database().await?;
    let (tx, store) = transaction(&db, IdbTransactionMode::Readwrite)?;
    // The old run's parts go in the same transaction as the new run comes.
    store.clear().map_err(fail)?;
    let head = Object::new();
    Reflect::set(&head, &"meta".into(), &JsValue::from_str(&record.meta)).map_err(fail)?;
    for (what, bytes) in [("model", &record.model), ("optimizer", &record.optimizer)] {
        let parts = bytes.chunks(PART_BYTES);
        Reflect::set(&head, &format!("{what}_parts").into(), &JsValue::from(parts.len() as u32)).map_err(fail)?;
        for (i, part) in parts.enumerate() {
            store.put_with_key(&Uint8Array::from(part), &part_key(what, i)).map_err(fail)?;
        }
    }
    store.put_with_key(&head, &JsValue::from_str(KEY)).map_err(fail)?;
    committed(&tx).await.map_err(fail)
}

/// The saved run's meta text without its weights, if there is a saved run.
pub async fn meta() -> Result<Option<String>, String> {
    let fail = |e| js_err("could not read the saved run", e);
    let db = database().await?;
    let (_, store) = transaction(&db, IdbTransactionMode::Readonly)?;
    let head = done(&store.get(&JsValue::from_str(KEY)).map_err(fail)?).await.map_err(fail)?;
    if head.is_undefined() || head.is_null() {
        return Ok(None);
    }
    Reflect::get(&head, &"meta".into())
        .ok()
        .and_then(|m| m.as_string())
        .map(Some)
        .ok_or("the saved run is incomplete".into())
}

/// The saved run, if there is one.
pub async fn get() -> Result<Option<Record>, String> {
    let fail = |e| js_err("could not read the saved run", e);
    let db = database().await?;
    let (_, store) = transaction(&db, IdbTransactionMode::Readonly)?;
    // Keys and values of the whole store in one transaction: the run as one save left it.
    let keys = store.get_all_keys().map_err(fail)?;
    let values = store.get_all().map_err(fail)?;
    let keys: Array = done(&keys).await.map_err(fail)?.unchecked_into();
    let values: Array = done(&values).await.map_err(fail)?.unchecked_into();
    let value_of = |key: &JsValue| keys.index_of(key, 0).try_into().ok().map(|i: u32| values.get(i));
    let Some(head) = value_of(&JsValue::from_str(KEY)) else { return Ok(None) };
    let incomplete = || "the saved run is incomplete".to_string();
    let meta = Reflect::get(&head, &"meta".into()).ok().and_then(|m| m.as_string()).ok_or_else(incomplete)?;
    let bytes = |what: &str| -> Result<Vec<u8>, String> {
        // A run saved before the bytes went in parts holds them whole.
        if let Some(whole) = Reflect::get(&head, &what.into()).ok().and_then(|v| v.dyn_into::<Uint8Array>().ok()) {
            return Ok(whole.to_vec());
        }
        let parts = Reflect::get(&head, &format!("{what}_parts").into()).ok().and_then(|n| n.as_f64());
        let parts = parts.ok_or_else(incomplete)? as usize;
        let mut out = Vec::new();
        for i in 0..parts {
            let part = value_of(&part_key(what, i)).and_then(|v| v.dyn_into::<Uint8Array>().ok());
            out.extend(part.ok_or_else(incomplete)?.to_vec());
        }
        Ok(out)
    };
    Ok(Some(Record { meta, model: bytes("model")?, optimizer: bytes("optimizer")? }))
}

/// Forgets the saved run.
pub async fn delete() -> Result<(), String> {
    let fail = |e| js_err("could not delete the saved run", e);
    let db = database().await?;
    let (tx, store) = transaction(&db, IdbTransactionMode::Readwrite)?;
    store.clear().map_err(fail)?;
    committed(&tx).await.map_err(fail)
}
