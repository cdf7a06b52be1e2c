//! A loaded model reading a text on the GPU: the trainer's forward pass (`forward::Pass`, from the
//! same `architecture::BLOCK`) recorded for the text's length, with every buffer brought back into
//! the CPU's `Cache` and the logits, so the lab's lenses measure it as they measure the CPU's pass.
//! The weights are uploaded once; a text costs one submission and a readback per block.

use super::forward::{Activations, Kernels, Pass};
use super::{GpuContext, Result, Tensor};
use crate::config::ModelConfig;
use crate::error::Error;
use crate::model::cache::BlockCache;
use crate::model::params::Layout;
use crate::model::{Cache, Model};

pub struct GpuReader {
    ctx: GpuContext,
    k: Kernels,
    cfg: ModelConfig,
    layout: Layout,
    params: Tensor,
    /// The LayerNorm kernel's gradient binding, which its forward entry leaves alone.
    unused: Tensor,
}

impl GpuReader {
    /// Uploads `model`'s weights: refused (`GpuError::TooLarge`) when they are over the adapter's
    /// largest buffer, as GPT-2 small's 0.5 GB is on WebGPU's default limits.
    pub fn new(ctx: GpuContext, model: &Model<f32>) -> Result<Self> {
        let params = ctx.tensor_from("params", &model.params)?;
        let unused = ctx.tensor("unused", 1)?;
        let k = Kernels::new(&ctx);
        Ok(GpuReader { k, cfg: model.cfg.clone(), layout: model.layout.clone(), params, unused, ctx })
    }

    /// The forward pass over `tokens` (1 to the context, one row), as `Model::read` and
    /// `Model::logits` give it on the CPU: the cache and the (T, V) logits.
    pub async fn read(&self, tokens: &[u32]) -> Result<(Cache<f32>, Vec<f32>)> {
        let (m, t) = (&self.cfg, tokens.len());
        if t == 0 || t > m.context || tokens.iter().any(|&x| x as usize >= m.vocab) {
            let msg = format!("a window of 1 to {} tokens below {}, got {t}", m.context, m.vocab);
            return Err(Error::Data(msg).into());
        }
        if !m.causal && t < m.context && m.arch.is_lab_block() {
            return Err(Error::Config("a model that attends both ways needs a full window".into()).into());
        }
        let ctx = &self.ctx;
        let a = Activations::new(ctx, m, 1, t)?;
        let g_tokens = ctx.tensor_from("tokens", tokens)?;
        let pass =
            Pass { ctx, k: &self.k, cfg: m, layout: &self.layout, params: &self.params, grads: &self.unused, b: 1, t };
        let ops = pass.ops(&g_tokens, &a);
        ctx.run(&ops.iter().collect::<Vec<_>>());

        let mut cache = Cache::window(m, 1, t);
        cache.tokens.copy_from_slice(tokens);
        let mut outer: Vec<&Tensor> = a.resid.iter().collect();
        outer.extend(&a.lnf);
        outer.push(&a.logits);
        let mut read = ctx.read_tensors(&outer).await?.into_iter();
        let mut next = || read.next().expect("one vector per tensor");
        for r in cache.resid.iter_mut() {
            *r = next();
        }
        (cache.lnf_u, cache.lnf_rstd, cache.lnf_out) = (next(), next(), next());
        let logits = next();
        for (bc, bk) in cache.blocks.iter_mut().zip(&a.blocks) {
            let [(u1, r1), (u2, r2)] = &bk.norms;
            let mut parts: Vec<&Tensor> = vec![u1, r1, u2, r2, &bk.att];
            parts.extend(&bk.kept);
            let got: Vec<Vec<f32>> = ctx.read_tensors(&parts).await?;
            let [ln1_u, ln1_rstd, ln2_u, ln2_rstd, att, ln1_out, q, k, v, attn_y, h, ln2_out, fc_pre, fc_act]: [Vec<
                f32,
            >;
                14] = got.try_into().expect("the block's tensors in `Slot::KEPT`'s order");
            *bc = BlockCache {
                ln1_u,
                ln1_rstd,
                ln1_out,
                q,
                k,
                v,
                att,
                attn_y,
                h,
                ln2_u,
                ln2_rstd,
                ln2_out,
                fc_pre,
                fc_act,
                // The lenses read the MLP's output, not a gated MLP's gate.
                gate: Vec::new(),
            };
        }
        Ok((cache, logits))
    }

    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::config::Arch;
    use crate::gpu::block_on;

    /// Worst |gpu - cpu| / (|cpu| + 1e-3) over a buffer.
    fn rel(gpu: &[f32], cpu: &[f32]) -> f32 {
        assert_eq!(gpu.len(), cpu.len());
        gpu.iter().zip(cpu).map(|(g, c)| (g - c).abs() / (c.abs() + 1e-3)).fold(0.0, f32::max)
    }

