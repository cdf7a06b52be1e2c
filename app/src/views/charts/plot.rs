//! Plots drawn with plotters on `<canvas>`: the loss (with earlier runs for comparison), attention
//! entropy per layer over training, and the second-order optimizers' CG diagnostics.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use web_sys::HtmlCanvasElement;

use crate::views::canvas_text::{self, DEFAULT_PX};
use crate::views::charts::backend::{css_font, ChartCanvas};

/// Sizes the canvas's pixels to its shown size and returns canvas pixels per CSS pixel: the
/// device's pixel ratio. Its height is the shown height (the style sheet's, or its first aspect's
/// when it gives none), so nothing drawn is stretched. Before, the canvas kept 760 pixels wide and
/// the page shrank it, to 6.5 px text at 1280x800.
fn fit(canvas: &HtmlCanvasElement) -> f64 {
    let dpr = web_sys::window().map(|w| w.device_pixel_ratio()).unwrap_or(1.0).clamp(1.0, 4.0);
    let aspect = match canvas.get_attribute("data-aspect").and_then(|a| a.parse::<f64>().ok()) {
        Some(a) => a,
        None => {
            let a = canvas.height() as f64 / canvas.width().max(1) as f64;
            let _ = canvas.set_attribute("data-aspect", &a.to_string());
            a
        }
    };
    let shown = canvas.client_width() as f64;
    if shown >= 50.0 {
        let w = (shown * dpr).round() as u32;
        let tall = canvas.client_height() as f64;
        // Drawn at the size it is shown (the style sheet may give it a height): never stretched.
        let h = if tall >= 50.0 { tall * dpr } else { w as f64 * aspect };
        if canvas.width() != w || canvas.height() != h.round() as u32 {
            canvas.set_width(w);
            canvas.set_height(h.round() as u32);
        }
    }
    dpr
}

/// The least height of a chart's plot, in CSS pixels: its curves stay readable under any text size.
const MIN_PLOT_PX: f64 = 160.0;

/// Colours of the light and dark themes.
pub struct Theme {
    pub bg: RGBColor,
    pub fg: RGBColor,
    pub grid: RGBColor,
}

impl Theme {
    pub fn new(dark: bool) -> Self {
        if dark {
            Theme { bg: RGBColor(0x16, 0x18, 0x1d), fg: RGBColor(0xd8, 0xdc, 0xe3), grid: RGBColor(0x33, 0x37, 0x40) }
        } else {
            Theme { bg: WHITE, fg: RGBColor(0x22, 0x25, 0x2b), grid: RGBColor(0xe3, 0xe6, 0xeb) }
        }
    }
}

/// Series colours, in order.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0x2f, 0x7d, 0xe1),
    RGBColor(0xe5, 0x5a, 0x2b),
    RGBColor(0x2a, 0xa1, 0x6b),
    RGBColor(0x9b, 0x59, 0xd0),
    RGBColor(0xc9, 0x9a, 0x1a),
    RGBColor(0xd0, 0x3f, 0x8a),
];

/// A race entrant's colour, the same on both charts: the page's own run blue, the rivals apart
/// from the baselines' colours.
pub fn entrant_color(i: usize) -> RGBColor {
    if i == 0 {
        PALETTE[0]
    } else {
        PALETTE[(i + 4) % PALETTE.len()]
    }
}

/// One line of a chart.
pub struct Line {
    pub label: String,
    pub color: RGBColor,
    pub width: u32,
    pub points: Vec<(f64, f64)>,
    /// Draw as dots instead of a line.
    pub dots: bool,
    /// Where its label goes: the legend under the plot (lines of one label share one entry, a line
    /// and dots together), or the line's own right end (a level line).
    pub at_end: bool,
}

/// One entry of the legend: its label and colour, and whether it shows a line, dots or both.
struct Entry<'a> {
    label: &'a str,
    color: RGBColor,
    width: u32,
    line: bool,
    dots: bool,
}

/// The legend's entries: one per label, in the lines' order.
fn entries(lines: &[Line]) -> Vec<Entry<'_>> {
    let mut out: Vec<Entry> = Vec::new();
    for l in lines.iter().filter(|l| !l.at_end) {
        match out.iter_mut().find(|e| e.label == l.label) {
            Some(e) => {
                e.line |= !l.dots;
                e.dots |= l.dots;
            }
            None => out.push(Entry { label: &l.label, color: l.color, width: l.width, line: !l.dots, dots: l.dots }),
        }
    }
    out
}

