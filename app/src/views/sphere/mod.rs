//! The sphere panel: the probe row's tokens on the unit sphere in 3-D (the top three principal
//! directions of their LayerNorm outputs, `science::sphere::project3`, aligned frame to frame),
//! played through training like a video (positions between recorded frames follow great circles,
//! `science::sphere::slerp`), with fading trails, and for a selected token its attention row as
//! arcs and random walkers hopping along that chain (`science::walkers`).

mod draw;
pub mod gl;
mod pointer;
mod replay;

use engine::science::sphere::slerp;
use engine::science::walkers;
use engine::session::Panels;
use leptos::html::Canvas;
use leptos::prelude::*;

use crate::lab::real_model::Mode;
use crate::lab::Lab;
use crate::views::panel::Panel;
use crate::views::token_style::{css, glyph, kind_color, viridis, Kind};
use draw::{Drawn, Scene};
use gl::Renderer;
use replay::shown;

/// Picks one overlay of the sphere view from the panels: its depth and its unit 3-vectors.
type Overlay = fn(&Panels) -> Option<(usize, &[f32])>;

/// The orbit toggle's turn, radians per second.
const ORBIT_SPEED: f64 = 0.35;
/// Walkers shown for a selected token, the hops each makes before starting again, and the seconds a hop takes.
const WALKERS: usize = 5;
const HOPS: usize = 8;
const HOP_SECONDS: f64 = 0.9;
/// The animation's tick (only the view moves: the training numbers never depend on it).
const TICK_MS: u64 = 40;

fn step_text(step: f64) -> String {
    format!("step {:.0}", step)
}

/// Numbers for the page's data attributes, with the precision the browser test compares at.
fn join(values: impl Iterator<Item = f64>) -> String {
    values.map(|v| format!("{v:.6}")).collect::<Vec<_>>().join(",")
}

/// A checkbox bound to a switch of the view.
fn toggle(id: &'static str, text: &'static str, on: RwSignal<bool>, class: &'static str) -> impl IntoView {
    view! {
        <label for=id class=class>
            <input id=id type="checkbox" prop:checked=move || on.get() on:change=move |ev| on.set(event_target_checked(&ev)) />
            {text}
        </label>
    }
}

fn reduced_motion() -> bool {
    web_sys::window()
        .and_then(|w| w.match_media("(prefers-reduced-motion: reduce)").ok().flatten())
        .is_some_and(|m| m.matches())
}

