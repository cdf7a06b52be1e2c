// LayerNorm over rows of C, mirroring engine/src/nn/layer_norm.rs: u = (x - mean) * rstd with the
// population variance and rstd = 1 / sqrt(var + eps); out = u * w + b. With `centre` 0 it is
// RMSNorm's forward (mean taken as 0: u = x / sqrt(mean(x²) + eps)); the backward is LayerNorm's.
// The gain and bias live in
// the flat parameter buffer at w_off and b_off; their gradients in the flat gradient buffer.
// Row kernels run one workgroup per row; the parameter-gradient kernel one invocation per column.

struct Params {
    n: u32,
    c: u32,
    w_off: u32,
    b_off: u32,
    eps: f32,
    centre: u32,
}

@group(0) @binding(0) var<storage, read> inp: array<f32>;         // x (forward) or dout (backward)
@group(0) @binding(1) var<storage, read> prm: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // out (forward) or dinp (backward, +=)
@group(0) @binding(3) var<storage, read_write> u: array<f32>;
@group(0) @binding(4) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(5) var<storage, read_write> grads: array<f32>; // backward: dweight, dbias (+=)
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let row = row_index(wg, nwg);
    if (row >= p.n) {
        return; // the grid's last line of workgroups runs past the rows
    }
    let base = row * p.c;
    let cs = f32(p.c);
    var s = 0.0;
    for (var j = li; j < p.c; j += 256u) {
        s += inp[base + j];
    }
    let mean = select(0.0, wg_sum(s, li) / cs, p.centre != 0u);
    var q = 0.0;
    for (var j = li; j < p.c; j += 256u) {
        let d = inp[base + j] - mean;
        q += d * d;
    }
    let r = 1.0 / sqrt(wg_sum(q, li) / cs + p.eps);
    if (li == 0u) {
        rstd[row] = r;
    }
    for (var j = li; j < p.c; j += 256u) {
        let uu = (inp[base + j] - mean) * r;
        u[base + j] = uu;
        out[base + j] = uu * prm[p.w_off + j] + prm[p.b_off + j];
    }
}

// dinp += rstd * (dy * w - mean(dy * w) - u * mean(dy * w * u)).
@compute @workgroup_size(256)
fn backward_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) li: u32) {
    let row = row_index(wg, nwg);
    if (row >= p.n) {
        return; // the grid's last line of workgroups runs past the rows
    }
    let base = row * p.c;
    let cs = f32(p.c);
    var a = 0.0;
    var b = 0.0;
    for (var j = li; j < p.c; j += 256u) {
        let du = inp[base + j] * prm[p.w_off + j];
        a += du;
        b += du * u[base + j];
    }
    let mean_du = wg_sum(a, li) / cs;
    let mean_du_u = wg_sum(b, li) / cs;
    let r = rstd[row];
    for (var j = li; j < p.c; j += 256u) {
        out[base + j] += r * (inp[base + j] * prm[p.w_off + j] - mean_du - u[base + j] * mean_du_u);
    }
}

// dweight[j] += sum_n dy * u, dbias[j] += sum_n dy.
@compute @workgroup_size(256)
fn backward_params(@builtin(global_invocation_id) gid: vec3<u32>) {
    let j = gid.x;
    if (j >= p.c) {
        return;
    }
    var dw = 0.0;
    var db = 0.0;
    for (var n = 0u; n < p.n; n++) {
        let dy = inp[n * p.c + j];
        dw += dy * u[n * p.c + j];
        db += dy;
    }
    grads[p.w_off + j] += dw;
    grads[p.b_off + j] += db;
}
