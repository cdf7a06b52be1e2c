// Softmax cross-entropy over rows of V, mirroring engine/src/loss.rs: logits become probabilities
// in place; the mean is over rows whose target is not IGNORE (u32::MAX).
// stats = [mean loss, counted rows], computed on the GPU so the backward pass needs no readback.

struct Params {
    n: u32,
    v: u32,
}

@group(0) @binding(0) var<storage, read_write> probs: array<f32>;   // (N, V) logits -> probabilities
@group(0) @binding(1) var<storage, read> targets: array<u32>;
@group(0) @binding(2) var<storage, read_write> rows: array<f32>;    // (N, 2): loss, counted
@group(0) @binding(3) var<storage, read_write> stats: array<f32>;   // mean loss, count
@group(0) @binding(4) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

const IGNORE: u32 = 0xffffffffu;

var<workgroup> red2: array<f32, 256>;

@compute @workgroup_size(256)
fn forward(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) li: u32) {
    let row = row_index(wg, nwg);
    if (row >= p.n) {
        return; // the grid's last line of workgroups runs past the rows
    }
    let base = row * p.v;
    var m = -3.402823e38;
    for (var j = li; j < p.v; j += 256u) {
        m = max(m, probs[base + j]);
    }
    m = wg_max(m, li);
    var s = 0.0;
    for (var j = li; j < p.v; j += 256u) {
        let e = exp(probs[base + j] - m);
        probs[base + j] = e;
        s += e;
    }
    s = wg_sum(s, li);
    for (var j = li; j < p.v; j += 256u) {
        probs[base + j] /= s;
    }
    workgroupBarrier();
    if (li == 0u) {
        let t = targets[row];
        if (t == IGNORE) {
            rows[2u * row] = 0.0;
            rows[2u * row + 1u] = 0.0;
        } else {
            rows[2u * row] = -log(probs[base + t]);
            rows[2u * row + 1u] = 1.0;
        }
    }
}

// One workgroup: stats = [sum loss / count (0 when nothing counts), count].
@compute @workgroup_size(256)
fn finish(@builtin(local_invocation_index) li: u32) {
    var l = 0.0;
    var c = 0.0;
    for (var r = li; r < p.n; r += 256u) {
        l += rows[2u * r];
        c += rows[2u * r + 1u];
    }
    red[li] = l;
    red2[li] = c;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            red[li] += red[li + w];
            red2[li] += red2[li + w];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        stats[0] = select(0.0, red[0] / red2[0], red2[0] > 0.0);
        stats[1] = red2[0];
    }
}

// dlogits = (p - onehot(target)) / max(count, 1) on counted rows, 0 elsewhere.
@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n * p.v) {
        return;
    }
    let row = i / p.v;
    let t = targets[row];
    if (t == IGNORE) {
        dlogits[i] = 0.0;
        return;
    }
    let scale = 1.0 / max(stats[1], 1.0);
    dlogits[i] = probs[i] * scale - select(0.0, scale, i % p.v == t);
}
