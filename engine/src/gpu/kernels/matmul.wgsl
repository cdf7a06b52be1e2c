// Batched strided GEMM: C = alpha * A B + beta * C, C being M x N and K the inner dimension, after
// matmul_tile.wgsl (the uniform, batch addressing, causal triangles, the store).
//
// Tiling: a 16 x 16 workgroup computes a 64 x 64 tile of C, each invocation a 4 x 4 block,
// staging 64 x 16 panels of A and B in workgroup memory; edges are zero-padded on load.

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;

const TILE: u32 = 64u;
const BK: u32 = 16u;

// [BK][TILE]: k-major so the inner loop reads a row of each panel.
var<workgroup> as_: array<f32, 1024>;
var<workgroup> bs: array<f32, 1024>;

@compute @workgroup_size(16, 16, 1)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t = tile_of(wg, nwg, TILE);
    if (!t.live) {
        return;
    }
    let a0 = t.a0;
    let b0 = t.b0;
    let row0 = t.row0;
    let col0 = t.col0;
    var acc: array<f32, 16>;
    for (var k0 = t.k_begin; k0 < t.k_end; k0 += BK) {
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
            store(t.c0, i, j, acc[r * 4u + s]);
        }
    }
}
