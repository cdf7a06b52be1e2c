//! Drawing the sphere panel: a shaded ball seen in orthographic projection with the tokens as dots
//! with depth cues (the far side smaller and dimmed), on WebGL2 (`gl`) or, without it, on the
//! 2-D canvas; then on the 2-D canvas a label for every token placed where it does not cover
//! another, trails as fading great-circle arcs, and for a selected token its attention row as arcs
//! and its random walkers.

use engine::science::sphere::arc;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use crate::views::canvas_text;
use crate::views::sphere::gl::{Dot, Renderer};
use crate::views::token_style::css;

/// Segments per drawn great-circle arc.
const ARC_SEGMENTS: usize = 12;
/// Attention weights below this draw no arc (they would be invisible anyway).
const MIN_ARC_P: f64 = 0.01;

/// Rotates by yaw (about the vertical axis), then pitch (about the horizontal one).
pub fn rotate(p: [f64; 3], yaw: f64, pitch: f64) -> [f64; 3] {
    let (sy, cy) = yaw.sin_cos();
    let (sp, cp) = pitch.sin_cos();
    let x = cy * p[0] + sy * p[2];
    let z = -sy * p[0] + cy * p[2];
    let y = cp * p[1] - sp * z;
    let z = sp * p[1] + cp * z;
    [x, y, z]
}

/// Everything one picture of the ball shows.
pub struct Scene<'a> {
    /// The tokens' positions (unit vectors, the view's basis).
    pub now: &'a [[f64; 3]],
    /// Earlier frames of the same tokens, oldest first, ending just before `now`.
    pub trail: &'a [Vec<[f64; 3]>],
    pub colors: &'a [(u8, u8, u8)],
    pub labels: &'a [String],
    /// Brownian ghost walkers (unit vectors).
    pub ghosts: &'a [[f64; 3]],
    /// Where the fitted particle flow puts the tokens (unit vectors), drawn beside the ghosts.
    pub particles: &'a [[f64; 3]],
    /// The selected token and its attention row P_i (one weight per token).
    pub chain: Option<(usize, &'a [f64])>,
    /// A real model's selected token at every depth, first to last (the view is one for all).
    pub depth_path: &'a [[f64; 3]],
    /// The selected token's random walkers, where they are now.
    pub walkers: &'a [[f64; 3]],
    /// The token under the pointer: its label is drawn whatever it covers.
    pub hovered: Option<usize>,
    pub caption: String,
    pub yaw: f64,
    pub pitch: f64,
}

/// What was drawn, for the page's data attributes (the browser test reads them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Drawn {
    pub points: usize,
    pub labels: usize,
    pub ghosts: usize,
    pub particles: usize,
    pub arcs: usize,
    /// Arcs of the selected token's walk through depth.
    pub path: usize,
    /// Screen positions (CSS pixels) and depth (z > 0: near) of the tokens: clicks select the nearest.
    pub screen: Vec<(f64, f64, f64)>,
    /// Whether the ball and the dots came from WebGL2.
    pub gl: bool,
}

struct Frame {
    cx: f64,
    cy: f64,
    r: f64,
    yaw: f64,
    pitch: f64,
}

impl Frame {
    /// Screen position and depth (z > 0: the near half).
    fn project(&self, p: [f64; 3]) -> (f64, f64, f64) {
        let q = rotate(p, self.yaw, self.pitch);
        (self.cx + self.r * q[0], self.cy - self.r * q[1], q[2])
    }
}

fn context(canvas: &HtmlCanvasElement) -> Result<CanvasRenderingContext2d, String> {
    crate::views::canvas::context(canvas).ok_or_else(|| "the sphere canvas has no 2D context".to_string())
}

