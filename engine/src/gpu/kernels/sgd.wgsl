// SGD with heavy-ball momentum and decoupled weight decay over the flat parameter buffer,
// mirroring engine/src/optim/sgd.rs, with the global gradient-norm clip of optim/clip.rs folded in
// (clip.wgsl). The learning rate comes from `step`, written before each submission.



struct Params {
    n: u32,
    momentum: f32,
    max_norm: f32, // 0: no clipping
}

@group(0) @binding(0) var<storage, read_write> prm: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> velocity: array<f32>;
@group(0) @binding(3) var<storage, read> decay: array<f32>;  // weight decay per parameter (0 off matrices)
@group(0) @binding(4) var<storage, read> norm: array<f32>;   // [sum of squared gradients]
@group(0) @binding(5) var<storage, read> step: array<f32>;   // [lr, ...]
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 256u;
    if (i >= p.n) {
        return;
    }
    // A non-finite gradient (and so a non-finite loss: the cross-entropy is in log-sum-exp form, so
    // its loss is finite whenever its logits and their gradient are) skips the update here on the
    // device: the state stays that of the last good step without waiting for a readback.
    if (!is_finite(norm[0])) {
        return;
    }
    let scale = clip_scale();
    let vi = p.momentum * velocity[i] + grads[i] * scale;
    velocity[i] = vi;
    prm[i] -= step[0] * (vi + decay[i] * prm[i]);
}
