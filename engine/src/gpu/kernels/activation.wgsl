// The MLP nonlinearity, forward and backward, mirroring engine/src/activation.rs (GELU in its
// tanh form, tanh through one exp exactly as the CPU code computes it).

struct Params {
    n: u32,
    kind: u32, // 0 GELU, 1 ReLU, 2 identity
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
    }
    y[i] = d;
}