/// Sizes the canvas to its shown size in device pixels (sharp at any size); returns the CSS size
/// and the device pixel ratio.
fn fit(canvas: &HtmlCanvasElement, ctx: &CanvasRenderingContext2d) -> Result<(f64, f64), String> {
    let css = match canvas.client_width() {
        c if c >= 100 => c as f64,
        _ => canvas.width() as f64,
    };
    let dpr = web_sys::window().map(|w| w.device_pixel_ratio()).unwrap_or(1.0).clamp(1.0, 4.0);
    let px = (css * dpr).round() as u32;
    if canvas.width() != px || canvas.height() != px {
        canvas.set_width(px);
        canvas.set_height(px);
    }
    ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0).map_err(|_| "canvas transform failed".to_string())?;
    Ok((css, dpr))
}

/// A token's dot (radius in CSS pixels, opacity): larger and opaque on the near half, smaller and
/// faint on the far one; `scale` grows it with the view.
fn dot_size(z: f64, scale: f64) -> (f64, f64) {
    if z >= 0.0 {
        (scale * (5.5 + 2.0 * z), 1.0)
    } else {
        (scale * (4.0 + (1.0 + z)), 0.6)
    }
}

/// Dots and labels grow with the view, within limits (a phone, a projector).
fn view_scale(size: f64) -> f64 {
    (size / 420.0).clamp(0.85, 1.6)
}

