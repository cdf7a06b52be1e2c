// The page trains its default experiment to the end in the browser: the page stays responsive,
// the loss goes down, and nothing is logged as an error.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import {
  ARTIFACTS, PAGE_URL, EXECUTABLE, RUN_TIMEOUT_MS, CHROMIUM_FLAGS, readPage, mean,
  waitReady,
} from './helpers.mjs';

test('the page trains the default experiment in the browser and the loss goes down', {
  timeout: RUN_TIMEOUT_MS + 120_000,
}, async (t) => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const userDataDir = mkdtempSync(join(tmpdir(), 'spherewalk-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: EXECUTABLE,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 900, height: 960 },
    colorScheme: 'light',
  });
  const page = context.pages()[0] ?? (await context.newPage());
  t.after(async () => {
    // Whatever happened, keep a picture of the page for the person reading the log.
    await page.screenshot({ path: join(ARTIFACTS, 'page-last.png'), fullPage: true }).catch(() => {});
    await context.close().catch(() => {});
    // The browser's last processes may still be writing the profile as it closes: retried.
    rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  });
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()} (${req.failure()?.errorText})`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()} for ${res.url()}`);
  });

  const loadStart = Date.now();
  await page.goto(PAGE_URL, { waitUntil: 'load' });
  await waitReady(page);
  const loadMs = Date.now() - loadStart;

  // Before training.
  const before = await readPage(page);
  assert.equal(before.title, 'Spherewalk');
  assert.match(before.backend ?? '', /^Backend: auto \(/, 'the default backend is auto, and the line says so');
  assert.match(before.version ?? '', /^\d+\.\d+\.\d+/, 'the engine version is shown');
  assert.equal(before.status, 'idle');
  assert.equal(before.button, 'Start');
  assert.ok(before.totalSteps > 0, `the default experiment has steps (saw ${before.totalSteps})`);
  assert.equal(before.error, null, 'no error before training');

  // Watch for long tasks: chunked training must never block the page for long.
  await page.evaluate(() => {
    window.__longestTaskMs = 0;
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) window.__longestTaskMs = Math.max(window.__longestTaskMs, e.duration);
    }).observe({ type: 'longtask' });
  });

  const trainStart = Date.now();
  await page.click('#start');
  await page.waitForFunction(
    () => {
      const s = document.getElementById('status')?.dataset.phase;
      return s === 'done' || s === 'error' || Number(document.getElementById('step')?.textContent) >= 1;
    },
    null,
    { timeout: 60_000, polling: 100 },
  );

  // While it trains, the page answers: an animation frame comes quickly, and Pause works.
  let frameMs = null;
  let paused = false;
  if ((await readPage(page)).status === 'training') {
    frameMs = await page.evaluate(
      () => new Promise((resolve) => {
        const t0 = performance.now();
        requestAnimationFrame(() => resolve(performance.now() - t0));
      }),
    );
    await page.click('#start'); // Pause
    await page.waitForFunction(() => document.getElementById('status')?.dataset.phase !== 'training', null, {
      timeout: 10_000,
      polling: 50,
    });
    const p1 = await readPage(page);
    if (p1.status === 'paused') {
      paused = true;
      assert.equal(p1.button, 'Resume');
      await page.waitForTimeout(600);
      const p2 = await readPage(page);
      assert.equal(p2.step, p1.step, 'no steps run while paused');
      await page.click('#start'); // Resume
    }
  }

  await page.waitForFunction(
    () => ['done', 'error'].includes(document.getElementById('status')?.dataset.phase),
    null,
    { timeout: RUN_TIMEOUT_MS, polling: 250 },
  );
  const trainMs = Date.now() - trainStart;
  const after = await readPage(page);
  // Headless Chromium's only WebGPU adapter is SwiftShader (software): auto keeps the CPU and says why.
  assert.match(after.backend ?? '', /^Backend: CPU \(auto: the GPU adapter .+ is software/, `auto picked the CPU (saw "${after.backend}")`);
  const longestTaskMs = await page.evaluate(() => window.__longestTaskMs);

  await page.screenshot({ path: join(ARTIFACTS, 'page.png'), fullPage: true });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(ARTIFACTS, 'page-dark.png'), fullPage: true });

  t.diagnostic(
    `engine ${after.version}; page load ${loadMs} ms; ${after.step} steps in ${(trainMs / 1000).toFixed(1)} s ` +
      `(${after.speed} per step); train loss ${after.train[0]?.toFixed(4)} -> ${after.trainLoss}; ` +
      `val loss ${after.val[0]?.toFixed(4)} -> ${after.valLoss}; longest task ${longestTaskMs.toFixed(0)} ms; ` +
      `frame while training ${frameMs === null ? 'n/a' : frameMs.toFixed(0) + ' ms'}; paused+resumed: ${paused}`,
  );

  assert.equal(after.error, null, `the page shows an error: ${after.error}`);
  assert.equal(after.status, 'done');
  assert.equal(after.button, 'Restart');
  assert.equal(after.step, after.totalSteps, 'every step ran');
  assert.equal(after.train.length, after.totalSteps, 'one training-loss point per step');
  assert.ok(after.train.every(Number.isFinite), 'training losses are finite');
  assert.ok(after.val.length >= 2, `at least two validation points (saw ${after.val.length})`);
  assert.ok(after.val.every(Number.isFinite), 'validation losses are finite');

  // The loss went down: the last training losses sit below the first one, and the
  // last validation loss below the one measured before training.
  const k = Math.max(1, Math.min(10, Math.floor(after.train.length / 4)));
  const firstTrain = after.train[0];
  const lateTrain = mean(after.train.slice(-k));
  assert.ok(lateTrain < firstTrain, `train loss went down: first ${firstTrain}, mean of last ${k} ${lateTrain}`);
  const firstVal = after.val[0];
  const lastVal = after.val[after.val.length - 1];
  assert.ok(lastVal < firstVal, `validation loss went down: first ${firstVal}, last ${lastVal}`);

  // Chunked training keeps the page responsive.
  assert.ok(longestTaskMs < 2_000, `the page was blocked for ${longestTaskMs} ms at once`);

  assert.deepEqual(problems, [], 'no console errors, exceptions or failed requests');
});
