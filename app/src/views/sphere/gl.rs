//! The ball and the tokens in 3-D on WebGL2: the sphere lit from the upper left (a shaded disc whose
//! normal is computed per pixel), and each token a lit ball of its own, smaller and fainter on the far
//! side. It renders into an offscreen canvas that the 2-D view draws first and then puts trails,
//! arcs and labels over; where WebGL2 is missing the 2-D view draws flat discs instead.

use wasm_bindgen::JsCast;
use web_sys::{HtmlCanvasElement, WebGl2RenderingContext as GL, WebGlBuffer, WebGlProgram, WebGlShader};

const BALL_VS: &str = r"#version 300 es
in vec2 corner;
uniform vec3 ball; // centre x, y and radius in clip units
out vec2 local;
void main() {
    local = corner;
    gl_Position = vec4(ball.xy + corner * ball.z, 0.0, 1.0);
}";

const BALL_FS: &str = r"#version 300 es
precision mediump float;
in vec2 local;
uniform vec3 lit;
uniform vec3 shade;
uniform float pixel; // one pixel in units of the ball's radius
out vec4 color;
void main() {
    float r2 = dot(local, local);
    if (r2 > 1.0) discard;
    vec3 n = vec3(local.x, local.y, sqrt(1.0 - r2));
    float light = max(dot(n, normalize(vec3(-0.45, 0.55, 0.7))), 0.0);
    float edge = smoothstep(1.0, 1.0 - 2.0 * pixel, sqrt(r2));
    color = vec4(mix(shade, lit, 0.25 + 0.75 * light), edge);
}";

const DOT_VS: &str = r"#version 300 es
in vec2 at;
in vec4 rgba;
in float size;
out vec4 tint;
void main() {
    tint = rgba;
    gl_PointSize = size;
    gl_Position = vec4(at, 0.0, 1.0);
}";

const DOT_FS: &str = r"#version 300 es
precision mediump float;
in vec4 tint;
uniform vec3 rim;
out vec4 color;
void main() {
    vec2 p = gl_PointCoord * 2.0 - 1.0;
    p.y = -p.y;
    float r2 = dot(p, p);
    if (r2 > 1.0) discard;
    vec3 n = vec3(p, sqrt(1.0 - r2));
    float light = max(dot(n, normalize(vec3(-0.45, 0.55, 0.7))), 0.0);
    float spec = pow(max(dot(reflect(-normalize(vec3(-0.45, 0.55, 0.7)), n), vec3(0.0, 0.0, 1.0)), 0.0), 24.0);
    vec3 c = tint.rgb * (0.55 + 0.5 * light) + 0.35 * spec;
    // A thin rim in the background colour keeps touching dots apart.
    c = mix(c, rim, smoothstep(0.78, 1.0, sqrt(r2)));
    color = vec4(c, tint.a);
}";

/// One token as WebGL2 draws it: centre (CSS pixels), radius (CSS pixels), colour and opacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dot {
    pub x: f64,
    pub y: f64,
    pub radius: f64,
    pub rgb: (u8, u8, u8),
    pub alpha: f64,
}

pub struct Renderer {
    canvas: HtmlCanvasElement,
    gl: GL,
    ball: WebGlProgram,
    dots: WebGlProgram,
    quad: WebGlBuffer,
    instances: WebGlBuffer,
}

fn compile(gl: &GL, kind: u32, source: &str) -> Result<WebGlShader, String> {
    let shader = gl.create_shader(kind).ok_or("no shader")?;
    gl.shader_source(&shader, source);
    gl.compile_shader(&shader);
    if gl.get_shader_parameter(&shader, GL::COMPILE_STATUS).as_bool() != Some(true) {
        return Err(gl.get_shader_info_log(&shader).unwrap_or_default());
    }
    Ok(shader)
}

fn program(gl: &GL, vs: &str, fs: &str) -> Result<WebGlProgram, String> {
    let p = gl.create_program().ok_or("no program")?;
    gl.attach_shader(&p, &compile(gl, GL::VERTEX_SHADER, vs)?);
    gl.attach_shader(&p, &compile(gl, GL::FRAGMENT_SHADER, fs)?);
    gl.link_program(&p);
    if gl.get_program_parameter(&p, GL::LINK_STATUS).as_bool() != Some(true) {
        return Err(gl.get_program_info_log(&p).unwrap_or_default());
    }
    Ok(p)
}

