//! The 2-D contexts every view draws on. Where the GPU is software (SwiftShader, llvmpipe: a school
//! laptop whose GPU is blocklisted) they are CPU-backed: drawn through the software GPU, a canvas
//! on a 2-core machine that also trains left the page without a new frame for 30 s and more (Pause
//! never showed), while CPU canvases kept it at 55 frames a second.

use std::cell::OnceCell;

use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use crate::views::sphere::gl;

thread_local! {
    static SOFTWARE_GPU: OnceCell<bool> = const { OnceCell::new() };
}

/// Whether this browser's GPU drawing is done in software (asked once).
pub fn software_gpu() -> bool {
    SOFTWARE_GPU.with(|s| *s.get_or_init(|| gl::software_renderer_name().is_some()))
}

/// The canvas's 2-D context. A canvas keeps the options of its first `getContext`, so every view
/// asks through here.
pub fn context(canvas: &HtmlCanvasElement) -> Option<CanvasRenderingContext2d> {
    let options = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&options, &"willReadFrequently".into(), &software_gpu().into());
    canvas.get_context_with_context_options("2d", &options).ok().flatten().and_then(|c| c.dyn_into().ok())
}
