//! Spherewalk's browser lab.
//!
//! A Leptos (CSR) page that trains the engine's built-in default experiment on
//! the CPU, inside the page, and plots the training loss (line) and the
//! validation loss (points) on a `<canvas>` with plotters.
//!
//! Training runs in small chunks: each animation frame runs optimizer steps
//! for at most [`FRAME_BUDGET_MS`] and then hands control back to the browser,
//! so the page stays responsive (the Pause button works mid-run).
//!
//! Stable element ids, read by the browser test (`e2e/page.test.mjs`):
//! `#version`, `#start`, `#status`, `#step`, `#total-steps`, `#train-loss`,
//! `#val-loss`, `#speed`, `#error`, `#loss-chart` (whose `data-train-losses`
//! and `data-val-losses` attributes hold the plotted values, comma-separated).

use std::cell::{Cell, RefCell};

use engine::{TrainConfig, Trainer};
use leptos::html::Canvas;
use leptos::prelude::*;
use plotters::prelude::*;
use plotters_canvas::CanvasBackend;
use wasm_bindgen::prelude::*;
use web_sys::HtmlCanvasElement;

/// Milliseconds of training per animation frame before yielding to the browser.
const FRAME_BUDGET_MS: f64 = 12.0;

thread_local! {
    /// The running trainer. It lives outside the reactive graph: it is neither
    /// `Send` nor cheap to clone, and only the frame loop touches it.
    static TRAINER: RefCell<Option<Trainer>> = const { RefCell::new(None) };
    /// Generation of the frame loop: bumping it stops any loop already scheduled,
    /// so Pause/Resume clicked within one frame never starts two loops.
    static LOOP_GENERATION: Cell<u64> = const { Cell::new(0) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Running,
    Paused,
    Done,
    Failed,
}

impl Phase {
    fn status_text(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Running => "training",
            Phase::Paused => "paused",
            Phase::Done => "done",
            Phase::Failed => "error",
        }
    }

    fn button_text(self) -> &'static str {
        match self {
            Phase::Idle => "Start",
            Phase::Running => "Pause",
            Phase::Paused => "Resume",
            Phase::Done => "Restart",
            Phase::Failed => "Retry",
        }
    }
}

/// All the page's reactive state; every field is a `Copy` signal handle.
#[derive(Clone, Copy)]
struct Lab {
    phase: RwSignal<Phase>,
    total_steps: RwSignal<usize>,
    eval_every: RwSignal<usize>,
    /// (completed steps, training loss of that step)
    train: RwSignal<Vec<(usize, f32)>>,
    /// (completed steps, validation loss after them)
    val: RwSignal<Vec<(usize, f32)>>,
    ms_per_step: RwSignal<Option<f64>>,
    error: RwSignal<Option<String>>,
}

impl Lab {
    fn new() -> Self {
        let cfg = TrainConfig::browser_default();
        Lab {
            phase: RwSignal::new(Phase::Idle),
            total_steps: RwSignal::new(cfg.steps),
            eval_every: RwSignal::new(cfg.eval_every),
            train: RwSignal::new(Vec::new()),
            val: RwSignal::new(Vec::new()),
            ms_per_step: RwSignal::new(None),
            error: RwSignal::new(None),
        }
    }

    fn fail(self, message: String) {
        web_sys::console::warn_1(&format!("Spherewalk: {message}").into());
        self.error.set(Some(message));
        self.phase.set(Phase::Failed);
        next_generation();
    }

    /// The Start / Pause / Resume / Restart button.
    fn toggle(self) {
        match self.phase.get_untracked() {
            Phase::Idle | Phase::Done | Phase::Failed => self.start_fresh(),
            Phase::Running => {
                next_generation();
                self.phase.set(Phase::Paused);
            }
            Phase::Paused => self.run(),
        }
    }

    fn start_fresh(self) {
        next_generation();
        self.error.set(None);
        self.train.set(Vec::new());
        self.val.set(Vec::new());
        self.ms_per_step.set(None);
        let cfg = TrainConfig::browser_default();
        self.total_steps.set(cfg.steps);
        self.eval_every.set(cfg.eval_every);
        match Trainer::new(cfg) {
            Ok(trainer) => {
                TRAINER.with_borrow_mut(|slot| *slot = Some(trainer));
                self.run();
            }
            Err(e) => {
                TRAINER.with_borrow_mut(|slot| *slot = None);
                self.fail(format!("could not create the trainer: {e}"));
            }
        }
    }

    fn run(self) {
        let generation = next_generation();
        self.phase.set(Phase::Running);
        request_animation_frame(move || self.frame(generation));
    }

