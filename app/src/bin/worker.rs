//! The page's training worker (Trunk builds it as `worker.js` + `worker_bg.wasm`, loaded through
//! `worker_loader.js`): it owns the engine's session; the page only draws.

fn main() {
    common::worker::start();
}
