// Token and position embeddings, mirroring engine/src/embedding.rs. wte (V, C) and wpe (T, C) sit
// in the flat parameter buffer (forward) or gradient buffer (backward) at wte_off and wpe_off.
// The scatter-add has no float atomics in WGSL, so each gradient entry gathers its own sum:
// one invocation per (vocab row or position, column), summing the matching tokens in order.

struct Params {
    n: u32, // tokens, B * T
    t: u32,
    c: u32,
    v: u32,
    wte_off: u32,
    wpe_off: u32,
    learned: u32, // 0: rotary positions, no wpe to add
}

@group(0) @binding(0) var<storage, read> tokens: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;        // params, or dout (N, C)
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;  // out (N, C), or grads (+=)
@group(0) @binding(3) var<uniform> p: Params;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * 256u;
}

@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    if (i >= p.n * p.c) {
        return;
    }
    let row = i / p.c;
    let j = i % p.c;
    let pos = row % p.t;
    var x = src[p.wte_off + tokens[row] * p.c + j];
    if (p.learned != 0u) {
        x += src[p.wpe_off + pos * p.c + j];
    }
    dst[i] = x;
}

// Invocations 0..V*C fill dwte, V*C..(V+T)*C fill dwpe.
@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = flat(gid, nwg);
    let vc = p.v * p.c;
    if (i < vc) {
        let tok = i / p.c;
        let j = i % p.c;
        var s = 0.0;
        for (var r = 0u; r < p.n; r++) {
            if (tokens[r] == tok) {
                s += src[r * p.c + j];
            }
        }
        dst[p.wte_off + i] += s;
    } else if (i < vc + p.t * p.c) {
        let k = i - vc;
        let pos = k / p.c;
        let j = k % p.c;
        var s = 0.0;
        for (var r = pos; r < p.n; r += p.t) {
            s += src[r * p.c + j];
        }
        dst[p.wpe_off + k] += s;
    }
}
