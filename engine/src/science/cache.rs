//! Reading what the science layer studies out of the model's forward cache, as f64.
//!
//! Layouts (see `model` and `attention`): sphere points `ln1_u` are (B*T, C); q and k are (B, T, C)
//! with head h in columns h*hs..(h+1)*hs; attention is (B, NH, T, T). "Layer" l < L means the
//! input of block l (its first LayerNorm); l = L means the final LayerNorm, so a token's path through
//! depth has L + 1 points.

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::model::{Cache, Model};
use crate::scalar::Scalar;
use crate::science::markov;

fn f64s<S: Scalar>(xs: &[S]) -> Vec<f64> {
    xs.iter().map(|x| x.to_f64().unwrap_or(f64::NAN)).collect()
}

fn check_head<S>(cfg: &ModelConfig, cache: &Cache<S>, layer: usize, b: usize, h: usize) -> Result<()> {
    if layer >= cfg.layers || b >= cache.b || h >= cfg.heads {
        return Err(Error::Config(format!(
            "layer {layer}, batch row {b}, head {h} is outside {} layers, {} rows, {} heads",
            cfg.layers, cache.b, cfg.heads
        )));
    }
    Ok(())
}

/// The (T, T) attention matrix of one head for one batch row.
pub fn attention<S: Scalar>(cfg: &ModelConfig, cache: &Cache<S>, layer: usize, b: usize, h: usize) -> Result<Vec<f64>> {
    check_head(cfg, cache, layer, b, h)?;
    let tt = cache.t * cache.t;
    let start = (b * cfg.heads + h) * tt;
    Ok(f64s(&cache.blocks[layer].att[start..start + tt]))
}

/// One head's queries and keys for one batch row, each (T, head size).
pub fn queries_keys<S: Scalar>(
    cfg: &ModelConfig,
    cache: &Cache<S>,
    layer: usize,
    b: usize,
    h: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    check_head(cfg, cache, layer, b, h)?;
    let (t, c, hs) = (cache.t, cfg.d_model, cfg.head_size());
    let head = |buf: &[S]| -> Vec<f64> {
        (0..t)
            .flat_map(|i| {
                let start = (b * t + i) * c + h * hs;
                f64s(&buf[start..start + hs])
            })
            .collect()
    };
    let blk = &cache.blocks[layer];
    Ok((head(&blk.q), head(&blk.k)))
}

/// Sphere points u (B*T, C) entering layer `layer` (0..=L, L the final LayerNorm).
pub fn sphere_points<S: Scalar>(cfg: &ModelConfig, cache: &Cache<S>, layer: usize) -> Result<Vec<f64>> {
    match layer {
        l if l < cfg.layers => Ok(f64s(&cache.blocks[l].ln1_u)),
        l if l == cfg.layers => Ok(f64s(&cache.lnf_u)),
        l => Err(Error::Config(format!("layer {l} is outside 0..={} (the last is the final LayerNorm)", cfg.layers))),
    }
}

/// Every token's path through depth: L + 1 frames of (B*T, C), ready for `fit::fit_diffusion`
/// with times 0, 1, ..., L.
pub fn depth_trajectory<S: Scalar>(cfg: &ModelConfig, cache: &Cache<S>) -> Vec<Vec<f64>> {
    (0..=cfg.layers).map(|l| sphere_points(cfg, cache, l).expect("layer in range")).collect()
}

/// Gain and bias of the LayerNorm in front of layer `layer` (0..=L, as `sphere_points`).
pub fn layer_norm_affine<S: Scalar>(model: &Model<S>, layer: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    let l = &model.layout;
    let (w, b) = match layer {
        i if i < model.cfg.layers => (l.blocks[i].ln1_w, l.blocks[i].ln1_b),
        i if i == model.cfg.layers => (l.lnf_w, l.lnf_b),
        i => return Err(Error::Config(format!("layer {i} is outside 0..={}", model.cfg.layers))),
    };
    Ok((f64s(l.of(&model.params, w)), f64s(l.of(&model.params, b))))
}

