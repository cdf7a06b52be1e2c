// Batched strided GEMM: C = alpha * A B + beta * C, C being M x N and K the inner dimension.
// Element (i, j) of a matrix is at off + zo * bo + zi * bi + i * rs + j * cs, where the batch index
// z splits into (zo, zi) = (z / inner, z % inner): attention's (batch, head). z is workgroup_id.z,
// plus nwg.z for every line of row tiles in y when the batches outnumber a dimension's 65535.
// Strides make transposes free, as in the CPU engine's matmul views.
//
// Tiling: a 16 x 16 workgroup computes a 64 x 64 tile of C, each invocation a 4 x 4 block,
// staging 64 x 16 panels of A and B in workgroup memory; edges are zero-padded on load.

struct Params {
    m: u32, n: u32, k: u32, inner: u32,
    a_off: u32, a_rs: u32, a_cs: u32, a_bo: u32, a_bi: u32,
    b_off: u32, b_rs: u32, b_cs: u32, b_bo: u32, b_bi: u32,
    c_off: u32, c_rs: u32, c_cs: u32, c_bo: u32, c_bi: u32,
    alpha: f32, beta: f32,
    batches: u32,
    zeros: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TILE: u32 = 64u;
const BK: u32 = 16u;

// [BK][TILE]: k-major so the inner loop reads a row of each panel.
var<workgroup> as_: array<f32, 1024>;
var<workgroup> bs: array<f32, 1024>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row_tiles = (p.m + TILE - 1u) / TILE;
    let z = (wg.y / row_tiles) * nwg.z + wg.z;
    if (z >= p.batches) {
        return; // the last line of batches runs past their number
    }
    let zo = z / p.inner;
    let zi = z % p.inner;
    let a0 = p.a_off + zo * p.a_bo + zi * p.a_bi;
    let b0 = p.b_off + zo * p.b_bo + zi * p.b_bi;
    let c0 = p.c_off + zo * p.c_bo + zi * p.c_bi;
    let row0 = (wg.y % row_tiles) * TILE;
    let col0 = wg.x * TILE;

    var acc: array<f32, 16>;
    // Causal attention's triangles (Zeros in matmul.rs); row0 and the tile are multiples of BK.
    var k_begin = 0u;
    var k_end = p.k;
    if (p.zeros == 1u && col0 > row0) {
        k_end = 0u; // a tile wholly above C's diagonal
    } else if (p.zeros == 2u) {
        k_end = min(p.k, row0 + TILE);
    } else if (p.zeros == 3u) {
        k_begin = row0;
    }
    for (var k0 = k_begin; k0 < k_end; k0 += BK) {
        for (var r = 0u; r < 4u; r++) {
            let idx = li + r * 256u;
            // A panel: 64 rows x 16 k, consecutive invocations along k.
            let ai = idx / BK;
            let ak = idx % BK;
            var av = 0.0;
            if (row0 + ai < p.m && k0 + ak < p.k) {
                av = a[a0 + (row0 + ai) * p.a_rs + (k0 + ak) * p.a_cs];
            }
            as_[ak * TILE + ai] = av;
            // B panel: 16 k x 64 columns, consecutive invocations along the columns.
            let bk = idx / TILE;
            let bj = idx % TILE;
            var bv = 0.0;
            if (k0 + bk < p.k && col0 + bj < p.n) {
                bv = b[b0 + (k0 + bk) * p.b_rs + (col0 + bj) * p.b_cs];
            }
            bs[bk * TILE + bj] = bv;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            var ar: array<f32, 4>;
            var br: array<f32, 4>;
            for (var r = 0u; r < 4u; r++) {
                ar[r] = as_[kk * TILE + lid.y + 16u * r];
                br[r] = bs[kk * TILE + lid.x + 16u * r];
            }
            for (var r = 0u; r < 4u; r++) {
                for (var s = 0u; s < 4u; s++) {
                    acc[r * 4u + s] = fma(ar[r], br[s], acc[r * 4u + s]);
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r++) {
        let i = row0 + lid.y + 16u * r;
        for (var s = 0u; s < 4u; s++) {
            let j = col0 + lid.x + 16u * s;
            if (i < p.m && j < p.n) {
                let at = c0 + i * p.c_rs + j * p.c_cs;
                var v = p.alpha * acc[r * 4u + s];
                // beta = 0 must not read C: it may hold anything, NaN included.
                if (p.beta != 0.0) {
                    v += p.beta * c[at];
                }
                c[at] = v;
            }
        }
    }
}
