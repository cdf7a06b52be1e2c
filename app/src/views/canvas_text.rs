//! The size of the text the canvases draw, in CSS pixels: one setting, `--canvas-text` in
//! style.css (12 px, 24 px in presenter mode), so chart ticks and legends, heatmap labels and the
//! sphere's labels grow with the page's own text. Each canvas reports what it drew with as
//! `data-font-px`, for the browser test and for anyone checking a projector.

use web_sys::HtmlCanvasElement;

/// The size when the style sheet does not say.
pub const DEFAULT_PX: f64 = 12.0;

/// The smallest text a canvas draws, in CSS pixels.
pub fn px() -> f64 {
    web_sys::window()
        .and_then(|w| w.get_computed_style(&w.document()?.document_element()?).ok().flatten())
        .and_then(|style| style.get_property_value("--canvas-text").ok())
        .and_then(|v| v.trim().trim_end_matches("px").parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0)
        .unwrap_or(DEFAULT_PX)
}

/// Records on `canvas` the smallest text it drew, in CSS pixels.
pub fn report(canvas: &HtmlCanvasElement, px: f64) {
    let _ = canvas.set_attribute("data-font-px", &format!("{px}"));
}
