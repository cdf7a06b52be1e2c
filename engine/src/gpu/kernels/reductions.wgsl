// The workgroup reductions every row kernel uses, prepended to its source (`gpu::with_reductions`):
// 256 invocations reduce through shared memory in a fixed order, so results are reproducible; each
// call must be reached by the whole workgroup (uniform control flow).
var<workgroup> red: array<f32, 256>;

fn wg_sum(v: f32, li: u32) -> f32 {
    red[li] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            red[li] += red[li + w];
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn wg_max(v: f32, li: u32) -> f32 {
    red[li] = v;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            red[li] = max(red[li], red[li + w]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// A row per workgroup, over a 2-D grid when the rows outnumber one dimension's limit.
fn row_index(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}