/// Draws `scene` (or the empty ball with a hint); the ball and the dots on WebGL2 when `gl` is given.
/// `empty`: what the ball says while there is no scene (how to get one, in this mode).
pub fn draw(
    canvas: &HtmlCanvasElement,
    scene: Option<&Scene>,
    empty: &str,
    dark: bool,
    gl: Option<&Renderer>,
) -> Result<Drawn, String> {
    let ctx = context(canvas)?;
    let (size, dpr) = fit(canvas, &ctx)?;
    let (bg, fg, muted) = if dark { ("#16181d", "#e8ebf0", "#9aa2ae") } else { ("#ffffff", "#1d2026", "#5d6470") };
    let (yaw, pitch) = scene.map_or((0.6, 0.35), |s| (s.yaw, s.pitch));
    let f = Frame { cx: size / 2.0, cy: size / 2.0 + 8.0, r: 0.40 * size, yaw, pitch };
    // Tokens back to front, so nearer dots cover farther ones.
    let mut order: Vec<(usize, (f64, f64, f64))> =
        scene.map(|s| s.now.iter().map(|&p| f.project(p)).enumerate().collect()).unwrap_or_default();
    let screen = order.iter().map(|(_, p)| *p).collect();
    order.sort_by(|a, b| a.1 .2.total_cmp(&b.1 .2));
    let color = |i: usize| scene.and_then(|s| s.colors.get(i).copied()).unwrap_or((128, 128, 128));
    let dots: Vec<Dot> = order
        .iter()
        .map(|&(i, (x, y, z))| {
            let (radius, alpha) = dot_size(z, view_scale(size));
            Dot { x, y, radius, rgb: color(i), alpha }
        })
        .collect();
    let mut drawn = Drawn { screen, ..Drawn::default() };
    let image = gl.and_then(|r| r.render(size, dpr, (f.cx, f.cy, f.r), &dots, dark).ok());
    match image {
        Some(image) => {
            ctx.draw_image_with_html_canvas_element_and_dw_and_dh(image, 0.0, 0.0, size, size)
                .map_err(|_| "could not draw the WebGL2 view".to_string())?;
            drawn.gl = true;
            rings(&ctx, &f, dark);
        }
        None => {
            ctx.set_fill_style_str(bg);
            ctx.fill_rect(0.0, 0.0, size, size);
            ball(&ctx, &f, dark)?;
        }
    }
    let Some(s) = scene else {
        // The words drawn, for a screen reader and the tests.
        let _ = canvas.set_attribute("data-empty", empty);
        let _ = canvas.set_attribute("data-path", "0");
        for (name, value) in [("data-labels", "0"), ("data-labelled", ""), ("data-label-boxes", "")] {
            let _ = canvas.set_attribute(name, value);
        }
        ctx.set_fill_style_str(fg);
        let text = canvas_text::px() * 1.25;
        canvas_text::report(canvas, text);
        ctx.set_font(&format!("{text}px sans-serif"));
        ctx.set_text_align("center");
        let _ = ctx.fill_text(empty, f.cx, f.cy);
        ctx.set_text_align("start");
        return Ok(drawn);
    };
    let _ = canvas.remove_attribute("data-empty");
    // Ghosts: hollow grey rings.
    for &g in s.ghosts {
        let (x, y, z) = f.project(g);
        ctx.set_global_alpha(if z >= 0.0 { 0.9 } else { 0.35 });
        ctx.set_stroke_style_str(muted);
        ctx.set_line_width(1.5);
        circle(&ctx, x, y, if z >= 0.0 { 5.5 } else { 3.5 })?;
        ctx.stroke();
        drawn.ghosts += 1;
    }
    // Particles of the fitted attention flow: hollow diamonds.
    for &p in s.particles {
        let (x, y, z) = f.project(p);
        let r = if z >= 0.0 { 6.0 } else { 4.0 };
        ctx.set_global_alpha(if z >= 0.0 { 0.9 } else { 0.35 });
        ctx.set_stroke_style_str(muted);
        ctx.set_line_width(1.5);
        ctx.begin_path();
        ctx.move_to(x, y - r);
        ctx.line_to(x + r, y);
        ctx.line_to(x, y + r);
        ctx.line_to(x - r, y);
        ctx.close_path();
        ctx.stroke();
        drawn.particles += 1;
    }
    // Trails: each token's path through the earlier frames, as great-circle arcs fading with age.
    let frames = s.trail.len();
    let mut history: Vec<&[[f64; 3]]> = s.trail.iter().map(Vec::as_slice).collect();
    history.push(s.now);
    for (age, pair) in history.windows(2).enumerate() {
        let alpha = 0.7 * (age + 1) as f64 / (frames + 1) as f64;
        for i in 0..s.now.len() {
            let (Some(&a), Some(&b)) = (pair[0].get(i), pair[1].get(i)) else { continue };
            ctx.set_stroke_style_str(&css(color(i)));
            ctx.set_line_width(2.0);
            path(&ctx, &f, &arc(a, b, 4), alpha);
        }
    }
    // The selected token's walk through depth, darker towards the last depth.
    for (k, pair) in s.depth_path.windows(2).enumerate() {
        ctx.set_stroke_style_str(fg);
        ctx.set_line_width(3.0);
        path(&ctx, &f, &arc(pair[0], pair[1], 8), 0.25 + 0.65 * (k + 1) as f64 / s.depth_path.len() as f64);
        drawn.path += 1;
    }
    // The selected token's attention row: arcs whose width and opacity are P_ij.
    let selected = s.chain.map(|c| c.0);
    if let Some((i, row)) = s.chain {
        if let Some(&from) = s.now.get(i) {
            ctx.set_stroke_style_str(fg);
            for (j, &p) in row.iter().enumerate() {
                let Some(&to) = s.now.get(j) else { continue };
                if p < MIN_ARC_P || j == i {
                    continue;
                }
                ctx.set_line_width(1.5 + 8.0 * p);
                path(&ctx, &f, &arc(from, to, ARC_SEGMENTS), 0.3 + 0.7 * p);
                drawn.arcs += 1;
            }
        }
    }
    for (&(i, (x, y, _)), d) in order.iter().zip(&dots) {
        let chosen = Some(i) == selected;
        if !drawn.gl || chosen {
            ctx.set_global_alpha(d.alpha);
            circle(&ctx, x, y, d.radius)?;
            if !drawn.gl {
                ctx.set_fill_style_str(&css(d.rgb));
                ctx.fill();
            }
            ctx.set_stroke_style_str(if chosen { fg } else { bg });
            ctx.set_line_width(if chosen { 3.0 } else { 1.0 });
            ctx.stroke();
        }
        drawn.points += 1;
    }
    // Walkers of the selected token's chain: rings in the text colour around the background's.
    for &w in s.walkers {
        let (x, y, z) = f.project(w);
        ctx.set_global_alpha(if z >= 0.0 { 1.0 } else { 0.5 });
        ctx.set_fill_style_str(bg);
        ctx.set_stroke_style_str(fg);
        ctx.set_line_width(2.5);
        circle(&ctx, x, y, 4.5)?;
        ctx.fill();
        ctx.stroke();
    }
    ctx.set_global_alpha(1.0);
    // Labels at the page's canvas text size (`canvas_text`), larger on a large view.
    let text = canvas_text::px() * view_scale(size).max(1.0);
    canvas_text::report(canvas, canvas_text::px());
    let placed = labels(&ctx, s, &order, (text, size), view_scale(size), (fg, muted, bg));
    drawn.labels = placed.len();
    // The caption at the page's size, shortened to the view's width.
    let caption_px = canvas_text::px();
    ctx.set_fill_style_str(fg);
    ctx.set_font(&format!("{caption_px}px sans-serif"));
    let _ = ctx.fill_text_with_max_width(&s.caption, 8.0, 4.0 + caption_px, size - 16.0);
    // Set here, not as the element's attributes: the canvas holds as many as the view allows.
    let _ = canvas.set_attribute("data-path", &drawn.path.to_string());
    let _ = canvas.set_attribute("data-labels", &drawn.labels.to_string());
    // Which tokens have a label, and where (x, y, width, height in CSS px): none overlap.
    let list = |v: Vec<String>| v.join(",");
    let _ = canvas.set_attribute("data-labelled", &list(placed.iter().map(|p| p.0.to_string()).collect()));
    let boxes = placed.iter().flat_map(|p| [p.1 .0, p.1 .1, p.1 .2, p.1 .3]).map(|x| format!("{x:.1}")).collect();
    let _ = canvas.set_attribute("data-label-boxes", &list(boxes));
    Ok(drawn)
}

