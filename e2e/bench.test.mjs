// Benchmarks: spherewalk.bench times the engine alone in a worker (FLOPs counted as the engine
// counts them), and the main thread's frames while the worker trains.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, open, ratesOver, labTrain } from './helpers.mjs';

test('spherewalk.bench times the engine alone in a worker, with the step\'s FLOPs counted as the engine counts them', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  const spec = { d_model: 64, layers: 2, heads: 4, context: 64, batch: 16, steps: 10 };
  const r = await page.evaluate((s) => spherewalk.bench(s), spec);
  // The same model through lab: its parameter count and vocabulary.
  const experiment = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  Object.assign(experiment.train.model, { d_model: 64, layers: 2, heads: 4, d_ff: 256, context: 64 });
  Object.assign(experiment.train, { batch: 16, steps: 1, eval_every: 1, data: { kind: 'grammar' } });
  experiment.backend = 'cpu';
  const native = labTrain(JSON.stringify(experiment)).summary;
  assert.equal(r.params, native.params, 'the benchmark trains the model it was asked for');
  assert.equal(r.steps, 10);
  // FLOPs of one step, counted here: 3 x (per token and layer 2(4C^2 + 2CF) + 4TC, and 2CV) x B T.
  const [C, F, T, V, L, B] = [64, 256, 64, native.vocab, 2, 16];
  const flops = 3 * (L * (8 * C * C + 4 * C * F + 4 * T * C) + 2 * C * V) * B * T;
  assert.ok(Math.abs(r.gflops - flops / (r.ms_per_step * 1e6)) < 1e-6 * r.gflops, `GFLOP/s ${r.gflops} from ${r.ms_per_step} ms`);
  assert.ok(r.ms_per_step > 0 && r.gemm_gflops > 0, JSON.stringify(r));
  // As the page's training worker: a second worker takes half of each step where there is a core for it.
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  assert.equal(r.workers, cores >= 2 ? 2 : 1, `workers on ${cores} cores`);
  const one = await page.evaluate((s) => spherewalk.bench({ ...s, workers: 1 }), spec);
  assert.equal(one.workers, 1);
  t.diagnostic(`spherewalk.bench, small size (d64 L2 H4 T64 B16, Adam, CPU path): ${r.ms_per_step.toFixed(1)} ms/step in ${r.workers} workers, ${one.ms_per_step.toFixed(1)} in one; ${r.gflops.toFixed(1)} GFLOP/s; wasm GEMM 256^3 ${r.gemm_gflops.toFixed(1)} GFLOP/s`);
  // The page's default experiment (d32 L2 H4 T32 B8), engine only, as README holds it against the
  // native engine (bench/tfjs_reference.mjs with a release `lab`): one worker, and as the page would.
  const pageSpec = { d_model: 32, layers: 2, heads: 4, context: 32, batch: 8, steps: 100 };
  const pageOne = await page.evaluate((s) => spherewalk.bench({ ...s, workers: 1 }), pageSpec);
  const pageBest = await page.evaluate((s) => spherewalk.bench(s), pageSpec);
  assert.equal(pageOne.steps, 100);
  // Timed after a warm-up of at least a second: dozens of steps at this size, not the minimum 3.
  assert.ok(pageOne.warmup_steps > 3 && pageOne.warmup_steps <= 2000, `warm-up ${pageOne.warmup_steps} steps`);
  t.diagnostic(`spherewalk.bench, the page's default experiment (d32 L2 H4 T32 B8, Adam, CPU path): ${pageOne.ms_per_step.toFixed(2)} ms/step in one worker, ${pageBest.ms_per_step.toFixed(2)} in ${pageBest.workers}, after ${pageOne.warmup_steps} and ${pageBest.warmup_steps} warm-up steps`);
  const two = await page.evaluate(() => spherewalk.bench({ workers: 3 }).then(() => 'resolved', (e) => e.message));
  assert.match(two, /bench workers must be 1 or 2/);
  const bad = await page.evaluate(() => spherewalk.bench({ heads: 5 }).then(() => 'resolved', (e) => e.message));
  assert.match(bad, /heads/);
  const unknown = await page.evaluate(() => spherewalk.bench({ width: 5 }).then(() => 'resolved', (e) => e.message));
  assert.match(unknown, /cannot be read.*width/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('benchmark: the main thread while the worker trains', { timeout: 300_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const measure = async (hash, seconds) => {
    await open(page, hash);
    await page.click('#start');
    await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 1, null, { timeout: 60_000 });
    // Long tasks while training (from the first step on; loading the page is not training).
    await page.evaluate(() => {
      window.__longest = 0;
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longest = Math.max(window.__longest, e.duration);
      }).observe({ type: 'longtask' });
    });
    const r = { ...(await ratesOver(page, seconds * 1000)), longest: await page.evaluate(() => window.__longest) };
    await page.click('#start');
    return r;
  };
  const small = await measure('#s=' + encodeURIComponent(JSON.stringify({ steps: 5000, steps_per_second: 0 })), 4);
  const large = await measure('#s=' + encodeURIComponent(JSON.stringify({ d_model: 128, layers: 4, heads: 4, context: 128, steps: 500, steps_per_second: 0 })), 8);
  for (const [name, r] of [['default (d32 L2 T32 B8)', small], ['d128 L4 T128 B8', large]]) {
    // The longtask observer reports only tasks of 50 ms or more.
    const longest = r.longest > 0 ? `${r.longest.toFixed(0)} ms` : 'none over 50 ms';
    t.diagnostic(`${name}: longest main-thread task while training ${longest}, ${r.fps.toFixed(1)} frames/s, ${r.stepsPerSec.toFixed(1)} training steps/s (fastest pace)`);
  }
  assert.ok(small.stepsPerSec > 0 && large.stepsPerSec > 0, 'both sizes train');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
