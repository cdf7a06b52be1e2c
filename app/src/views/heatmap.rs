//! The attention panel: one head's attention matrix P of the probe row as a heatmap, raised to the
//! power k (`science::markov::power`: k steps of the Markov chain P defines).

use engine::science::markov;
use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::HtmlCanvasElement;

use crate::lab::{Chain, Lab};
use crate::views::canvas;
use crate::views::canvas_text;
use crate::views::panel::Panel;
use crate::views::token_style::{glyph, viridis};

/// Where the cells, the labels and the colour scale sit, in CSS pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Layout {
    /// Left and top edges of the cell grid, and the side of one cell.
    x0: f64,
    y0: f64,
    cell: f64,
    t: usize,
}

impl Layout {
    /// `text`: the labels' size in CSS pixels, `longest` the widest label's width; the margins hold
    /// them, up to a fifth of the canvas each (longer labels are cut short there).
    fn new(size: f64, t: usize, text: f64, longest: f64) -> Layout {
        let cap = 0.2 * size;
        let x0 = (longest + 6.0).clamp(2.0 * text, cap.max(2.0 * text));
        // Labels wider than a letter or two stand upright above their columns.
        let y0 =
            if upright(longest, text) { (longest + 8.0).clamp(text + 8.0, cap.max(text + 8.0)) } else { text + 8.0 };
        let side = (size - x0 - 6.0).min(size - y0 - 3.7 * text).max(10.0);
        Layout { x0, y0, cell: side / t.max(1) as f64, t }
    }

    /// The cell (row i, column j) under a point, if any.
    fn cell_at(&self, x: f64, y: f64) -> Option<(usize, usize)> {
        let (j, i) = ((x - self.x0) / self.cell, (y - self.y0) / self.cell);
        (i >= 0.0 && j >= 0.0 && (i as usize) < self.t && (j as usize) < self.t).then_some((i as usize, j as usize))
    }
}

/// Whether the column labels stand upright: any wider than a letter and a half.
fn upright(longest: f64, text: f64) -> bool {
    longest > 1.5 * text
}

/// `label` cut short with an ellipsis to `width` pixels in the context's font.
fn fit(ctx: &web_sys::CanvasRenderingContext2d, label: &str, width: f64) -> String {
    let wide = |s: &str| ctx.measure_text(s).map_or(0.0, |m| m.width());
    if wide(label) <= width {
        return label.to_string();
    }
    let chars: Vec<char> = label.chars().collect();
    (1..chars.len())
        .rev()
        .map(|n| chars[..n].iter().collect::<String>() + "…")
        .find(|s| wide(s) <= width)
        .unwrap_or_else(|| chars.first().map(|c| c.to_string()).unwrap_or_default())
}

