// The session in its worker gives the same numbers: one config through the native lab and through
// the page, the same link at two worker speeds, and a second worker (also when it crashes).
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, textOf, open, waitPhase, trainLosses, stepTo, labTrain, rel } from './helpers.mjs';

test('one config through lab and through the page worker gives the same numbers', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  // The page's default experiment, shortened, on the CPU (the page's worker, wasm).
  const experiment = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  experiment.train.steps = 120;
  experiment.train.eval_every = 20;
  experiment.backend = 'cpu';
  experiment.probe.every = 4;
  const text = JSON.stringify(experiment);
  const native = labTrain(text);
  const events = [];
  const summary = await page.evaluate(
    (cfg) => {
      window.__events = [];
      return spherewalk.train(JSON.parse(cfg), (e) => window.__events.push({ event: e.event, val: e.val ?? e.metrics?.val }));
    },
    text,
  );
  events.push(...(await page.evaluate(() => window.__events)));
  const val = events.filter((e) => e.event === 'run' || e.event === 'progress').flatMap((e) => e.val);
  // Tolerances: wasm32 and native x86-64 multiply in different orders (SIMD128 vs AVX-512 FMA), so
  // f32 losses drift apart by ~1e-6 relative per step; after 120 Adam steps we allow 1e-3.
  assert.equal(summary.steps, native.summary.steps);
  assert.equal(val.length, native.evals.length + 1, 'a validation point before training and one per evaluation');
  for (const [i, e] of native.evals.entries()) {
    const [step, loss] = val[i + 1];
    assert.equal(step, e.step);
    assert.ok(rel(loss, e.val_loss) < 1e-3, `val loss at step ${step}: page ${loss}, lab ${e.val_loss}`);
  }
  for (const k of ['final_train_loss', 'final_val_loss', 'unigram_val_loss', 'bigram_val_loss']) {
    assert.ok(rel(summary[k], native.summary[k]) < 1e-3, `${k}: page ${summary[k]}, lab ${native.summary[k]}`);
  }
  for (const k of ['params', 'vocab', 'probe_frames', 'probe_every', 'data', 'optimizer']) {
    assert.equal(summary[k], native.summary[k], k);
  }
  assert.equal(summary.backend, 'cpu');
  // The science: per depth D within 2%, R^2 within 0.02, KS within 2/N (N = 32 tokens: one token's
  // angle crossing a walker's moves it by 1/N); entropy summaries within 1e-3 nats.
  for (const [d, b] of native.summary.brownian.entries()) {
    const p = summary.brownian[d];
    assert.ok(b.diffusion > 0 && rel(p.diffusion, b.diffusion) < 0.02, `depth ${d} D: page ${p.diffusion}, lab ${b.diffusion}`);
    assert.ok(Math.abs(p.r_squared - b.r_squared) < 0.02, `depth ${d} R^2: page ${p.r_squared}, lab ${b.r_squared}`);
    assert.ok(Math.abs(p.ks - b.ks) <= 2 / 32 + 1e-9, `depth ${d} KS: page ${p.ks}, lab ${b.ks}`);
    assert.ok(rel(p.diffusion_ml, b.diffusion_ml) < 0.02, `depth ${d} D (ML): page ${p.diffusion_ml}, lab ${b.diffusion_ml}`);
    assert.equal(p.points, b.points, `depth ${d}: tokens pooled`);
  }
  for (const [l, e] of native.summary.entropy.entries()) {
    const p = summary.entropy[l];
    for (const k of ['initial', 'min', 'final']) assert.ok(Math.abs(p[k] - e[k]) < 1e-3, `layer ${l} entropy ${k}: page ${p[k]}, lab ${e[k]}`);
    assert.equal(p.shape, e.shape, `layer ${l} entropy shape`);
  }
  t.diagnostic(`lab vs page worker, 120 steps: final val ${native.summary.final_val_loss.toFixed(6)} vs ${summary.final_val_loss.toFixed(6)}; ` +
    `D(depth 0) ${native.summary.brownian[0].diffusion.toExponential(4)} vs ${summary.brownian[0].diffusion.toExponential(4)}; ` +
    `KS ${native.summary.brownian[0].ks.toFixed(4)} vs ${summary.brownian[0].ks.toFixed(4)}`);
  // Muon runs in the page's worker as in lab, and trains.
  const muon = JSON.parse(text);
  Object.assign(muon.train, { steps: 40, eval_every: 20, lr: 0.02 });
  muon.train.optimizer = { kind: 'muon', momentum: 0.95, nesterov: true, ns_steps: 5, weight_decay: 0, adam_lr: 0.01 };
  const muonText = JSON.stringify(muon);
  const muonNative = labTrain(muonText).summary;
  const muonPage = await page.evaluate((cfg) => spherewalk.train(JSON.parse(cfg)), muonText);
  assert.equal(muonPage.optimizer, 'muon');
  assert.ok(rel(muonPage.final_val_loss, muonNative.final_val_loss) < 1e-3, `Muon: page ${muonPage.final_val_loss}, lab ${muonNative.final_val_loss}`);
  assert.ok(muonPage.final_val_loss < muonPage.unigram_val_loss, `Muon beats the unigram baseline (${muonPage.final_val_loss} vs ${muonPage.unigram_val_loss})`);
  t.diagnostic(`Muon, 40 steps: page ${muonPage.final_val_loss.toFixed(6)}, lab ${muonNative.final_val_loss.toFixed(6)}`);
  // A bad config is a clear rejection, not a crash.
  const bad = await page.evaluate(() => spherewalk.train({ train: { lr: 1 } }).then(() => 'resolved', (e) => e.message));
  assert.match(bad, /the experiment cannot be read/);
  const huge = await page.evaluate((cfg) => {
    const c = JSON.parse(cfg);
    Object.assign(c.train.model, { d_model: 1024, heads: 1024, layers: 32, context: 1024 });
    c.train.batch = 1024;
    return spherewalk.train(c).then(() => 'resolved', (e) => e.message);
  }, text);
  assert.match(huge, /over the memory limit of 1\.0 GiB/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('the same link at two worker speeds gives the same science figures', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  // DevTools CPU throttling does not reach a dedicated worker in Chromium 156 ("Operation is only
  // supported for pages, not workers"), so the test slows the worker itself: a busy wait of
  // (factor - 1) times each step's own time. It checks that the worker really got slower.
  const run = async (factor) => {
    await open(page, '#preset=joma');
    await page.selectOption('#pace', '0'); // as fast as possible: the worker's own speed decides
    await page.evaluate((f) => spherewalk.testing.slowWorker(f), factor);
    await page.click('#start');
    await waitPhase(page, ['done'], 120_000);
    const summary = JSON.parse(await page.evaluate(() => document.getElementById('summary').dataset.json));
    const sps = Number(await page.evaluate(() => document.getElementById('speed').dataset.stepsPerSecond));
    return { summary, sps };
  };
  const fast = await run(1);
  const slow = await run(4);
  t.diagnostic(`JoMA preset: ${fast.sps.toFixed(0)} steps/s at full speed, ${slow.sps.toFixed(0)} steps/s slowed x4`);
  assert.ok(slow.sps < fast.sps / 2, `the slowed worker is slower (${slow.sps} vs ${fast.sps} steps/s)`);
  const science = (s) => JSON.stringify({ brownian: s.brownian, entropy: s.entropy, frames: s.probe_frames, every: s.probe_every, loss: s.final_val_loss });
  assert.equal(science(slow.summary), science(fast.summary), 'the same frames, entropy and Brownian numbers at both speeds');
  assert.ok(fast.summary.probe_frames >= 20, `enough probe frames (${fast.summary.probe_frames})`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('a second worker computes half of each CPU step, and when it crashes the run goes on with the same numbers', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  const link = '#s=' + encodeURIComponent(JSON.stringify({ steps: 150, steps_per_second: 0 }));
  const run = async (crashAt) => {
    await open(page, link);
    await page.click('#start');
    await stepTo(page, 2);
    const backend = await textOf(page, '#backend');
    if (crashAt) {
      await stepTo(page, crashAt);
      await page.evaluate(() => spherewalk.testing.trapSecondWorker());
      await page.waitForFunction(() => /second worker stopped/.test(document.getElementById('notice')?.textContent ?? ''), null, { timeout: 30_000 });
    }
    await waitPhase(page, ['done'], 120_000);
    return {
      backend,
      after: await textOf(page, '#backend'),
      notice: await textOf(page, '#notice'),
      losses: await trainLosses(page),
      summary: JSON.parse(await page.evaluate(() => document.getElementById('summary').dataset.json)),
    };
  };
  const whole = await run(0);
  if (cores < 2) {
    t.diagnostic(`one core here (${cores}): no second worker`);
    assert.doesNotMatch(whole.backend, /2 cores/);
    return;
  }
  assert.match(whole.backend, /2 cores \(a second worker computes half of each step\)/, 'the backend line says the run uses two cores');
  const crashed = await run(40);
  t.diagnostic(`second worker crashed at step 40: ${crashed.notice}`);
  assert.match(crashed.notice, /The second worker stopped \(it crashed: .*unreachable.*\): training goes on in one worker, with the same numbers\./);
  assert.doesNotMatch(crashed.after, /2 cores/, 'the backend line drops the second core');
  assert.equal(whole.losses.length, 150);
  assert.deepEqual(crashed.losses, whole.losses, 'the same loss at every step, with and without the second worker');
  const science = (s) => JSON.stringify({ val: s.final_val_loss, train: s.final_train_loss, brownian: s.brownian, entropy: s.entropy });
  assert.equal(science(crashed.summary), science(whole.summary), 'the same summary');
  const expected = problems.filter((p) => !/unreachable|RuntimeError/.test(p));
  assert.deepEqual(expected, [], 'no other console errors or exceptions');
});
