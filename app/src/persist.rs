//! "Lose nothing": the run in progress (config, metrics, weights and optimizer state) saved to the
//! browser's IndexedDB by the worker as it trains, and read back when the page opens.
//!
//! One record under [`KEY`] in the object store [`STORE`] of the database [`DB`]: `meta` (JSON text:
//! settings, config, step and metrics), `model` and `optimizer` (safetensors bytes, as the engine's
//! checkpoint folder has them).

use std::cell::RefCell;

use js_sys::{Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{IdbDatabase, IdbRequest, IdbTransactionMode};

const DB: &str = "spherewalk";
const STORE: &str = "runs";
const KEY: &str = "current";

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
    let detail = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    format!("{what}: {detail}")
}

/// Waits for an IndexedDB request to succeed and returns its result.
async fn done(req: &IdbRequest) -> Result<JsValue, JsValue> {
    let promise = Promise::new(&mut |resolve, reject| {
        let r = req.clone();
        let ok = Closure::once_into_js(move |_: JsValue| {
            let _ = resolve.call1(&JsValue::NULL, &r.result().unwrap_or(JsValue::UNDEFINED));
        });
        let bad = Closure::once_into_js(move |_: JsValue| {
            let _ = reject.call1(&JsValue::NULL, &JsValue::from_str("the storage request failed"));
        });
        req.set_onsuccess(Some(ok.unchecked_ref()));
        req.set_onerror(Some(bad.unchecked_ref()));
    });
    JsFuture::from(promise).await
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

fn store(db: &IdbDatabase, mode: IdbTransactionMode) -> Result<web_sys::IdbObjectStore, String> {
    db.transaction_with_str_and_mode(STORE, mode)
        .and_then(|t| t.object_store(STORE))
        .map_err(|e| js_err("browser storage", e))
}

/// Saves `record`, replacing any earlier one.
pub async fn put(record: Record) -> Result<(), String> {
    let db = database().await?;
    let value = Object::new();
    let set = |k: &str, v: &JsValue| Reflect::set(&value, &k.into(), v).map(|_| ());
    set("meta", &JsValue::from_str(&record.meta))
        .and_then(|_| set("model", &Uint8Array::from(record.model.as_slice()).into()))
        .and_then(|_| set("optimizer", &Uint8Array::from(record.optimizer.as_slice()).into()))
        .map_err(|e| js_err("could not save the run", e))?;
    let req = store(&db, IdbTransactionMode::Readwrite)?
        .put_with_key(&value, &JsValue::from_str(KEY))
        .map_err(|e| js_err("could not save the run", e))?;
    done(&req).await.map(|_| ()).map_err(|e| js_err("could not save the run", e))
}

/// The saved run, if there is one.
pub async fn get() -> Result<Option<Record>, String> {
    let db = database().await?;
    let req = store(&db, IdbTransactionMode::Readonly)?
        .get(&JsValue::from_str(KEY))
        .map_err(|e| js_err("could not read the saved run", e))?;
    let value = done(&req).await.map_err(|e| js_err("could not read the saved run", e))?;
    if value.is_undefined() || value.is_null() {
        return Ok(None);
    }
    let field = |k: &str| Reflect::get(&value, &k.into()).ok();
    let bytes = |k: &str| field(k).and_then(|v| v.dyn_into::<Uint8Array>().ok()).map(|a| a.to_vec());
    match (field("meta").and_then(|m| m.as_string()), bytes("model"), bytes("optimizer")) {
        (Some(meta), Some(model), Some(optimizer)) => Ok(Some(Record { meta, model, optimizer })),
        _ => Err("the saved run is incomplete".into()),
    }
}

/// Forgets the saved run.
pub async fn delete() -> Result<(), String> {
    let db = database().await?;
    let req = store(&db, IdbTransactionMode::Readwrite)?
        .delete(&JsValue::from_str(KEY))
        .map_err(|e| js_err("could not delete the saved run", e))?;
    done(&req).await.map(|_| ()).map_err(|e| js_err("could not delete the saved run", e))
}
