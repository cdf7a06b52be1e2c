// The global gradient-norm clip of optim/clip.rs, which the optimizers' kernels (adamw.wgsl,
// sgd.wgsl, muon.wgsl) fold in: prepended to each, which binds `norm` = [sum of squared
// gradients] and has `p.max_norm` (0: no clipping).

// NaN or infinity: all exponent bits set.
fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// The factor that brings the gradient's norm down to p.max_norm.
fn clip_scale() -> f32 {
    let total = sqrt(norm[0]);
    if (p.max_norm > 0.0 && total > p.max_norm) {
        return p.max_norm / total;
    }
    return 1.0;
}
