//! What the model writes: the key/value cache against the full forward pass, greedy writing
//! against the full forward's argmax, sampled frequencies against the reported probabilities
//! (chi-square), and the session's writing schedule.
#![cfg(not(target_arch = "wasm32"))]

use engine::config::{DataSpec, ModelConfig, TrainConfig};
use engine::gpu::block_on;
use engine::model::KvCache;
use engine::sample::{self, Choice, SampleSpec, Vocab};
use engine::session::{Experiment, Progress, Session};
use engine::Model;
use rand::Rng;
use rand_distr::{Distribution, Normal};

/// A model with weights large enough that its distributions are far from uniform and its
/// attention far from flat: N(0, 0.3) everywhere, gains around 1.
fn model(vocab: usize, d_model: usize, heads: usize, layers: usize, context: usize, seed: u64) -> Model<f32> {
    let cfg = ModelConfig { vocab, d_model, heads, layers, d_ff: 3 * d_model, context, seed, ..Default::default() };
    let mut m = Model::<f32>::new(cfg).unwrap();
    let mut r = engine::rng::rng(seed, engine::rng::Stream::Init, 99);
    let normal = Normal::new(0.0, 0.3).unwrap();
    for info in m.layout.tensors.clone() {
        let gain = if info.shape.len() == 1 && info.name.ends_with("weight") { 1.0 } else { 0.0 };
        for x in &mut m.params[info.range()] {
            *x = normal.sample(&mut r) + gain;
        }
    }
    m
}

fn vocab(n: usize) -> Vocab {
    Vocab::new((0..n).map(|i| char::from(b'a' + i as u8).to_string()).collect(), 0)
}

fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    let num: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt();
    let den: f32 = b.iter().map(|y| y * y).sum::<f32>().sqrt();
    num / den.max(1e-30)
}

/// Every real model's block writes through the cache as its full pass reads: rotary positions
/// turned at each token's own position, the gated MLP, the parallel residual, RMSNorm.
#[test]
fn every_block_writes_through_the_cache_as_its_full_pass_reads() {
    use engine::config::{Activation, Arch, Mlp, NormKind, Positions};
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
    // The last: a model stored in BF16, whose written tokens read the weights' bfloat16 copies.
    for (arch, activation, bf16) in [
        (neox, Activation::GeluExact, false),
        (llama.clone(), Activation::Silu, false),
        (llama, Activation::Silu, true),
    ] {
        let (v, t) = (29, 21);
        let cfg = ModelConfig {
            vocab: v,
            d_model: 32,
            heads: 4,
            layers: 2,
            d_ff: 48,
            context: t,
            arch,
            activation,
            ..Default::default()
        };
        let mut m = Model::<f32>::new(cfg).unwrap();
        let mut r = engine::rng::rng(7, engine::rng::Stream::Init, 99);
        let normal = Normal::new(0.0, 0.3).unwrap();
        for x in m.params.iter_mut() {
            *x += normal.sample(&mut r);
            if bf16 {
                *x = f32::from_bits(x.to_bits() & 0xffff_0000);
            }
        }
        if bf16 {
            // Keys and values repeating in groups of two heads, as a real grouped-query model's
            // are read: each group's rows are computed once, from the copy too.
            let (c, hs) = (m.cfg.d_model, m.cfg.d_model / m.cfg.heads);
            for b in m.layout.blocks.clone() {
                for (id, width) in [(b.k_w, c), (b.v_w, c), (b.k_b, 1), (b.v_b, 1)] {
                    let t = m.layout.of_mut(&mut m.params, id);
                    for head in [1, 3] {
                        t.copy_within((head - 1) * hs * width..head * hs * width, head * hs * width);
                    }
                }
            }
            m = Model::from_parts(m.cfg.clone(), m.layout.clone(), m.params).unwrap();
        }
        m.keep_bf16();
        assert_eq!(m.keeps_bf16(), bf16, "copies kept only of weights that are bfloat16 exactly");
        let tokens: Vec<u32> = (0..t).map(|_| r.random_range(0..v as u32)).collect();
        let full = m.logits_full(&tokens).unwrap();
        let mut kv = KvCache::new(&m.cfg, t);
        for (pos, &tok) in tokens.iter().enumerate() {
            let cached = m.forward_next(&mut kv, tok).unwrap().to_vec();
            let e = rel_err(&cached, &full[pos]);
            assert!(e < 1e-5, "{:?} position {pos}: relative error {e:e}", m.cfg.arch);
        }
        let after = m.prefill(&mut kv, &tokens[..9]).unwrap().to_vec();
        assert!(rel_err(&after, &full[8]) < 1e-5, "prefill");
        let next = m.forward_next(&mut kv, tokens[9]).unwrap().to_vec();
        assert!(rel_err(&next, &full[9]) < 1e-5, "a token after the prefill");
    }
}