/// Mean attention entropy of a layer over batch rows, heads and query rows (JoMA's measurement).
pub fn layer_entropy<S: Scalar>(cfg: &ModelConfig, cache: &Cache<S>, layer: usize) -> Result<f64> {
    let mut sum = 0.0;
    for b in 0..cache.b {
        for h in 0..cfg.heads {
            sum += markov::row_entropy(&attention(cfg, cache, layer, b, h)?, cache.t).iter().sum::<f64>();
        }
    }
    Ok(sum / (cache.b * cfg.heads * cache.t) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::layer_norm::EPS;
    use crate::science::sphere::radius_stats;

    fn run(causal: bool) -> (Model<f64>, Cache<f64>) {
        let cfg = ModelConfig {
            vocab: 11,
            d_model: 16,
            heads: 2,
            layers: 2,
            d_ff: 32,
            context: 8,
            causal,
            ..ModelConfig::default()
        };
        let model = Model::<f64>::new(cfg.clone()).unwrap();
        let mut cache = Cache::new(&cfg, 3);
        let tokens: Vec<u32> = (0..24).map(|i| (i * 7 % 11) as u32).collect();
        let targets: Vec<u32> = (0..24).map(|i| (i * 5 % 11) as u32).collect();
        model.forward(&mut cache, &tokens, &targets).unwrap();
        (model, cache)
    }

    #[test]
    fn cached_attention_is_the_softmax_of_cached_q_and_k() {
        for causal in [true, false] {
            let (model, cache) = run(causal);
            let cfg = &model.cfg;
            for (layer, b, h) in [(0, 0, 0), (0, 2, 1), (1, 1, 0)] {
                let p = attention(cfg, &cache, layer, b, h).unwrap();
                let (q, k) = queries_keys(cfg, &cache, layer, b, h).unwrap();
                let direct = markov::softmax_attention(&q, &k, 8, cfg.head_size(), causal);
                assert!(p.iter().zip(&direct).all(|(a, d)| (a - d).abs() < 1e-12));
                assert!(matches!(markov::check(&p, 8, 1e-12), markov::Validity::Ok { .. }));
            }
            assert!(attention(cfg, &cache, 2, 0, 0).is_err());
            let h = layer_entropy(cfg, &cache, 1).unwrap();
            let most = if causal { markov::uniform_causal_entropy(8) } else { 8f64.ln() };
            assert!(h > 0.0 && h <= most + 1e-9, "entropy {h} vs at most {most}");
        }
    }

    #[test]
    fn model_sphere_points_have_radius_sqrt_d_with_eps() {
        let (model, cache) = run(true);
        let (cfg, c) = (&model.cfg, 16);
        let frames = depth_trajectory(cfg, &cache);
        assert_eq!(frames.len(), 3);
        for (l, u) in frames.iter().enumerate() {
            // |u| = sqrt(C var / (var + eps)), var of the residual stream the LayerNorm read.
            for (x, ui) in cache.resid[l].chunks_exact(c).zip(u.chunks_exact(c)) {
                let mean = x.iter().sum::<f64>() / c as f64;
                let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
                let want = (c as f64 * var / (var + EPS)).sqrt();
                let got = ui.iter().map(|v| v * v).sum::<f64>().sqrt();
                assert!((got - want).abs() < 1e-12 * want, "layer {l}: {got} vs {want}");
            }
            // At initialisation the residual is small (var ~ 1e-3), so eps pulls u inside by ~0.5%.
            let stats = radius_stats(u, c).unwrap();
            assert!(stats.max <= 4.0 && stats.max_rel_err < 0.05, "{stats:?}");
        }
        let (g, b) = layer_norm_affine(&model, 2).unwrap();
        assert!(g.iter().all(|&x| x == 1.0) && b.iter().all(|&x| x == 0.0));
        assert!(sphere_points(cfg, &cache, 3).is_err());
    }
}