fn range(lines: &[Line], floor_zero: bool) -> (f64, f64) {
    let ys = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).filter(|y| y.is_finite());
    let (mut lo, mut hi) = ys().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| (a.min(y), b.max(y)));
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(0.05);
    let lo = if floor_zero { (lo - pad).max(0.0) } else { lo - pad };
    (lo, hi + pad)
}

/// A chart's x axis: what it counts, and whether steps are spread on a log scale (a training
/// history from step 0 to 143,000), still labelled in steps.
#[derive(Clone, Copy)]
pub struct XAxis<'a> {
    pub desc: &'a str,
    pub log_steps: bool,
}

impl XAxis<'_> {
    /// Where `x` (a step, or seconds) is drawn.
    fn at(self, x: f64) -> f64 {
        if self.log_steps {
            (x.max(0.0) + 1.0).log10()
        } else {
            x
        }
    }

    /// The steps labelled on a log axis up to `end` (drawn coordinates): 0, then every power of
    /// ten, each at its own step's place.
    fn step_ticks(self, end: f64) -> Vec<(f64, String)> {
        let steps = std::iter::once(0u64).chain((1..10).map(|k| 10u64.pow(k)));
        let label = |s: u64| if s >= 1000 { format!("{}k", s / 1000) } else { s.to_string() };
        steps.map(|s| (self.at(s as f64), label(s))).filter(|&(x, _)| x <= end).collect()
    }
}

