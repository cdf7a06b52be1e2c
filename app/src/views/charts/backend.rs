//! plotters' canvas backend, measuring text with the canvas itself. plotters-canvas sizes a label by
//! putting a `<span>` into the page and reading its `offsetHeight`, which lays the whole page out
//! again for every label; with the charts redrawn as the numbers arrive, that was most of the
//! main thread's 50-90 ms long tasks while training. `measureText` needs no layout.

use plotters::prelude::DrawingBackend;
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind};
use plotters_canvas::CanvasBackend;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

type Error = DrawingErrorKind<<CanvasBackend as DrawingBackend>::ErrorType>;

pub struct ChartCanvas {
    inner: CanvasBackend,
    context: CanvasRenderingContext2d,
}

impl ChartCanvas {
    pub fn new(canvas: HtmlCanvasElement) -> Option<Self> {
        let context = crate::views::canvas::context(&canvas)?;
        Some(ChartCanvas { inner: CanvasBackend::with_canvas_object(canvas)?, context })
    }

    /// Width and height of `text` in the CSS font `font` (as `draw_text` sets it): the advance
    /// width, and the font's ascent plus descent, as the span's inline box was.
    pub fn text_size(&self, text: &str, font: &str) -> (u32, u32) {
        self.context.set_font(font);
        match self.context.measure_text(text) {
            Ok(m) => {
                let height = m.font_bounding_box_ascent() + m.font_bounding_box_descent();
                (m.width().ceil() as u32, height.ceil() as u32)
            }
            Err(_) => (0, 0),
        }
    }
}

/// The CSS font plotters-canvas draws a text style in.
pub fn css_font<S: BackendTextStyle>(style: &S) -> String {
    format!("{} {}px {}", style.style().as_str(), style.size(), style.family().as_str())
}

impl DrawingBackend for ChartCanvas {
    type ErrorType = <CanvasBackend as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), Error> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), Error> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Error> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result<(), Error> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Error> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Error> {
        self.inner.draw_path(path, style)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Error> {
        self.inner.fill_polygon(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Error> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn draw_text<S: BackendTextStyle>(&mut self, text: &str, style: &S, pos: BackendCoord) -> Result<(), Error> {
        self.inner.draw_text(text, style, pos)
    }

    fn estimate_text_size<S: BackendTextStyle>(&self, text: &str, style: &S) -> Result<(u32, u32), Error> {
        Ok(self.text_size(text, &css_font(style)))
    }
}
