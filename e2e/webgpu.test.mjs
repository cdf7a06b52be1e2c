// The WebGPU backend (SwiftShader, through --enable-unsafe-webgpu): the backend line names the
// adapter, steps run and the loss falls, and switching to the CPU continues from the same step.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, readPage, launch, stepOf, textOf, valueOf, open, waitPhase, stepTo } from './helpers.mjs';

test('WebGPU backend: picked and named, trains, and the CPU continues from the same step', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  assert.equal(await valueOf(page, '#backend-choice'), 'auto', 'the default backend is auto');
  await page.selectOption('#backend-choice', 'webgpu');
  assert.match(await textOf(page, '#backend'), /^Backend: WebGPU/);
  // Before the run: SwiftShader is a software adapter, and the page says what that means.
  await page.waitForSelector('#backend-warning', { timeout: 30_000 });
  assert.match(await textOf(page, '#backend-warning'), /software adapter: a step takes seconds/);

  await page.click('#start');
  await page.waitForFunction(() => /^Backend: (WebGPU \(.+\)|CPU)/.test(document.getElementById('backend')?.textContent ?? ''), null, { timeout: 60_000 });
  const line = await textOf(page, '#backend');
  assert.match(line, /^Backend: WebGPU \(.+\)$/, `WebGPU is in use and its adapter is named (saw "${line}")`);
  t.diagnostic(line);
  const started = Date.now();
  await stepTo(page, 8, 120_000);
  const perStep = (Date.now() - started) / (await stepOf(page));
  await page.click('#start'); // Pause
  await waitPhase(page, ['paused']);
  assert.match(await textOf(page, '#gpu-copy'), /drawn from the weights read back from the GPU at each probe step/);
  assert.equal(await page.$$eval('.gpu-copy-note', (ps) => ps.length), 2, 'the sphere and attention panels say where their numbers come from');
  const gpuRun = await readPage(page);
  const k = gpuRun.step;
  assert.ok(k >= 8, `steps ran on WebGPU (step ${k})`);
  assert.equal(gpuRun.train.length, k, 'one training loss per step');
  assert.ok(gpuRun.train.every(Number.isFinite), 'finite losses on WebGPU');
  const head = gpuRun.train[0];
  const tail = gpuRun.train.slice(-3).reduce((a, b) => a + b, 0) / 3;
  assert.ok(tail < head, `the loss falls on WebGPU: ${head} -> ${tail}`);
  assert.ok(gpuRun.val.length >= 1 && gpuRun.val.every(Number.isFinite), 'validation ran on WebGPU');
  await page.screenshot({ path: join(ARTIFACTS, 'page-webgpu.png') });

  // To the CPU: the run continues from the GPU's state at the same step.
  await page.selectOption('#backend-choice', 'cpu');
  await page.waitForFunction(() => /^Backend: CPU/.test(document.getElementById('backend')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.equal(await stepOf(page), k, 'the step is kept');
  assert.equal(await page.$('#gpu-copy'), null, 'no GPU copy note on the CPU');
  await page.click('#step-once');
  await stepTo(page, k + 1, 30_000);
  const cpuRun = await readPage(page);
  assert.equal(cpuRun.step, k + 1);
  assert.deepEqual(cpuRun.train.slice(0, k), gpuRun.train, 'the WebGPU curve is kept');
  const next = cpuRun.train[k];
  assert.ok(Number.isFinite(next) && next < head, `the CPU step continues the trained model (loss ${next} after ${tail} on WebGPU)`);
  assert.ok(Math.abs(next - gpuRun.train[k - 1]) < 0.5 * gpuRun.train[k - 1], 'no jump back to an untrained model');
  t.diagnostic(`WebGPU (SwiftShader): ${perStep.toFixed(0)} ms per step including the page's work; ${k} steps, loss ${head.toFixed(3)} -> ${tail.toFixed(3)}, then CPU step ${k + 1}: ${next.toFixed(3)}`);
  assert.equal(await textOf(page, '#error'), null, 'no error');

  // What the GPU cannot run (K-FAC) stays on the CPU, with a visible message, and trains there.
  await page.click('#reset');
  await waitPhase(page, ['idle']);
  await page.selectOption('#optimizer', 'kfac');
  await page.selectOption('#backend-choice', 'webgpu');
  await page.click('#step-once');
  await stepTo(page, 1, 60_000);
  await page.waitForFunction(() => /^Backend: CPU \(the GPU .*cannot run this/.test(document.getElementById('backend')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.match(await textOf(page, '#notice'), /cannot run this.*training on the CPU/);
  t.diagnostic(await textOf(page, '#notice'));
  assert.equal(await textOf(page, '#error'), null, 'no error');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