/// Draws the (t, t) matrix `p` with its token labels on both axes and the colour scale under it;
/// returns the layout and the mean row entropy.
fn draw(
    canvas: &HtmlCanvasElement,
    p: &[f64],
    t: usize,
    labels: &[String],
    selected: Option<usize>,
    hovered: Option<(usize, usize)>,
    dark: bool,
) -> Result<(Layout, f64), String> {
    let ctx = canvas::context(canvas).ok_or_else(|| "the heatmap canvas has no 2D context".to_string())?;
    let size = match canvas.client_width() {
        c if c >= 100 => c as f64,
        _ => canvas.width() as f64,
    };
    let dpr = web_sys::window().map(|w| w.device_pixel_ratio()).unwrap_or(1.0).clamp(1.0, 4.0);
    let px = (size * dpr).round() as u32;
    if canvas.width() != px || canvas.height() != px {
        canvas.set_width(px);
        canvas.set_height(px);
    }
    ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0).map_err(|_| "canvas transform failed".to_string())?;
    let (bg, fg) = if dark { ("#16181d", "#e8ebf0") } else { ("#ffffff", "#1d2026") };
    ctx.set_fill_style_str(bg);
    ctx.fill_rect(0.0, 0.0, size, size);
    let text = canvas_text::px();
    canvas_text::report(canvas, text);
    let font = text;
    ctx.set_font(&format!("{font:.0}px ui-monospace, monospace"));
    let longest = labels.iter().take(t).map(|l| ctx.measure_text(l).map_or(0.0, |m| m.width())).fold(0.0, f64::max);
    let layout = Layout::new(size, t, text, longest);
    if t == 0 || p.len() != t * t {
        return Ok((layout, 0.0));
    }
    let max = p.iter().copied().filter(|x| x.is_finite()).fold(0.0, f64::max).max(1e-12);
    // One pixel per cell in an image scaled up without smoothing: one draw call, not T^2 (at
    // context 128 the per-cell rectangles alone held the page for tens of milliseconds).
    let mut rgba = Vec::with_capacity(4 * t * t);
    for &x in p {
        // Square root: small probabilities stay visible next to a dominant one.
        let (r, g, b) = viridis((x / max).sqrt());
        rgba.extend_from_slice(&[r, g, b, 255]);
    }
    let cells = image_canvas(&rgba, t as u32, t as u32)?;
    let side = layout.cell * t as f64;
    ctx.set_image_smoothing_enabled(false);
    ctx.draw_image_with_html_canvas_element_and_dw_and_dh(&cells, layout.x0, layout.y0, side, side)
        .map_err(|_| "could not draw the heatmap".to_string())?;
    // Token labels: rows (who looks) on the left, columns (where it looks) on top, upright when
    // they are words (GPT-2's pieces); every n-th when the cells are too small for every one.
    let every = ((font + 1.0) / layout.cell).ceil().max(1.0) as usize;
    let stand = upright(longest, text);
    ctx.set_fill_style_str(fg);
    for (i, label) in labels.iter().enumerate().take(t).step_by(every) {
        let c = layout.cell * (i as f64 + 0.5);
        ctx.set_text_align("right");
        let _ = ctx.fill_text(&fit(&ctx, label, layout.x0 - 6.0), layout.x0 - 4.0, layout.y0 + c + font / 3.0);
        if stand {
            ctx.save();
            let _ = ctx.translate(layout.x0 + c + font / 3.0, layout.y0 - 5.0);
            let _ = ctx.rotate(-std::f64::consts::FRAC_PI_2);
            ctx.set_text_align("left");
            let _ = ctx.fill_text(&fit(&ctx, label, layout.y0 - 8.0), 0.0, 0.0);
            ctx.restore();
        } else {
            ctx.set_text_align("center");
            let _ = ctx.fill_text(label, layout.x0 + c, layout.y0 - 5.0);
        }
    }
    // The cell under the pointer, framed thin; the selected token's row, framed.
    if let Some((i, j)) = hovered.filter(|&(i, j)| i < t && j < t) {
        ctx.set_stroke_style_str(fg);
        ctx.set_line_width(1.5);
        ctx.stroke_rect(
            layout.x0 + layout.cell * j as f64,
            layout.y0 + layout.cell * i as f64,
            layout.cell,
            layout.cell,
        );
    }
    if let Some(i) = selected.filter(|&i| i < t) {
        ctx.set_stroke_style_str(fg);
        ctx.set_line_width(2.0);
        ctx.stroke_rect(layout.x0, layout.y0 + layout.cell * i as f64, side, layout.cell);
    }
    // The colour scale: the square-root ramp, ticks at real probabilities.
    let (bx, by, bw) = (layout.x0, layout.y0 + side + 8.0, side);
    let ramp: Vec<u8> = (0..256)
        .flat_map(|v| {
            let (r, g, b) = viridis(v as f64 / 255.0);
            [r, g, b, 255]
        })
        .collect();
    let bar = image_canvas(&ramp, 256, 1)?;
    ctx.set_image_smoothing_enabled(true);
    ctx.draw_image_with_html_canvas_element_and_dw_and_dh(&bar, bx, by, bw, 10.0)
        .map_err(|_| "could not draw the colour scale".to_string())?;
    ctx.set_font(&format!("{text}px sans-serif"));
    for (at, value) in [(0.0, 0.0), (0.5, max / 4.0), (1.0, max)] {
        ctx.set_text_align(if at == 0.0 {
            "left"
        } else if at == 1.0 {
            "right"
        } else {
            "center"
        });
        let _ = ctx.fill_text(&format!("{value:.2}"), bx + at * bw, by + 12.0 + text);
    }
    ctx.set_text_align("start");
    let h = markov::row_entropy(p, t);
    Ok((layout, h.iter().sum::<f64>() / t as f64))
}

