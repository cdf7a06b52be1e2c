// CG-FAC's kernels (engine/src/optim/second_order.rs, cg.rs, kronecker.rs): the per-layer vectors
// live in `vecs` at element offsets, the CG scalars in `sc` (one slot block per layer, globals at 0,
// reduction partials after the layers). Every CG kernel first checks its layer's status, so a fixed
// list of `max_iters` iterations reproduces the CPU loop's early exit exactly: once a layer has
// converged or diverged its vectors stop changing.

struct Params {
    n: u32,     // elements (vector kernels), partials (dot_final), layers (kl), din (a_edge)
    a: u32,     // offsets in vecs (or in ext, see each kernel)
    b: u32,
    c: u32,
    d: u32,
    slot: u32,  // the layer's scalar block in sc (or the destination slot of dot_final)
    cols: u32,  // din + 1
    rows: u32,  // tokens (a_edge), workgroups (dot_partial)
    f0: f32,
    f1: f32,
    f2: f32,
    f3: f32,
}

@group(0) @binding(0) var<storage, read_write> vecs: array<f32>;
@group(0) @binding(1) var<storage, read_write> sc: array<f32>;
// A tensor of the trainer's: the flat gradients (gather), the parameters (update) or a layer's
// input rows (a_edge). Other kernels leave it alone.
@group(0) @binding(2) var<storage, read_write> ext: array<f32>;
@group(0) @binding(3) var<storage, read> norm: array<f32>; // [sum of squared gradients]
@group(0) @binding(4) var<uniform> p: Params;

// The slots of sc (LR, NU, STATUS, ...) and the STATUS values are put in front of this file from
// engine/src/gpu/cgfac/layout.rs.

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

fn finite(x: f32) -> bool {
    // NaN fails both comparisons; +-inf fails the bound.
    return abs(x) <= 0x1.fffffep+127f; // the largest f32
}

fn is_active() -> bool {
    return sc[p.slot + STATUS] == ACTIVE;
}

// vecs[a..a+n] = 0 (a cold start).
@compute @workgroup_size(256)
fn fill_zero(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        vecs[p.a + i] = 0.0;
    }
}

// vecs[b..] = vecs[a..]: the lambda X term, before the matmul adds G X A onto it.
@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        vecs[p.b + i] = vecs[p.a + i];
    }
}

// r (c) = grad (a) - A x (b); p (d) = r.
@compute @workgroup_size(256)
fn residual(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        let r = vecs[p.a + i] - vecs[p.b + i];
        vecs[p.c + i] = r;
        vecs[p.d + i] = r;
    }
}


// First pass of <vecs[a..], vecs[b..]>: workgroup w of p.rows writes sc[c + w].
@compute @workgroup_size(256)
fn dot_partial(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    var s = 0.0;
    for (var i = wg.x * 256u + li; i < p.n; i += p.rows * 256u) {
        s += vecs[p.a + i] * vecs[p.b + i];
    }
    let total = wg_sum(s, li);
    if (li == 0u) {
        sc[p.c + wg.x] = total;
    }
}

// Second pass: sc[slot] = sum of the n partials at sc[c..].
@compute @workgroup_size(256)
fn dot_final(@builtin(local_invocation_index) li: u32) {
    var s = 0.0;
    for (var i = li; i < p.n; i += 256u) {
        s += sc[p.c + i];
    }
    let total = wg_sum(s, li);
    if (li == 0u) {
        sc[p.slot] = total;
    }
}

// After r0 = |b|^2 and rr = |r|^2: relative residual and whether to iterate (f0: tolerance).
@compute @workgroup_size(1)
fn start() {
    let s = p.slot;
    // |b| measures the residual, as on the CPU; the floor keeps a zero gradient finite.
    let r0 = max(sc[s + R0], 0x1p-126f);
    sc[s + R0] = r0;
    let rel = sqrt(sc[s + RR] / r0);
    sc[s + REL] = rel;
    sc[s + ITERS] = 0.0;
    sc[s + FELL] = 0.0;
    sc[s + STATUS] = select(DONE, ACTIVE, rel * rel >= p.f0);
}

// After DOT = p^T A p: non-positive or non-finite curvature diverges, else alpha = rr / pAp.
@compute @workgroup_size(1)
fn alpha() {
    if (!is_active()) {
        return;
    }
    let s = p.slot;
    let pap = sc[s + DOT];
    if (!(pap > 0.0) || !finite(pap)) {
        sc[s + STATUS] = DIVERGED;
    } else {
        sc[s + ALPHA] = sc[s + RR] / pap;
    }
}

// x (a) += alpha p (b); r (c) -= alpha Ap (d).
@compute @workgroup_size(256)
fn update_xr(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n && is_active()) {
        let al = sc[p.slot + ALPHA];
        vecs[p.a + i] += al * vecs[p.b + i];
        vecs[p.c + i] -= al * vecs[p.d + i];
    }
}

// After DOT = |r|^2: beta, the iteration count and the stopping test (f0: tolerance, f1: max
// iterations).
@compute @workgroup_size(1)
fn beta() {
    if (!is_active()) {
        return;
    }
    let s = p.slot;
    let rr = sc[s + DOT];
    sc[s + BETA] = rr / sc[s + RR];
    sc[s + RR] = rr;
    let iters = sc[s + ITERS] + 1.0;
    sc[s + ITERS] = iters;
    let rel = sqrt(rr / sc[s + R0]);
    sc[s + REL] = rel;
    if (!finite(rel)) {
        sc[s + STATUS] = DIVERGED;
    } else if (rel * rel < p.f0 || iters >= p.f1) {
        sc[s + STATUS] = DONE;
    }
}