fn floats(rgb: (u8, u8, u8)) -> [f32; 3] {
    [rgb.0 as f32 / 255.0, rgb.1 as f32 / 255.0, rgb.2 as f32 / 255.0]
}

/// The WebGL renderer's name when it is software, asked of a throwaway context.
pub fn software_renderer_name() -> Option<String> {
    let canvas: HtmlCanvasElement = web_sys::window()?.document()?.create_element("canvas").ok()?.dyn_into().ok()?;
    let gl: GL = canvas.get_context("webgl2").ok().flatten()?.dyn_into().ok()?;
    let name = software_renderer(&gl);
    // Chromium keeps only so many contexts: give this one back now.
    if let Some(lose) = gl.get_extension("WEBGL_lose_context").ok().flatten() {
        let _ = js_sys::Reflect::get(&lose, &"loseContext".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .map(|f| f.call0(&lose));
    }
    name
}

/// Why a software WebGL is not used: the start of the renderer's error then.
pub const SOFTWARE: &str = "WebGL is drawn in software here, slower than the 2-D canvas";

/// The renderer's name when WebGL runs on the CPU (SwiftShader, llvmpipe: what a machine whose GPU
/// is blocklisted gets): there every frame is rasterised in software and read back, and a class saw
/// the page take 20 s to answer Pause.
fn software_renderer(gl: &GL) -> Option<String> {
    // The unmasked name, when the browser gives it; the masked one otherwise.
    const UNMASKED_RENDERER_WEBGL: u32 = 0x9246;
    let unmasked = gl.get_extension("WEBGL_debug_renderer_info").ok().flatten().map(|_| UNMASKED_RENDERER_WEBGL);
    let name = gl.get_parameter(unmasked.unwrap_or(GL::RENDERER)).ok()?.as_string()?;
    let lower = name.to_lowercase();
    ["swiftshader", "llvmpipe", "softpipe", "lavapipe", "software"].iter().any(|s| lower.contains(s)).then_some(name)
}

impl Renderer {
    /// A renderer on an offscreen canvas, or why WebGL2 is not available (the 2-D view then draws alone).
    /// A renderer, unless WebGL2 is missing or (without `software_ok`) drawn in software.
    pub fn new(software_ok: bool) -> Result<Renderer, String> {
        let canvas: HtmlCanvasElement = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.create_element("canvas").ok())
            .and_then(|c| c.dyn_into().ok())
            .ok_or("no canvas")?;
        // Kept after each frame: the 2-D view copies it (and a PNG with it) after the frame.
        let options = web_sys::WebGlContextAttributes::new();
        options.set_preserve_drawing_buffer(true);
        options.set_antialias(true);
        let gl: GL = canvas
            .get_context_with_context_options("webgl2", &options)
            .ok()
            .flatten()
            .and_then(|c| c.dyn_into().ok())
            .ok_or("this browser has no WebGL2")?;
        if let Some(name) = software_renderer(&gl).filter(|_| !software_ok) {
            return Err(format!("{SOFTWARE}: {name}"));
        }
        let ball = program(&gl, BALL_VS, BALL_FS)?;
        let dots = program(&gl, DOT_VS, DOT_FS)?;
        let quad = gl.create_buffer().ok_or("no buffer")?;
        gl.bind_buffer(GL::ARRAY_BUFFER, Some(&quad));
        let corners: [f32; 8] = [-1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0];
        gl.buffer_data_with_array_buffer_view(
            GL::ARRAY_BUFFER,
            &js_sys::Float32Array::from(&corners[..]),
            GL::STATIC_DRAW,
        );
        let instances = gl.create_buffer().ok_or("no buffer")?;
        Ok(Renderer { canvas, gl, ball, dots, quad, instances })
    }

    /// Renders the ball (centre and radius in CSS pixels of a `size`-pixel square view) and the dots,
    /// in the order given (back to front), at `dpr` device pixels per CSS pixel; returns the canvas.
    pub fn render(
        &self,
        size: f64,
        dpr: f64,
        ball: (f64, f64, f64),
        dots: &[Dot],
        dark: bool,
    ) -> Result<&HtmlCanvasElement, String> {
        let gl = &self.gl;
        if gl.is_context_lost() {
            return Err("the WebGL2 context was lost".into());
        }
        let px = (size * dpr).round() as u32;
        if self.canvas.width() != px || self.canvas.height() != px {
            self.canvas.set_width(px);
            self.canvas.set_height(px);
        }
        gl.viewport(0, 0, px as i32, px as i32);
        let bg: (u8, u8, u8) = if dark { (0x16, 0x18, 0x1d) } else { (0xff, 0xff, 0xff) };
        let b = floats(bg);
        gl.clear_color(b[0], b[1], b[2], 1.0);
        gl.clear(GL::COLOR_BUFFER_BIT);
        gl.enable(GL::BLEND);
        gl.blend_func(GL::SRC_ALPHA, GL::ONE_MINUS_SRC_ALPHA);
        let clip = |x: f64, y: f64| ((2.0 * x / size - 1.0) as f32, (1.0 - 2.0 * y / size) as f32);

        gl.use_program(Some(&self.ball));
        let (cx, cy) = clip(ball.0, ball.1);
        let (lit, shade) =
            if dark { ((0x33, 0x39, 0x44), (0x0c, 0x0e, 0x11)) } else { ((0xff, 0xff, 0xff), (0xc9, 0xd0, 0xdb)) };
        let uniform = |name: &str| gl.get_uniform_location(&self.ball, name);
        gl.uniform3f(uniform("ball").as_ref(), cx, cy, (2.0 * ball.2 / size) as f32);
        let [r, g, bl] = floats(lit);
        gl.uniform3f(uniform("lit").as_ref(), r, g, bl);
        let [r, g, bl] = floats(shade);
        gl.uniform3f(uniform("shade").as_ref(), r, g, bl);
        gl.uniform1f(uniform("pixel").as_ref(), (1.0 / (ball.2 * dpr)) as f32);
        let corner = gl.get_attrib_location(&self.ball, "corner") as u32;
        gl.bind_buffer(GL::ARRAY_BUFFER, Some(&self.quad));
        gl.enable_vertex_attrib_array(corner);
        gl.vertex_attrib_pointer_with_i32(corner, 2, GL::FLOAT, false, 0, 0);
        gl.draw_arrays(GL::TRIANGLE_STRIP, 0, 4);
        gl.disable_vertex_attrib_array(corner);

        // One vertex per dot: at (2), rgba (4), size (1).
        let data: Vec<f32> = dots
            .iter()
            .flat_map(|d| {
                let (x, y) = clip(d.x, d.y);
                let [r, g, b] = floats(d.rgb);
                [x, y, r, g, b, d.alpha as f32, (2.0 * d.radius * dpr) as f32]
            })
            .collect();
        gl.use_program(Some(&self.dots));
        gl.uniform3f(gl.get_uniform_location(&self.dots, "rim").as_ref(), b[0], b[1], b[2]);
        gl.bind_buffer(GL::ARRAY_BUFFER, Some(&self.instances));
        gl.buffer_data_with_array_buffer_view(
            GL::ARRAY_BUFFER,
            &js_sys::Float32Array::from(&data[..]),
            GL::DYNAMIC_DRAW,
        );
        let stride = 7 * 4;
        let mut attributes = Vec::new();
        for (name, count, offset) in [("at", 2, 0), ("rgba", 4, 2), ("size", 1, 6)] {
            let loc = gl.get_attrib_location(&self.dots, name);
            if loc >= 0 {
                gl.enable_vertex_attrib_array(loc as u32);
                gl.vertex_attrib_pointer_with_i32(loc as u32, count, GL::FLOAT, false, stride, offset * 4);
                attributes.push(loc as u32);
            }
        }
        gl.draw_arrays(GL::POINTS, 0, dots.len() as i32);
        attributes.into_iter().for_each(|a| gl.disable_vertex_attrib_array(a));
        Ok(&self.canvas)
    }
}
