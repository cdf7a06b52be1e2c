// Keeping the run: time to interactive and the engine's ms/step in wasm; the run saved to IndexedDB
// and resumed exactly after a reload; model download (safetensors + config) and upload, corrupt
// files; a non-finite loss (pause, keep the state, go on at a new learning rate); the "Brownian or
// not?" panel and ghost walkers; figures as PNG; the light/dark theme toggle. Then a crashed worker
// and the last save, rapid presses, a script's runs beside the page's saved run, and storage that
// is full, blocked or off.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ARTIFACTS, PAGE_URL, LAB_BIN, launch, phase, stepOf, textOf, valueOf, open, setField, waitPhase,
  inkOf, safetensorsHeader, trainLosses, stepTo,
  waitReady,
} from './helpers.mjs';

test('lose nothing, model files, non-finite loss, Brownian panel, PNG and theme', { timeout: 300_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const notes = [];

  // Time to interactive: navigation start to a usable Start button.
  await page.goto(PAGE_URL, { waitUntil: 'commit' });
  await page.waitForSelector('#start:enabled', { timeout: 60_000 });
  const ttiMs = await page.evaluate(() => performance.now());
  notes.push(`time to interactive (navigation start to Start enabled, localhost): ${ttiMs.toFixed(0)} ms`);
  assert.equal(await page.$('#saved-run'), null, 'a fresh browser has no saved run');
  // Lose nothing: three steps are saved to IndexedDB; after a reload the run resumes exactly.
  for (let i = 1; i <= 3; i++) {
    await page.click('#step-once');
    await stepTo(page, i);
  }
  await page.waitForSelector('#saved[data-step="3"]', { timeout: 10_000 });
  const saved = await trainLosses(page);
  assert.equal(saved.length, 3);
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#saved-run', { timeout: 15_000 });
  assert.match(await textOf(page, '#saved-run'), /step 3 of \d+/);
  await page.click('#resume-saved');
  await stepTo(page, 12);
  await page.click('#start'); // pause
  await waitPhase(page, ['paused']);
  const resumed = await trainLosses(page);
  const resumedStep = await stepOf(page);
  assert.deepEqual(resumed.slice(0, 3), saved, 'the losses before the reload are kept');
  assert.equal(resumed.length, resumedStep, 'the step count continues from the saved step');
  assert.match(await textOf(page, '#notice'), /resumed the saved run at step 3/);
  // The same run without the reload gives the same losses: the restore is exact.
  await page.click('#reset');
  await waitPhase(page, ['idle']);
  await page.click('#start');
  await stepTo(page, resumedStep + 2);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  const reference = await trainLosses(page);
  assert.deepEqual(reference.slice(0, resumed.length), resumed, 'resumed run = uninterrupted run');

  // Download the model (one safetensors file with its config) and its config.json.
  const k = await stepOf(page);
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), page.click('#download-model')]);
  assert.equal(dl.suggestedFilename(), 'spherewalk-model.safetensors');
  const modelPath = join(ARTIFACTS, 'spherewalk-model.safetensors');
  await dl.saveAs(modelPath);
  const modelBytes = readFileSync(modelPath);
  const { header, dataStart } = safetensorsHeader(modelBytes);
  assert.deepEqual(header.wte.shape.length, 2, 'wte is named as in the README');
  assert.equal(header['head.weight'].dtype, 'F32');
  assert.ok(header['blocks.1.attn.q.weight'], 'per-block names as in the README');
  const meta = header.__metadata__;
  assert.equal(meta.format, 'spherewalk');
  assert.equal(Number(meta.step), k);
  assert.equal(JSON.parse(meta.config).model.d_model, 32);
  const [dlc] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), page.click('#download-config')]);
  assert.equal(dlc.suggestedFilename(), 'config.json');
  const configText = readFileSync(await dlc.path(), 'utf8');
  assert.equal(JSON.parse(configText).step, k);
  // The CLI reads what the page downloads: the model file alone, or beside its config.json, and
  // the config.json as a run's config.
  const evalOf = (checkpoint) => JSON.parse(execFileSync(LAB_BIN, ['eval', '--checkpoint', checkpoint, '--json'], { encoding: 'utf8' }));
  const alone = evalOf(modelPath);
  const folder = mkdtempSync(join(tmpdir(), 'spherewalk-download-'));
  writeFileSync(join(folder, 'spherewalk-model.safetensors'), modelBytes);
  writeFileSync(join(folder, 'config.json'), configText);
  const beside = evalOf(folder);
  assert.ok(Number.isFinite(alone.loss) && alone.step === k, JSON.stringify(alone));
  assert.deepEqual(beside, alone, 'the file alone and the folder are the same model');
  const short = JSON.parse(configText);
  short.config.steps = 2;
  writeFileSync(join(folder, 'config.json'), JSON.stringify(short));
  const rerun = execFileSync(LAB_BIN, ['train', '--config', join(folder, 'config.json'), '--json'], { encoding: 'utf8' });
  assert.equal(JSON.parse(rerun.trim().split('\n').at(-1)).steps, 2, 'the config.json runs');
  rmSync(folder, { recursive: true, force: true });
  // The next step's loss of the uninterrupted run: a model loaded from the file must give it too.
  await page.click('#step-once');
  await stepTo(page, k + 1);
  const nextLoss = (await trainLosses(page))[k];

  // A corrupt model file: a clear message, and the page keeps working.
  await page.setInputFiles('#model-input', { name: 'broken.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.from('this is not a model at all, just text') });
  await page.waitForSelector('#model-error', { timeout: 10_000 });
  assert.match(await textOf(page, '#model-error'), /broken\.safetensors is not valid safetensors/);
  assert.equal(await stepOf(page), k + 1, 'a rejected upload changes nothing');

  // Upload the downloaded file: training continues from its weights at its step.
  await page.click('#reset');
  await waitPhase(page, ['idle']);
  await page.setInputFiles('#model-input', modelPath);
  await page.waitForSelector('#model-note', { timeout: 10_000 });
  assert.match(await textOf(page, '#model-note'), new RegExp(`at step ${k} of`));
  assert.equal(await stepOf(page), k);
  assert.equal(await phase(page), 'paused');
  await page.click('#step-once');
  await stepTo(page, k + 1);
  assert.equal((await trainLosses(page))[0], nextLoss, 'the uploaded model gives the same next loss');
  // Weights without metadata plus the config.json, chosen together, work as well.
  const bare = { ...header };
  delete bare.__metadata__;
  let h = Buffer.from(JSON.stringify(bare));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  const weightsOnly = Buffer.concat([len, h, modelBytes.subarray(dataStart)]);
  await page.setInputFiles('#model-input', [
    { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: weightsOnly },
    { name: 'config.json', mimeType: 'application/json', buffer: Buffer.from(configText) },
  ]);
  await page.waitForFunction(() => /loaded model\.safetensors/.test(document.getElementById('model-note')?.textContent ?? ''), null, { timeout: 10_000 });
  assert.equal(await stepOf(page), k);
  // Weights alone, without any config: a clear message.
  await page.setInputFiles('#model-input', { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: weightsOnly });
  await page.waitForSelector('#model-error', { timeout: 10_000 });
  assert.match(await textOf(page, '#model-error'), /carries no config/);

  // A non-finite loss: the run pauses with a message, keeps its state, and goes on at a sane rate.
  await page.click('#reset');
  await waitPhase(page, ['idle']);
  await setField(page, '#lr', '1e30');
  await page.click('#start');
  await page.waitForFunction(() => /not finite/.test(document.getElementById('error')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.equal(await phase(page), 'paused', 'a non-finite loss pauses the run');
  const nanError = await textOf(page, '#error');
  assert.match(nanError, /with learning rate 1e30: training paused\. The state after step \d+ is kept/);
  const kept = await stepOf(page);
  assert.ok((await trainLosses(page)).every(Number.isFinite));
  await setField(page, '#lr', '0.003');
  assert.match(await textOf(page, '#pending'), /applies when you press Resume/);
  await page.click('#start'); // Resume with the new rate
  await stepTo(page, kept + 5);
  await page.click('#start');
  await waitPhase(page, ['paused', 'done']);
  assert.equal(await page.$('#error'), null, 'the message goes once training goes on');
  assert.ok((await trainLosses(page)).every(Number.isFinite), 'losses are finite after the new rate');
  notes.push(`non-finite loss: "${nanError}"`);

  // Brownian or not?: finite D, R^2 and KS, and ghost walkers drawn beside the tokens.
  await open(page, '#preset=brownian');
  assert.equal(await valueOf(page, '#preset'), 'brownian');
  await page.click('#start');
  await page.waitForFunction(
    () => ['brownian-d', 'brownian-r2', 'brownian-ks'].every((id) => Number.isFinite(Number(document.getElementById(id)?.dataset.value ?? 'x'))) &&
      Number(document.getElementById('sphere')?.dataset.ghosts) > 0 &&
      /entropy [\d.]+ → lowest/.test(document.getElementById('verdict-joma-0')?.textContent ?? ''),
    null,
    { timeout: 60_000, polling: 100 },
  );
  await page.click('#start');
  await waitPhase(page, ['paused', 'done']);
  const br = await page.evaluate(() => Object.fromEntries(['brownian-d', 'brownian-r2', 'brownian-ks'].map((id) => [id, Number(document.getElementById(id).dataset.value)])));
  assert.ok(br['brownian-d'] > 0, `D is positive (${br['brownian-d']})`);
  assert.ok(br['brownian-ks'] >= 0 && br['brownian-ks'] <= 1, `KS in [0, 1] (${br['brownian-ks']})`);
  // The second estimate of D, from the increments, with its interval around it.
  const dMl = Number(await page.getAttribute('#brownian-d-ml', 'data-value'));
  const [ciLo, ciHi] = (await page.getAttribute('#brownian-d-ci', 'data-value')).split(',').map(Number);
  assert.ok(dMl > 0 && ciLo < dMl && dMl < ciHi, `D (ML) ${dMl} inside its interval [${ciLo}, ${ciHi}]`);
  assert.ok(Number.isFinite(br['brownian-r2']));
  assert.ok((await page.evaluate(() => Number(document.getElementById('brownian-chart').dataset.points))) >= 2);
  assert.ok((await inkOf(page, '#brownian-chart')) > 1000, 'the Brownian chart is drawn');
  assert.ok((await inkOf(page, '#brownian-msd-chart')) > 1000, 'the MSD chart is drawn');
  const ghosts = await page.evaluate(() => Number(document.getElementById('sphere').dataset.ghosts));
  assert.equal(ghosts, 32, 'one ghost walker per token');
  // Each science panel answers its question in words, with the number that makes it meaningful.
  await page.waitForFunction(() => /critical value/.test(document.getElementById('verdict-brownian')?.textContent ?? ''), null, { timeout: 10_000 });
  const brownianVerdict = await textOf(page, '#verdict-brownian .verdict-sentence');
  // (Until its numbers decide, a provisional verdict says it is measuring, with the same numbers.)
  assert.match(brownianVerdict, /^((Brownian|Partly Brownian|Not Brownian)|Measuring \(step \d+ of 300\): not decided yet).*R² = .*KS = [\d.]+, (within|beyond) the 5% critical value 0\.34 for 32 tokens/s);
  assert.match(await textOf(page, '#verdict-sphere .verdict-sentence'), /^On the sphere: every token of the probe row is within .* of the sphere of radius √32/);
  assert.match(await textOf(page, '#verdict-markov .verdict-sentence'), /^A Markov chain: every row of every head is non-negative and sums to 1/);
  // (A verdict's words change on screen at most every 2 s, so a class can read them: the latest comes.)
  await page.waitForFunction(() => /entropy [\d.]+ → lowest/.test(document.getElementById('verdict-joma-0')?.textContent ?? ''), null, { timeout: 10_000 });
  assert.match(await textOf(page, '#verdict-joma-0 .verdict-sentence'), /^(Layer 0: |Layer 0: Measuring \(step \d+ of 300\): not decided yet).*entropy [\d.]+ → lowest/);
  notes.push(`Brownian verdict: "${brownianVerdict}"`);
  await page.locator('#panel-brownian').screenshot({ path: join(ARTIFACTS, 'panel-brownian.png') });
  await page.locator('#panel-sphere').screenshot({ path: join(ARTIFACTS, 'panel-sphere-ghosts.png') });
  // Another depth: the analysis follows the sphere view's depth slider, also while paused.
  assert.match(await textOf(page, '#brownian-note'), /^depth 0:/);
  await page.evaluate(() => {
    const d = document.getElementById('depth');
    d.value = d.max;
    d.dispatchEvent(new Event('input', { bubbles: true }));
  });
  await page.waitForFunction(() => /^depth 2:/.test(document.getElementById('brownian-note')?.textContent ?? ''), null, { timeout: 5_000 });
  assert.equal(await page.evaluate(() => Number(document.getElementById('sphere').dataset.ghosts)), 32);
  await page.uncheck('#ghosts');
  await page.waitForFunction(() => Number(document.getElementById('sphere').dataset.ghosts) === 0, null, { timeout: 5_000 });
  notes.push(`Brownian or not? D ${br['brownian-d'].toExponential(3)} per step, R^2 ${br['brownian-r2'].toFixed(3)}, KS ${br['brownian-ks'].toFixed(3)}`);

  // Figures as PNG.
  const [png] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), page.click('#png-loss-chart')]);
  assert.equal(png.suggestedFilename(), 'spherewalk-loss.png');
  const pngBytes = readFileSync(await png.path());
  assert.deepEqual([...pngBytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG file');
  assert.ok(pngBytes.length > 2000);
  for (const id of ['sphere', 'attention', 'entropy-chart', 'brownian-chart', 'brownian-msd-chart']) {
    assert.ok(await page.$(`#png-${id}`), `a PNG button for #${id}`);
    const url = await page.evaluate((c) => document.getElementById(c).toDataURL(), id);
    assert.match(url, /^data:image\/png;base64,[A-Za-z0-9+/]{100,}/);
  }

  // Light and dark theme: the toggle switches, and the choice survives a reload.
  const themeOf = () => page.evaluate(() => ({ theme: document.documentElement.dataset.theme, bg: getComputedStyle(document.body).backgroundColor }));
  const light = await themeOf();
  assert.equal(light.theme, 'light');
  await page.click('#theme');
  const dark = await themeOf();
  assert.equal(dark.theme, 'dark');
  assert.notEqual(dark.bg, light.bg, 'the page colours change');
  await page.reload({ waitUntil: 'load' });
  await waitReady(page);
  assert.equal((await themeOf()).theme, 'dark', 'the theme is remembered');
  await page.screenshot({ path: join(ARTIFACTS, 'page-dark-toggle.png') });
  await page.click('#theme');
  assert.equal((await themeOf()).theme, 'light');

  for (const n of notes) t.diagnostic(n);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('a crashed worker is reported and the last save resumes; rapid presses stay consistent', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  // Rapid presses in one instant: Step, Step, Reset, Step, Start, Pause.
  await page.evaluate(() => {
    for (const id of ['step-once', 'step-once', 'reset', 'step-once', 'start', 'start']) document.getElementById(id).click();
  });
  await waitPhase(page, ['paused'], 30_000);
  await page.waitForTimeout(500);
  assert.equal(await textOf(page, '#error'), null, 'no internal error after rapid presses');
  const k = await stepOf(page);
  assert.equal((await trainLosses(page)).length, k, 'one loss per step after rapid presses');
  await page.click('#step-once');
  await stepTo(page, k + 1);
  await page.waitForSelector(`#saved[data-step="${k + 1}"]`, { timeout: 10_000 });
  const before = await trainLosses(page);
  // The worker's wasm traps (as a bug or a failed allocation would).
  await page.evaluate(() => spherewalk.testing.trapWorker());
  await page.waitForSelector('#crashed', { timeout: 10_000 });
  const crash = await textOf(page, '#crashed');
  assert.match(crash, /The training worker crashed \(.*unreachable.*\)\. The last saved state \(step \d+\) is kept/);
  assert.equal(await phase(page), 'error');
  await page.click('#restart-worker');
  await page.waitForFunction((s) => /resumed the saved run at step/.test(document.getElementById('notice')?.textContent ?? '') && Number(document.getElementById('step')?.textContent) >= s, k + 1, { timeout: 30_000 });
  assert.equal(await page.$('#crashed'), null, 'the crash banner goes once the worker is back');
  assert.deepEqual((await trainLosses(page)).slice(0, before.length), before, 'nothing saved was lost');
  // Sizes past the memory budget: the link's message names the estimate and the limit.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 1024, heads: 1024, layers: 32, context: 1024, batch: 1024 })));
  assert.match((await textOf(page, '#url-error')) ?? '', /over the memory limit of 1\.0 GiB/);
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 512, heads: 8, layers: 8, context: 256, batch: 32 })));
  assert.match((await textOf(page, '#url-error')) ?? '', /over the memory limit of 1\.0 GiB/);
  const expected = problems.filter((p) => !/training worker crashed|unreachable|RuntimeError/.test(p));
  assert.deepEqual(expected, [], 'no other console errors or exceptions');
});

