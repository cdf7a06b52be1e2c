// The MLP nonlinearity, forward and backward, mirroring engine/src/nn/activation.rs (GELU in its
// tanh form, tanh through one exp exactly as the CPU code computes it; for real models GELU with
// the normal CDF, through Abramowitz and Stegun's erf 7.1.26 (within 1.5e-7), and SiLU). Gated
// (a Llama's MLP), the forward multiplies by `dout`'s element: y = act(gate) * up.

struct Params {
    n: u32,
    kind: u32, // 0 GELU, 1 ReLU, 2 identity, 3 exact GELU, 4 SiLU
    gated: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;     // pre-activation
@group(0) @binding(1) var<storage, read> dout: array<f32>;  // backward only
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const GELU_K: f32 = 0.7978845608028654;
const GELU_C: f32 = 0.044715;

fn tanh_exp(v: f32) -> f32 {
    return 1.0 - 2.0 / (exp(2.0 * v) + 1.0);
}

fn erf(v: f32) -> f32 {
    let a = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(v) * (1.0 - poly * exp(-a * a));
}

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let v = x[i];
    var o = v;
    if (p.kind == 0u) {
        o = 0.5 * v * (1.0 + tanh_exp(GELU_K * (v + GELU_C * v * v * v)));
    } else if (p.kind == 1u) {
        o = max(v, 0.0);
    } else if (p.kind == 3u) {
        o = 0.5 * v * (1.0 + erf(v * 0.7071067811865476));
    } else if (p.kind == 4u) {
        o = v * sigmoid(v);
    }
    if (p.gated != 0u) {
        o *= dout[i];
    }
    y[i] = o;
}

@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let v = x[i];
    let g = dout[i];
    var d = g;
    if (p.kind == 0u) {
        let th = tanh_exp(GELU_K * (v + GELU_C * v * v * v));
        let sech2 = 1.0 - th * th;
        d = g * (0.5 * (1.0 + th) + 0.5 * v * sech2 * GELU_K * (1.0 + 3.0 * GELU_C * v * v));
    } else if (p.kind == 1u) {
        d = select(0.0, g, v > 0.0);
    } else if (p.kind == 3u) {
        d = g * (0.5 * (1.0 + erf(v * 0.7071067811865476)) + v * exp(-0.5 * v * v) * 0.3989422804014327);
    } else if (p.kind == 4u) {
        let s = sigmoid(v);
        d = g * s * (1.0 + v * (1.0 - s));
    }
    y[i] = d;
}