    #[test]
    fn reads_a_tied_model_as_the_cpu_does() {
        let cfg = ModelConfig {
            vocab: 97,
            d_model: 32,
            heads: 4,
            layers: 3,
            d_ff: 128,
            context: 40,
            ..ModelConfig::default()
        };
        let mut model = Model::<f32>::new(cfg.clone()).unwrap();
        // GPT-2's layout: the head reads the token embedding.
        model.cfg.arch = Arch::gpt2();
        let layout = Layout::new(&model.cfg);
        let mut params = vec![0.0; layout.total];
        for t in &layout.tensors {
            let src = model.layout.tensors.iter().find(|s| s.name == t.name).expect("a tensor of the trained layout");
            params[t.range()].copy_from_slice(&model.params[src.range()]);
        }
        (model.layout, model.params) = (layout, params);
        let ctx = match block_on(GpuContext::new()) {
            Ok(ctx) => ctx,
            Err(e) => return eprintln!("skipped, no adapter: {e}"),
        };
        let reader = GpuReader::new(ctx, &model).unwrap();
        for t in [1, 17, 40] {
            let ids: Vec<u32> = (0..t as u32).map(|i| (i * 31 + 5) % 97).collect();
            let (gpu, logits) = block_on(reader.read(&ids)).unwrap();
            let cpu = model.read(&ids).unwrap();
            for (g, c) in gpu.resid.iter().zip(&cpu.resid) {
                assert!(rel(g, c) < 1e-4, "residual stream off by {}", rel(g, c));
            }
            for (g, c) in gpu.blocks.iter().zip(&cpu.blocks) {
                for (gx, cx) in
                    [(&g.att, &c.att), (&g.ln1_u, &c.ln1_u), (&g.q, &c.q), (&g.k, &c.k), (&g.fc_act, &c.fc_act)]
                {
                    assert!(rel(gx, cx) < 1e-4, "a block's buffer off by {}", rel(gx, cx));
                }
            }
            assert!(rel(&gpu.lnf_u, &cpu.lnf_u) < 1e-4);
            assert!(rel(&logits, &model.logits(&cpu)) < 1e-4, "logits off by {}", rel(&logits, &model.logits(&cpu)));
        }
        assert!(block_on(reader.read(&[])).is_err() && block_on(reader.read(&[97])).is_err());
        // Weights over the adapter's largest buffer are refused with both sizes, before any work.
        let small = block_on(GpuContext::with_max_buffer(64 << 10)).unwrap();
        let e = GpuReader::new(small, &model).err().expect("refused").to_string();
        assert!(e.contains("over the adapter's limit of 64.0 KiB"), "{e}");
    }

    /// Every real model's block reads on the GPU as on the CPU: GPT-NeoX's (LayerNorm, rotary on a
    /// quarter of each head, parallel, exact GELU) and Llama's (RMSNorm, rotary on the whole head,
    /// gated SiLU, shared key/value heads stored per query head, tied head), and BERT's (Post-LN,
    /// attending both ways, the masked-LM head's transform).
    #[test]
    fn reads_every_family_block_as_the_cpu_does() {
        use crate::config::{Activation, Mlp, NormKind, Positions};
        let ctx = || match block_on(GpuContext::new()) {
            Ok(ctx) => Some(ctx),
            Err(e) => {
                eprintln!("skipped, no adapter: {e}");
                None
            }
        };
        let neox = Arch {
            positions: Positions::Rotary { dims: 4, base: 1e4, scaling: Default::default() },
            parallel_residual: true,
            ..Arch::default()
        };
        let llama = Arch {
            norm: NormKind::RmsNorm,
            norm_eps: 1e-6,
            positions: Positions::Rotary { dims: 8, base: 1e5, scaling: Default::default() },
            mlp: Mlp::Gated,
            kv_heads: 2,
            tied_head: true,
            ..Arch::default()
        };
        let bert = Arch { post_norm: true, head_transform: true, tied_head: true, norm_eps: 1e-12, ..Arch::default() };
        for (arch, activation) in
            [(neox, Activation::GeluExact), (llama, Activation::Silu), (bert, Activation::GeluExact)]
        {
            let causal = !arch.post_norm;
            let cfg = ModelConfig {
                vocab: 61,
                d_model: 32,
                heads: 4,
                layers: 2,
                d_ff: 48,
                context: 33,
                arch,
                activation,
                causal,
                ..ModelConfig::default()
            };
            let mut model = Model::<f32>::new(cfg).unwrap();
            // Weights far from the initialisation's: the norms' gains and biases and the gate count.
            for (i, x) in model.params.iter_mut().enumerate() {
                *x += 0.3 * ((i as f32 * 0.618).fract() - 0.5);
            }
            let Some(ctx) = ctx() else { return };
            let reader = GpuReader::new(ctx, &model).unwrap();
            for t in [1, 20, 33] {
                let ids: Vec<u32> = (0..t as u32).map(|i| (i * 17 + 3) % 61).collect();
                let (gpu, logits) = block_on(reader.read(&ids)).unwrap();
                let cpu = model.read(&ids).unwrap();
                // Against the buffer's largest value, as the families' dumps are compared.
                let off = |g: &[f32], c: &[f32]| {
                    let scale = c.iter().fold(0f32, |m, x| m.max(x.abs()));
                    g.iter().zip(c).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / scale
                };
                for (g, c) in gpu.resid.iter().zip(&cpu.resid) {
                    assert!(off(g, c) < 1e-5, "{:?}: residual stream off by {}", model.cfg.arch, off(g, c));
                }
                for (g, c) in gpu.blocks.iter().zip(&cpu.blocks) {
                    let pairs =
                        [(&g.att, &c.att), (&g.ln1_u, &c.ln1_u), (&g.q, &c.q), (&g.k, &c.k), (&g.fc_act, &c.fc_act)];
                    for (gx, cx) in pairs {
                        assert!(off(gx, cx) < 1e-5, "{:?}: a block's buffer off by {}", model.cfg.arch, off(gx, cx));
                    }
                }
                let want = model.logits(&cpu);
                assert!(off(&logits, &want) < 1e-5, "{:?}: logits off by {}", model.cfg.arch, off(&logits, &want));
            }
        }
    }
}
