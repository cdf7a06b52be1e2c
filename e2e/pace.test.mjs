// Pace: the default run watched at its pace and the speed control; never frozen, even with every
// GPU drawing in software.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHROMIUM_FLAGS, launch, setField, stepOf, textOf, valueOf, open, waitPhase, stepTo } from './helpers.mjs';

/** The estimate once this computer is measured for the current settings. */
async function measured(page) {
  await page.waitForFunction(() => document.getElementById('estimate')?.dataset.rates, null, { timeout: 60_000, polling: 100 });
  return textOf(page, '#estimate');
}

/** The work and rates behind the estimate. */
async function measures(page) {
  const attr = async (name) => JSON.parse(await page.getAttribute('#estimate', name));
  return { work: await attr('data-work'), rates: await attr('data-rates') };
}

/** Seconds the run's steps take at `rates`, summed from the work's parts. */
function priced(work, rates) {
  return work.train_flops / (rates.train_gflops * 1e9) + work.read_flops / (rates.read_gflops * 1e9) + work.row_bytes / (rates.row_gb_per_s * 1e9);
}

test('pace: a class watches the default run for about 30 s, slower where things change fastest, and the speed control changes steps per second', { timeout: 300_000 }, async (t) => {
  const { page, problems } = await launch(t);
  // The Brownian preset's first 30 steps, where E[cos θ] falls from 1 to 0.4, last several seconds.
  await open(page, '#preset=brownian');
  assert.match(await textOf(page, '#estimate'), /at 12 steps\/s, a third of it for the first 30: about 30 s$/);
  await page.click('#start');
  await stepTo(page, 1, 30_000);
  const t1 = Date.now();
  await stepTo(page, 30, 30_000);
  const early = (Date.now() - t1) / 1000;
  t.diagnostic(`Brownian preset: steps 1 to 30 took ${early.toFixed(1)} s on screen`);
  assert.ok(early >= 5, `steps 1 to 30 took ${early} s`);
  // Play replays at the same pace: from step 0, step 30 comes after 7.5 s (30 steps at 4 steps/s).
  await stepTo(page, 45, 30_000);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.evaluate(() => {
    const e = document.getElementById('time');
    e.value = '0';
    e.dispatchEvent(new Event('input', { bubbles: true }));
  });
  const p0 = Date.now();
  await page.click('#sphere-play');
  await page.waitForFunction(() => Number(document.getElementById('sphere').dataset.shownStep) >= 30, null, { timeout: 30_000, polling: 50 });
  const replay = (Date.now() - p0) / 1000;
  t.diagnostic(`replay of steps 0 to 30 at the pace: ${replay.toFixed(1)} s (7.5 s expected)`);
  assert.ok(replay >= 6 && replay <= 11, `the replay follows the pace and its slow start (${replay} s)`);
  await page.click('#sphere-play');
  await open(page, '');
  assert.equal(await valueOf(page, '#pace'), '16', 'the default experiment runs at a pace a class can follow');
  assert.match(await textOf(page, '#estimate'), /^400 steps \(validation every 20\) at 16 steps\/s, a third of it for the first 40: about 30 s$/);
  const rate = async (pace) => {
    await page.selectOption('#pace', String(pace));
    await page.waitForTimeout(500);
    const s0 = await stepOf(page);
    await page.waitForTimeout(3000);
    return ((await stepOf(page)) - s0) / 3;
  };
  // Past the slow start, the pace is the pace.
  await page.selectOption('#pace', '60');
  await page.click('#start');
  await stepTo(page, 45, 30_000);
  const slow = await rate(5);
  const fast = await rate(30);
  t.diagnostic(`pace 5 steps/s: measured ${slow.toFixed(1)}; pace 30 steps/s: measured ${fast.toFixed(1)}`);
  assert.ok(slow >= 3 && slow <= 6.5, `about 5 steps/s (${slow})`);
  assert.ok(fast >= 18 && fast <= 33, `about 30 steps/s (${fast})`);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  assert.equal(await page.$('#pending'), null, 'a new pace is no new run: nothing pending');
  // "As fast as possible" is priced at this computer's rates, measured in this page on the run's
  // own model (`engine::session::duration::measure`); the line says so, and is the schedule's work
  // at those rates, summed here from its parts. Nothing is a constant of one CPU: the run is held to
  // what the measured rates justify. Its steps (validation, frames and writing included) take what
  // they were priced at within a factor that a shared machine's noise allows, and the whole run
  // takes its own steps' time plus the measured start, within 30% and a second (its saves and its
  // messages to the page). The sizes: the default, a step-bound one, and a wide one whose writing
  // (each token past the full window reads it again) is most of the run.
  const wide = { d_model: 1024, layers: 1, heads: 8, context: 16, batch: 2, steps: 16 };
  for (const size of [{}, { d_model: 64, context: 64, batch: 16, steps: 100 }, wide]) {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ ...size, steps_per_second: 0 })));
    const said = await measured(page);
    const { work, rates } = await measures(page);
    const stepsS = priced(work, rates);
    assert.match(said, /as fast as possible: about \d+ s, measured on this computer/);
    assert.equal(Number(said.match(/about (\d+) s/)[1]), Math.round(rates.start_s + stepsS), `${said}: ${JSON.stringify(rates)}`);
    const t0 = Date.now();
    await page.click('#start');
    await page.waitForFunction(() => /Measured [\d.]+ steps\/s: about \d+ s left/.test(document.getElementById('estimate').textContent), null, { timeout: 30_000, polling: 100 });
    await waitPhase(page, ['done'], 120_000);
    const took = (Date.now() - t0) / 1000;
    const ran = (await page.evaluate(() => spherewalk.testing.summary())).wall_s;
    t.diagnostic(`${JSON.stringify(size)}: "${said}"; its steps priced ${stepsS.toFixed(2)} s, took ${ran.toFixed(2)} s; the run ${took.toFixed(1)} s`);
    assert.ok(ran / stepsS > 0.4 && ran / stepsS < 2.5, `the steps were priced at ${stepsS} s and took ${ran} s`);
    const own = rates.start_s + ran;
    assert.ok(Math.abs(took - own) <= 0.3 * own + 1, `the run took ${took} s; its steps ${ran} s and its measured start ${rates.start_s} s`);
  }
  // Measured in this page: a worker three times slower measures rates three times lower, and the
  // same schedule three times longer.
  // (The run set the writing's prompt, which the estimate counts: it measures again first.)
  await measured(page);
  const before = await measures(page);
  await page.evaluate(() => spherewalk.testing.slowWorker(3));
  await page.selectOption('#pace', '16');
  await setField(page, '#steps', 15);
  await measured(page);
  const slowed = await measures(page);
  const ratio = slowed.rates.train_gflops / before.rates.train_gflops;
  t.diagnostic(`slowed three times: train ${before.rates.train_gflops.toFixed(1)} -> ${slowed.rates.train_gflops.toFixed(1)} GFLOP/s`);
  // (One run on an Intel Xeon measured 1/4.7 of the rate: slowing stretches the measure's pieces as
  // well as its steps. The point is that the measure follows the worker's speed.)
  assert.ok(ratio > 1 / 6 && ratio < 1 / 2, `a worker three times slower measured ${ratio}x the rate`);
  await page.evaluate(() => spherewalk.testing.slowWorker(1));
  // A size that will be slow says so before it starts.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 256, layers: 4, heads: 4, context: 256, steps: 200 })));
  await measured(page);
  assert.match(await textOf(page, '#estimate'), /Slow size: about [\d.]+ s a step in the browser/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('never frozen: with WebGL and canvases on a software GPU, Pause takes effect at once and frames keep coming', { timeout: 300_000 }, async (t) => {
  // --use-angle=swiftshader: every GPU drawing in software, as on a laptop whose GPU is blocklisted.
  // Drawn through it, the canvases left the page without a frame for 30 s at d128 L4 T128.
  const { page, problems } = await launch(t, { args: [...CHROMIUM_FLAGS, '--use-angle=swiftshader'], viewport: { width: 1280, height: 800 } });
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const wide = { preset: 'custom', data: 'grammar', text: '', d_model: 128, layers: 4, heads: 4, context: 128, activation: 'gelu', causal: true, optimizer: 'adam', lr: 0.003, steps: 400, batch: 8, seed: 0, steps_per_second: 16 };
  const notes = [];
  for (const [name, hash, from] of [['default', '', 40], ['d128 L4 T128', '#s=' + encodeURIComponent(JSON.stringify(wide)), 8]]) {
    await open(page, hash);
    assert.match(await page.getAttribute('#sphere', 'data-renderer'), /^canvas 2d \(WebGL is drawn in software here/);
    assert.equal(await page.isVisible('#webgl-anyway'), true, 'the sphere panel offers WebGL anyway');
    const framesPerSecond = () => page.evaluate(() => new Promise((done) => {
      let n = 0; const t0 = performance.now();
      const f = () => { n++; if (performance.now() - t0 < 2000) requestAnimationFrame(f); else done(n / 2); };
      requestAnimationFrame(f);
    }));
    // This machine's frames before the run: the yardstick for those while it trains.
    const idle = await framesPerSecond();
    await page.click('#start');
    await stepTo(page, from, 120_000);
    const fps = await framesPerSecond();
    const waits = [];
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      await page.click('#start');
      await page.waitForFunction(() => document.getElementById('status')?.dataset.phase === 'paused', null, { timeout: 30_000, polling: 10 });
      waits.push(Date.now() - t0);
      await page.click('#start');
      await page.waitForTimeout(1500);
    }
    // Pause takes effect after the step in flight.
    const stepMs = parseFloat(await textOf(page, '#speed')) || 0;
    notes.push(`${name}: ${fps} frames/s while training (${idle} before), Pause in ${waits.join(', ')} ms (a step ${stepMs} ms)`);
    assert.ok(median(waits) <= 300 + stepMs, `${name}: Pause took ${waits} ms`);
    assert.ok(fps >= idle / 4, `${name}: ${fps} frames per second while training, ${idle} before`);
    await page.click('#start');
    await waitPhase(page, ['paused']);
  }
  t.diagnostic(notes.join('; '));
  assert.deepEqual(problems.filter((p) => !/WebGL|GPU stall/i.test(p)), [], 'no console errors or exceptions');
});

test('a long step stops for Pause between its shards, and the paused run keeps the numbers of one never paused', { timeout: 300_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  // About half a second a step in a tab: two workers, each with two shards of a forward and a
  // backward pass (engine::train::interrupt).
  const wide = { preset: 'custom', data: 'grammar', text: '', d_model: 1024, layers: 1, heads: 8, context: 16, activation: 'gelu', causal: true, optimizer: 'adam', lr: 0.003, steps: 16, batch: 8, seed: 0 };
  const hash = '#s=' + encodeURIComponent(JSON.stringify(wide));
  const lossesOf = (page) => page.evaluate(() => document.getElementById('loss-chart')?.dataset.trainLosses ?? '');
  await open(page, hash);
  await page.click('#start');
  await stepTo(page, 2, 120_000);
  const waits = [];
  for (let i = 0; i < 4 && (await page.getAttribute('#status', 'data-phase')) === 'training'; i++) {
    // Press at a different moment of the step each time.
    await page.waitForTimeout(90 * i + 40);
    const t0 = Date.now();
    await page.click('#start');
    await waitPhase(page, ['paused', 'done'], 30_000);
    waits.push(Date.now() - t0);
    if ((await page.getAttribute('#status', 'data-phase')) === 'done') break;
    await page.click('#start');
  }
  const stepMs = parseFloat(await textOf(page, '#speed')) || 0;
  await waitPhase(page, ['done'], 240_000);
  const paused = await lossesOf(page);
  await open(page, hash);
  await page.click('#start');
  await waitPhase(page, ['done'], 240_000);
  t.diagnostic(`d1024 L1 T16 B8: Pause in ${waits.join(', ')} ms, a step ${stepMs} ms`);
  assert.equal(paused, await lossesOf(page), 'the same losses with and without the pauses');
  assert.ok(paused.split(',').length >= 16, `every step's loss: ${paused}`);
  assert.ok(waits.length >= 3 && stepMs > 0, `${waits.length} pauses, a step of ${stepMs} ms`);
  // Each press comes 40-310 ms into a step of about 2 s (validation and writing included, as every
  // step of a 16-step run has them): waiting for the step's end would take most of it. Cut between
  // its shards' passes, Pause comes within a fraction of it.
  assert.ok(median(waits) < 0.3 * stepMs, `Pause took ${waits} ms; a step ${stepMs} ms`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