#[test]
fn the_cached_forward_gives_the_full_forwards_logits_at_every_position() {
    for (v, c, nh, l, t) in [(11, 16, 2, 1, 8), (23, 32, 4, 2, 33), (64, 48, 3, 3, 64), (7, 8, 1, 2, 5)] {
        let m = model(v, c, nh, l, t, v as u64);
        let mut r = engine::rng::rng(1, engine::rng::Stream::Sample, t as u64);
        let tokens: Vec<u32> = (0..t).map(|_| r.random_range(0..v as u32)).collect();
        let full = m.logits_full(&tokens).unwrap();
        let mut kv = KvCache::new(&m.cfg, m.cfg.context);
        for (pos, &tok) in tokens.iter().enumerate() {
            let cached = m.forward_next(&mut kv, tok).unwrap().to_vec();
            let e = rel_err(&cached, &full[pos]);
            assert!(e < 1e-5, "d{c} L{l} T{t} position {pos}: relative error {e:e}");
        }
        assert!(kv.is_full());
        let err = m.forward_next(&mut kv, 0).unwrap_err().to_string();
        assert!(err.contains("holds all"), "{err}");
        // The window at once: the same logits after it, and the same keys and values after that.
        let half = t / 2 + 1;
        let after = m.prefill(&mut kv, &tokens[..half]).unwrap().to_vec();
        assert!(rel_err(&after, &full[half - 1]) < 1e-5, "prefill of {half}");
        if half < t {
            let next = m.forward_next(&mut kv, tokens[half]).unwrap().to_vec();
            assert!(rel_err(&next, &full[half]) < 1e-5, "a token after the prefill");
        }
        // A shorter window: the full forward of the prefix alone.
        let prefix = m.logits_full(&tokens[..t / 2 + 1]).unwrap();
        assert!(rel_err(&prefix[t / 2], &full[t / 2]) < 1e-5, "causal: the future does not matter");
    }
}

#[test]
fn a_model_that_attends_both_ways_does_not_write() {
    let mut m = model(5, 8, 2, 1, 6, 0);
    m.cfg.causal = false;
    let err = m.forward_next(&mut KvCache::new(&m.cfg, m.cfg.context), 1).unwrap_err().to_string();
    assert!(err.contains("causal off"), "{err}");
}

#[test]
fn greedy_writing_is_the_full_forwards_argmax_token_by_token() {
    let (v, t) = (13, 12);
    let m = model(v, 24, 3, 2, t, 5);
    let voc = vocab(v);
    // 40 tokens from a 3-token prompt: the window fills, then slides.
    let spec = SampleSpec { prompt: "abc".into(), tokens: 40, temperature: 0.0, ..SampleSpec::default() };
    let s = sample::generate(&m, &voc, &spec).unwrap().remove(0);
    let mut window = vec![0u32, 1, 2];
    for (i, step) in s.steps.iter().enumerate() {
        let logits = m.logits_full(&window[window.len().saturating_sub(t)..]).unwrap().pop().unwrap();
        let best = (0..v).max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a))).unwrap() as u32;
        assert_eq!(step.token, best, "token {i}");
        let p = Choice::default().distribution(&logits)[0].1;
        assert!((step.p - p).abs() < 1e-5, "token {i}: p {} against {p}", step.p);
        window.push(best);
    }
    assert_eq!(s.tokens.len(), 40);
    assert_eq!(s.text, voc.decode(&s.tokens));
    let uncached =
        sample::generate::generate_uncached(&m, &[0, 1, 2], 40, Choice { temperature: 0.0, ..Choice::default() }, 0);
    assert_eq!(uncached.unwrap(), s.tokens, "the benchmark's uncached path writes the same");
}

