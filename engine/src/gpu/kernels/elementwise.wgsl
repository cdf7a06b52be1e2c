// Flat vector kernels over x (read) and y (read_write), addressed from element offsets.
// 1-D grids may spill into y (WebGPU caps x at 65535 workgroups): i = gid.x + gid.y * nwg.x * 256.

struct Params {
    n: u32,      // elements (add, broadcast_rows), columns (col_sum), or elements to reduce
    cols: u32,   // row length (broadcast_rows, col_sum)
    rows: u32,   // rows (col_sum)
    x_off: u32,
    y_off: u32,
    square: u32, // reduce: sum of squares instead of plain sum
    groups: u32, // reduce: workgroups in the grid
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

// y += x (residual connections).
@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        y[p.y_off + i] += x[p.x_off + i];
    }
}

// Every row of y (n elements, rows of `cols`) = the vector x (a linear layer's bias).
@compute @workgroup_size(256)
fn broadcast_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i < p.n) {
        y[p.y_off + i] = x[p.x_off + i % p.cols];
    }
}

// y[j] += sum over rows of x[r, j] (a bias gradient); one invocation per column, rows in order.
@compute @workgroup_size(256)
fn col_sum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = flat(gid, nwg);
    if (j < p.cols) {
        var s = 0.0;
        for (var r = 0u; r < p.rows; r++) {
            s += x[p.x_off + r * p.cols + j];
        }
        y[p.y_off + j] += s;
    }
}

// Workgroup w of `groups` writes y[w] = sum (or sum of squares) of its grid-strided share of x;
// a second pass with one workgroup sums the partials. Fixed order, so results are reproducible.
@compute @workgroup_size(256)
fn reduce(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    var s = 0.0;
    for (var i = wg.x * 256u + li; i < p.n; i += p.groups * 256u) {
        let v = x[p.x_off + i];
        s += select(v, v * v, p.square != 0u);
    }
    let total = wg_sum(s, li);
    if (li == 0u) {
        y[p.y_off + wg.x] = total;
    }
}
