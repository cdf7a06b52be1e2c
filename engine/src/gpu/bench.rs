//! GPU throughput for `lab bench --backend gpu`: the tiled matmul's GFLOP/s. Native only, since
//! `std::time::Instant` does not exist on wasm32. Software adapters give correctness, not speed.

use std::time::Instant;

use super::matmul::{Dims, Matmul, Tiling, View};
use super::{GpuContext, Result};

/// Deterministic values in [-1, 1): the rate does not depend on them, only the work must be real.
fn filled(n: usize, seed: usize) -> Vec<f32> {
    (0..n * n).map(|i| (((i * 7919 + seed * 104_729) % 2000) as f32 / 1000.0) - 1.0).collect()
}

/// GFLOP/s of an `n x n` by `n x n` product in `tiling` (`None`: the one `Matmul::op` takes): one
/// warm-up, then repeats until about 0.3 s have passed (at least 3), each timed to completion by a
/// one-value readback.
pub async fn matmul_gflops(ctx: &GpuContext, n: usize, tiling: Option<Tiling>) -> Result<f64> {
    let mm = Matmul::new(ctx);
    let a = ctx.tensor_from("bench a", &filled(n, 1))?;
    let b = ctx.tensor_from("bench b", &filled(n, 2))?;
    let c = ctx.tensor("bench c", n * n)?;
    let d = Dims::new(n, n, n);
    let v = View::rows(0, n);
    let tiling = tiling.unwrap_or(mm.tiling(d, v, v));
    let op = mm.op_tiled(ctx, tiling, d, 1.0, (&a, v), (&b, v), 0.0, (&c, v));
    ctx.run(&[&op]);
    ctx.read::<f32>(&c, 0, 1).await?;
    let start = Instant::now();
    let mut reps = 0;
    while reps < 3 || start.elapsed().as_secs_f64() < 0.3 {
        ctx.run(&[&op]);
        ctx.read::<f32>(&c, 0, 1).await?;
        reps += 1;
    }
    Ok(d.flops() * reps as f64 / start.elapsed().as_secs_f64() / 1e9)
}