    /// One animation frame of training: steps until the frame budget is spent,
    /// then publishes the new points and schedules the next frame.
    fn frame(self, generation: u64) {
        if generation != LOOP_GENERATION.get() || self.phase.get_untracked() != Phase::Running {
            return;
        }
        let need_initial_eval = self.val.with_untracked(Vec::is_empty);
        let mut chunk = Chunk::default();
        let started = now_ms();
        let outcome = TRAINER.with_borrow_mut(|slot| match slot.as_mut() {
            Some(trainer) => chunk.run(trainer, need_initial_eval, started),
            None => Err("the trainer is gone (internal error)".to_string()),
        });
        let elapsed = now_ms() - started;

        if !chunk.train.is_empty() {
            self.ms_per_step.set(Some(elapsed / chunk.train.len() as f64));
            self.train.update(|t| t.extend_from_slice(&chunk.train));
        }
        if !chunk.val.is_empty() {
            self.val.update(|v| v.extend_from_slice(&chunk.val));
        }
        match outcome {
            Err(message) => self.fail(message),
            Ok(true) => {
                next_generation();
                self.phase.set(Phase::Done);
            }
            Ok(false) => request_animation_frame(move || self.frame(generation)),
        }
    }
}

/// The points produced by one frame's worth of training.
#[derive(Default)]
struct Chunk {
    train: Vec<(usize, f32)>,
    val: Vec<(usize, f32)>,
}

impl Chunk {
    /// Returns Ok(true) when the run is complete.
    fn run(&mut self, trainer: &mut Trainer, initial_eval: bool, started: f64) -> Result<bool, String> {
        let total = trainer.config().steps;
        let eval_every = trainer.config().eval_every;
        if initial_eval {
            let loss = trainer
                .evaluate()
                .map_err(|e| format!("validation failed before training: {e}"))?;
            self.val.push((trainer.step_count(), loss));
        }
        loop {
            if trainer.step_count() >= total {
                return Ok(true);
            }
            let report = trainer
                .step()
                .map_err(|e| format!("training step {} failed: {e}", trainer.step_count() + 1))?;
            let done = trainer.step_count();
            self.train.push((done, report.loss));
            if done == total || (eval_every > 0 && done.is_multiple_of(eval_every)) {
                let loss = trainer
                    .evaluate()
                    .map_err(|e| format!("validation after step {done} failed: {e}"))?;
                self.val.push((done, loss));
            }
            if now_ms() - started >= FRAME_BUDGET_MS {
                return Ok(trainer.step_count() >= total);
            }
        }
    }
}

fn next_generation() -> u64 {
    LOOP_GENERATION.with(|g| {
        g.set(g.get().wrapping_add(1));
        g.get()
    })
}

fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map(|p| p.now())
        .unwrap_or(0.0)
}

/// A signal that follows the system's light/dark setting, so the chart redraws in the
/// matching colours when it changes.
fn dark_mode_signal() -> RwSignal<bool> {
    let query = web_sys::window().and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok().flatten());
    let dark = RwSignal::new(query.as_ref().is_some_and(|q| q.matches()));
    if let Some(query) = query {
        let on_change = Closure::<dyn FnMut(web_sys::MediaQueryListEvent)>::new(move |e: web_sys::MediaQueryListEvent| {
            dark.set(e.matches());
        });
        // The page lives as long as the listener: leaking the closure is intended.
        if query
            .add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref())
            .is_ok()
        {
            on_change.forget();
        }
    }
    dark
}

fn fmt_loss(v: Option<f32>) -> String {
    v.map(|l| format!("{l:.4}")).unwrap_or_else(|| "–".to_string())
}

fn join_losses(points: &[(usize, f32)]) -> String {
    points.iter().map(|(_, l)| format!("{l:.5}")).collect::<Vec<_>>().join(",")
}