/// An offscreen canvas holding an RGBA image.
fn image_canvas(rgba: &[u8], w: u32, h: u32) -> Result<HtmlCanvasElement, String> {
    let image = web_sys::ImageData::new_with_u8_clamped_array_and_sh(wasm_bindgen::Clamped(rgba), w, h)
        .map_err(|_| "could not make the heatmap image".to_string())?;
    let c: HtmlCanvasElement = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.create_element("canvas").ok())
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "could not make the heatmap image".to_string())?;
    c.set_width(w);
    c.set_height(h);
    let ctx = canvas::context(&c).ok_or_else(|| "the heatmap image has no 2D context".to_string())?;
    ctx.put_image_data(&image, 0.0, 0.0).map_err(|_| "could not draw the heatmap image".to_string())?;
    Ok(c)
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
    let Chain { layer, head, k } = lab.view.chain;
    let entropy = RwSignal::new(None::<f64>);
    let layout = RwSignal::new(None::<Layout>);
    // The cell under the pointer: (row, column, P_ij of the matrix shown).
    let hover = RwSignal::new(None::<(usize, usize, f64)>);
    let hover_cell = Memo::new(move |_| hover.get().map(|(i, j, _)| (i, j)));
    let layers = move || lab.panels.with(|s| s.as_ref().map(|s| s.layers)).unwrap_or(lab.settings.with(|s| s.layers));
    let heads = move || lab.panels.with(|s| s.as_ref().map(|s| s.heads)).unwrap_or(lab.settings.with(|s| s.heads));
    let matrix = Memo::new(move |_| {
        lab.panels.with(|s| s.as_ref().and_then(|s| lab.view.chain.matrix(s).map(|p| (p, s.context))))
    });
    let labels = Memo::new(move |_| {
        lab.panels
            .with(|s| s.as_ref().map(|s| s.symbols.iter().map(|x| glyph(x)).collect::<Vec<_>>()).unwrap_or_default())
    });

    Effect::new(move |_| {
        let dark = dark.get();
        lab.view.layout.track();
        let selected = lab.view.selected.get();
        let hovered = hover_cell.get();
        let Some(canvas) = canvas_ref.get() else { return };
        let result = matrix.with(|m| {
            let (p, t) = m.as_ref().map_or((&[][..], 0), |(p, t)| (p.as_slice(), *t));
            labels.with(|l| draw(&canvas, p, t, l, selected, hovered, dark)).map(|(lay, h)| (lay, (t > 0).then_some(h)))
        });
        match result {
            Ok((lay, h)) => {
                layout.set(Some(lay));
                entropy.set(h);
            }
            Err(e) => lab.error.set(Some(format!("could not draw the attention: {e}"))),
        }
    });
    // A new matrix (another layer, head, power or frame): the hovered value is re-read.
    Effect::new(move |_| {
        let value = matrix.with(|m| {
            let (i, j, _) = hover.get_untracked()?;
            let (p, t) = m.as_ref()?;
            Some((i, j, p[i * t + j]))
        });
        hover.set(value);
    });
    let on_move = move |ev: leptos::ev::PointerEvent| {
        let Some(lay) = layout.get_untracked() else { return };
        let (x, y) = (ev.offset_x() as f64, ev.offset_y() as f64);
        let cell = lay.cell_at(x, y);
        hover.set(cell.and_then(|(i, j)| matrix.with_untracked(|m| m.as_ref().map(|(p, t)| (i, j, p[i * t + j])))));
    };
    let hover_text = move || {
        let symbol = |i: usize| labels.with(|l| l.get(i).cloned().unwrap_or_default());
        match hover.get() {
            Some((i, j, p)) => format!(
                "token {i} '{}' looks at token {j} '{}' with probability P = {p:.4}{}",
                symbol(i),
                symbol(j),
                if k.get() > 1 { format!(" after {} steps of the walk", k.get()) } else { String::new() }
            ),
            None => "Point at a cell for its exact probability.".to_string(),
        }
    };

    // A model that attends both ways (BERT): where this head's walk settles, as the engine found it.
    let stationary = move || {
        if lab.real.mode.get() != crate::lab::real_model::Mode::Model {
            return None;
        }
        lab.real.reading.with(|r| {
            let r = r.as_ref()?;
            let pi = &r.layers.get(layer.get())?.heads.get(head.get())?.stationary;
            let mut order: Vec<usize> = (0..pi.len().min(r.pieces.len())).collect();
            order.sort_by(|&a, &b| pi[b].total_cmp(&pi[a]));
            let most: Vec<String> = order
                .iter()
                .take(3)
                .map(|&i| {
                    format!(
                        "\"{}\" (token {}) {:.2}",
                        crate::views::token_style::glyph(r.pieces[i].trim()),
                        i + 1,
                        pi[i]
                    )
                })
                .collect();
            (!most.is_empty()).then(|| {
                format!(
                    "This head attends both ways, so its walk goes on forever and settles on a stationary distribution \
                     π (πP = π): most on {}; a walk that favoured no token would give {:.2} each.",
                    most.join(", "),
                    1.0 / pi.len() as f64
                )
            })
        })
    };
    view! {
        <Panel
            name="attention"
            title="Attention as a Markov chain"
            explain="Row i of a head's attention matrix P is where token i looks: P_ij >= 0 and each row sums \
                to 1, so P is the transition matrix of a random walk over positions. P^k is k steps of that \
                walk (k layers of attention alone, with no mixing in between): as k grows the rows tend to \
                the walk's stationary distribution, and causal attention drains towards the first tokens. \
                Rows are the tokens that look (left labels), columns the tokens looked at (top labels). \
                Colour is the square root of P_ij relative to the largest entry of the matrix (the scale \
                under it, in probabilities): yellow is that largest entry, dark purple is 0."
        >
            <div class="row">
                {slider("att-layer", "layer", layer, 0, move || layers().saturating_sub(1))}
                {slider("att-head", "head", head, 0, move || heads().saturating_sub(1))}
                {slider("att-k", "power k", k, 1, || 16)}
            </div>
            <crate::views::panel::PngButton canvas="attention" file="spherewalk-attention.png" />
            <canvas
                id="attention"
                node_ref=canvas_ref
                width="320"
                height="320"
                role="img"
                aria-label=move || format!("attention heatmap of layer {}, head {}, to the power {}", layer.get(), head.get(), k.get())
                aria-describedby="attention-hover"
                data-entropy=move || entropy.get().map(|h| format!("{h:.4}")).unwrap_or_default()
                data-labels=move || labels.with(|l| l.join("\u{1f}"))
                data-grid=move || layout.get().map(|l| format!("{},{},{}", l.x0, l.y0, l.cell)).unwrap_or_default()
                data-hover-p=move || hover.get().map(|(_, _, p)| format!("{p:e}")).unwrap_or_default()
                on:pointermove=on_move
                on:pointerleave=move |_| hover.set(None)
            ></canvas>
            <p id="attention-hover" class="note" aria-live="polite">{hover_text}</p>
            <p id="attention-entropy" class="note">
                {move || {
                    entropy
                        .get()
                        .map(|h| format!("mean row entropy of P^{}: {h:.3} nats", k.get()))
                        .unwrap_or_else(|| "no attention yet".into())
                }}
            </p>
            <p id="attention-stationary" class="note">{stationary}</p>
            {crate::views::panel::verdict_line("verdict-markov".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.markov.clone())))}
            {crate::views::panel::verdict_line("verdict-kernel".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.kernel.clone())))}
            {crate::lab::gpu_copy_note(lab)}
        </Panel>
    }
}
