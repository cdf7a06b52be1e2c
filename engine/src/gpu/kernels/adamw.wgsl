// AdamW over the flat parameter buffer, mirroring engine/src/optim/adam.rs, with the global
// gradient-norm clip of optim/clip.rs folded in: g = grad * min(1, max_norm / norm).
// Step-dependent values (lr and the bias corrections) come from `step`, written before each
// submission, so the op itself never changes.

struct Params {
    n: u32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    max_norm: f32, // 0: no clipping
    off: u32,      // first parameter updated (CG-FAC updates only the tensors outside linear layers)
}

@group(0) @binding(0) var<storage, read_write> prm: array<f32>;
@group(0) @binding(1) var<storage, read> grads: array<f32>;
@group(0) @binding(2) var<storage, read_write> m: array<f32>;
@group(0) @binding(3) var<storage, read_write> v: array<f32>;
@group(0) @binding(4) var<storage, read> decay: array<f32>;  // weight decay per parameter (0 off matrices)
@group(0) @binding(5) var<storage, read> norm: array<f32>;   // [sum of squared gradients]
@group(0) @binding(6) var<storage, read> step: array<f32>;   // [lr, 1 - beta1^t, 1 - beta2^t]
@group(0) @binding(7) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let j = gid.x + gid.y * nwg.x * 256u;
    if (j >= p.n) {
        return;
    }
    let i = p.off + j;
    // A non-finite gradient (and so a non-finite loss: the cross-entropy is in log-sum-exp form, so
    // its loss is finite whenever its logits and their gradient are) skips the update here on the
    // device: the state stays that of the last good step without waiting for a readback.
    if (!is_finite(norm[0])) {
        return;
    }
    let scale = clip_scale();
    let g = grads[i] * scale;
    let lr = step[0];
    let mi = p.beta1 * m[i] + (1.0 - p.beta1) * g;
    let vi = p.beta2 * v[i] + (1.0 - p.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    let update = (mi / step[1]) / (sqrt(vi / step[2]) + p.eps);
    prm[i] -= lr * (update + decay[i] * prm[i]);
}
