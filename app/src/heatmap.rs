//! The attention panel: one head's attention matrix P of the probe row as a heatmap, raised to the
//! power k (`science::markov::power`: k steps of the Markov chain P defines).

use engine::science::markov;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use crate::lab::Lab;

/// A perceptual-ish blue-to-yellow ramp for v in 0..=1.
fn ramp(v: f64) -> (u8, u8, u8) {
    const STOPS: [(f64, f64, f64); 5] =
        [(68.0, 1.0, 84.0), (59.0, 82.0, 139.0), (33.0, 145.0, 140.0), (94.0, 201.0, 98.0), (253.0, 231.0, 37.0)];
    let x = v.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |p: f64, q: f64| (p + (q - p) * f).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Draws the (t, t) matrix `p`; returns its mean row entropy.
fn draw(canvas: &HtmlCanvasElement, p: &[f64], t: usize, dark: bool) -> Result<f64, String> {
    let ctx: CanvasRenderingContext2d = canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "the heatmap canvas has no 2D context".to_string())?;
    let (w, h) = (canvas.width() as f64, canvas.height() as f64);
    ctx.set_fill_style_str(if dark { "#16181d" } else { "#ffffff" });
    ctx.fill_rect(0.0, 0.0, w, h);
    if t == 0 || p.len() != t * t {
        return Ok(0.0);
    }
    let max = p.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::max).max(1e-12);
    // One pixel per cell in an image scaled up without smoothing: one draw call, not T^2 (at
    // context 128 the per-cell rectangles alone held the page for tens of milliseconds).
    let mut rgba = Vec::with_capacity(4 * t * t);
    for &x in p {
        // Square root: small probabilities stay visible next to a dominant one.
        let (r, g, b) = ramp((x / max).sqrt());
        rgba.extend_from_slice(&[r, g, b, 255]);
    }
    let image = web_sys::ImageData::new_with_u8_clamped_array_and_sh(wasm_bindgen::Clamped(&rgba), t as u32, t as u32)
        .map_err(|_| "could not make the heatmap image".to_string())?;
    let cells: HtmlCanvasElement = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.create_element("canvas").ok())
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "could not make the heatmap image".to_string())?;
    cells.set_width(t as u32);
    cells.set_height(t as u32);
    let cells_ctx: CanvasRenderingContext2d = cells
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "the heatmap image has no 2D context".to_string())?;
    cells_ctx.put_image_data(&image, 0.0, 0.0).map_err(|_| "could not draw the heatmap image".to_string())?;
    let side = w.min(h);
    ctx.set_image_smoothing_enabled(false);
    ctx.draw_image_with_html_canvas_element_and_dw_and_dh(&cells, 0.0, 0.0, side, side)
        .map_err(|_| "could not draw the heatmap".to_string())?;
    let h = markov::row_entropy(p, t);
    Ok(h.iter().sum::<f64>() / t as f64)
}

fn slider(
    id: &'static str,
    label: &'static str,
    value: RwSignal<usize>,
    min: usize,
    max: impl Fn() -> usize + Send + Sync + Copy + 'static,
) -> impl IntoView {
    view! {
        <label for=id>
            {label} " " <output>{move || value.get()}</output>
            <input
                id=id
                type="range"
                min=min
                max=max
                prop:value=move || value.get().to_string()
                on:input=move |ev| value.set(event_target_value(&ev).parse().unwrap_or(min))
            />
        </label>
    }
}

#[component]
pub fn AttentionPanel(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    let layer = RwSignal::new(0usize);
    let head = RwSignal::new(0usize);
    let k = RwSignal::new(1usize);
    let entropy = RwSignal::new(None::<f64>);
    let layers = move || lab.panels.with(|s| s.as_ref().map(|s| s.layers)).unwrap_or(lab.settings.with(|s| s.layers));
    let heads = move || lab.panels.with(|s| s.as_ref().map(|s| s.heads)).unwrap_or(lab.settings.with(|s| s.heads));

    Effect::new(move |_| {
        let (l, hd, k, dark) = (layer.get(), head.get(), k.get(), dark.get());
        let Some(canvas) = canvas_ref.get() else { return };
        let result = lab.panels.with(|s| {
            let (p, t): (Vec<f64>, usize) = match s {
                Some(s) if l < s.layers && hd < s.heads => {
                    (s.attention_of(l, hd).iter().map(|&x| x as f64).collect(), s.context)
                }
                _ => (Vec::new(), 0),
            };
            let pk = if t > 0 && k != 1 { markov::power(&p, t, k as u32) } else { p };
            draw(&canvas, &pk, t, dark).map(|h| (t > 0).then_some(h))
        });
        match result {
            Ok(h) => entropy.set(h),
            Err(e) => lab.error.set(Some(format!("could not draw the attention: {e}"))),
        }
    });

    view! {
        <section id="panel-attention" class="panel" aria-labelledby="attention-title">
            <h2 id="attention-title">"Attention as a Markov chain"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "Row i of a head's attention matrix P is where token i looks: P_ij >= 0 and each row sums "
                    "to 1, so P is the transition matrix of a random walk over positions. P^k is k steps of that "
                    "walk (k layers of attention alone, with no mixing in between): as k grows the rows tend to "
                    "the walk's stationary distribution, and causal attention drains towards the first tokens. "
                    "Bright cells are large probabilities (colour is the square root, row max = yellow)."
                </p>
            </details>
            <div class="row">
                {slider("att-layer", "layer", layer, 0, move || layers().saturating_sub(1))}
                {slider("att-head", "head", head, 0, move || heads().saturating_sub(1))}
                {slider("att-k", "power k", k, 1, || 16)}
            </div>
            <crate::panels::PngButton canvas="attention" file="spherewalk-attention.png" />
            <canvas
                id="attention"
                node_ref=canvas_ref
                width="320"
                height="320"
                role="img"
                aria-label=move || format!("attention heatmap of layer {}, head {}, to the power {}", layer.get(), head.get(), k.get())
                data-entropy=move || entropy.get().map(|h| format!("{h:.4}")).unwrap_or_default()
            ></canvas>
            <p id="attention-entropy" class="note">
                {move || {
                    entropy
                        .get()
                        .map(|h| format!("mean row entropy of P^{}: {h:.3} nats", k.get()))
                        .unwrap_or_else(|| "no attention yet".into())
                }}
            </p>
            {crate::panels::verdict_line("verdict-markov".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.markov.clone())))}
            {crate::lab::gpu_copy_note(lab)}
        </section>
    }
}