// p (a) = r (b) + beta p.
@compute @workgroup_size(256)
fn update_p(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n && is_active()) {
        vecs[p.a + i] = vecs[p.b + i] + sc[p.slot + BETA] * vecs[p.a + i];
    }
}

// After DOT = |x|^2: a diverged solve or a non-finite x falls back to the gradient.
@compute @workgroup_size(1)
fn fallback_flag() {
    let s = p.slot;
    sc[s + FELL] = select(0.0, 1.0, sc[s + STATUS] == DIVERGED || !finite(sc[s + DOT]));
}

// x (a) = grad (b) where the layer fell back.
@compute @workgroup_size(256)
fn fallback(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n && sc[p.slot + FELL] != 0.0) {
        vecs[p.a + i] = vecs[p.b + i];
    }
}

// KL-clip over the n layers whose slot blocks start at `slot` with stride `cols`:
// nu = min(1, sqrt(kappa / (lr^2 sum <x, grad>))) (f0: kappa); BAD when the step is not finite.
@compute @workgroup_size(1)
fn kl() {
    var xg = 0.0;
    var fell = 0.0;
    for (var l = 0u; l < p.n; l++) {
        xg += sc[p.slot + l * p.cols + XDOTG];
        fell += sc[p.slot + l * p.cols + FELL];
    }
    let lr = sc[LR];
    var nu = 1.0;
    if (p.f0 > 0.0 && xg > 0.0) {
        nu = min(1.0, sqrt(p.f0 / (lr * lr * xg)));
    }
    sc[XG] = xg;
    sc[NU] = nu;
    sc[SCALE] = lr * nu;
    sc[BAD] = select(0.0, 1.0, !finite(nu) || !finite(xg));
    sc[FALLBACKS] = fell;
}

// [dW | db] (vecs[a..], dout x cols) from the flat gradients in ext (W at b, bias at c), times the
// global-norm clip the CPU applies before the optimizer (f0: max norm, 0 off), as adamw.wgsl.
@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let total = sqrt(norm[0]);
    var clip = 1.0;
    if (p.f0 > 0.0 && total > p.f0) {
        clip = p.f0 / total;
    }
    let din = p.cols - 1u;
    let o = i / p.cols;
    let j = i % p.cols;
    var g: f32;
    if (j < din) {
        g = ext[p.b + o * din + j];
    } else {
        g = ext[p.c + o];
    }
    vecs[p.a + i] = g * clip;
}

// Momentum and the step of one layer (parameters in ext: W at c, bias at d): v (b) = mu v + x (a);
// W -= scale v + lr wd W; b -= scale v (f0: mu, f1: weight decay). Skipped when the step is bad.
@compute @workgroup_size(256)
fn update(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n || sc[BAD] != 0.0) {
        return;
    }
    let v = p.f0 * vecs[p.b + i] + vecs[p.a + i];
    vecs[p.b + i] = v;
    let din = p.cols - 1u;
    let o = i / p.cols;
    let j = i % p.cols;
    let scale = sc[SCALE];
    if (j < din) {
        let at = p.c + o * din + j;
        ext[at] -= scale * v + sc[LR] * p.f1 * ext[at];
    } else {
        ext[p.d + o] -= scale * v;
    }
}

// The ones column of A = keep A + (1 - keep) a~^T a~ / N (A at vecs[a..], din1 = cols): the input
// means (ext: rows x din) in the last row and column, 1 in the corner (f0: keep). The a^T a block
// is a matmul.
@compute @workgroup_size(256)
fn a_edge(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = flat(gid, nwg);
    let din = p.n;
    if (j > din) {
        return;
    }
    let keep = p.f0;
    let corner = p.a + din * p.cols + din;
    if (j == din) {
        vecs[corner] = keep * vecs[corner] + (1.0 - keep);
        return;
    }
    var s = 0.0;
    for (var r = 0u; r < p.rows; r++) {
        s += ext[r * din + j];
    }
    let mean = s / f32(p.rows);
    let col = p.a + j * p.cols + din;
    let row = p.a + din * p.cols + j;
    vecs[col] = keep * vecs[col] + (1.0 - keep) * mean;
    vecs[row] = keep * vecs[row] + (1.0 - keep) * mean;
}

// The matrix-free products' batch operands, stored per layer after its backward (the binding
// `vecs` is the layer's batch tensor here).

// a~ = [a, 1] (n = rows x cols elements, cols = din + 1) from the layer's input rows in ext
// (rows x din).
@compute @workgroup_size(256)
fn fold(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let din = p.cols - 1u;
    let r = i / p.cols;
    let j = i % p.cols;
    if (j < din) {
        vecs[i] = ext[r * din + j];
    } else {
        vecs[i] = 1.0;
    }
}

// vecs[a..a+n] = f0 ext[b..b+n]: the per-token gradients g = N dy.
@compute @workgroup_size(256)
fn scale_copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        vecs[p.a + i] = p.f0 * ext[p.b + i];
    }
}

// The exact Fisher's diagonal: for each of the p.rows rows n of P = g X (vecs, rows x cols),
// s_n = f0 <P_n, a~_n> (a~ in ext, rows x cols, f0 = 1/N), then P_n = s_n a~_n in place. One
// workgroup per row, striding by the number of workgroups.
@compute @workgroup_size(256)
fn fisher_rows(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    for (var r = wg.x; r < p.rows; r += nwg.x) {
        let base = r * p.cols;
        var s = 0.0;
        for (var j = li; j < p.cols; j += 256u) {
            s += vecs[base + j] * ext[base + j];
        }
        // wg_sum ends with a barrier: every thread has the sum before the next row reuses the memory.
        let sn = wg_sum(s, li) * p.f0;
        for (var j = li; j < p.cols; j += 256u) {
            vecs[base + j] = sn * ext[base + j];
        }
    }
}