/// The ball: lit from the upper left, with its equator and a meridian turned with the view.
fn ball(ctx: &CanvasRenderingContext2d, f: &Frame, dark: bool) -> Result<(), String> {
    let (lit, shade, line) = if dark { ("#2a2f38", "#101216", "#3d434e") } else { ("#ffffff", "#dfe4ec", "#c3c9d3") };
    let g = ctx
        .create_radial_gradient(f.cx - 0.35 * f.r, f.cy - 0.4 * f.r, 0.05 * f.r, f.cx, f.cy, f.r)
        .map_err(|_| "canvas gradient failed".to_string())?;
    let _ = g.add_color_stop(0.0, lit);
    let _ = g.add_color_stop(1.0, shade);
    ctx.set_fill_style_canvas_gradient(&g);
    circle(ctx, f.cx, f.cy, f.r)?;
    ctx.fill();
    ctx.set_stroke_style_str(line);
    ctx.set_line_width(1.0);
    ctx.stroke();
    rings(ctx, f, dark);
    Ok(())
}

/// The equator and a meridian, turned with the view (the far halves dimmed).
fn rings(ctx: &CanvasRenderingContext2d, f: &Frame, dark: bool) {
    ctx.set_stroke_style_str(if dark { "#4a515d" } else { "#b9c0cb" });
    ctx.set_line_width(1.0);
    for c in 0..2 {
        let ring: Vec<[f64; 3]> = (0..=72)
            .map(|i| {
                let a = std::f64::consts::TAU * i as f64 / 72.0;
                if c == 0 {
                    [a.cos(), 0.0, a.sin()]
                } else {
                    [0.0, a.cos(), a.sin()]
                }
            })
            .collect();
        path(ctx, f, &ring, 1.0);
    }
}

fn circle(ctx: &CanvasRenderingContext2d, x: f64, y: f64, r: f64) -> Result<(), String> {
    ctx.begin_path();
    ctx.arc(x, y, r, 0.0, std::f64::consts::TAU).map_err(|_| "canvas arc failed".to_string())
}

