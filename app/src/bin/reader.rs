//! The page's model worker (Trunk builds it as `reader.js` + `reader_bg.wasm`, loaded through
//! `worker_loader.js?worker=reader` when the page opens a real model): a model opened from its
//! files, with its tokenizer. The training page never loads it.

fn main() {
    common::reader::start();
}