/// Draws the loss curves into the canvas. Errors come back as text for the page.
fn draw_chart(
    canvas: HtmlCanvasElement,
    train: &[(usize, f32)],
    val: &[(usize, f32)],
    total_steps: usize,
    dark: bool,
) -> Result<(), String> {
    let (bg, fg, grid) = if dark {
        (RGBColor(0x16, 0x18, 0x1d), RGBColor(0xd8, 0xdc, 0xe3), RGBColor(0x33, 0x37, 0x40))
    } else {
        (WHITE, RGBColor(0x22, 0x25, 0x2b), RGBColor(0xe3, 0xe6, 0xeb))
    };
    let train_color = RGBColor(0x2f, 0x7d, 0xe1);
    let val_color = RGBColor(0xe5, 0x5a, 0x2b);

    let backend = CanvasBackend::with_canvas_object(canvas)
        .ok_or_else(|| "the canvas has no 2D context".to_string())?;
    let root = backend.into_drawing_area();
    root.fill(&bg).map_err(|e| e.to_string())?;

    let finite = || train.iter().chain(val.iter()).map(|&(_, l)| l).filter(|l| l.is_finite());
    let (mut lo, mut hi) = finite().fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), l| (a.min(l), b.max(l)));
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (0.0, 5.0);
    }
    let pad = ((hi - lo) * 0.08).max(0.05);
    let (lo, hi) = ((lo - pad).max(0.0), hi + pad);
    let x_max = total_steps.max(1) as f64;

    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .margin_right(28)
        .caption("loss (cross-entropy)", ("sans-serif", 18).into_font().color(&fg))
        .x_label_area_size(34)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..x_max, lo..hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .light_line_style(grid.mix(0.35))
        .bold_line_style(grid)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .axis_style(fg)
        .label_style(("sans-serif", 13).into_font().color(&fg))
        .x_desc("step")
        .draw()
        .map_err(|e| e.to_string())?;

    chart
        .draw_series(LineSeries::new(
            train.iter().filter(|p| p.1.is_finite()).map(|&(s, l)| (s as f64, l)),
            train_color.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?
        .label("train loss")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], train_color.stroke_width(2)));
    chart
        .draw_series(
            val.iter()
                .filter(|p| p.1.is_finite())
                .map(|&(s, l)| Circle::new((s as f64, l), 4, val_color.filled())),
        )
        .map_err(|e| e.to_string())?
        .label("validation loss")
        .legend(move |(x, y)| Circle::new((x + 9, y), 4, val_color.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(bg.mix(0.85))
        .border_style(grid)
        .label_font(("sans-serif", 13).into_font().color(&fg))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

#[component]
fn App() -> impl IntoView {
    let lab = Lab::new();
    let canvas_ref = NodeRef::<Canvas>::new();
    let chart_error = RwSignal::new(None::<String>);
    let dark = dark_mode_signal();

    // Redraw whenever the points change (at most once per frame: the loop
    // publishes one batch of points per animation frame).
    Effect::new(move |_| {
        let total = lab.total_steps.get();
        let dark = dark.get();
        let Some(canvas) = canvas_ref.get() else { return };
        let result = lab
            .train
            .with(|train| lab.val.with(|val| draw_chart(canvas, train, val, total, dark)));
        let failure = result.err().map(|e| format!("could not draw the chart: {e}"));
        if chart_error.get_untracked() != failure {
            chart_error.set(failure);
        }
    });

    let last_train = move || lab.train.with(|t| t.last().map(|p| p.1));
    let last_val = move || lab.val.with(|v| v.last().map(|p| p.1));
    let step = move || lab.train.with(|t| t.last().map(|p| p.0).unwrap_or(0));

    view! {
        <main class="lab">
            <header>
                <h1>"Spherewalk"</h1>
                <p class="subtitle">
                    "A small transformer, trained in your browser on the CPU. Engine "
                    <code id="version">{engine::VERSION}</code>
                </p>
            </header>

            <section class="controls">
                <button
                    id="start"
                    type="button"
                    class:running=move || lab.phase.get() == Phase::Running
                    on:click=move |_| lab.toggle()
                >
                    {move || lab.phase.get().button_text()}
                </button>
                <span class="experiment">
                    "default experiment: " {move || lab.total_steps.get()} " steps, validation every "
                    {move || lab.eval_every.get()} " steps"
                </span>
            </section>

            <dl class="stats">
                <div>
                    <dt>"status"</dt>
                    <dd id="status" data-phase=move || lab.phase.get().status_text()>
                        {move || lab.phase.get().status_text()}
                    </dd>
                </div>
                <div>
                    <dt>"step"</dt>
                    <dd>
                        <span id="step">{step}</span>
                        " / "
                        <span id="total-steps">{move || lab.total_steps.get()}</span>
                    </dd>
                </div>
                <div>
                    <dt>"train loss"</dt>
                    <dd id="train-loss">{move || fmt_loss(last_train())}</dd>
                </div>
                <div>
                    <dt>"validation loss"</dt>
                    <dd id="val-loss">{move || fmt_loss(last_val())}</dd>
                </div>
                <div>
                    <dt>"time per step"</dt>
                    <dd id="speed">
                        {move || {
                            lab.ms_per_step
                                .get()
                                .map(|ms| format!("{ms:.1} ms"))
                                .unwrap_or_else(|| "–".to_string())
                        }}
                    </dd>
                </div>
            </dl>

            <Show when=move || lab.error.with(Option::is_some) || chart_error.with(Option::is_some)>
                <p id="error" class="error" role="alert">
                    {move || lab.error.get().or_else(|| chart_error.get()).unwrap_or_default()}
                </p>
            </Show>

            <canvas
                id="loss-chart"
                node_ref=canvas_ref
                width="760"
                height="380"
                aria-label="training and validation loss by step"
                data-points=move || lab.train.with(Vec::len)
                data-train-losses=move || lab.train.with(|t| join_losses(t))
                data-val-losses=move || lab.val.with(|v| join_losses(v))
            ></canvas>
        </main>
    }
}

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(App);
}
