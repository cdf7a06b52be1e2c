//! The sphere panel: the probe row's tokens on the unit sphere in 3-D (the top three principal
//! directions of their LayerNorm outputs, `science::sphere::project3`, aligned frame to frame),
//! drawn as a rotating ball with trails over training time.

use leptos::html::Canvas;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

use engine::session::Panels;

use crate::lab::{Lab, TRAIL_LEN};

/// Rotates by yaw (about the vertical axis), then pitch (about the horizontal one).
fn rotate(p: [f64; 3], yaw: f64, pitch: f64) -> [f64; 3] {
    let (sy, cy) = yaw.sin_cos();
    let (sp, cp) = pitch.sin_cos();
    let x = cy * p[0] + sy * p[2];
    let z = -sy * p[0] + cy * p[2];
    let y = cp * p[1] - sp * z;
    let z = sp * p[1] + cp * z;
    [x, y, z]
}

fn hue(i: usize, n: usize) -> f64 {
    360.0 * i as f64 / n.max(1) as f64
}

/// A moment of training as the view shows it: the chosen frame and the frames before it (all in
/// the live frame's basis, as the session projects them).
#[derive(Clone, Debug, PartialEq)]
struct Scrub {
    step: usize,
    /// Oldest first, the last is the chosen frame.
    trail: Vec<Vec<[f64; 3]>>,
}

/// The index of the frame the time slider points at: the last at or before `step`.
fn frame_index(snap: &Panels, step: usize) -> usize {
    snap.steps.iter().rposition(|&s| s <= step).unwrap_or(0)
}

/// The cloud at frame `k` (the latest when None) with its trail, at `depth`.
fn scrub(snap: &Panels, k: Option<usize>, depth: usize) -> Option<Scrub> {
    let frames = snap.frames();
    let k = k.unwrap_or(frames.checked_sub(1)?).min(frames.checked_sub(1)?);
    let depth = depth.min(snap.layers);
    let first = (k + 1).saturating_sub(TRAIL_LEN);
    let trail = (first..=k).map(|f| snap.points(depth, f)).collect();
    Some(Scrub { step: snap.steps[k], trail })
}

struct View {
    depth: usize,
    by_token: bool,
    trails: bool,
    ghosts: bool,
    yaw: f64,
    pitch: f64,
    dark: bool,
}