test('a script\'s unreadable value is refused before the wasm, its runs never replace the page\'s saved run, and a resumed run keeps its pace', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  // A cycle or a deep nest: a message, and every API call and Start still work afterwards.
  const messages = await page.evaluate(async () => {
    const o = {}; o.o = o;
    let deep = {}; for (let i = 0; i < 100000; i++) deep = { d: deep };
    const msg = (p) => p.then(() => 'resolved', (e) => e.message);
    return [await msg(spherewalk.train(o)), await msg(spherewalk.bench(o)), await msg(spherewalk.train(deep)), await msg(spherewalk.sample(deep))];
  });
  for (const m of messages) assert.match(m, /cannot be read|recursion limit|not valid JSON/, m);
  const exp = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  exp.train.steps = 10;
  const summary = await page.evaluate((e) => spherewalk.train(e), exp);
  assert.equal(summary.steps, 10, 'the API works after the refusals');
  // The page's own run at 16 steps/s, saved, reloaded and resumed: still about 16 steps/s.
  await page.selectOption('#pace', '16');
  await page.click('#start');
  await stepTo(page, 20);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.waitForFunction(() => Number(document.getElementById('saved')?.dataset.step) >= 20, null, { timeout: 10_000 });
  const pausedAt = await stepOf(page);
  // A script's run meanwhile does not replace the page's saved run.
  const again = await page.evaluate((e) => spherewalk.train(e), exp);
  assert.equal(again.steps, 10);
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#resume-saved', { timeout: 15_000 });
  assert.match(await textOf(page, '#saved-run'), new RegExp(`step ${pausedAt} of 400 \\(sphere preset`), 'the page\'s run is the saved one');
  await page.click('#resume-saved');
  await waitPhase(page, ['training']);
  const s0 = await stepOf(page);
  await page.waitForTimeout(3000);
  const rate = ((await stepOf(page)) - s0) / 3;
  // At step 20 of 400 the run is in its slow start: a third of 16 steps/s.
  assert.ok(rate > 2.5 && rate < 24, `the resumed run goes at its pace of 16 steps/s (${rate.toFixed(1)})`);
  assert.equal(await valueOf(page, '#pace'), '16');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('storage: a save counts once stored; a full or blocked storage is said and the last save kept; a d1024 Adam run trains and saves', { timeout: 300_000 }, async (t) => {
  const first = await launch(t);
  await open(first.page, '');
  await first.page.click('#start');
  await stepTo(first.page, 10);
  await first.page.click('#start');
  await waitPhase(first.page, ['paused']);
  await first.page.waitForFunction(() => Number(document.getElementById('saved')?.dataset.step) >= 10, null, { timeout: 10_000 });
  const kept = Number(await first.page.evaluate(() => document.getElementById('saved').dataset.step));
  assert.deepEqual(first.problems, [], 'no console errors or exceptions');
  await first.context.close();
  // The same browser opened again, its site's quota now below what the saved run takes: the
  // resumed run's next save aborts in its transaction.
  const { page, problems } = await launch(t, { profile: first.userDataDir });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: new URL(PAGE_URL).origin, quotaSize: 1000 });
  await open(page, '');
  await page.waitForSelector('#resume-saved', { timeout: 15_000 });
  await page.click('#resume-saved');
  await waitPhase(page, ['training']);
  await stepTo(page, kept + 10);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.waitForSelector('#saved.save-failed', { timeout: 15_000 });
  assert.match(await textOf(page, '#saved'), new RegExp(`storage for this site is full.*; the save of step ${kept} is kept`));
  await page.locator('section.controls.model').screenshot({ path: join(ARTIFACTS, 'saved-full.png') });
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#resume-saved', { timeout: 15_000 });
  assert.match(await textOf(page, '#saved-run'), new RegExp(`step ${kept} of`), 'storage holds the last save that was stored');
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: new URL(PAGE_URL).origin });

  // Width 1024 with Adam: 150 MB of weights and moments, more than Chromium takes in one stored
  // value; the run trains, saves in parts and resumes from them.
  const wide = { preset: 'custom', data: 'grammar', text: '', d_model: 1024, layers: 1, heads: 4, context: 16, activation: 'gelu', causal: true, optimizer: 'adam', lr: 0.003, steps: 20, batch: 2, seed: 0, steps_per_second: 0 };
  await open(page, '#s=' + encodeURIComponent(JSON.stringify(wide)));
  await page.click('#start');
  await stepTo(page, 2, 90_000);
  await page.click('#start');
  await waitPhase(page, ['paused'], 30_000);
  const at = await stepOf(page);
  await page.waitForFunction((k) => Number(document.getElementById('saved')?.dataset.step) === k, at, { timeout: 60_000 });
  assert.equal(await page.$('#saved.save-failed'), null);
  await page.reload({ waitUntil: 'load' });
  await page.waitForSelector('#resume-saved', { timeout: 30_000 });
  assert.match(await textOf(page, '#saved-run'), new RegExp(`step ${at} of 20 \\(custom preset, adam`));
  await page.click('#resume-saved');
  await waitPhase(page, ['training'], 60_000);
  assert.ok((await stepOf(page)) >= at, 'resumed from the parts');
  await stepTo(page, at + 1, 60_000);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('storage: with site data blocked the page says runs cannot be saved, and trains anyway', { timeout: 120_000 }, async (t) => {
  const preferences = { profile: { default_content_setting_values: { cookies: 2 } } };
  const { page, problems } = await launch(t, { preferences });
  await open(page, '');
  await page.waitForSelector('#saved.save-failed', { timeout: 15_000 });
  assert.match(await textOf(page, '#saved'), /runs cannot be saved in this browser .*site data is blocked/);
  await page.click('#start');
  await stepTo(page, 10);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.waitForTimeout(500);
  assert.match(await textOf(page, '#saved'), /browser storage: .*site data is blocked/, 'never "saved"');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
