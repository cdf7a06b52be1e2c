// Attention's row softmax over (B, NH, T, T) scores, one workgroup per row, in place; row r is
// query position r % T, which sees keys 0..=r % T when causal. Masked entries become exactly 0,
// so the backward pass needs no mask: dS = P * (dP - sum_j P dP), as engine/src/attention.rs.

struct Params {
    t: u32,
    causal: u32,
    rows: u32,
}

@group(0) @binding(0) var<storage, read> prob: array<f32>;       // backward only: P
@group(0) @binding(1) var<storage, read_write> s: array<f32>;    // scores -> P, or dP -> dS
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let row = row_index(wg, nwg);
    if (row >= p.rows) {
        return; // the grid's last line of workgroups runs past the rows
    }
    let base = row * p.t;
    let visible = select(p.t, row % p.t + 1u, p.causal != 0u);
    var m = -3.402823e38;
    for (var j = li; j < visible; j += 256u) {
        m = max(m, s[base + j]);
    }
    m = wg_max(m, li);
    var sum = 0.0;
    for (var j = li; j < visible; j += 256u) {
        let e = exp(s[base + j] - m);
        s[base + j] = e;
        sum += e;
    }
    sum = wg_sum(sum, li);
    for (var j = li; j < p.t; j += 256u) {
        s[base + j] = select(0.0, s[base + j] / sum, j < visible);
    }
}

@compute @workgroup_size(256)
fn backward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let row = row_index(wg, nwg);
    if (row >= p.rows) {
        return;
    }
    let base = row * p.t;
    var dot = 0.0;
    for (var j = li; j < p.t; j += 256u) {
        dot += prob[base + j] * s[base + j];
    }
    dot = wg_sum(dot, li);
    for (var j = li; j < p.t; j += 256u) {
        s[base + j] = prob[base + j] * (s[base + j] - dot);
    }
}