/// Draws the snapshot; returns the number of points and of Brownian ghosts drawn.
fn draw(
    canvas: &HtmlCanvasElement,
    snap: Option<&Panels>,
    shown: Option<&Scrub>,
    past: bool,
    v: &View,
) -> Result<(usize, usize), String> {
    let ctx: CanvasRenderingContext2d = canvas
        .get_context("2d")
        .ok()
        .flatten()
        .and_then(|c| c.dyn_into().ok())
        .ok_or_else(|| "the sphere canvas has no 2D context".to_string())?;
    // Draw at the size the canvas is shown, in device pixels, so the ball is sharp at any size.
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
    let (w, h) = (css, css);
    let (cx, cy, r) = (w / 2.0, h / 2.0, 0.42 * w.min(h));
    let (bg, fg, faint) = if v.dark { ("#16181d", "#d8dce3", "#3a3f49") } else { ("#ffffff", "#22252b", "#d5d9e0") };
    ctx.set_fill_style_str(bg);
    ctx.fill_rect(0.0, 0.0, w, h);
    // The sphere's outline, and its equator and a meridian turned with the view.
    ctx.set_stroke_style_str(faint);
    ctx.set_line_width(1.0);
    ctx.begin_path();
    ctx.arc(cx, cy, r, 0.0, std::f64::consts::TAU).map_err(|_| "canvas arc failed".to_string())?;
    ctx.stroke();
    for circle in 0..2 {
        ctx.begin_path();
        for i in 0..=72 {
            let a = std::f64::consts::TAU * i as f64 / 72.0;
            let p = if circle == 0 { [a.cos(), 0.0, a.sin()] } else { [0.0, a.cos(), a.sin()] };
            let q = rotate(p, v.yaw, v.pitch);
            let (x, y) = (cx + r * q[0], cy - r * q[1]);
            if i == 0 {
                ctx.move_to(x, y);
            } else {
                ctx.line_to(x, y);
            }
        }
        ctx.stroke();
    }
    let Some(snap) = snap else {
        ctx.set_fill_style_str(fg);
        ctx.set_font("15px sans-serif");
        ctx.set_text_align("center");
        let _ = ctx.fill_text("Press Start or Step to see the tokens", cx, cy);
        ctx.set_text_align("start");
        return Ok((0, 0));
    };
    let depth = v.depth.min(snap.layers);
    let Some(shown) = shown else { return Ok((0, 0)) };
    let trail = &shown.trail;
    let Some(now) = trail.last() else { return Ok((0, 0)) };
    // Brownian ghost walkers (same start points, fitted D), behind the tokens: hollow grey rings.
    let mut ghosts = 0;
    if v.ghosts && !past {
        if let Some(Ok(a)) = snap.brownian.as_ref().filter(|b| b.as_ref().is_ok_and(|a| a.depth == depth)) {
            ctx.set_line_width(1.5);
            for g in a.ghosts.chunks_exact(3) {
                let q = rotate([g[0] as f64, g[1] as f64, g[2] as f64], v.yaw, v.pitch);
                let front = q[2] >= 0.0;
                ctx.set_stroke_style_str(if v.dark {
                    if front {
                        "#b8bec8"
                    } else {
                        "#5a606b"
                    }
                } else if front {
                    "#6b7280"
                } else {
                    "#b5bac3"
                });
                ctx.begin_path();
                ctx.arc(cx + r * q[0], cy - r * q[1], if front { 5.0 } else { 3.5 }, 0.0, std::f64::consts::TAU)
                    .map_err(|_| "canvas arc failed")?;
                ctx.stroke();
                ghosts += 1;
            }
        }
    }
    let color = |i: usize| {
        if v.by_token {
            hue(snap.tokens.get(i).copied().unwrap_or(0) as usize, snap.vocab)
        } else {
            hue(i, snap.context) * 0.8
        }
    };
    if v.trails && trail.len() > 1 {
        // Older segments fade out.
        ctx.set_line_width(1.5);
        let frames = trail.len();
        for i in 0..now.len() {
            let c = color(i);
            for (f, pair) in trail.windows(2).enumerate() {
                let alpha = 0.6 * (f + 1) as f64 / frames as f64;
                let (a, b) = (rotate(pair[0][i], v.yaw, v.pitch), rotate(pair[1][i], v.yaw, v.pitch));
                ctx.set_stroke_style_str(&format!("hsla({c:.0}, 70%, 50%, {alpha:.2})"));
                ctx.begin_path();
                ctx.move_to(cx + r * a[0], cy - r * a[1]);
                ctx.line_to(cx + r * b[0], cy - r * b[1]);
                ctx.stroke();
            }
        }
    }
    // Back to front, so nearer points cover farther ones.
    let mut order: Vec<(usize, [f64; 3])> = now.iter().map(|&p| rotate(p, v.yaw, v.pitch)).enumerate().collect();
    order.sort_by(|a, b| a.1[2].total_cmp(&b.1[2]));
    ctx.set_font("12px ui-monospace, monospace");
    for (i, q) in &order {
        let front = q[2] >= 0.0;
        let (x, y) = (cx + r * q[0], cy - r * q[1]);
        let light = if front { 50 } else { 72 };
        ctx.set_fill_style_str(&format!("hsl({:.0}, 70%, {light}%)", color(*i)));
        ctx.begin_path();
        ctx.arc(x, y, if front { 5.0 } else { 3.5 }, 0.0, std::f64::consts::TAU).map_err(|_| "canvas arc failed")?;
        ctx.fill();
        if front && v.by_token {
            ctx.set_fill_style_str(fg);
            let label = snap.symbols.get(*i).map(|s| if s == " " { "␣" } else { s.as_str() }).unwrap_or("");
            let _ = ctx.fill_text(label, x + 6.0, y - 5.0);
        }
    }
    ctx.set_fill_style_str(fg);
    ctx.set_font("13px sans-serif");
    let depth_name = if depth == snap.layers { "final LayerNorm".to_string() } else { format!("into layer {depth}") };
    let kept = snap.explained.get(depth).copied().unwrap_or(0.0) * 100.0;
    let step = shown.step;
    let _ = ctx.fill_text(&format!("step {step}, {depth_name}; view shows {kept:.0}% of the spread"), 10.0, 20.0);
    Ok((now.len(), ghosts))
}

