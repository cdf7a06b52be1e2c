// What both matmul kernels (matmul.wgsl, matmul_wide.wgsl) share, prepended to each: the op's
// uniform and where a workgroup's tile lies.
//
// Element (i, j) of a matrix is at off + zo * bo + zi * bi + i * rs + j * cs, where the batch index
// z splits into (zo, zi) = (z / inner, z % inner): attention's (batch, head). z is workgroup_id.z,
// plus nwg.z for every line of row tiles in y when the batches outnumber a dimension's 65535.
// Strides make transposes free, as in the CPU engine's matmul views.

struct Params {
    m: u32, n: u32, k: u32, inner: u32,
    a_off: u32, a_rs: u32, a_cs: u32, a_bo: u32, a_bi: u32,
    b_off: u32, b_rs: u32, b_cs: u32, b_bo: u32, b_bi: u32,
    c_off: u32, c_rs: u32, c_cs: u32, c_bo: u32, c_bi: u32,
    alpha: f32, beta: f32,
    batches: u32,
    zeros: u32,
    // matmul_wide.wgsl only: whether A's and B's vec4s run along k.
    a_k: u32, b_k: u32,
}

// A and B are bindings 0 and 1, typed by each kernel.
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// A workgroup's tile of C: its batch's element offsets, its first row and column, and the range
// of k it multiplies over.
struct Tile {
    live: bool, // false for the spare workgroups of the last line of batches
    a0: u32, b0: u32, c0: u32,
    row0: u32, col0: u32,
    k_begin: u32, k_end: u32,
}

fn tile_of(wg: vec3<u32>, nwg: vec3<u32>, size: u32) -> Tile {
    let row_tiles = (p.m + size - 1u) / size;
    let z = (wg.y / row_tiles) * nwg.z + wg.z;
    let zo = z / p.inner;
    let zi = z % p.inner;
    let row0 = (wg.y % row_tiles) * size;
    let col0 = wg.x * size;
    // Causal attention's triangles (Zeros in matmul.rs); row0 and the tile are multiples of the
    // kernels' panel depth.
    var k_begin = 0u;
    var k_end = p.k;
    if (p.zeros == 1u && col0 > row0) {
        k_end = 0u; // a tile wholly above C's diagonal
    } else if (p.zeros == 2u) {
        k_end = min(p.k, row0 + size);
    } else if (p.zeros == 3u) {
        k_begin = row0;
    }
    return Tile(z < p.batches, p.a_off + zo * p.a_bo + zi * p.a_bi, p.b_off + zo * p.b_bo + zi * p.b_bi,
                p.c_off + zo * p.c_bo + zi * p.c_bi, row0, col0, k_begin, k_end);
}

// C = alpha * acc + beta * C at (i, j), inside C; beta = 0 must not read C: it may hold anything,
// NaN included.
fn store(c0: u32, i: u32, j: u32, acc: f32) {
    if (i < p.m && j < p.n) {
        let at = c0 + i * p.c_rs + j * p.c_cs;
        var v = p.alpha * acc;
        if (p.beta != 0.0) {
            v += p.beta * c[at];
        }
        c[at] = v;
    }
}