#[component]
pub fn SphereView(lab: Lab, dark: RwSignal<bool>) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    let depth = lab.view.depth;
    let by_kind = RwSignal::new(true);
    let trails = RwSignal::new(true);
    let ghosts = RwSignal::new(lab.settings.get_untracked().preset == "brownian");
    let orbit = RwSignal::new(false);
    let playing = RwSignal::new(false);
    // The ghosts belong to the "Brownian or not?" preset: picking it shows them, and any other
    // preset (a tour's next step) starts without them.
    let preset = Memo::new(move |_| lab.settings.with(|s| s.preset.clone()));
    Effect::new(move |_| ghosts.set(preset.with(|p| p == "brownian")));
    // The training step shown (None: live, the latest).
    let time = RwSignal::new(None::<f64>);
    // A real model's depth while its walk through the layers plays (None: the slider's).
    let depth_at = RwSignal::new(None::<f64>);
    let moment = Memo::new(move |_| {
        let (depth, at, through) = (depth.get(), time.get(), depth_at.get());
        lab.panels.with(|s| {
            let s = s.as_ref()?;
            through.map_or_else(|| shown(s, at, depth), |d| replay::through_depth(s, d))
        })
    });
    // A new run (or a rollback) goes back in steps: show it live.
    Effect::new(move |_| {
        let now = lab.panels.with(|s| s.as_ref().map(|s| s.step));
        if time.get_untracked().is_some_and(|t| now.is_none_or(|n| (n as f64) < t)) {
            time.set(None);
            playing.set(false);
        }
    });
    let span = move || {
        lab.panels.with(|s| s.as_ref().filter(|s| s.frames() > 0).map(|s| (s.steps[0], s.steps[s.frames() - 1])))
    };
    let time_text = move || match (time.get(), moment.with(|m| m.as_ref().map(|m| m.step))) {
        (Some(_), Some(step)) => step_text(step),
        _ => lab.panels.with(|s| s.as_ref().map_or("live".to_string(), |s| format!("live (step {})", s.step))),
    };
    let on_time = move |ev: leptos::ev::Event| {
        let Ok(v) = event_target_value(&ev).parse::<f64>() else { return };
        playing.set(false);
        time.set(span().filter(|&(_, last)| v < last as f64).map(|_| v));
    };

    // The selected token's chain (the attention panel's layer, head and power) and its walkers.
    let chain = Memo::new(move |_| {
        lab.panels.with(|s| s.as_ref().and_then(|s| lab.view.chain.matrix(s).map(|p| (p, s.context))))
    });
    let row = Memo::new(move |_| {
        let i = lab.view.selected.get()?;
        chain.with(|c| c.as_ref().filter(|(_, t)| i < *t).map(|(p, t)| (i, p[i * t..(i + 1) * t].to_vec())))
    });
    // A real model's selected token at every depth: its walk through the layers.
    let depth_path = Memo::new(move |_| {
        let i = lab.view.selected.get().filter(|_| lab.real.mode.get() == Mode::Model)?;
        lab.panels.with(|s| {
            let s = s.as_ref()?;
            (0..=s.layers).map(|d| s.points(d, 0).get(i).copied()).collect::<Option<Vec<_>>>()
        })
    });
    // A real model's arcs are those of the layer the depth slider is at (the final norm: the last).
    Effect::new(move |_| {
        let d = depth.get();
        if lab.real.mode.get() == Mode::Model {
            let last = lab.panels.with_untracked(|s| s.as_ref().map_or(0, |s| s.layers.saturating_sub(1)));
            lab.view.chain.layer.set(d.min(last));
        }
    });
    let paths = Memo::new(move |_| {
        let i = lab.view.selected.get()?;
        chain.with(|c| {
            let (p, t) = c.as_ref()?;
            walkers::walk(&vec![p.clone(); HOPS], *t, i, WALKERS, None, 7).ok().map(|r| r.paths)
        })
    });
    let hop = RwSignal::new(0.0f64);
    Effect::new(move |_| {
        lab.view.selected.track();
        hop.set(0.0);
    });

    // One tick moves what the user set moving: the video, the orbit, the walkers.
    let last_tick = StoredValue::new(None::<f64>);
    let reduced = reduced_motion();
    let ticker = set_interval_with_handle(
        move || {
            let now = common::js::now_ms();
            let dt = last_tick.get_value().map_or(0.0, |t| ((now - t) / 1000.0).clamp(0.0, 0.25));
            last_tick.set_value(Some(now));
            if playing.get_untracked() {
                match span() {
                    Some((first, last)) if last > first => {
                        let now = time.get_untracked().unwrap_or(first as f64);
                        let (total, pace) = lab.settings.with_untracked(|s| (s.steps, s.pace()));
                        let next = replay::next(now, dt, (first, last), total, pace);
                        if next >= last as f64 {
                            time.set(None);
                            playing.set(false);
                        } else {
                            time.set(Some(next));
                        }
                    }
                    _ => playing.set(false),
                }
            }
            if let Some(d) = depth_at.get_untracked() {
                let layers = lab.panels.with_untracked(|s| s.as_ref().map_or(0, |s| s.layers));
                let next = replay::next_depth(d, dt, layers);
                depth_at.set((next < layers as f64).then_some(next));
                let shown = (next.floor() as usize).min(layers);
                if depth.get_untracked() != shown {
                    depth.set(shown);
                }
            }
            if orbit.get_untracked() {
                lab.view.yaw.update(|y| *y += ORBIT_SPEED * dt);
            }
            if lab.view.selected.get_untracked().is_some() {
                // With reduced motion the walkers jump from token to token instead of gliding.
                let h = (hop.get_untracked() + dt / HOP_SECONDS) % HOPS as f64;
                if !reduced || h.floor() != hop.get_untracked().floor() {
                    hop.set(if reduced { h.floor() } else { h });
                }
            }
        },
        std::time::Duration::from_millis(TICK_MS),
    );
    if let Ok(handle) = ticker {
        on_cleanup(move || handle.clear());
    }
    let on_play = move |_| {
        if playing.get_untracked() {
            playing.set(false);
        } else if let Some((first, _)) = span() {
            if time.get_untracked().is_none() {
                time.set(Some(first as f64));
            }
            playing.set(true);
        }
    };

    let drawn = RwSignal::new(Drawn::default());
    let hovered = RwSignal::new(None::<usize>);
    // The 3-D renderer: Err says why the view draws on the 2-D canvas alone. A software WebGL
    // (a blocklisted GPU) is used only when the visitor asks for it.
    let gl_anyway = RwSignal::new(false);
    let renderer = StoredValue::new_local(Renderer::new(false));
    let name_of = move || {
        renderer.with_value(|r| r.as_ref().map_or_else(|e| format!("canvas 2d ({e})"), |_| "webgl2".to_string()))
    };
    let renderer_name = RwSignal::new(name_of());
    let software = renderer_name.with_untracked(|n| n.contains(gl::SOFTWARE));
    Effect::new(move |was: Option<bool>| {
        let on = gl_anyway.get();
        if was.is_some_and(|w| w != on) {
            renderer.set_value(Renderer::new(on));
            renderer_name.set(name_of());
        }
        on
    });
    let colors = Memo::new(move |_| {
        let kind = by_kind.get();
        lab.panels.with(|s| {
            let Some(s) = s else { return Vec::new() };
            (0..s.context)
                .map(|i| match kind {
                    true => kind_color(Kind::of(s.symbols.get(i).map_or("", String::as_str))),
                    false => viridis(i as f64 / s.context.saturating_sub(1).max(1) as f64),
                })
                .collect()
        })
    });
    let labels = Memo::new(move |_| {
        lab.panels
            .with(|s| s.as_ref().map(|s| s.symbols.iter().map(|x| glyph(x)).collect::<Vec<_>>()).unwrap_or_default())
    });
    let walker_points = move |now: &[[f64; 3]]| -> Vec<[f64; 3]> {
        let h = hop.get();
        let (k, frac) = (h.floor() as usize, h.fract());
        paths.with(|p| {
            p.iter()
                .flatten()
                .filter_map(|path| {
                    let (a, b) = (now.get(*path.get(k)?)?, now.get(*path.get(k + 1)?)?);
                    Some(slerp(*a, *b, frac))
                })
                .collect()
        })
    };

    Effect::new(move |_| {
        let Some(canvas) = canvas_ref.get() else { return };
        renderer_name.track();
        lab.view.layout.track();
        let dark = dark.get();
        // The training mode has Start and Step; the model mode reads a text when a model opens.
        let empty = match (lab.real.mode.get(), lab.real.opened.with(Option::is_some)) {
            (Mode::Train, _) => "Press Start or Step to see the tokens",
            (Mode::Model, false) => "Open a model to see its tokens",
            (Mode::Model, true) => "Read a text to see its tokens",
        };
        let result = moment.with(|m| {
            let Some(m) = m else {
                return renderer.with_value(|r| draw::draw(&canvas, None, empty, dark, r.as_ref().ok()));
            };
            let depth = depth.get();
            // The Brownian ghosts and, once the run has ended, the fitted flow's particles: both at
            // the view's depth, on the live frame only.
            let overlay = |pick: Overlay| -> Vec<[f64; 3]> {
                if !ghosts.get() || time.get().is_some() {
                    return Vec::new();
                }
                lab.panels.with(|s| {
                    s.as_ref()
                        .and_then(|s| pick(s).filter(|(d, _)| *d == depth.min(s.layers)))
                        .map(|(_, p)| p.chunks_exact(3).map(|g| [g[0] as f64, g[1] as f64, g[2] as f64]).collect())
                        .unwrap_or_default()
                })
            };
            let ghost_points = overlay(|s| s.brownian.as_ref()?.as_ref().ok().map(|b| (b.depth, b.ghosts.as_slice())));
            let particle_points =
                overlay(|s| s.flow.as_ref()?.as_ref().ok().map(|f| (f.depth, f.particles.as_slice())));
            let walkers = walker_points(&m.now);
            let no_trail: Vec<Vec<[f64; 3]>> = Vec::new();
            let caption = lab.panels.with(|s| {
                let s = s.as_ref()?;
                let d = depth.min(s.layers);
                let name =
                    if d == s.layers { "after the final LayerNorm".to_string() } else { format!("into layer {d}") };
                Some(match lab.real.mode.get_untracked() {
                    Mode::Model => format!("The text {name}: one dot per token"),
                    Mode::Train => {
                        format!("{}, {name}: one dot per character", step_text(m.step))
                    }
                })
            });
            row.with(|row| {
                colors.with(|colors| {
                    labels.with(|labels| {
                        let scene = Scene {
                            now: &m.now,
                            trail: if trails.get() { &m.trail } else { &no_trail },
                            colors,
                            labels,
                            ghosts: &ghost_points,
                            particles: &particle_points,
                            chain: row.as_ref().map(|(i, r)| (*i, r.as_slice())),
                            depth_path: &depth_path.get().unwrap_or_default(),
                            walkers: &walkers,
                            hovered: hovered.get(),
                            caption: caption.unwrap_or_default(),
                            yaw: lab.view.yaw.get(),
                            pitch: lab.view.pitch.get(),
                        };
                        renderer.with_value(|r| draw::draw(&canvas, Some(&scene), empty, dark, r.as_ref().ok()))
                    })
                })
            })
        });
        match result {
            Ok(d) => drawn.set(d),
            Err(e) => lab.error.set(Some(format!("could not draw the sphere: {e}"))),
        }
    });

    let one_finger = RwSignal::new(false);
    let grab = pointer::Grab::new(lab, canvas_ref, drawn, one_finger, hovered);
    let count = move || lab.panels.with(|s| s.as_ref().map_or(0, |s| s.context));
    let on_key = move |ev: leptos::ev::KeyboardEvent| {
        let turn = match ev.key().as_str() {
            "ArrowLeft" => (-0.1, 0.0),
            "ArrowRight" => (0.1, 0.0),
            "ArrowUp" => (0.0, -0.1),
            "ArrowDown" => (0.0, 0.1),
            "]" | "[" => {
                let n = count();
                if n > 0 {
                    let back = ev.key() == "[";
                    lab.view.selected.update(|s| {
                        *s = Some(match (*s, back) {
                            (None, false) => 0,
                            (None, true) => n - 1,
                            (Some(i), false) => (i + 1) % n,
                            (Some(i), true) => (i + n - 1) % n,
                        })
                    });
                }
                ev.prevent_default();
                return;
            }
            "Escape" => {
                lab.view.selected.set(None);
                return;
            }
            _ => return,
        };
        ev.prevent_default();
        lab.view.yaw.update(|v| *v += turn.0);
        lab.view.pitch.update(|v| *v = (*v + turn.1).clamp(-1.5, 1.5));
    };
    let max_depth =
        move || lab.panels.with(|s| s.as_ref().map(|s| s.layers)).unwrap_or(lab.settings.with(|s| s.layers));
    let kept = move || {
        lab.panels.with(|s| {
            let s = s.as_ref()?;
            Some(s.explained.get(depth.get().min(s.layers)).copied().unwrap_or(0.0) * 100.0)
        })
    };

    view! {
        <Panel
            name="sphere"
            title="Tokens on the sphere"
            explain="Each LayerNorm maps a token's vector x to u = (x - mean) / std, which lies on a sphere of \
                radius sqrt(d). Here are the u of one fixed validation row, projected on their top three \
                principal directions and normalised to the unit sphere (the directions are matched from one \
                frame to the next, so the picture does not jump). Near dots are large and bright, far ones \
                small and faint. Play runs through training like a video, at the pace control's speed (slow start \
                included; the whole history in 12 s when the pace is as fast as possible): between two recorded moments the \
                tokens glide along great circles, and the trails show where they were. Look for tokens of \
                the same kind gathering as the model learns. Click a token (or pick it, or press ] on the \
                ball) to draw its attention row as arcs, as thick as the probability of each jump, with \
                walkers hopping along that random walk. Drag, the arrow keys or Orbit turn the ball."
        >
            <crate::views::panel::PngButton canvas="sphere" file="spherewalk-sphere.png" />
            <div class="row">
                <button
                    id="sphere-play"
                    class="small"
                    type="button"
                    aria-pressed=move || playing.get().to_string()
                    disabled=move || span().is_none_or(|(a, b)| b <= a)
                    on:click=on_play
                >
                    {move || if playing.get() { "Pause" } else { "Play" }}
                </button>
                <label for="time">
                    "Step " <span id="time-value">{time_text}</span>
                    <input
                        id="time"
                        type="range"
                        step="any"
                        min=move || span().map_or(0, |s| s.0)
                        max=move || span().map_or(0, |s| s.1)
                        aria-valuetext=time_text
                        disabled=move || span().is_none_or(|(a, b)| b <= a)
                        prop:value=move || {
                            time.get().map(|t| t.to_string()).unwrap_or_else(|| span().map_or(0, |s| s.1).to_string())
                        }
                        on:input=on_time
                    />
                </label>
                <button
                    id="time-live"
                    class="small"
                    type="button"
                    aria-label="back to the live training step"
                    disabled=move || time.get().is_none()
                    on:click=move |_| {
                        playing.set(false);
                        time.set(None);
                    }
                >
                    "Live"
                </button>
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
                        on:input=move |ev| {
                            depth_at.set(None);
                            depth.set(event_target_value(&ev).parse().unwrap_or(0))
                        }
                    />
                </label>
                <button
                    id="depth-play"
                    class="small"
                    type="button"
                    title="walk the tokens through every layer, from the first to the last"
                    aria-pressed=move || depth_at.with(Option::is_some).to_string()
                    on:click=move |_| {
                        let playing = depth_at.get_untracked().is_some();
                        depth_at.set((!playing).then_some(0.0));
                        if !playing {
                            depth.set(0);
                        }
                    }
                >
                    {move || if depth_at.with(Option::is_some) { "Pause" } else { "Play through depth" }}
                </button>
            </div>
            <div class="row">
                <label for="sphere-token">
                    "Follow token"
                    <select
                        id="sphere-token"
                        on:change=move |ev| lab.view.selected.set(event_target_value(&ev).parse().ok())
                    >
                        <option value="" selected=move || lab.view.selected.get().is_none()>"none"</option>
                        {move || {
                            labels
                                .get()
                                .into_iter()
                                .enumerate()
                                .map(|(i, l)| {
                                    view! {
                                        <option value=i.to_string() selected=move || lab.view.selected.get() == Some(i)>
                                            {format!("{i}: {l}")}
                                        </option>
                                    }
                                })
                                .collect_view()
                        }}
                    </select>
                </label>
                <label for="color-by">
                    "Colour by"
                    <select id="color-by" on:change=move |ev| by_kind.set(event_target_value(&ev) != "position")>
                        <option value="kind">"kind of token"</option>
                        <option value="position">"position"</option>
                    </select>
                </label>
                {toggle("trails", " trails", trails, "")}
                {toggle("ghosts", " Brownian ghosts", ghosts, "")}
                {toggle("orbit", " orbit", orbit, "")}
                {toggle("one-finger", " one-finger turn", one_finger, "touch-only")}
                {software.then(|| toggle("webgl-anyway", " WebGL (software here: slow)", gl_anyway, ""))}
            </div>
            <canvas
                id="sphere"
                node_ref=canvas_ref
                width="520"
                height="520"
                tabindex="0"
                role="img"
                aria-label="tokens of the probe row as points on a sphere; drag (two fingers on a touch screen) or use the arrow keys to turn it, [ and ] to follow a token, Escape to stop"
                class:one-finger=move || one_finger.get()
                data-yaw=move || format!("{:.3}", lab.view.yaw.get())
                data-renderer=move || if drawn.with(|d| d.gl) { "webgl2".to_string() } else { renderer_name.get() }
                data-screen=move || drawn.with(|d| join(d.screen.iter().flat_map(|p| [p.0, p.1, p.2])))
                data-points=move || drawn.with(|d| d.points)
                data-ghosts=move || drawn.with(|d| d.ghosts)
                data-particles=move || drawn.with(|d| d.particles)
                data-arcs=move || drawn.with(|d| d.arcs)
                data-selected=move || lab.view.selected.get().map(|i| i.to_string()).unwrap_or_default()
                data-arc-row=move || row.with(|r| r.as_ref().map(|(_, r)| join(r.iter().copied())).unwrap_or_default())
                data-positions=move || moment.with(|m| m.as_ref().map(|m| join(m.now.iter().flatten().copied())).unwrap_or_default())
                data-step=move || lab.panels.with(|s| s.as_ref().map(|s| s.step).unwrap_or(0))
                data-shown-step=move || moment.with(|m| m.as_ref().map(|m| m.step.to_string()).unwrap_or_default())
                on:pointerdown=move |ev| grab.down(&ev)
                on:pointermove=move |ev| grab.moved(&ev)
                on:pointerup=move |ev| grab.up(&ev)
                on:pointercancel=move |ev| grab.cancel(&ev)
                on:pointerleave=move |_| grab.leave()
                on:keydown=on_key
            ></canvas>
            <div id="sphere-legend" class="legend" aria-label="legend" hidden=move || count() == 0>
                {move || match by_kind.get() {
                    true => {
                        let present: Vec<Kind> = lab.panels.with(|s| {
                            let kinds: Vec<Kind> = s.as_ref().map(|s| s.symbols.iter().map(|x| Kind::of(x)).collect()).unwrap_or_default();
                            Kind::ALL.into_iter().filter(|k| kinds.contains(k)).collect()
                        });
                        present
                            .into_iter()
                            .map(|k| view! { <span class="key"><i style=format!("background:{}", css(kind_color(k)))></i>{k.name()}</span> })
                            .collect_view()
                            .into_any()
                    }
                    false => view! {
                        <span class="key">
                            "position 0 "
                            <i class="ramp"></i>
                            {move || format!(" {}", count().saturating_sub(1))}
                        </span>
                    }
                    .into_any(),
                }}
                <span class="key">"␣ space, ↵ newline"</span>
                <Show when=move || ghosts.get()><span class="key"><i class="ring"></i>"Brownian ghost"</span></Show>
                <Show when=move || ghosts.get() && drawn.with(|d| d.particles > 0)><span class="key"><i class="diamond"></i>"particle (fitted attention flow)"</span></Show>
                <Show when=move || lab.view.selected.get().is_some()><span class="key"><i class="ring walker"></i>"walker on the chain"</span></Show>
            </div>
            <p id="sphere-note" class="note">
                {move || {
                    let chain = lab.view.selected.get().map(|i| {
                        let walk = match lab.real.mode.get() {
                            Mode::Model => " The dark line is its walk through every depth, from the first layer to the last.",
                            Mode::Train => "",
                        };
                        format!(
                            " Arcs: where token {i} looks in layer {}, head {}{} (the attention panel's choice; the arcs \
                             are of the latest frame).{walk}",
                            lab.view.chain.layer.get(),
                            lab.view.chain.head.get(),
                            match lab.view.chain.k.get() {
                                1 => String::new(),
                                k => format!(", after {k} steps"),
                            }
                        )
                    });
                    kept()
                        .map(|k| {
                            // A real model's depths share one view: say so, since it is what makes moving
                            // the depth slider mean something.
                            let shared = match lab.real.mode.get() {
                                Mode::Model => " The same three directions for every depth: a token moves here only as it moves in the model.",
                                Mode::Train => "",
                            };
                            format!(
                                "These three directions keep {k:.0}% of the tokens' spread in {} dimensions; the rest \
                                 is in directions the picture cannot show.{shared}{}",
                                lab.panels.with(|s| s.as_ref().map_or(0, |s| s.d_model)),
                                chain.unwrap_or_default()
                            )
                        })
                        .unwrap_or_default()
                }}
            </p>
            {crate::views::panel::verdict_line("verdict-sphere".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.sphere.clone())))}
            {crate::views::panel::verdict_line("verdict-grouping".into(), move || lab.panels.with(|p| p.as_ref().and_then(|p| p.verdicts.grouping.clone())))}
            {crate::lab::gpu_copy_note(lab)}
        </Panel>
    }
}