/// Strokes a path of points on the sphere, each segment dimmed where it runs on the far side.
fn path(ctx: &CanvasRenderingContext2d, f: &Frame, points: &[[f64; 3]], alpha: f64) {
    for pair in points.windows(2) {
        let ((x0, y0, z0), (x1, y1, z1)) = (f.project(pair[0]), f.project(pair[1]));
        ctx.set_global_alpha(if z0 + z1 >= 0.0 { alpha } else { 0.35 * alpha });
        ctx.begin_path();
        ctx.move_to(x0, y0);
        ctx.line_to(x1, y1);
        ctx.stroke();
    }
    ctx.set_global_alpha(1.0);
}

/// A label per token, the selected and the hovered token's first, then nearest first: each takes
/// the first of eight spots around its point that lies inside the canvas and covers no label
/// placed before it; a label with no free spot is left out (hovering its dot shows it), but the
/// selected and hovered ones are always drawn. Near labels are larger and in the text colour, far
/// ones smaller and muted; a halo keeps them readable on trails.
fn labels(
    ctx: &CanvasRenderingContext2d,
    s: &Scene,
    order: &[(usize, (f64, f64, f64))],
    (text_px, size): (f64, f64),
    scale: f64,
    (fg, muted, bg): (&str, &str, &str),
) -> Vec<(usize, (f64, f64, f64, f64))> {
    let mut placed: Vec<(usize, (f64, f64, f64, f64))> = Vec::new();
    let overlaps = |r: &(f64, f64, f64, f64), q: &(f64, f64, f64, f64)| {
        r.0 < q.0 + q.2 && q.0 < r.0 + r.2 && r.1 < q.1 + q.3 && q.1 < r.1 + r.3
    };
    ctx.set_line_join("round");
    let always = [s.chain.map(|c| c.0), s.hovered];
    let first = order.iter().filter(|(i, _)| always.contains(&Some(*i)));
    let rest = order.iter().rev().filter(|(i, _)| !always.contains(&Some(*i)));
    for (i, (x, y, z)) in first.chain(rest) {
        let Some(text) = s.labels.get(*i) else { continue };
        let near = *z >= 0.0;
        let px = text_px * if near { 1.25 } else { 1.0 };
        ctx.set_font(&format!("{}{px}px ui-monospace, monospace", if near { "600 " } else { "" }));
        let w = ctx.measure_text(text).map(|m| m.width()).unwrap_or(px * 0.6 * text.chars().count() as f64);
        let (d, h) = (8.0 * scale, px);
        let spots = [
            (d, -d),
            (-w - d, -d),
            (d, h + d * 0.5),
            (-w - d, h + d * 0.5),
            (-w / 2.0, -d - 2.0),
            (-w / 2.0, h + d + 2.0),
            (d + 6.0, h / 2.0 - 2.0),
            (-w - d - 6.0, h / 2.0 - 2.0),
        ];
        let rect = |(dx, dy): (f64, f64)| (x + dx, y + dy - h, w, h);
        // Inside the canvas (a label cut at its edge misreads), over no label placed before it.
        let inside = |r: &(f64, f64, f64, f64)| r.0 >= 0.0 && r.1 >= 0.0 && r.0 + r.2 <= size && r.1 + r.3 <= size;
        let free = spots.iter().map(|&o| rect(o)).find(|r| inside(r) && placed.iter().all(|q| !overlaps(r, &q.1)));
        let spot = match (free, always.contains(&Some(*i))) {
            (Some(r), _) => r,
            (None, true) => {
                let r = rect(spots[0]);
                (r.0.clamp(0.0, (size - r.2).max(0.0)), r.1.clamp(0.0, (size - r.3).max(0.0)), r.2, r.3)
            }
            (None, false) => continue,
        };
        placed.push((*i, spot));
        ctx.set_stroke_style_str(bg);
        ctx.set_line_width(3.0);
        let _ = ctx.stroke_text(text, spot.0, spot.1 + h - 2.0);
        ctx.set_fill_style_str(if near { fg } else { muted });
        let _ = ctx.fill_text(text, spot.0, spot.1 + h - 2.0);
    }
    placed
}