/// Draws `lines` against the x axis from 0 to x_max.
pub fn draw_lines(
    canvas: HtmlCanvasElement,
    caption: &str,
    axis: XAxis,
    y_desc: &str,
    lines: &[Line],
    x_max: f64,
    dark: bool,
) -> Result<(), String> {
    let theme = Theme::new(dark);
    let s = fit(&canvas);
    let text = canvas_text::px();
    canvas_text::report(&canvas, text);
    let px = |v: f64| (v * s).round() as i32;
    // Room for the labels grows with their size.
    let room = |v: f64| px(v * text / DEFAULT_PX);
    // As many tick labels as fit without touching: a small chart shows fewer.
    let ticks = |pixels: u32, per_label: f64| ((pixels as f64 / (per_label * text * s)) as usize).clamp(2, 10);
    let (x_ticks, y_ticks) = (ticks(canvas.width(), 5.0), ticks(canvas.height(), 2.5));
    let width = canvas.width() as i32;
    let element = canvas.clone();
    let backend = ChartCanvas::new(canvas).ok_or_else(|| "the canvas has no 2D context".to_string())?;
    let legend_font = ("sans-serif", text * s).into_font().color(&theme.fg);
    let keys = entries(lines);
    let label_widths: Vec<i32> =
        keys.iter().map(|e| backend.text_size(e.label, &css_font(&legend_font)).0 as i32).collect();
    // The caption at its size if it fits the canvas, else at the labels' size.
    let caption_px = {
        let big = ("sans-serif", 1.25 * text * s).into_font().color(&theme.fg);
        if (backend.text_size(caption, &css_font(&big)).0 as i32) < width - px(20.0) {
            1.25 * text
        } else {
            text
        }
    };
    // The legend's rows under the plot, as wide as the canvas allows: it never covers the data.
    let (swatch, gap, row) = (room(24.0), room(14.0), room(20.0));
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut used = px(10.0);
    for (i, w) in label_widths.iter().enumerate() {
        let need = swatch + room(6.0) + w + gap;
        if used + need > width - px(10.0) && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = px(10.0);
        }
        rows.last_mut().expect("a row").push(i);
        used += need;
    }
    let band = if keys.is_empty() { 0 } else { rows.len() as i32 * row + room(6.0) };
    let root = backend.into_drawing_area();
    root.fill(&theme.bg).map_err(|e| e.to_string())?;
    let (lo, hi) = range(lines, true);
    let end = axis.at(x_max).max(1.0);
    let mut chart = ChartBuilder::on(&root)
        .margin(px(10.0))
        .margin_right(room(22.0))
        .margin_bottom(px(10.0) + band)
        .caption(caption, ("sans-serif", caption_px * s).into_font().color(&theme.fg))
        .x_label_area_size(room(32.0))
        .y_label_area_size(room(48.0))
        .build_cartesian_2d(0f64..end, lo..hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .light_line_style(theme.grid.mix(0.35))
        .bold_line_style(theme.grid)
        .x_label_formatter(&|x| if end < 10.0 { format!("{x:.1}") } else { format!("{x:.0}") })
        .y_label_formatter(&|y| format!("{y:.2}"))
        // A log axis's ticks are drawn below, at the steps they name.
        .x_labels(if axis.log_steps { 0 } else { x_ticks })
        .y_labels(y_ticks)
        .axis_style(theme.fg)
        .label_style(("sans-serif", text * s).into_font().color(&theme.fg))
        .x_desc(axis.desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| e.to_string())?;
    if axis.log_steps {
        let label_style = ("sans-serif", text * s).into_font().color(&theme.fg).pos(Pos::new(HPos::Center, VPos::Top));
        for (x, label) in axis.step_ticks(end) {
            chart.draw_series(LineSeries::new([(x, lo), (x, hi)], theme.grid)).map_err(|e| e.to_string())?;
            let (px_x, px_y) = chart.backend_coord(&(x, lo));
            root.draw(&Text::new(label, (px_x, px_y + px(6.0)), label_style.clone())).map_err(|e| e.to_string())?;
        }
    }
    for line in lines {
        let color = line.color;
        let width = px(line.width as f64).max(1) as u32;
        let pts = line.points.iter().map(|&(x, y)| (axis.at(x), y)).filter(|p| p.1.is_finite());
        if line.dots {
            chart.draw_series(pts.map(|p| Circle::new(p, px(4.0), color.filled()))).map_err(|e| e.to_string())?;
        } else {
            chart.draw_series(LineSeries::new(pts, color.stroke_width(width))).map_err(|e| e.to_string())?;
        }
    }
    // A level line's label at its right end, just above it; labels of close lines step apart.
    let end_style = legend_font.pos(Pos::new(HPos::Right, VPos::Bottom));
    let mut ends: Vec<((i32, i32), &str)> = lines
        .iter()
        .filter(|l| l.at_end)
        .filter_map(|l| l.points.last().map(|&(x, y)| (chart.backend_coord(&(axis.at(x), y)), l.label.as_str())))
        .collect();
    ends.sort_by_key(|e| e.0 .1);
    let mut below = i32::MIN;
    for ((x, y), label) in ends {
        let y = (y - px(2.0)).max(below + row);
        root.draw(&Text::new(label, (x - px(4.0), y), end_style.clone())).map_err(|e| e.to_string())?;
        below = y;
    }
    let plot = chart.plotting_area().get_pixel_range();
    // The plot keeps at least MIN_PLOT_PX of height: a canvas too short for its caption, axes and
    // legend as well grows (a projector's 24 px text left some plots 45 px), and is drawn again.
    let short = MIN_PLOT_PX - (plot.1.end - plot.1.start) as f64 / s;
    if short > 0.5 {
        // (min-height is the border box's: the border counts.) Drawn again only if it grew.
        let before = element.offset_height();
        let tall = (before as f64 + short).ceil();
        let _ = element.style().set_property("min-height", &format!("{tall}px"));
        if element.offset_height() > before {
            return draw_lines(element, caption, axis, y_desc, lines, x_max, dark);
        }
    }
    let top = plot.1.end + room(32.0) + room(4.0);
    draw_legend(&root, top, &rows, &keys, &label_widths, (swatch, gap, row), &legend_font)
        .map_err(|e| e.to_string())?;
    // Where the plot ends and the legend starts (CSS px), and the legend's labels: for the tests.
    let css = |v: i32| format!("{:.0}", v as f64 / s);
    let _ = element.set_attribute("data-plot-top", &css(plot.1.start));
    let _ = element.set_attribute("data-plot-bottom", &css(plot.1.end));
    let _ = element.set_attribute("data-legend-top", &css(top));
    let _ = element.set_attribute("data-legend", &keys.iter().map(|e| e.label).collect::<Vec<_>>().join("|"));
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

/// The legend under the plot, from `top`: each entry's swatch (a line, dots, or both) and label,
/// in `rows`. Drawn here because plotters' own legend measures its labels through the page's
/// layout (see `backend`); `widths` are the labels' widths measured on the canvas.
fn draw_legend(
    root: &DrawingArea<ChartCanvas, Shift>,
    top: i32,
    rows: &[Vec<usize>],
    keys: &[Entry],
    widths: &[i32],
    (swatch, gap, row): (i32, i32, i32),
    font: &TextStyle,
) -> Result<(), DrawingAreaErrorKind<<ChartCanvas as DrawingBackend>::ErrorType>> {
    let s = font.font.get_size() / DEFAULT_PX;
    let px = |v: f64| (v * s).round() as i32;
    let label_style = font.pos(Pos::new(HPos::Left, VPos::Center));
    for (r, entries) in rows.iter().enumerate() {
        let y = top + r as i32 * row + row / 2;
        let mut x = px(10.0);
        for &i in entries {
            let e = &keys[i];
            if e.line {
                root.draw(&PathElement::new(
                    vec![(x, y), (x + swatch, y)],
                    e.color.stroke_width(px(e.width.max(2) as f64) as u32),
                ))?;
            }
            if e.dots {
                root.draw(&Circle::new((x + swatch / 2, y), px(4.0), e.color.filled()))?;
            }
            root.draw(&Text::new(e.label, (x + swatch + px(6.0), y), label_style.clone()))?;
            x += swatch + px(6.0) + widths[i] + gap;
        }
    }
    Ok(())
}

/// The loss chart's lines: earlier runs (thin, faded), this run's training loss, validation points
/// (in `val_color`: a race draws each entrant's line and points in one colour).
pub fn loss_lines(
    train: &[(usize, f32)],
    train_label: &str,
    val: &[(usize, f32)],
    (val_label, val_color): (&str, RGBColor),
    earlier: &[(String, Vec<(usize, f32)>)],
    dark: bool,
) -> Vec<Line> {
    let faded = if dark { RGBColor(0x70, 0x76, 0x80) } else { RGBColor(0xa8, 0xae, 0xb8) };
    let pts = |p: &[(usize, f32)]| p.iter().map(|&(s, l)| (s as f64, l as f64)).collect::<Vec<_>>();
    let mut lines: Vec<Line> = earlier
        .iter()
        .enumerate()
        .map(|(i, (label, p))| Line {
            label: format!("earlier: {label}"),
            color: if i + 1 == earlier.len() { PALETTE[3] } else { faded },
            width: 1,
            points: pts(p),
            dots: false,
            at_end: false,
        })
        .collect();
    let line =
        |label: &str, color, points, dots| Line { label: label.into(), color, width: 2, points, dots, at_end: false };
    lines.push(line(train_label, PALETTE[0], pts(train), false));
    lines.push(line(val_label, val_color, pts(val), true));
    lines
}

/// The loss of what needs no learning, as level lines across the run: a uniform guess among `vocab`
/// symbols (ln V), letter frequencies (unigram) and the previous symbol (bigram).
pub fn baseline_lines(vocab: usize, unigram: f64, bigram: f64, x_max: f64, dark: bool) -> Vec<Line> {
    let faded = if dark { RGBColor(0x8a, 0x90, 0x9a) } else { RGBColor(0x90, 0x96, 0xa0) };
    [
        (format!("uniform guess (ln {vocab})"), (vocab as f64).ln(), faded),
        ("letter frequencies (unigram)".to_string(), unigram, PALETTE[4]),
        ("previous symbol (bigram)".to_string(), bigram, PALETTE[2]),
    ]
    .into_iter()
    .map(|(label, y, color)| Line {
        label,
        color,
        width: 1,
        points: vec![(0.0, y), (x_max.max(1.0), y)],
        dots: false,
        at_end: true,
    })
    .collect()
}

/// Entropy lines, one per layer.
pub fn entropy_lines(entropy: &[(usize, Vec<f64>)]) -> Vec<Line> {
    let layers = entropy.first().map(|e| e.1.len()).unwrap_or(0);
    (0..layers)
        .map(|l| Line {
            label: format!("layer {l}"),
            color: PALETTE[l % PALETTE.len()],
            width: 2,
            points: entropy.iter().map(|(s, h)| (*s as f64, h[l])).collect(),
            dots: false,
            at_end: false,
        })
        .collect()
}