#[component]
pub fn SphereView(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    let depth = lab.depth;
    let by_token = RwSignal::new(true);
    let trails = RwSignal::new(true);
    let ghosts = RwSignal::new(lab.settings.get_untracked().preset == "brownian");
    // Picking the "Brownian or not?" preset shows the ghosts.
    Effect::new(move |_| {
        if lab.settings.with(|s| s.preset == "brownian") {
            ghosts.set(true);
        }
    });
    // The training step the time slider points at (None: live, the latest).
    let time = RwSignal::new(None::<usize>);
    let shown = Memo::new(move |_| {
        let depth = depth.get();
        let step = time.get();
        lab.panels.with(|s| s.as_ref().and_then(|s| scrub(s, step.map(|t| frame_index(s, t)), depth)))
    });
    // A new run (or a rollback) goes back in steps: show it live.
    Effect::new(move |_| {
        let now = lab.panels.with(|s| s.as_ref().map(|s| s.step));
        if time.get_untracked().is_some_and(|t| now.is_none_or(|n| n < t)) {
            time.set(None);
        }
    });
    let frames = move || lab.panels.with(|s| s.as_ref().map_or(0, |s| s.frames()));
    let time_index = move || match time.get() {
        None => frames().saturating_sub(1),
        Some(step) => lab.panels.with(|s| s.as_ref().map_or(0, |s| frame_index(s, step))),
    };
    let time_text = move || match (time.get(), shown.get()) {
        (Some(_), Some(p)) => format!("step {}", p.step),
        _ => lab.panels.with(|s| s.as_ref().map_or("live".to_string(), |s| format!("live (step {})", s.step))),
    };
    let on_time = move |ev: leptos::ev::Event| {
        let i: usize = event_target_value(&ev).parse().unwrap_or(0);
        let chosen = lab.panels.with_untracked(|s| {
            let s = s.as_ref()?;
            if i + 1 >= s.frames() {
                None
            } else {
                Some(s.steps[i])
            }
        });
        time.set(chosen);
    };
    let drawn = RwSignal::new(0usize);
    let ghosts_drawn = RwSignal::new(0usize);
    let max_depth =
        move || lab.panels.with(|s| s.as_ref().map(|s| s.layers)).unwrap_or(lab.settings.with(|s| s.layers));

    Effect::new(move |_| {
        let view = View {
            depth: depth.get(),
            by_token: by_token.get(),
            trails: trails.get(),
            ghosts: ghosts.get(),
            yaw: lab.yaw.get(),
            pitch: lab.pitch.get(),
            dark: dark.get(),
        };
        let Some(canvas) = canvas_ref.get() else { return };
        let past = time.get().is_some();
        let n = shown.with(|p| lab.panels.with(|s| draw(&canvas, s.as_ref(), p.as_ref(), past, &view)));
        match n {
            Ok((n, g)) => {
                drawn.set(n);
                ghosts_drawn.set(g);
            }
            Err(e) => lab.error.set(Some(format!("could not draw the sphere: {e}"))),
        }
    });

    // Pointers down on the ball. A mouse or pen turns it; on a touch screen one finger scrolls the
    // page (touch-action: pan-y) and two fingers turn the ball, or one with the "one-finger turn" toggle.
    let pointers = StoredValue::new(Vec::<(i32, bool, f64, f64)>::new());
    let one_finger = RwSignal::new(false);
    let on_down = move |ev: leptos::ev::PointerEvent| {
        let touch = ev.pointer_type() == "touch";
        pointers.update_value(|p| p.push((ev.pointer_id(), touch, ev.client_x() as f64, ev.client_y() as f64)));
        if let Some(c) = canvas_ref.get_untracked() {
            let _ = c.set_pointer_capture(ev.pointer_id());
        }
    };
    let on_move = move |ev: leptos::ev::PointerEvent| {
        let (x, y) = (ev.client_x() as f64, ev.client_y() as f64);
        let turn = pointers.try_update_value(|p| {
            let touches = p.iter().filter(|q| q.1).count();
            let q = p.iter_mut().find(|q| q.0 == ev.pointer_id())?;
            let delta = (x - q.2, y - q.3);
            (q.2, q.3) = (x, y);
            match (q.1, touches) {
                (false, _) => Some(delta),
                (true, n) if n >= 2 || one_finger.get_untracked() => Some((delta.0 / n as f64, delta.1 / n as f64)),
                _ => None,
            }
        });
        if let Some(Some((dx, dy))) = turn {
            lab.yaw.update(|v| *v += dx * 0.01);
            lab.pitch.update(|v| *v = (*v + dy * 0.01).clamp(-1.5, 1.5));
        }
    };
    let on_up = move |ev: leptos::ev::PointerEvent| pointers.update_value(|p| p.retain(|q| q.0 != ev.pointer_id()));
    let on_key = move |ev: leptos::ev::KeyboardEvent| {
        let turn = match ev.key().as_str() {
            "ArrowLeft" => (-0.1, 0.0),
            "ArrowRight" => (0.1, 0.0),
            "ArrowUp" => (0.0, -0.1),
            "ArrowDown" => (0.0, 0.1),
            _ => return,
        };
        ev.prevent_default();
        lab.yaw.update(|v| *v += turn.0);
        lab.pitch.update(|v| *v = (*v + turn.1).clamp(-1.5, 1.5));
    };

    view! {
        <section id="panel-sphere" class="panel" aria-labelledby="sphere-title">
            <h2 id="sphere-title">"Tokens on the sphere"</h2>
            <details class="explain">
                <summary>"What is this?"</summary>
                <p>
                    "Each LayerNorm maps a token's vector x to u = (x - mean) / std, which lies on a sphere of "
                    "radius sqrt(d). Here are the u of one fixed validation row, projected on their top three "
                    "principal directions and normalised to the unit sphere (the directions are matched from one "
                    "frame to the next, so the picture does not jump). Trails show where each token was in the "
                    "last frames of training; the training-step slider goes back to earlier moments (Live returns "
                    "to the latest). Look for tokens of the same kind gathering together as the model "
                    "learns; deeper layers usually separate them more. Drag (or use the arrow keys) to rotate."
                </p>
            </details>
            <crate::panels::PngButton canvas="sphere" file="spherewalk-sphere.png" />
            <div class="row">
                <label for="depth">
                    "Depth " <output id="depth-value">{move || {
                        let d = depth.get();
                        if d >= max_depth() { "final".to_string() } else { format!("layer {d}") }
                    }}</output>
                    <input
                        id="depth"
                        type="range"
                        min="0"
                        max=max_depth
                        prop:value=move || depth.get().to_string()
                        on:input=move |ev| depth.set(event_target_value(&ev).parse().unwrap_or(0))
                    />
                </label>
                <label for="time">
                    "Step " <span id="time-value">{time_text}</span>
                    <input
                        id="time"
                        type="range"
                        min="0"
                        max=move || frames().saturating_sub(1)
                        aria-valuetext=time_text
                        disabled=move || frames() < 2
                        prop:value=move || time_index().to_string()
                        on:input=on_time
                    />
                </label>
                <button
                    id="time-live"
                    class="small"
                    type="button"
                    aria-label="back to the live training step"
                    disabled=move || time.get().is_none()
                    on:click=move |_| time.set(None)
                >
                    "Live"
                </button>
                <label for="color-by">
                    "Colour by"
                    <select
                        id="color-by"
                        on:change=move |ev| by_token.set(event_target_value(&ev) == "token")
                    >
                        <option value="token">"token"</option>
                        <option value="position">"position"</option>
                    </select>
                </label>
                <label for="trails">
                    <input
                        id="trails"
                        type="checkbox"
                        prop:checked=move || trails.get()
                        on:change=move |ev| trails.set(event_target_checked(&ev))
                    />
                    " trails"
                </label>
                <label for="one-finger" class="touch-only">
                    <input
                        id="one-finger"
                        type="checkbox"
                        prop:checked=move || one_finger.get()
                        on:change=move |ev| one_finger.set(event_target_checked(&ev))
                    />
                    " one-finger turn"
                </label>
                <label for="ghosts">
                    <input
                        id="ghosts"
                        type="checkbox"
                        prop:checked=move || ghosts.get()
                        on:change=move |ev| ghosts.set(event_target_checked(&ev))
                    />
                    " Brownian ghosts"
                </label>
            </div>
            <canvas
                id="sphere"
                node_ref=canvas_ref
                width="520"
                height="520"
                tabindex="0"
                role="img"
                aria-label="tokens of the probe row as points on a sphere; drag (two fingers on a touch screen) or use arrow keys to rotate"
                class:one-finger=move || one_finger.get()
                data-yaw=move || format!("{:.3}", lab.yaw.get())
                data-points=move || drawn.get()
                data-ghosts=move || ghosts_drawn.get()
                data-step=move || lab.panels.with(|s| s.as_ref().map(|s| s.step).unwrap_or(0))
                data-shown-step=move || shown.get().map(|p| p.step).unwrap_or(0)
                on:pointerdown=on_down
                on:pointermove=on_move
                on:pointerup=on_up
                on:pointercancel=on_up
                on:keydown=on_key
            ></canvas>
            {crate::panels::verdict_line("verdict-sphere".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.sphere.clone())))}
            {crate::lab::gpu_copy_note(lab)}
        </section>
    }
}
