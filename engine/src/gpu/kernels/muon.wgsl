// Muon's element-wise kernels (engine/src/optim/muon.rs): the momentum of one weight matrix with
// the global gradient clip folded in, the scaling of its direction to unit Frobenius norm (into
// the (r, c), r <= c, layout the Newton-Schulz products use), the polynomial's diagonal, and the
// update. The Newton-Schulz products themselves are matmul ops.

struct Params {
    n: u32,        // elements of the matrix (rows * cols), or r (diag)
    off: u32,      // the weight's first element in the flat parameters and gradients
    rows: u32,     // the weight's shape (dout, din)
    cols: u32,
    mu: f32,
    nesterov: u32,
    max_norm: f32, // 0: no clipping
    a: f32,        // diag: added to the diagonal; update: max(1, rows/cols)^0.5
    wd: f32,
}

@group(0) @binding(0) var<storage, read_write> prm: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> mom: array<f32>;
@group(0) @binding(3) var<storage, read_write> dir: array<f32>;  // the direction, or P for diag
@group(0) @binding(4) var<storage, read_write> x: array<f32>;    // the (r, c) Newton-Schulz iterate
@group(0) @binding(5) var<storage, read> norm: array<f32>;       // [sum of squared gradients]
@group(0) @binding(6) var<storage, read> dir_sq: array<f32>;     // [sum of squared direction]
@group(0) @binding(7) var<storage, read> step: array<f32>;       // [lr]
@group(0) @binding(8) var<uniform> p: Params;

fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

// mom = mu mom + g, dir = g + mu mom (Nesterov) or mom, g clipped as optim/clip.rs clips.
@compute @workgroup_size(256)
fn momentum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n || !is_finite(norm[0])) {
        return;
    }
    let scale = clip_scale();
    let g = grads[p.off + i] * scale;
    let m = p.mu * mom[i] + g;
    mom[i] = m;
    dir[i] = select(m, g + p.mu * m, p.nesterov != 0u);
}

// x = dir / |dir|_F, transposed when rows > cols so that x is (r, c) with r <= c.
@compute @workgroup_size(256)
fn normalize(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    let v = dir[i] / sqrt(dir_sq[0]);
    let row = i / p.cols;
    let col = i % p.cols;
    if (p.rows <= p.cols) {
        x[i] = v;
    } else {
        x[col * p.rows + row] = v;
    }
}

// P += a I for P (n, n).
@compute @workgroup_size(256)
fn diag(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n) {
        return;
    }
    dir[i * p.n + i] += p.a;
}

// W -= lr (a x + wd W), x read back in the weight's layout; skipped when the gradient is not finite.
@compute @workgroup_size(256)
fn update(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p.n || !is_finite(norm[0])) {
        return;
    }
    let row = i / p.cols;
    let col = i % p.cols;
    let u = select(x[col * p.rows + row], x[i], p.rows <= p.cols);
    let w = prm[p.off + i];
    prm[p.off + i] = w - step[0] * (p.a * u + p.wd * w);
}