/// Chi-square's critical value at the 0.1% level (Wilson-Hilferty).
fn chi2_critical(df: usize) -> f64 {
    let (k, z) = (df as f64, 3.090);
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

#[test]
fn sampled_first_tokens_follow_the_reported_probabilities() {
    let v = 9;
    let m = model(v, 16, 2, 1, 8, 11);
    let voc = vocab(v);
    let n = 20_000;
    for (temperature, top_k, top_p) in [(1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 4, 1.0), (1.0, 0, 0.8), (1.5, 6, 0.9)] {
        // Seeds 1000 .. 1000 + n, a hundred (the most one request takes) at a time.
        let samples: Vec<_> = (0..n / 100)
            .flat_map(|i| {
                let seed = 1000 + 100 * i as u64;
                let spec = SampleSpec { prompt: "ab".into(), tokens: 1, temperature, top_k, top_p, seed, samples: 100 };
                sample::generate(&m, &voc, &spec).unwrap()
            })
            .collect();
        let top = &samples[0].steps[0].top;
        let mut counts = vec![0usize; v];
        for s in &samples {
            assert_eq!(s.steps[0].top, *top, "the same distribution every time");
            counts[s.tokens[0] as usize] += 1;
        }
        // The reported distribution: all its candidates (top 5 and the rest from the model).
        let logits = m.prefill(&mut KvCache::new(&m.cfg, m.cfg.context), &[0, 1]).unwrap().to_vec();
        let dist = Choice { temperature, top_k, top_p }.distribution(&logits);
        for (i, (text, p)) in top.iter().enumerate() {
            assert_eq!((voc.text(dist[i].0), dist[i].1), (text.as_str(), *p));
        }
        let kept: Vec<u32> = dist.iter().map(|x| x.0).collect();
        for (tok, &c) in counts.iter().enumerate() {
            if !kept.contains(&(tok as u32)) {
                assert_eq!(
                    c, 0,
                    "token {tok} is outside top-k/top-p but was drawn (T {temperature} k {top_k} p {top_p})"
                );
            }
        }
        let chi2: f64 =
            dist.iter().map(|&(tok, p)| (counts[tok as usize] as f64 - n as f64 * p).powi(2) / (n as f64 * p)).sum();
        let df = dist.len() - 1;
        if df > 0 {
            assert!(chi2 < chi2_critical(df), "T {temperature} k {top_k} p {top_p}: chi2 {chi2:.1} over {df} df");
        }
        if top_k > 0 {
            assert!(dist.len() <= top_k);
        }
        let total: f64 = dist.iter().map(|x| x.1).sum();
        assert!((total - 1.0).abs() < 1e-9, "renormalised");
        // Each drawn token's p is its probability in that distribution.
        for s in samples.iter().take(50) {
            let p = dist.iter().find(|x| x.0 == s.tokens[0]).unwrap().1;
            assert_eq!(s.steps[0].p, p);
        }
    }
}

#[test]
fn seeds_decide_the_text() {
    let m = model(9, 16, 2, 1, 8, 3);
    let voc = vocab(9);
    let spec = SampleSpec { prompt: "a".into(), tokens: 30, seed: 7, samples: 3, ..SampleSpec::default() };
    let a = sample::generate(&m, &voc, &spec).unwrap();
    let b = sample::generate(&m, &voc, &spec).unwrap();
    assert_eq!(a, b, "the same seed writes the same");
    assert_ne!(a[0].text, a[1].text, "seed 7 and 8 differ");
    assert_eq!((a[0].seed, a[2].seed), (7, 9));
    let later = sample::generate(&m, &voc, &SampleSpec { seed: 8, samples: 1, ..spec.clone() }).unwrap();
    assert_eq!(later[0], a[1], "sample i is seed + i on its own too");
}

#[test]
fn prompts_are_checked_and_cut_to_the_context() {
    let m = model(9, 16, 2, 1, 8, 3);
    let voc = Vocab::new((0..9).map(|i| char::from(b'a' + i as u8).to_string()).collect(), 4);
    let spec = |prompt: &str| SampleSpec { prompt: prompt.into(), tokens: 3, ..SampleSpec::default() };
    let long = sample::generate(&m, &voc, &spec("abcdefghiabc")).unwrap().remove(0);
    assert_eq!(long.prompt, "efghiabc", "the last T = 8 tokens");
    let empty = sample::generate(&m, &voc, &spec("")).unwrap().remove(0);
    assert_eq!(empty.prompt, "e", "an empty prompt starts from the data's first token");
    let bad = |s: SampleSpec| sample::generate(&m, &voc, &s).unwrap_err().to_string();
    let unknown = bad(spec("abz"));
    assert!(unknown.contains("\"z\"") && unknown.contains("9 symbols"), "{unknown}");
    assert!(bad(SampleSpec { tokens: 0, ..spec("a") }).contains("tokens must be from 1 to 10000"));
    assert!(bad(SampleSpec { tokens: 10_001, ..spec("a") }).contains("tokens must be from 1 to 10000"));
    assert!(bad(SampleSpec { temperature: -0.5, ..spec("a") }).contains("temperature"));
    assert!(bad(SampleSpec { temperature: f64::NAN, ..spec("a") }).contains("temperature"));
    assert!(bad(SampleSpec { top_p: 0.0, ..spec("a") }).contains("top_p"));
    assert!(bad(SampleSpec { top_p: 1.01, ..spec("a") }).contains("top_p"));
}

#[test]
fn predictions_score_every_next_token() {
    let (v, t) = (9, 8);
    let m = model(v, 16, 2, 1, t, 4);
    let voc = vocab(v);
    let tokens: Vec<u32> = vec![1, 4, 2, 8, 0, 3, 3, 7];
    let preds = sample::predictions(&m, &voc, &tokens, 5).unwrap();
    assert_eq!(preds.len(), t);
    let full = m.logits_full(&tokens).unwrap();
    let next: Vec<u32> = tokens[1..].iter().copied().chain([5]).collect();
    for (i, p) in preds.iter().enumerate() {
        let dist = Choice::default().distribution(&full[i]);
        let want = dist.iter().find(|x| x.0 == next[i]).unwrap().1;
        assert_eq!(p.text, voc.text(next[i]));
        assert!((p.p - want).abs() < 1e-12 && (p.loss + want.ln()).abs() < 1e-9, "position {i}");
        assert!(p.top.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
        assert!(p.top.iter().map(|x| x.1).sum::<f64>() <= 1.0 + 1e-9);
    }
}

fn writing_session(seed: u64) -> Session {
    let mut train = TrainConfig::browser_default();
    train.data = DataSpec::Grammar;
    train.steps = 40;
    train.eval_every = 20;
    train.seed = seed;
    train.model.seed = seed;
    let mut exp = Experiment::new(train);
    exp.writing.every = 20;
    exp.writing.tokens = 30;
    block_on(Session::new(exp, engine::memory::DEFAULT_BUDGET)).unwrap()
}

#[test]
fn the_session_writes_on_its_step_schedule_the_same_every_time() {
    let mut a = writing_session(2);
    assert_eq!(a.written().len(), 1, "a sample at step 0");
    let mut wrote = Vec::new();
    while let Progress::Stepped { step, wrote: w, .. } = block_on(a.step()).unwrap() {
        if w {
            wrote.push(step);
        }
    }
    assert_eq!(wrote, vec![20, 40]);
    let steps: Vec<usize> = a.written().iter().map(|w| w.step).collect();
    assert_eq!(steps, vec![0, 20, 40]);
    let w = &a.written()[2];
    assert_eq!(w.sample.tokens.len(), 30);
    assert_eq!(w.predictions.len(), 32, "one per probe position");
    assert!(!a.prompt().is_empty() && a.prompt().len() <= 24, "the start of a validation line: {:?}", a.prompt());
    let mut b = writing_session(2);
    while let Progress::Stepped { .. } = block_on(b.step()).unwrap() {}
    assert_eq!(a.written(), b.written(), "the same run writes the same samples");
    // On demand: the same spec, the same text; a bad one changes nothing.
    let spec = SampleSpec { prompt: "the ".into(), tokens: 20, seed: 3, ..SampleSpec::default() };
    assert_eq!(block_on(a.sample(&spec)).unwrap(), block_on(b.sample(&spec)).unwrap());
    assert!(block_on(a.sample(&SampleSpec { prompt: "\u{1F600}".into(), ..spec })).is_err());
    assert_eq!(a.written().len(), 3);
}
