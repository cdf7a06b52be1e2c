// Rotary positions, mirroring engine/src/nn/rotary.rs: in each head of each row, the first `dims`
// dimensions turn in pairs (i, i + dims/2) by the angle of the row's position and pair i, whose
// cosines and sines the table holds (computed in f64 on the CPU: T rows of dims/2, cosines first).
// One invocation per (row, head, pair).

struct Params {
    n: u32, // rows, B * T
    t: u32,
    nh: u32,
    hs: u32,
    half: u32,
}

@group(0) @binding(0) var<storage, read> table: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n * p.nh * p.half) {
        return;
    }
    let pair = i % p.half;
    let head = (i / p.half) % p.nh;
    let row = i / (p.half * p.nh);
    let at = (row % p.t) * p.half + pair;
    let c = table[at];
    let s = table[p.t * p.half + at];
    let base = row * p.nh * p.hs + head * p.hs;
    let x1 = x[base + pair];
    let x2 = x[base + pair + p.half];
    x[base + pair] = x1 * c - x2 * s;
    x[base + pair + p.half] = x2 * c + x1 * s;
}
