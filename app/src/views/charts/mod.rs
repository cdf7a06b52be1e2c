//! The chart panels: loss (and a race's rivals), attention entropy over training (JoMA), the
//! second-order diagnostics, and "Brownian or not?". Each is one or more [`Chart`]s, which differ
//! only in their lines: `plot` draws them with plotters, `backend` is its canvas.

pub mod backend;
mod brownian;
mod diagnostics;
mod entropy;
mod loss;
pub mod plot;

use leptos::html::Canvas;
use leptos::prelude::*;

use crate::lab::Lab;
use crate::views::panel::PngButton;
pub use brownian::BrownianPanel;
pub use diagnostics::DiagnosticsPanel;
pub use entropy::EntropyPanel;
pub use loss::LossPanel;
use plot::Line;

/// A value the browser tests read off a chart's canvas as a `data-*` attribute (absent while `None`).
pub type Data = (&'static str, Box<dyn Fn() -> Option<String> + Send + Sync>);

/// A chart's `data-*` attribute `name`, following `value`.
pub fn data(name: &'static str, value: impl Fn() -> Option<String> + Send + Sync + 'static) -> Data {
    (name, Box::new(value))
}

/// One chart: its PNG button and its canvas, redrawn whenever its lines, the theme or the layout
/// change. `lines` gives the lines for the theme (dark or not) and the x axis's end; failures go
/// to the page's error line.
#[component]
pub fn Chart(
    lab: Lab,
    dark: RwSignal<bool>,
    /// The canvas's id.
    id: &'static str,
    /// The PNG's file name.
    file: &'static str,
    /// What the chart shows, for screen readers.
    label: &'static str,
    caption: &'static str,
    y_desc: &'static str,
    /// What the x axis counts.
    #[prop(default = "step")]
    x_desc: &'static str,
    /// Steps on a log scale (still labelled in steps).
    #[prop(optional)]
    log_steps: bool,
    #[prop(default = 300)] height: u32,
    lines: impl Fn(bool) -> (Vec<Line>, f64) + 'static,
    #[prop(optional)] data: Vec<Data>,
) -> impl IntoView {
    let canvas_ref = NodeRef::<Canvas>::new();
    Effect::new(move |_| {
        let dark = dark.get();
        lab.view.layout.track();
        let (lines, x_max) = lines(dark);
        let Some(canvas) = canvas_ref.get() else { return };
        if let Err(e) =
            plot::draw_lines(canvas, caption, plot::XAxis { desc: x_desc, log_steps }, y_desc, &lines, x_max, dark)
        {
            lab.error.set(Some(format!("could not draw the chart \"{caption}\": {e}")));
        }
    });
    for (name, value) in data {
        Effect::new(move |_| {
            let value = value();
            let Some(canvas) = canvas_ref.get() else { return };
            let _ = match value {
                Some(v) => canvas.set_attribute(name, &v),
                None => canvas.remove_attribute(name),
            };
        });
    }
    view! {
        <PngButton canvas=id file=file />
        <canvas id=id node_ref=canvas_ref width="760" height=height role="img" aria-label=label></canvas>
    }
}
