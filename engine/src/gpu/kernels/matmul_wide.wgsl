// matmul.wgsl's product for large grids, after matmul_tile.wgsl as it: a 16 x 16 workgroup computes
// a 128 x 128 tile of C, each invocation an 8 x 8 block of adjacent rows and columns, from 128 x 8
// panels of A and B loaded one vec4 per invocation. Each output is the same fma chain over k in
// order as matmul.wgsl's, so both kernels give the same values.
//
// A and B are read as vec4s, so each operand runs in fours along one dimension: a_k = 1 when A's
// fours run along k (a_cs = 1), 0 when they run along m (a_rs = 1); b_k = 1 when B's run along k
// (b_rs = 1), 0 along n (b_cs = 1). Matmul::op checks that offsets, strides and that dimension are
// multiples of 4, so a four is wholly inside the matrix or wholly outside it.

@group(0) @binding(0) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> b: array<vec4<f32>>;

const TILE: u32 = 128u;
const BK: u32 = 8u;
const QUADS: u32 = 32u; // TILE / 4

// [BK][TILE / 4]: k-major, an invocation's 8 rows (or columns) are two adjacent vec4s.
var<workgroup> as_: array<vec4<f32>, 256>;
var<workgroup> bs: array<vec4<f32>, 256>;

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
    var acc: array<vec4<f32>, 16>; // row r, columns 4h..4h+3 at acc[r * 2 + h]
    for (var k0 = t.k_begin; k0 < t.k_end; k0 += BK) {
        // A panel: 128 rows x 8 k, one vec4 per invocation.
        if (p.a_k == 1u) {
            let i = li / 2u;
            let kq = (li % 2u) * 4u;
            var v = vec4<f32>(0.0);
            if (row0 + i < p.m && k0 + kq < p.k) {
                v = a[(a0 + (row0 + i) * p.a_rs + k0 + kq) / 4u];
            }
            for (var q = 0u; q < 4u; q++) {
                as_[(kq + q) * QUADS + i / 4u][i % 4u] = v[q];
            }
        } else {
            let kk = li / QUADS;
            let i = (li % QUADS) * 4u;
            var v = vec4<f32>(0.0);
            if (row0 + i < p.m && k0 + kk < p.k) {
                v = a[(a0 + row0 + i + (k0 + kk) * p.a_cs) / 4u];
            }
            as_[kk * QUADS + i / 4u] = v;
        }
        // B panel: 8 k x 128 columns.
        if (p.b_k == 1u) {
            let j = li / 2u;
            let kq = (li % 2u) * 4u;
            var v = vec4<f32>(0.0);
            if (col0 + j < p.n && k0 + kq < p.k) {
                v = b[(b0 + k0 + kq + (col0 + j) * p.b_cs) / 4u];
            }
            for (var q = 0u; q < 4u; q++) {
                bs[(kq + q) * QUADS + j / 4u][j % 4u] = v[q];
            }
        } else {
            let kk = li / QUADS;
            let j = (li % QUADS) * 4u;
            var v = vec4<f32>(0.0);
            if (col0 + j < p.n && k0 + kk < p.k) {
                v = b[(b0 + (k0 + kk) * p.b_rs + col0 + j) / 4u];
            }
            bs[kk * QUADS + j / 4u] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let ar = array<vec4<f32>, 2>(as_[kk * QUADS + lid.y * 2u], as_[kk * QUADS + lid.y * 2u + 1u]);
            let b_lo = bs[kk * QUADS + lid.x * 2u];
            let b_hi = bs[kk * QUADS + lid.x * 2u + 1u];
            for (var r = 0u; r < 8u; r++) {
                let av = vec4<f32>(ar[r / 4u][r % 4u]);
                acc[r * 2u] = fma(av, b_lo, acc[r * 2u]);
                acc[r * 2u + 1u] = fma(av, b_hi, acc[r * 2u + 1u]);
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 8u; r++) {
        let i = row0 + lid.y * 8u + r;
        for (var s = 0u; s < 8u; s++) {
            let j = col0 + lid.x * 8u + s;
            store(t.c0, i, j, acc[r * 2u + s / 4u][s % 4u]);
        }
    }
}
