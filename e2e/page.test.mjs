// Browser test of the Spherewalk page (run by `cargo xtask test`, or by hand:
//   SPHEREWALK_URL=http://127.0.0.1:8080/ node --test e2e/page.test.mjs
// while `cargo xtask serve` runs).
//
// It drives the system Chromium (never a downloaded browser) with playwright-core.
// Test 1 trains the page's default experiment to the end and checks that the page stays
// responsive, that the loss goes down, and that nothing is logged as an error.
// Test 2 goes through the lab's features: presets and links, bad links, bad settings and
// uploads, the keyboard, the sphere, attention and entropy panels, CG-FAC diagnostics,
// JSON export, and measures frames and training steps per second.
// Test 3 keeps the run: time to interactive and the engine's ms/step in wasm; the run saved to
// IndexedDB and resumed exactly after a reload; model download (safetensors + config) and upload,
// corrupt files; a non-finite loss (pause, keep the state, go on at a new learning rate); the
// "Brownian or not?" panel and ghost walkers; figures as PNG; the light/dark theme toggle.
// Test 4 picks the WebGPU backend (SwiftShader, through --enable-unsafe-webgpu): the backend line
// names the adapter, steps run and the loss falls, and switching to the CPU continues from the same step.
// Screenshots land in e2e/artifacts/ (page*.png, panel-*.png).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = dirname(fileURLToPath(import.meta.url));
const ARTIFACTS = join(HERE, 'artifacts');
const PAGE_URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8080/';
const EXECUTABLE = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// The native lab, for comparing the page's numbers with the CLI's.
const LAB_BIN = process.env.LAB_BIN ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'target', 'debug', 'lab');
// How long the whole default run may take in the browser.
const RUN_TIMEOUT_MS = Number(process.env.SPHEREWALK_RUN_TIMEOUT_MS ?? 300_000);

const CHROMIUM_FLAGS = [
  '--no-sandbox', // root, in a container
  '--enable-unsafe-webgpu', // WebGPU on SwiftShader (CPU adapters are blocklisted otherwise)
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
];

/** Everything the page shows, read through the stable element ids. */
function readPage(page) {
  return page.evaluate(() => {
    const text = (id) => document.getElementById(id)?.textContent?.trim() ?? null;
    const nums = (s) => (s ? s.split(',').filter((x) => x !== '').map(Number) : []);
    const chart = document.getElementById('loss-chart');
    return {
      title: document.querySelector('h1')?.textContent?.trim() ?? null,
      backend: text('backend'),
      version: text('version'),
      button: text('start'),
      status: document.getElementById('status')?.dataset.phase ?? null,
      step: Number(text('step')),
      totalSteps: Number(text('total-steps')),
      trainLoss: text('train-loss'),
      valLoss: text('val-loss'),
      speed: text('speed'),
      error: text('error'),
      train: nums(chart?.dataset.trainLosses),
      val: nums(chart?.dataset.valLosses),
    };
  });
}

/** WCAG contrast of every visible text (and form control) against the background behind it:
 * AA is 4.5:1, or 3:1 for large text. Disabled controls are exempt, as WCAG has it. */
function contrastReport(page) {
  return page.evaluate(() => (() => {
  const parse = (c) => { const m = c.match(/rgba?\(([^)]+)\)/); if (!m) return null; const v = m[1].split(/[ ,/]+/).filter(Boolean).map(Number); return { r: v[0], g: v[1], b: v[2], a: v.length > 3 ? v[3] : 1 }; };
  const lum = ({ r, g, b }) => { const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, bot) => ({ r: top.r * top.a + bot.r * (1 - top.a), g: top.g * top.a + bot.g * (1 - top.a), b: top.b * top.a + bot.b * (1 - top.a), a: 1 });
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = parse(getComputedStyle(e).backgroundColor); if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; } }
    let bg = { r: 255, g: 255, b: 255, a: 1 };
    for (const c of layers.reverse()) bg = over(c, bg);
    return bg;
  };
  const bad = [];
  let checked = 0;
  for (const el of document.querySelectorAll('body *')) {
    if (!el.checkVisibility?.() || el.closest('[disabled],[hidden]') || el.disabled) continue;
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own && !['INPUT', 'SELECT', 'TEXTAREA'].includes(el.tagName)) continue;
    const s = getComputedStyle(el);
    let op = 1; for (let e = el; e; e = e.parentElement) op *= Number(getComputedStyle(e).opacity);
    if (op < 1) continue;
    const bg = background(el);
    const fg = over(parse(s.color), bg);
    const [a, b] = [lum(fg) + 0.05, lum(bg) + 0.05];
    const ratio = Math.max(a, b) / Math.min(a, b);
    const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    checked++;
    if (ratio < need) bad.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}.${el.className} "${(el.textContent || el.value || '').trim().slice(0, 30)}" ${ratio.toFixed(2)} < ${need} (${s.color} on rgb(${bg.r|0},${bg.g|0},${bg.b|0}))`);
  }
  return { checked, bad };
})());
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

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
    rmSync(userDataDir, { recursive: true, force: true });
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
  await page.waitForSelector('#start', { timeout: 60_000 });
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

// ---------------------------------------------------------------- the lab's features

/** A fresh headless Chromium with the page's problems (console errors, exceptions) collected. */
async function launch(t, { preferences, profile, ...options } = {}) {
  mkdirSync(ARTIFACTS, { recursive: true });
  // A new profile, or `profile` (the folder of an earlier launch: a browser opened again).
  const userDataDir = profile ?? mkdtempSync(join(tmpdir(), 'spherewalk-chromium-'));
  // The profile's settings, as a visitor would have set them in the browser's settings page.
  if (preferences) {
    mkdirSync(join(userDataDir, 'Default'));
    writeFileSync(join(userDataDir, 'Default', 'Preferences'), JSON.stringify(preferences));
  }
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: EXECUTABLE,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1100, height: 1000 },
    colorScheme: 'light',
    acceptDownloads: true,
    ...options,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  t.after(async () => {
    await page.screenshot({ path: join(ARTIFACTS, 'page-features-last.png'), fullPage: true }).catch(() => {});
    await context.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
  });
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
  page.on('response', (res) => {
    if (res.status() >= 400) problems.push(`HTTP ${res.status()} for ${res.url()}`);
  });
  return { context, page, problems, userDataDir };
}

const phase = (page) => page.evaluate(() => document.getElementById('status')?.dataset.phase);
const stepOf = (page) => page.evaluate(() => Number(document.getElementById('step')?.textContent));
const textOf = (page, sel) => page.evaluate((s) => document.querySelector(s)?.textContent?.trim() ?? null, sel);
const valueOf = (page, sel) => page.evaluate((s) => document.querySelector(s)?.value ?? null, sel);
const settingsOf = (page) =>
  page.evaluate(() =>
    Object.fromEntries(
      ['preset', 'data', 'd-model', 'layers', 'heads', 'context', 'activation', 'causal', 'optimizer', 'lr', 'steps', 'seed']
        .map((id) => [id, document.getElementById(id)?.value ?? null]),
    ),
  );

async function open(page, hash) {
  // A change of the hash alone would not reload the page.
  await page.goto('about:blank');
  await page.goto(PAGE_URL + hash, { waitUntil: 'load' });
  await page.waitForSelector('#start', { timeout: 60_000 });
}

async function setField(page, sel, value) {
  await page.fill(sel, String(value));
  await page.dispatchEvent(sel, 'change');
}

async function waitPhase(page, phases, timeout = 60_000) {
  await page.waitForFunction((ps) => ps.includes(document.getElementById('status')?.dataset.phase), phases, {
    timeout,
    polling: 50,
  });
}

/** Pixels of a canvas that differ from its top-left (background) pixel. */
const inkOf = (page, sel) =>
  page.evaluate((s) => {
    const c = document.querySelector(s);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) n++;
    return n;
  }, sel);

const snapshot = (page, sel) => page.evaluate((s) => document.querySelector(s).toDataURL(), sel);

/** Animation frames and training steps per second over `ms` of training, measured in the page. */
const ratesOver = (page, ms) =>
  page.evaluate((ms) => new Promise((resolve) => {
    const step = () => Number(document.getElementById('step')?.textContent);
    const s0 = step();
    const t0 = performance.now();
    let frames = 0;
    const tick = () => {
      frames++;
      const dt = performance.now() - t0;
      if (dt < ms) requestAnimationFrame(tick);
      else resolve({ fps: (frames * 1000) / dt, stepsPerSec: ((step() - s0) * 1000) / dt });
    };
    requestAnimationFrame(tick);
  }), ms);

test('presets, links, bad input, panels, export and speed', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const notes = [];

  // A preset link: the short form sets the preset, and the address then holds the whole experiment.
  await open(page, '#preset=joma');
  const joma = await settingsOf(page);
  assert.equal(joma.preset, 'joma');
  assert.equal(joma.data, 'hierarchy');
  assert.equal(joma.activation, 'gelu', "JoMA's prediction is for a nonlinear MLP");
  assert.equal(await page.$('#url-error'), null, 'a good link shows no error');
  await page.selectOption('#activation', 'identity');
  await setField(page, '#seed', 7);
  const link = await page.evaluate(() => location.href);
  assert.match(link, /#s=/, 'the address holds the settings');
  // The link reproduces the settings in a fresh page.
  await page.goto('about:blank');
  await page.goto(link, { waitUntil: 'load' });
  await page.waitForSelector('#start', { timeout: 60_000 });
  const again = await settingsOf(page);
  assert.deepEqual(again, { ...joma, preset: 'custom', activation: 'identity', seed: '7' }, 'the link reproduces the settings');

  // A malformed link: a clear message, the default experiment, and a page that works.
  await open(page, '#s=%7B%22heads%22%3A%22four%22');
  const urlError = await textOf(page, '#url-error');
  assert.match(urlError ?? '', /could not be read.*default experiment/s, `bad link message: ${urlError}`);
  assert.equal((await settingsOf(page)).preset, 'sphere');
  await page.click('#step-once');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) === 1, null, { timeout: 30_000 });
  assert.equal(await phase(page), 'paused');
  await open(page, '#s=%7B%22d_model%22%3A30%7D');
  assert.match((await textOf(page, '#url-error')) ?? '', /heads \(4\) must divide d_model \(30\)/, 'unusable link values are named');
  await open(page, '#preset=nonsense');
  assert.match((await textOf(page, '#url-error')) ?? '', /unknown preset/);
  // A new hash in the open page applies without a reload.
  await page.evaluate(() => { location.hash = '#preset=race'; });
  await page.waitForFunction(() => document.getElementById('optimizer')?.value === 'cgfac', null, { timeout: 5_000 });
  assert.equal(await page.$('#url-error'), null, 'a good hash clears the message');

  // Bad settings: the engine's message, and the page keeps working after a fix.
  await open(page, '');
  await setField(page, '#heads', 5);
  await page.click('#start');
  await waitPhase(page, ['error']);
  const headsError = await textOf(page, '#error');
  assert.match(headsError ?? '', /heads \(5\) must divide d_model \(32\)/, `bad settings message: ${headsError}`);
  await setField(page, '#heads', 4);
  await page.click('#start');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 3, null, { timeout: 30_000 });
  assert.equal(await page.$('#error'), null, 'the error is gone after a good start');

  // Space pauses and resumes (when no form control has the focus).
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('Space');
  await waitPhase(page, ['paused', 'done']);
  if ((await phase(page)) === 'paused') {
    await page.keyboard.press('Space');
    await waitPhase(page, ['training', 'done']);
    await page.keyboard.press('Space');
    await waitPhase(page, ['paused', 'done']);
  }
  await page.click('#reset');
  await waitPhase(page, ['idle']);

  // Uploads: empty and binary files get a clear message; short text gets the engine's.
  const upload = (name, buffer) => page.setInputFiles('#file-input', { name, mimeType: 'text/plain', buffer });
  await upload('empty.txt', Buffer.alloc(0));
  await page.waitForSelector('#upload-error', { timeout: 10_000 });
  assert.match(await textOf(page, '#upload-error'), /empty\.txt is empty/);
  await upload('model.bin', Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0, 1, 2, 0, 0xff]));
  await page.waitForFunction(() => /binary/.test(document.getElementById('upload-error')?.textContent ?? ''), null, { timeout: 10_000 });
  assert.equal(await valueOf(page, '#data'), 'grammar', 'a rejected upload changes nothing');
  await upload('big.txt', Buffer.alloc(4 * 1024 * 1024 + 1, 'a'));
  await page.waitForFunction(() => /big\.txt/.test(document.getElementById('upload-error')?.textContent ?? ''), null, { timeout: 10_000 });
  assert.match(await textOf(page, '#upload-error'), /big\.txt is 4194305 bytes; the lab takes text files up to 4 MiB \(4194304 bytes\)/);
  await upload('short.txt', Buffer.from('hello world'));
  await page.waitForSelector('#upload-note', { timeout: 10_000 });
  assert.equal(await valueOf(page, '#data'), 'text');
  assert.equal(await valueOf(page, '#text-input'), 'hello world');
  await page.click('#start');
  await waitPhase(page, ['error']);
  assert.match((await textOf(page, '#error')) ?? '', /text has 11 characters; a context of 32 needs at least 66/);
  const story = 'The quick brown fox jumps over the lazy dog, and the dog sleeps on. '.repeat(20);
  await upload('story.txt', Buffer.from(story));
  await page.waitForFunction(() => /loaded/.test(document.getElementById('upload-note')?.textContent ?? ''), null, { timeout: 10_000 });
  await page.click('#step-once');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) === 1, null, { timeout: 30_000 });
  assert.equal(await page.$('#error'), null, 'uploaded text trains');

  // Adam against CG-FAC: both entrants step together (one worker each); CG-FAC shows its diagnostics.
  await open(page, '#preset=race');
  assert.equal(await valueOf(page, '#optimizer'), 'cgfac');
  for (let i = 0; i < 3; i++) await page.click('#step-once');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) === 3, null, { timeout: 30_000 });
  await page.waitForFunction(() => document.getElementById('race-chart')?.dataset.steps === '3,3', null, { timeout: 30_000 });
  assert.equal(await page.getAttribute('#race-chart', 'data-entrants'), 'cgfac lr 0.03,adam lr 0.01', 'entrants labelled by optimizer and learning rate');
  const diag = await textOf(page, '#diagnostics');
  assert.match(diag ?? '', /cgfac after step 3: damping .*CG iterations, residual/s, `diagnostics: ${diag}`);
  assert.ok(await page.isVisible('#panel-diagnostics'));
  assert.ok((await page.evaluate(() => Number(document.getElementById('diagnostics-chart').dataset.points))) >= 3);
  await page.locator('#panel-diagnostics').screenshot({ path: join(ARTIFACTS, 'panel-diagnostics.png') });
  await page.click('#start');
  await page.waitForFunction(() => document.getElementById('race-chart')?.dataset.steps.split(',').every((n) => Number(n) >= 30), null, { timeout: 60_000 });
  const raceSteps = (await page.getAttribute('#race-chart', 'data-steps')).split(',').map(Number);
  assert.equal(await phase(page), 'training', 'both entrants have 30 steps while the run still trains: they run at the same time');
  await page.click('#start');
  await waitPhase(page, ['paused']);
  // The race on the page: its verdict under the race chart, a row of numbers per named entrant,
  // validation points for both.
  await page.waitForSelector('#race-verdict', { timeout: 10_000 });
  assert.match(await textOf(page, '#race-verdict'), /cgfac lr 0\.03.*adam lr 0\.01|adam lr 0\.01.*cgfac lr 0\.03/);
  const rows = await page.locator('#race-stats tbody tr').allTextContents();
  assert.equal(rows.length, 2);
  assert.match(rows[0], /^cgfac lr 0\.03\d+\d\.\d{4}\d\.\d{4}/);
  assert.match(rows[1], /^adam lr 0\.01\d+\d\.\d{4}\d\.\d{4}/);
  const valPoints = (await page.getAttribute('#race-chart', 'data-val-points')).split(',').map(Number);
  assert.ok(valPoints.every((n) => n >= 2), `validation points per entrant: ${valPoints}`);
  await page.locator('#panel-loss').screenshot({ path: join(ARTIFACTS, 'panel-race.png') });
  notes.push(`race: steps ${raceSteps.join(' / ')} (cgfac / adam) while both train`);

  // Speed: a long run of the default model; frames and steps per second over 3 s of training.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ steps: 5000, steps_per_second: 0 })));
  await page.click('#start');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 5, null, { timeout: 30_000 });
  const speed = await ratesOver(page, 3000);
  const pageMsPerStep = await textOf(page, '#speed');
  notes.push(`frames per second while training ${speed.fps.toFixed(1)}; training steps per second ${speed.stepsPerSec.toFixed(1)} (default model, CPU)`);
  // For the "within 2x of native" comparison: wall time per step in the page (drawing and probing
  // included), and the page's own ms per optimizer step (training chunk only). The default browser
  // experiment: TrainConfig::browser_default() (d_model 32, 2 layers, 4 heads, context 32, batch 8, adam).
  notes.push(
    `browser ms/step, default browser experiment (CPU path): ${(1000 / speed.stepsPerSec).toFixed(2)} ms wall per step; ` +
      `${pageMsPerStep} per optimizer step inside the training chunks`,
  );
  assert.ok(speed.fps >= 10, `the animation keeps going while training (${speed.fps.toFixed(1)} fps)`);
  assert.ok(speed.stepsPerSec > 1, `training makes progress (${speed.stepsPerSec.toFixed(1)} steps/s)`);

  // The sphere: points drawn, trails, depth slider, colour by position, drag to rotate.
  await page.waitForFunction(() => Number(document.getElementById('sphere')?.dataset.step) >= 20, null, { timeout: 30_000 });
  await page.click('#start'); // pause
  await waitPhase(page, ['paused']);
  assert.equal(await page.evaluate(() => Number(document.getElementById('sphere').dataset.points)), 32, 'one point per probe token');
  assert.ok((await inkOf(page, '#sphere')) > 2000, 'the sphere canvas is drawn');
  await page.evaluate(() => {
    const d = document.getElementById('depth');
    d.value = d.max;
    d.dispatchEvent(new Event('input', { bubbles: true }));
  });
  assert.equal(await textOf(page, '#depth-value'), 'final');
  await page.selectOption('#color-by', 'position');
  const before = await snapshot(page, '#sphere');
  await page.locator('#sphere').scrollIntoViewIfNeeded();
  const box = await page.locator('#sphere').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 + 80, box.y + box.height / 2 + 30, { steps: 5 });
  await page.mouse.up();
  assert.ok((await snapshot(page, '#sphere')) !== before, 'dragging rotates the sphere');
  // Training time: the step slider goes back to an earlier snapshot and Live returns to the latest.
  const liveStep = await page.evaluate(() => Number(document.getElementById('sphere').dataset.step));
  assert.match(await textOf(page, '#time-value'), new RegExp(`^live \\(step ${liveStep}\\)$`));
  assert.equal(await page.getAttribute('#time', 'aria-valuetext'), `live (step ${liveStep})`);
  assert.ok(Number(await page.getAttribute('#time', 'max')) >= 2, 'several snapshots kept over training');
  const liveView = await snapshot(page, '#sphere');
  // The cloud shown, as numbers: WebGL2 on SwiftShader does not redraw bit-identical pixels.
  const livePositions = await page.getAttribute('#sphere', 'data-positions');
  await page.evaluate(() => {
    const t = document.getElementById('time');
    t.value = '0';
    t.dispatchEvent(new Event('input', { bubbles: true }));
  });
  const pastText = await textOf(page, '#time-value');
  const pastStep = Number(/^step (\d+)$/.exec(pastText)?.[1]);
  assert.ok(pastStep < liveStep, `the slider points at an earlier step (${pastText}, live ${liveStep})`);
  assert.equal(await page.getAttribute('#time', 'aria-valuetext'), pastText, 'screen readers hear the step');
  assert.equal(await page.evaluate(() => Number(document.getElementById('sphere').dataset.shownStep)), pastStep);
  assert.ok((await snapshot(page, '#sphere')) !== liveView, 'the earlier cloud is drawn');
  await page.screenshot({ path: join(ARTIFACTS, 'panel-sphere-past.png'), clip: await page.locator('#panel-sphere').boundingBox() });
  await page.evaluate(() => {
    const t = document.getElementById('time');
    t.value = t.max;
    t.dispatchEvent(new Event('input', { bubbles: true }));
  });
  assert.equal(await textOf(page, '#time-value'), `live (step ${liveStep})`, 'the end of the slider is live');
  assert.equal(await page.evaluate(() => Number(document.getElementById('sphere').dataset.shownStep)), liveStep);
  assert.equal(await page.getAttribute('#sphere', 'data-positions'), livePositions, 'live shows the latest cloud again');
  await page.evaluate(() => {
    const t = document.getElementById('time');
    t.value = '1';
    t.dispatchEvent(new Event('input', { bubbles: true }));
  });
  assert.match(await textOf(page, '#time-value'), /^step \d+$/);
  await page.click('#time-live');
  assert.equal(await textOf(page, '#time-value'), `live (step ${liveStep})`, 'the Live button returns to the latest');
  await page.locator('#panel-sphere').screenshot({ path: join(ARTIFACTS, 'panel-sphere.png') });

  // Attention: a heatmap per layer and head; P^k spreads (or concentrates) the rows.
  assert.ok((await inkOf(page, '#attention')) > 1000, 'the heatmap is drawn');
  const h1 = await page.evaluate(() => Number(document.getElementById('attention').dataset.entropy));
  await page.evaluate(() => {
    for (const [id, v] of [['att-layer', 1], ['att-head', 2], ['att-k', 8]]) {
      const e = document.getElementById(id);
      e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
    }
  });
  await page.waitForFunction((h) => Number(document.getElementById('attention').dataset.entropy) !== h, h1, { timeout: 5_000 });
  assert.match(await textOf(page, '#attention-entropy'), /P\^8/);
  await page.locator('#panel-attention').screenshot({ path: join(ARTIFACTS, 'panel-attention.png') });

  // Entropy over training: one point per probe snapshot.
  assert.ok((await page.evaluate(() => Number(document.getElementById('entropy-chart').dataset.points))) >= 3);
  await page.locator('#panel-entropy').screenshot({ path: join(ARTIFACTS, 'panel-entropy.png') });
  await page.locator('#panel-loss').screenshot({ path: join(ARTIFACTS, 'panel-loss.png') });
  await page.locator('#panel-settings').screenshot({ path: join(ARTIFACTS, 'panel-settings.png') });

  // Export: the download is valid JSON with the config and every loss point.
  const steps = await stepOf(page);
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: 10_000 }), page.click('#export')]);
  assert.equal(download.suggestedFilename(), 'spherewalk-run.json');
  const doc = JSON.parse(readFileSync(await download.path(), 'utf8'));
  assert.equal(doc.config.model.d_model, 32);
  assert.equal(doc.config.steps, 5000);
  assert.equal(doc.settings.preset, 'sphere');
  assert.equal(doc.metrics.train_loss.length, steps, 'every training loss is exported');
  assert.ok(doc.metrics.train_loss.every(([s, l]) => Number.isInteger(s) && Number.isFinite(l)));
  assert.ok(doc.metrics.attention_entropy.length >= 3);
  const attr = await page.evaluate(() => document.getElementById('export-json').dataset.json);
  assert.deepEqual(JSON.parse(attr), doc, 'the page keeps the exported JSON');

  for (const n of notes) t.diagnostic(n);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

// ---------------------------------------------------------------- keeping the run

/** Reads a safetensors header: { header, dataStart }. */
function safetensorsHeader(buf) {
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.subarray(8, 8 + n).toString('utf8')), dataStart: 8 + n };
}

const trainLosses = (page) =>
  page.evaluate(() => (document.getElementById('loss-chart')?.dataset.trainLosses ?? '').split(',').filter((x) => x !== '').map(Number));

async function stepTo(page, n, timeout = 60_000) {
  await page.waitForFunction((k) => Number(document.getElementById('step')?.textContent) >= k, n, { timeout, polling: 20 });
}

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
      Number(document.getElementById('sphere')?.dataset.ghosts) > 0,
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
  const brownianVerdict = await textOf(page, '#verdict-brownian');
  assert.match(brownianVerdict, /^(So far \(step \d+ of 300\): )?(Brownian|Partly Brownian|Not Brownian).*R² = .*KS = [\d.]+, (within|beyond) the 5% critical value 0\.34 for 32 tokens/s);
  assert.match(await textOf(page, '#verdict-sphere'), /^On the sphere: every token of the probe row is within .* of the sphere of radius √32/);
  assert.match(await textOf(page, '#verdict-markov'), /^A Markov chain: every row of every head is non-negative and sums to 1/);
  assert.match(await textOf(page, '#verdict-joma-0'), /^(So far \(step \d+ of 300\): )?Layer 0: .*entropy [\d.]+ → lowest/);
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
  await page.waitForSelector('#start');
  assert.equal((await themeOf()).theme, 'dark', 'the theme is remembered');
  await page.screenshot({ path: join(ARTIFACTS, 'page-dark-toggle.png') });
  await page.click('#theme');
  assert.equal((await themeOf()).theme, 'light');

  for (const n of notes) t.diagnostic(n);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

// ---------------------------------------------------------------- the WebGPU backend

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

// ---------------------------------------------------------------- the session in its worker

/** The native `lab` on `experiment` (JSON text): its eval lines and summary. */
function labTrain(experiment, extra = []) {
  const dir = mkdtempSync(join(tmpdir(), 'spherewalk-exp-'));
  const file = join(dir, 'experiment.json');
  writeFileSync(file, experiment);
  const out = execFileSync(LAB_BIN, ['train', '--config', file, '--json', ...extra], { encoding: 'utf8' });
  rmSync(dir, { recursive: true, force: true });
  // Progress lines: evaluations, and what the model wrote (the page's experiment writes on its schedule).
  const lines = out.trim().split('\n').map((l) => JSON.parse(l));
  return { evals: lines.slice(0, -1).filter((l) => !('sample' in l)), summary: lines[lines.length - 1] };
}

/** Relative difference |a - b| / max(|b|, 1e-12). */
const rel = (a, b) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);

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

test('pace: a class watches the default run for about 30 s, slower where things change fastest, and the speed control changes steps per second', { timeout: 240_000 }, async (t) => {
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
  // "As fast as possible" takes about what the line said beforehand (within 30%), overheads and all.
  for (const size of [{}, { d_model: 64, context: 64, batch: 16, steps: 100 }]) {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ ...size, steps_per_second: 0 })));
    const said = await textOf(page, '#estimate');
    const expected = Number(said.match(/as fast as possible: about (\d+) s/)[1]);
    const t0 = Date.now();
    await page.click('#start');
    await page.waitForFunction(() => /Measured [\d.]+ steps\/s: about \d+ s left/.test(document.getElementById('estimate').textContent), null, { timeout: 30_000, polling: 100 });
    await waitPhase(page, ['done'], 120_000);
    const took = (Date.now() - t0) / 1000;
    t.diagnostic(`${JSON.stringify(size)}: "${said}"; took ${took.toFixed(1)} s`);
    assert.ok(Math.abs(took - expected) <= 0.3 * expected + 0.5, `the estimate ${expected} s against ${took.toFixed(1)} s measured`);
  }
  // A size that will be slow says so before it starts.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 256, layers: 4, heads: 4, context: 256, steps: 200 })));
  assert.match(await textOf(page, '#estimate'), /Slow size: about [\d.]+ s a step in the browser/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('forms keep a bad entry in place with its message and never write it into the link', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
  const before = await hash();
  for (const [id, text, message] of [
    ['#lr', '0,001', /decimal point, not a comma: "0\.001"/],
    ['#lr', 'abc', /must be a number such as 0\.001 or 1e-3/],
    ['#lr', 'NaN', /must be a finite number/],
    ['#lr', 'inf', /must be a finite number/],
    ['#lr', '-5', /must be positive/],
    ['#steps', '1e3', /whole number/],
    ['#steps', '-5', /whole number/],
    ['#steps', '1000000000', /at most 1000000/],
    ['#heads', '0', /at least 1/],
  ]) {
    await setField(page, id, text);
    const error = await textOf(page, `${id}-error`);
    assert.match(error ?? '', message, `${id} "${text}": ${error}`);
    assert.equal(await valueOf(page, id), text, `${id} keeps what was typed`);
    assert.equal(await page.getAttribute(id, 'aria-invalid'), 'true');
    assert.equal(await hash(), before, `${id} "${text}" does not reach the link`);
    assert.doesNotMatch(await hash(), /null/);
  }
  // A preset replaces the settings: the bad entries give way to its values.
  await setField(page, '#d-model', 'abc');
  await setField(page, '#steps', '-5');
  await page.selectOption('#preset', 'joma');
  const joma = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  assert.equal(await valueOf(page, '#d-model'), String(joma.train.model.d_model), 'the preset\'s width is shown');
  assert.equal(await valueOf(page, '#steps'), String(joma.train.steps));
  for (const id of ['#d-model', '#steps', '#heads']) {
    assert.equal(await textOf(page, `${id}-error`), '', `${id}: no message left`);
    assert.equal(await page.getAttribute(id, 'aria-invalid'), 'false');
  }
  await setField(page, '#lr', '1e-3');
  assert.equal(await textOf(page, '#lr-error'), '', 'a good entry clears the message');
  assert.match(await hash(), /"lr":0\.001/, 'scientific notation is read');
  await setField(page, '#steps', '300');
  await setField(page, '#heads', '4');
  assert.match(await hash(), /"steps":300/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('layout: the picture is on the first screen at 1280x800, and a phone does not scroll sideways', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  for (const id of ['panel-sphere', 'panel-loss', 'panel-attention', 'start', 'pace']) {
    const b = await page.locator(`#${id}`).boundingBox();
    assert.ok(b && b.x >= 0 && b.y >= 0 && b.x + b.width <= 1280 && b.y + b.height <= 800, `#${id} inside 1280x800 on load: ${JSON.stringify(b)}`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-1280x800.png') });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no horizontal scroll at 390 px (scroll width ${width})`);
  const start = await page.locator('#start').boundingBox();
  assert.ok(start.y + start.height <= 844, `Start is on the phone's first screen (${start.y})`);
  await page.screenshot({ path: join(ARTIFACTS, 'page-390x844.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('a link with one bad value keeps the good ones and marks the bad one; the address changes only on edits', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const link = '#s=' + encodeURIComponent(JSON.stringify({ heads: 3, seed: 7, lr: 0.005, steps: 120 }));
  await open(page, link);
  assert.equal(await valueOf(page, '#seed'), '7', 'a good value is kept');
  assert.equal(await valueOf(page, '#steps'), '120');
  assert.equal(await valueOf(page, '#lr'), '0.005');
  assert.equal(await valueOf(page, '#heads'), '3', 'the bad value is shown where it was');
  assert.match(await textOf(page, '#heads-error'), /from the link: .*heads \(3\) must divide d_model \(32\)/);
  assert.match(await textOf(page, '#url-error'), /heads = 3 .*the rest is as linked/);
  assert.equal(await page.evaluate(() => location.hash), link, 'loading a link leaves the address as it is');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  assert.equal(await page.evaluate(() => location.hash), link, 'running leaves it too');
  await setField(page, '#heads', '4');
  assert.equal(await textOf(page, '#heads-error'), '');
  assert.match(await page.evaluate(() => decodeURIComponent(location.hash)), /"heads":4.*"seed":7/, 'an edit writes the address');
  // Fields that only fit together are good together.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 30, heads: 3 })));
  assert.equal(await page.$('#url-error'), null);
  assert.equal(await valueOf(page, '#d-model'), '30');
  // A preset the page does not have: custom, and said so; a pace the selector does not offer: the
  // preset's pace, and said so (the selector never shows one pace while the run goes at another).
  for (const pace of [-5, 17, 1e308]) {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ preset: 'nonsense', seed: 9, steps_per_second: pace })));
    assert.equal(await valueOf(page, '#preset'), 'custom', 'the selector names what the form holds');
    assert.equal(await valueOf(page, '#seed'), '9');
    const error = await textOf(page, '#url-error');
    assert.match(error, /preset = "nonsense" \(no preset is called "nonsense"\)/);
    assert.match(error, /steps_per_second = .*\(the page goes at 2, 5, 8, 12, 16, 30, 60 steps per second, or 0/);
    assert.ok(['2', '5', '8', '12', '16', '30', '60', '0'].includes(await valueOf(page, '#pace')));
  }
  // What a link wrote, as it wrote it.
  await open(page, '#preset=' + encodeURIComponent('<b>x</b>'));
  assert.match(await textOf(page, '#url-error'), /unknown preset "<b>x<\/b>"/);
  await open(page, '#tour=abc');
  assert.match(await textOf(page, '#url-error'), /tour step "abc"; the tour has steps 1 to/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('presenter mode and the keys', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('p');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.presenter), 'on', 'P enters presenter mode');
  assert.equal(await page.isVisible('#panel-settings'), false, 'the settings step aside');
  for (const id of ['#panel-sphere', '#panel-loss', '#panel-attention', '#start']) assert.ok(await page.isVisible(id), `${id} stays`);
  const size = await page.evaluate(() => parseFloat(getComputedStyle(document.body).fontSize));
  assert.ok(size >= 20, `large type (${size}px)`);
  await page.keyboard.press('ArrowRight');
  await stepTo(page, 1, 30_000);
  await page.keyboard.press('ArrowRight');
  await stepTo(page, 2, 30_000);
  assert.equal(await phase(page), 'paused', 'the right arrow steps');
  await page.keyboard.press('Space');
  await waitPhase(page, ['training']);
  await page.keyboard.press('Space');
  await waitPhase(page, ['paused']);
  const stageTop = async () => (await page.locator('#panel-sphere').boundingBox()).y;
  const before = await stageTop();
  await page.keyboard.press('?');
  assert.match(await textOf(page, '#keys-help'), /Space.*start, pause.*presenter mode.*full screen/s);
  assert.equal(await stageTop(), before, 'the list of keys floats over the page: the picture stays where it was');
  await page.screenshot({ path: join(ARTIFACTS, 'page-presenter.png') });
  await page.keyboard.press('Escape');
  assert.equal(await page.$('#keys-help'), null, 'Escape closes the list');
  await page.keyboard.press('p');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.presenter), undefined);
  assert.ok(await page.isVisible('#panel-settings'));
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('the guided tour: every step sets up its experiment, points at its panel and shows a measured verdict, provisional until it is final', { timeout: 420_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  const verdictOf = () => textOf(page, '#tour-verdict');
  const expected = [
    [/Tokens live on a sphere/, 'panel-sphere', /Measured: On the sphere: every token/],
    [/Attention is a random walk/, 'panel-attention', /Measured: A Markov chain/],
    [/Softmax is a Gaussian kernel/, 'panel-attention', /Measured: With queries and keys on one sphere .* total variation of [\d.]+/],
    [/Random walk or Brownian motion\?/, 'panel-brownian', /Measured: (So far \(step \d+ of \d+\): )?(Brownian|Partly Brownian|Not Brownian).*critical value/],
    [/Second order against Adam/, 'panel-loss', /Measured: .*after \d+ steps cgfac lr 0\.03 is at loss [\d.]+, adam lr 0\.01 at [\d.]+/],
    [/JoMA: sparse, then dense/, 'panel-entropy', /Measured: (So far \(step \d+ of \d+\): )?Layer 0: .*entropy [\d.]+ → lowest .*Layer 1: .*entropy/],
  ];
  await open(page, '');
  const sphereAlone = await page.locator('#panel-sphere').boundingBox();
  await open(page, '#tour=1');
  assert.deepEqual(await page.locator('#panel-sphere').boundingBox(), sphereAlone, 'the tour box does not push the picture down');
  // Every 50 ms: a verdict marked settled keeps its answer for the rest of its run, and one that
  // is not settled is drawn as provisional.
  await page.evaluate(() => {
    const v = (window.__verdicts = { seen: {}, violations: [], provisional: 0, settled: 0 });
    setInterval(() => {
      for (const e of document.querySelectorAll('.verdict[data-settled], #tour-verdict[data-settled]')) {
        if (e.dataset.settled === 'true') {
          v.settled++;
          const was = v.seen[e.id];
          if (was !== undefined && was !== e.dataset.agreement) v.violations.push(`${e.id}: settled ${was}, then ${e.dataset.agreement}`);
          v.seen[e.id] = e.dataset.agreement;
        } else if (e.dataset.agreement && e.dataset.agreement !== 'not-yet') {
          v.provisional++;
          if (!e.classList.contains('provisional')) v.violations.push(`${e.id} is not final and not drawn as provisional`);
          if (!/So far \(step \d+ of \d+\)|Layer \d: too few/.test(e.textContent)) v.violations.push(`${e.id} is not final and does not say "so far": ${e.textContent.slice(0, 80)}`);
        }
      }
    }, 50);
  });
  const settledAt = [];
  const apart = async (panel) => page.evaluate((id) => {
    const [a, b] = [document.getElementById('tour').getBoundingClientRect(), document.getElementById(id).getBoundingClientRect()];
    return { apart: a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top, card: [a.left, a.top, a.width, a.height].map(Math.round), panel: [b.left, b.top, b.width, b.height].map(Math.round) };
  }, panel);
  for (const [i, [title, panel, verdict]] of expected.entries()) {
    // Each step shows its own claim in the tour's box; steps 4, 5 and 6 open a new run, whose
    // verdicts start afresh.
    await page.evaluate((fresh) => {
      if (fresh) window.__verdicts.seen = {};
      delete window.__verdicts.seen['tour-verdict'];
    }, i >= 3);
    assert.match(await textOf(page, '#tour-title'), new RegExp(`step ${i + 1} of 6: ${title.source}`));
    assert.ok(await page.evaluate((p) => document.getElementById(p).classList.contains('tour-focus'), panel), `step ${i + 1} points at #${panel}`);
    await page.waitForTimeout(200);
    const placed = await apart(panel);
    assert.ok(placed.apart, `step ${i + 1} at 1280x800: the card ${placed.card} does not cover #${panel} ${placed.panel}`);
    if ((await phase(page)) !== 'training' && (await phase(page)) !== 'done') {
      await page.selectOption('#pace', '0');
      // The card's own Start: no scrolling back to the top for it.
      assert.match(await textOf(page, '#tour-run'), /Start|Resume/);
      await page.click('#tour-run');
    }
    await page.waitForFunction((v) => new RegExp(v).test(document.getElementById('tour-verdict')?.textContent ?? ''), verdict.source, { timeout: 60_000 });
    // The run goes on to its end; then the step's verdict is final.
    await page.waitForFunction(() => document.getElementById('tour-verdict')?.dataset.settled === 'true', null, { timeout: 120_000, polling: 100 });
    settledAt.push(await page.getAttribute('#tour-verdict', 'data-agreement'));
    t.diagnostic(`tour step ${i + 1}: ${await verdictOf()}`);
    assert.doesNotMatch(await verdictOf(), /So far/, 'a final verdict does not say "so far"');
    if (i === 4) {
      // Step 5 builds on what step 4 measured, in its words.
      const opener = await textOf(page, '#tour-text');
      t.diagnostic(`step 5 opens: ${opener}`);
      const expectedOpener = { agrees: /^Step 4 measured a diffusion/, partly: /^Step 4 measured only part of a diffusion/, disagrees: /^Step 4 did not measure a diffusion/ }[settledAt[3]];
      assert.match(opener, expectedOpener, `step 4 ended "${settledAt[3]}"`);
    }
    if (i + 1 < expected.length) {
      await page.click('#tour-next');
      await page.waitForFunction((n) => location.hash.includes(`tour=${n}`), i + 2, { timeout: 10_000 });
    }
  }
  // Ended runs grow their panels (the race chart, the verdicts): the card follows its panel (the
  // page checks every 400 ms) and keeps clear of it.
  await page.waitForFunction(() => {
    const [a, b] = [document.getElementById('tour').getBoundingClientRect(), document.getElementById('panel-entropy').getBoundingClientRect()];
    return a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
  }, null, { timeout: 2_000, polling: 50 }).catch(() => {});
  const after = await apart('panel-entropy');
  assert.ok(after.apart, `after the run the card ${after.card} does not cover the JoMA panel ${after.panel}`);
  const watch = await page.evaluate(() => window.__verdicts);
  t.diagnostic(`verdicts watched: ${watch.settled} settled and ${watch.provisional} provisional sightings`);
  assert.deepEqual(watch.violations, [], 'settled verdicts never change; unsettled ones are provisional');
  assert.ok(watch.provisional > 20 && watch.settled > 20, 'both kinds were seen');
  await page.screenshot({ path: join(ARTIFACTS, 'page-tour.png') });
  const tall = (await page.locator('#tour').boundingBox()).height;
  await page.click('#tour-fold');
  const folded = (await page.locator('#tour').boundingBox()).height;
  assert.ok(folded < tall * 0.8, `folding the box shrinks it (${tall} -> ${folded} px)`);
  assert.match(await verdictOf(), /Measured: Layer 0/, 'and keeps the verdict');
  // A link opens a step directly and hides what a class does not need.
  await open(page, '#tour=3&hide=settings,model');
  assert.match(await textOf(page, '#tour-title'), /step 3 of 6/);
  assert.equal(await page.isVisible('#panel-settings'), false, 'the settings are hidden');
  assert.equal(await page.isVisible('#download-model'), false, 'the model files are hidden');
  await open(page, '#tour=9');
  assert.match(await textOf(page, '#url-error'), /tour has steps 1 to 6/);
  // A projector's 1920x1080: every step's card clear of its panel too.
  await page.setViewportSize({ width: 1920, height: 1080 });
  for (const [i, [, panel]] of expected.entries()) {
    await open(page, `#tour=${i + 1}`);
    await page.waitForTimeout(300);
    const placed = await apart(panel);
    assert.ok(placed.apart, `step ${i + 1} at 1920x1080: the card ${placed.card} does not cover #${panel} ${placed.panel}`);
  }
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('contrast: every text meets WCAG AA in the light and the dark theme, and in presenter mode', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '#tour=1');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  for (const theme of ['light', 'dark']) {
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== theme) await page.click('#theme');
    await page.waitForFunction((th) => document.documentElement.dataset.theme === th, theme);
    for (const presenter of [false, true]) {
      if (presenter) await page.keyboard.press('p');
      const { checked, bad } = await contrastReport(page);
      t.diagnostic(`${theme}${presenter ? ', presenter' : ''}: ${checked} texts checked`);
      assert.ok(checked > 50, `the check saw the page's texts (${checked})`);
      assert.deepEqual(bad, [], `${theme} theme${presenter ? ' in presenter mode' : ''}: texts below AA`);
      if (presenter) await page.keyboard.press('p');
    }
  }
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('touch: one finger scrolls the page over the sphere, two fingers turn it, and the toggle turns it with one', { timeout: 120_000 }, async (t) => {
  const { context, page, problems } = await launch(t, { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  const cdp = await context.newCDPSession(page);
  const box = {};
  const inView = async () => {
    await page.evaluate(() => document.getElementById('sphere').scrollIntoView({ block: 'start' }));
    Object.assign(box, await page.locator('#sphere').boundingBox());
  };
  const touch = async (type, points) => cdp.send('Input.dispatchTouchEvent', { type, touchPoints: points.map(([x, y], id) => ({ x, y, id })) });
  const swipe = async (fingers, dx, dy) => {
    const at = fingers.map((f) => [box.x + box.width / 2 + f, box.y + box.height / 2]);
    await touch('touchStart', at);
    for (let i = 1; i <= 10; i++) await touch('touchMove', at.map(([x, y]) => [x + (dx * i) / 10, y + (dy * i) / 10]));
    await touch('touchEnd', []);
    await page.waitForTimeout(300);
  };
  const yaw = async () => Number(await page.getAttribute('#sphere', 'data-yaw'));
  const scrollY = () => page.evaluate(() => window.scrollY);
  assert.ok(await page.isVisible('#one-finger'), 'a touch screen shows the one-finger toggle');
  await inView();
  let [yaw0, y0] = [await yaw(), await scrollY()];
  await swipe([0], 0, -200);
  assert.ok((await scrollY()) > y0 + 50, `one finger up scrolls the page (${y0} -> ${await scrollY()})`);
  assert.equal(await yaw(), yaw0, 'and does not turn the ball');
  await inView();
  yaw0 = await yaw();
  await swipe([-30, 30], 120, 0);
  assert.ok((await yaw()) > yaw0 + 0.3, `two fingers turn the ball (yaw ${yaw0} -> ${await yaw()})`);
  await page.check('#one-finger');
  assert.equal(await page.evaluate(() => getComputedStyle(document.getElementById('sphere')).touchAction), 'none');
  await inView();
  yaw0 = await yaw();
  await swipe([0], 120, 0);
  assert.ok((await yaw()) > yaw0 + 0.3, `with the toggle one finger turns it (yaw ${yaw0} -> ${await yaw()})`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('the sphere and the chain: labels, arcs = the engine attention row, great-circle playback, heatmap hover, verdicts that follow the data', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  await page.selectOption('#pace', '0');
  await page.click('#start');
  await waitPhase(page, ['done'], 120_000);
  const data = (name) => page.evaluate((n) => document.getElementById('sphere').dataset[n], name);
  const nums = (s) => (s ? s.split(',').map(Number) : []);
  const tokens = Number(await data('points'));
  assert.equal(tokens, 32, 'one point per probe token');
  assert.equal(Number(await data('labels')), tokens, 'a label for every token');
  assert.match(await textOf(page, '#sphere-legend'), /vowel.*consonant.*␣ space, ↵ newline/s, 'the legend names the colours and glyphs');
  await page.selectOption('#color-by', 'position');
  assert.match(await textOf(page, '#sphere-legend'), /position 0\s+31/, 'colour by position has its legend too');
  await page.selectOption('#color-by', 'kind');

  // In 3-D on WebGL2: the dot at the nearest token's place has its kind's colour (Okabe-Ito), lit.
  // This browser draws WebGL in software, so the page starts on the 2-D canvas and says so.
  assert.match(await data('renderer'), /^canvas 2d \(WebGL is drawn in software here/);
  await page.check('#webgl-anyway');
  await page.waitForFunction(() => document.getElementById('sphere').dataset.renderer === 'webgl2', null, { timeout: 10_000 });
  // The renderer is named before its first frame: the places and the pixel are read from a frame it drew.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 200)))));
  const screen = nums(await data('screen'));
  const front = Array.from({ length: tokens }, (_, i) => i).reduce((a, b) => (screen[3 * b + 2] > screen[3 * a + 2] ? b : a));
  const symbol = (await page.locator(`#sphere-token option[value="${front}"]`).textContent()).replace(/^\d+: /, '');
  const kinds = { vowel: [0xe6, 0x9f, 0x00], consonant: [0x00, 0x72, 0xb2], space: [0x00, 0x9e, 0x73], punctuation: [0xd5, 0x5e, 0x00], digit: [0xcc, 0x79, 0xa7], other: [0x56, 0xb4, 0xe9] };
  const kind = /^[aeiouy]$/i.test(symbol) ? 'vowel' : /^\p{L}$/u.test(symbol) ? 'consonant' : /^[␣↵⇥]$/.test(symbol) ? 'space' : /^\d$/.test(symbol) ? 'digit' : /^[!-/:-@[-`{-~]$/.test(symbol) ? 'punctuation' : 'other';
  const pixel = await page.evaluate(([x, y]) => {
    const c = document.getElementById('sphere');
    const s = c.width / c.clientWidth;
    return Array.from(c.getContext('2d').getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data).slice(0, 3);
  }, [screen[3 * front], screen[3 * front + 1]]);
  const nearest = Object.entries(kinds).map(([k, c]) => [k, Math.hypot(...c.map((v, i) => v - pixel[i]))]).sort((a, b) => a[1] - b[1])[0][0];
  assert.equal(nearest, kind, `the nearest token ('${symbol}', ${kind}) is drawn in its colour at its place (pixel ${pixel})`);
  // Clicking a dot follows that token.
  const sphereBox = await page.locator('#sphere').boundingBox();
  await page.mouse.click(sphereBox.x + 1 + screen[3 * front], sphereBox.y + 1 + screen[3 * front + 1]);
  assert.equal(await data('selected'), String(front), 'a click on a dot selects its token');

  // The arcs of a selected token are its row of P^k, computed here from the engine's matrix.
  const rowOf = async (layer, head, k, i) =>
    page.evaluate(([l, h, k, i]) => {
      const p = Array.from(window.spherewalk.testing.attention(l, h));
      const n = Math.round(Math.sqrt(p.length));
      let row = p.slice(i * n, (i + 1) * n);
      for (let s = 1; s < k; s++) row = row.map((_, j) => row.reduce((acc, v, m) => acc + v * p[m * n + j], 0));
      return row;
    }, [layer, head, k, i]);
  await page.selectOption('#sphere-token', '9');
  for (const [layer, head, k] of [[0, 0, 1], [1, 2, 3]]) {
    await page.evaluate(([l, h, k]) => {
      for (const [id, v] of [['att-layer', l], ['att-head', h], ['att-k', k]]) {
        const e = document.getElementById(id);
        e.value = String(v);
        e.dispatchEvent(new Event('input', { bubbles: true }));
      }
    }, [layer, head, k]);
    await page.waitForTimeout(200);
    const drawn = nums(await data('arcRow'));
    const engine = await rowOf(layer, head, k, 9);
    assert.equal(drawn.length, tokens);
    const worst = Math.max(...drawn.map((v, j) => Math.abs(v - engine[j])));
    assert.ok(worst < 1e-5, `layer ${layer} head ${head} k ${k}: the arcs are the engine's row (max diff ${worst})`);
    const expectedArcs = engine.filter((v, j) => j !== 9 && v >= 0.01).length;
    assert.equal(Number(await data('arcs')), expectedArcs, 'one arc per token with P_ij >= 0.01');
    t.diagnostic(`token 9, layer ${layer}, head ${head}, k ${k}: ${expectedArcs} arcs`);
  }
  assert.match(await textOf(page, '#sphere-note'), /Arcs: where token 9 looks in layer 1, head 2, after 3 steps/);
  await page.locator('#panel-sphere').screenshot({ path: join(ARTIFACTS, 'panel-sphere-chain.png') });
  // The keyboard follows the next token; Escape lets go.
  await page.focus('#sphere');
  await page.keyboard.press(']');
  assert.equal(await data('selected'), '10');
  await page.keyboard.press('Escape');
  assert.equal(await data('selected'), '');
  assert.equal(Number(await data('arcs')), 0);

  // Between two recorded frames the tokens move along great circles and arrive at the next frame.
  const steps = await page.evaluate(() => window.spherewalk.testing.frameSteps());
  assert.ok(steps.length >= 50, `frames recorded often (${steps.length} over 400 steps)`);
  const k = Math.floor(steps.length / 2);
  const at = async (s) => {
    await page.evaluate((v) => {
      const e = document.getElementById('time');
      e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
    }, s);
    return nums(await data('positions'));
  };
  const [a, mid, almost, b] = [await at(steps[k]), await at((steps[k] + steps[k + 1]) / 2), await at(steps[k + 1] - 1e-3), await at(steps[k + 1])];
  const norms = (xs) => Array.from({ length: xs.length / 3 }, (_, i) => Math.hypot(xs[3 * i], xs[3 * i + 1], xs[3 * i + 2]));
  const moved = (x, y) => Math.max(...x.map((v, i) => Math.abs(v - y[i])));
  assert.ok(norms(mid).every((n) => Math.abs(n - 1) < 1e-5), 'half way, every token is on the sphere');
  assert.ok(moved(a, b) > 1e-4 && moved(mid, a) > 0 && moved(mid, b) > 0, 'half way is between the frames');
  assert.ok(moved(almost, b) <= 1e-3 * moved(a, b) + 1e-6, `the path ends at the next frame (${moved(almost, b)} left of ${moved(a, b)})`);
  assert.equal(Number(await data('shownStep')), steps[k + 1]);
  // Play runs through the history by itself; Live returns to the end.
  await at(steps[0]);
  await page.click('#sphere-play');
  await page.waitForFunction((s) => Number(document.getElementById('sphere').dataset.shownStep) > s + 5, steps[0], { timeout: 10_000 });
  await page.click('#sphere-play');
  assert.match(await textOf(page, '#sphere-play'), /Play/);
  await page.click('#time-live');

  // The heatmap: token labels, a colour scale and the exact P_ij under the pointer.
  await page.evaluate(() => {
    for (const [id, v] of [['att-layer', 0], ['att-head', 1], ['att-k', 1]]) {
      const e = document.getElementById(id);
      e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
    }
  });
  await page.waitForTimeout(200);
  const [x0, y0, cell] = (await page.getAttribute('#attention', 'data-grid')).split(',').map(Number);
  const box = await page.locator('#attention').boundingBox();
  const [i, j] = [12, 4];
  await page.mouse.move(box.x + 1 + x0 + (j + 0.5) * cell, box.y + 1 + y0 + (i + 0.5) * cell);
  await page.waitForFunction(() => document.getElementById('attention').dataset.hoverP !== '', null, { timeout: 5_000 });
  const hovered = Number(await page.getAttribute('#attention', 'data-hover-p'));
  const p = await page.evaluate(([i, j]) => window.spherewalk.testing.attention(0, 1)[i * 32 + j], [i, j]);
  assert.ok(Math.abs(hovered - p) < 1e-6, `the hover shows the engine's P_12,4 (${hovered} vs ${p})`);
  assert.match(await textOf(page, '#attention-hover'), /token 12 '.+' looks at token 4 '.+' with probability P = \d\.\d{4}/);
  await page.locator('#panel-attention').screenshot({ path: join(ARTIFACTS, 'panel-attention-hover.png') });
  // The cells are the engine's matrix: at each cell's centre the colour's lightness ranks the
  // cells as P_ij does (viridis grows lighter with the value; a transposed or shifted matrix, or
  // another head's, ranks them otherwise), the zero cells above the causal diagonal are one colour,
  // and the largest P_ij is the lightest cell.
  const cells = await page.evaluate(([x0, y0, cell]) => {
    const c = document.getElementById('attention');
    const s = c.width / c.clientWidth;
    const img = c.getContext('2d').getImageData(0, 0, c.width, c.height);
    const p = Array.from(window.spherewalk.testing.attention(0, 1));
    const n = Math.round(Math.sqrt(p.length));
    const out = [];
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const [x, y] = [Math.round((x0 + (j + 0.5) * cell) * s), Math.round((y0 + (i + 0.5) * cell) * s)];
        const k = 4 * (y * img.width + x);
        const [r, g, b] = [img.data[k], img.data[k + 1], img.data[k + 2]];
        out.push({ i, j, p: p[i * n + j], light: 0.2126 * r + 0.7152 * g + 0.0722 * b, rgb: `${r},${g},${b}` });
      }
    }
    return out;
  }, [x0, y0, cell]);
  const rank = (xs) => {
    const order = xs.map((x, i) => [x, i]).sort((a, b) => a[0] - b[0]);
    const r = new Array(xs.length);
    for (let a = 0; a < order.length; ) {
      let b = a;
      while (b + 1 < order.length && order[b + 1][0] === order[a][0]) b++;
      for (let k = a; k <= b; k++) r[order[k][1]] = (a + b) / 2;
      a = b + 1;
    }
    return r;
  };
  const spearman = (xs, ys) => {
    const [rx, ry] = [rank(xs), rank(ys)];
    const m = (rx.length - 1) / 2;
    const dot = rx.reduce((acc, v, k) => acc + (v - m) * (ry[k] - m), 0);
    const sx = Math.sqrt(rx.reduce((acc, v) => acc + (v - m) ** 2, 0));
    const sy = Math.sqrt(ry.reduce((acc, v) => acc + (v - m) ** 2, 0));
    return dot / (sx * sy);
  };
  const rho = spearman(cells.map((c) => c.p), cells.map((c) => c.light));
  t.diagnostic(`heatmap: rank correlation of cell lightness with the engine's P_ij: ${rho.toFixed(4)} over ${cells.length} cells`);
  assert.ok(rho > 0.98, `the heatmap's cells rank as the engine's P does (Spearman ${rho})`);
  const zeros = new Set(cells.filter((c) => c.j > c.i).map((c) => c.rgb));
  assert.equal(zeros.size, 1, 'every cell above the causal diagonal has the colour of P = 0');
  const top = cells.reduce((a, b) => (b.p > a.p ? b : a));
  assert.ok(cells.every((c) => c.light <= top.light + 1e-9), `the largest P (${top.i},${top.j}) is the lightest cell`);

  // A verdict in words beside every science panel, and it follows the data: the same preset early
  // in training (a steady spread) and at its end (a jump, then a plateau).
  for (const id of ['verdict-sphere', 'verdict-markov', 'verdict-brownian']) assert.ok((await textOf(page, `#${id}`)).length > 40, `#${id} says it in words`);
  const brownianAfter = async (steps) => {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ preset: 'brownian', steps, steps_per_second: 0 })));
    await page.click('#start');
    await waitPhase(page, ['done'], 120_000);
    await page.waitForFunction(() => (document.getElementById('verdict-brownian')?.textContent ?? '').length > 20, null, { timeout: 10_000 });
    return textOf(page, '#verdict-brownian');
  };
  const [early, late] = [await brownianAfter(12), await brownianAfter(300)];
  t.diagnostic(`Brownian verdict after 12 steps: ${early}`);
  t.diagnostic(`Brownian verdict after 300 steps: ${late}`);
  assert.notEqual(early.split('.')[0], late.split('.')[0], 'the verdict changes with the data');
  // The entropy chart plots the engine's curves: each layer's first, lowest and last point are
  // the run summary's initial, min and final.
  const plotted = JSON.parse(await page.getAttribute('#entropy-chart', 'data-values'));
  const engineSummary = await page.evaluate(() => window.spherewalk.testing.summary());
  assert.equal(plotted.length, engineSummary.entropy.length, 'one curve per layer');
  for (const [l, curve] of plotted.entries()) {
    const e = engineSummary.entropy[l];
    const ys = curve.map(([, y]) => y);
    const got = { initial: ys[0], min: Math.min(...ys), final: ys[ys.length - 1] };
    for (const k of ['initial', 'min', 'final']) assert.ok(Math.abs(got[k] - e[k]) < 1e-6, `layer ${l} entropy ${k}: chart ${got[k]}, engine ${e[k]}`);
    assert.equal(curve[curve.length - 1][0], engineSummary.steps, `layer ${l}'s curve ends at the last step`);
  }
  assert.match(late, /Not Brownian: the tokens move in one jump early in training and then stay put.*R² = -?[\d.]+ is below 0.*critical value/);
  // Brownian motion or particles: fitted once the run has ended, the same fit as `lab train
  // --flow`, and the particles drawn as diamonds beside the ghosts.
  await page.waitForFunction(() => document.getElementById('brownian-flow')?.dataset.better, null, { timeout: 30_000 });
  const flowAttr = await page.evaluate(() => ({ ...document.getElementById('brownian-flow').dataset }));
  const flowText = await textOf(page, '#verdict-flow');
  t.diagnostic(`particles or Brownian: ${flowText}`);
  assert.match(flowText, /^(Brownian motion, not particles|Particles, not Brownian motion|Brownian motion comes closer than the particles' flow, but neither fits well).*Root-mean-square error/);
  // Never "Not Brownian" above a plain "Brownian motion fits better": the two answers read together.
  if (/^Not Brownian/.test(late)) assert.doesNotMatch(flowText, /^Brownian motion, not particles/);
  assert.equal(await page.getAttribute('#verdict-flow', 'data-settled'), 'true', 'the flow is fitted on the ended run: final');
  const flowDepth = Number(flowAttr.depth);
  const native = labTrain(await page.evaluate(() => window.spherewalk.experiment()), ['--flow', String(flowDepth)]).summary.flow;
  t.diagnostic(`lab train --flow ${flowDepth}: RMSE Brownian ${native.rmse_brownian}, particles ${native.rmse_particles} (beta ${native.beta}); page ${flowAttr.rmseBrownian}, ${flowAttr.rmseParticles} (beta ${flowAttr.beta})`);
  assert.equal(flowAttr.better, native.better, 'the page and the CLI name the same better model');
  for (const [page_, lab_, what] of [[flowAttr.rmseBrownian, native.rmse_brownian, 'Brownian RMSE'], [flowAttr.rmseParticles, native.rmse_particles, 'particles RMSE']]) {
    assert.ok(rel(Number(page_), lab_) < 0.05, `${what}: page ${page_}, lab ${lab_}`);
  }
  assert.ok(Math.abs(Math.log(Number(flowAttr.beta) / native.beta)) < 0.2, `beta: page ${flowAttr.beta}, lab ${native.beta}`);
  assert.equal(Number(await page.getAttribute('#brownian-flow-chart', 'data-points')), native.times.length);
  if (Number(await page.getAttribute('#sphere', 'data-ghosts')) > 0) {
    assert.equal(Number(await page.getAttribute('#sphere', 'data-particles')), native.points, 'one diamond per fitted token');
  }
  await page.locator('#panel-brownian').screenshot({ path: join(ARTIFACTS, 'panel-brownian.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('without WebGL2 the sphere falls back to the 2-D canvas and shows the same tokens', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t, { args: [...CHROMIUM_FLAGS, '--disable-3d-apis'] });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  await page.waitForFunction(() => Number(document.getElementById('sphere').dataset.points) === 32, null, { timeout: 10_000 });
  assert.match(await page.getAttribute('#sphere', 'data-renderer'), /^canvas 2d \(.*WebGL2/);
  assert.equal(Number(await page.getAttribute('#sphere', 'data-labels')), 32);
  assert.ok((await inkOf(page, '#sphere')) > 2000, 'the ball and its dots are drawn');
  assert.deepEqual(problems.filter((p) => !/WebGL|GPU/i.test(p)), [], 'no console errors or exceptions');
});

/** The writing panel's latest sample: its step, text, and each written character's p and candidates. */
const writingOf = (page) =>
  page.evaluate(() => {
    const el = document.getElementById('writing-sample');
    const parse = (s) => (s ? s.split('|').map((x) => { const i = x.lastIndexOf(':'); return [x.slice(0, i), Number(x.slice(i + 1))]; }) : []);
    return {
      step: el?.dataset.step === undefined ? null : Number(el.dataset.step),
      text: el?.dataset.text ?? null,
      tokens: [...(el?.querySelectorAll('.tok') ?? [])].map((s) => ({ p: Number(s.dataset.p), top: parse(s.dataset.top), title: s.title })),
      history: document.querySelectorAll('#writing-history li').length,
      predictions: [...document.querySelectorAll('#next-char .pred')].map((s) => ({ p: Number(s.dataset.p), top: parse(s.dataset.top) })),
    };
  });

test('the model writes: a sample at each evaluation, candidates on hover, baselines on the loss chart', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await open(page, '');
  await page.selectOption('#pace', '0');
  await page.click('#start');
  await page.waitForFunction(() => document.getElementById('writing-sample')?.dataset.step === '0', null, { timeout: 60_000 });
  const first = await writingOf(page);
  await page.waitForFunction(() => Number(document.getElementById('writing-sample')?.dataset.step) >= 100, null, { timeout: 120_000 });
  const later = await writingOf(page);
  assert.equal(first.step, 0);
  assert.notEqual(later.text, first.text, 'the text changes as the model learns');
  assert.equal(later.tokens.length, [...later.text].length, 'one shaded span per written character');
  for (const s of [first, later]) {
    for (const tok of s.tokens) {
      assert.ok(tok.p > 0 && tok.p <= 1, `p ${tok.p}`);
      assert.ok(tok.top.length >= 1 && tok.top.length <= 5);
      const sum = tok.top.reduce((a, [, p]) => a + p, 0);
      assert.ok(sum <= 1 + 1e-3, `the candidates' probabilities sum to at most 1 (${sum})`);
      assert.ok(tok.top.every((c, i) => i === 0 || c[1] <= tok.top[i - 1][1] + 1e-9), 'best first');
      assert.match(tok.title, /the model's candidates: "/);
    }
    assert.equal(s.predictions.length, 32, 'the probe row: one prediction per position');
  }
  assert.ok(later.history >= 1, 'earlier samples stay visible');
  // The written text is on the first screen at 1280x800 (its top, measured from the top of the page).
  const top = await page.evaluate(() => document.getElementById('writing-sample').getBoundingClientRect().top + window.scrollY);
  assert.ok(top < 800 - 40, `the written text starts on the first screen (at ${top} px)`);
  await page.screenshot({ path: join(ARTIFACTS, 'page-writing-first-screen.png') });
  // Hovering a character shows its candidates (the title is the hover text).
  await page.hover('#writing-sample .tok >> nth=3');
  // The baselines are on the loss chart, and the words say what they are.
  const baselines = await page.evaluate(() => document.getElementById('loss-chart').dataset.baselines.split(',').map(Number));
  const vocab = await page.evaluate(() => JSON.parse(spherewalk.experiment()).train.model.vocab);
  assert.equal(baselines.length, 3);
  assert.ok(Math.abs(baselines[0] - Math.log(Math.max(vocab, 1))) < 1e-3 || baselines[0] > baselines[1], `ln V first: ${baselines}`);
  assert.ok(baselines[0] > baselines[1] && baselines[1] > baselines[2], `uniform > unigram > bigram: ${baselines}`);
  assert.match(await textOf(page, '#baselines'), /uniform guess among the \d+ symbols scores \d\.\d\d, letter frequencies \(unigram\) \d\.\d\d/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-writing.png') });
  await page.locator('#panel-writing').screenshot({ path: join(ARTIFACTS, 'panel-writing.png') });
  // Write more: a long sample with the panel's settings; a bad prompt is refused and changes nothing.
  if ((await phase(page)) === 'running') await page.click('#start');
  await waitPhase(page, ['paused', 'done']);
  const step = await stepOf(page);
  await page.click('#write-more');
  await page.waitForSelector('#writing-more .tok', { timeout: 30_000 });
  assert.equal(await page.locator('#writing-more .tok').count(), 200);
  await page.fill('#writing-prompt', 'a\u00e9');
  await page.dispatchEvent('#writing-prompt', 'change');
  await page.waitForSelector('#error', { timeout: 10_000 });
  assert.match(await textOf(page, '#error'), /the writing settings were not changed: .*"\u00e9"/);
  assert.equal(await stepOf(page), step, 'nothing changes in the run');
  t.diagnostic(`step 0 writes ${JSON.stringify(first.text.slice(0, 40))}; step ${later.step} writes ${JSON.stringify(later.text.slice(0, 40))}`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('spherewalk.sample writes what lab sample writes for the same model and seed, and refuses bad settings', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  const experiment = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  experiment.train.steps = 60;
  experiment.backend = 'cpu';
  const dir = mkdtempSync(join(tmpdir(), 'spherewalk-ckpt-'));
  labTrain(JSON.stringify(experiment), ['--save', dir]);
  await page.setInputFiles('#model-input', [join(dir, 'model.safetensors'), join(dir, 'config.json')]);
  await page.waitForSelector('#model-note', { timeout: 20_000 });
  const spec = { prompt: 'the ', tokens: 60, temperature: 1, seed: 3, samples: 2 };
  const pageSamples = await page.evaluate((s) => spherewalk.sample(s), spec);
  const native = execFileSync(LAB_BIN, ['sample', '--checkpoint', dir, '--prompt', 'the ', '--tokens', '60', '--seed', '3', '--samples', '2', '--json'], { encoding: 'utf8' })
    .trim().split('\n').map((l) => JSON.parse(l));
  rmSync(dir, { recursive: true, force: true });
  assert.equal(pageSamples.length, 2);
  for (const [i, n] of native.entries()) {
    const p = pageSamples[i];
    assert.equal(p.text, n.text, `seed ${n.seed}: the page's worker writes what lab writes`);
    assert.deepEqual(p.tokens, n.tokens);
    for (const [j, s] of n.steps.entries()) assert.ok(rel(p.steps[j].p, s.p) < 1e-4, `token ${j}: p ${p.steps[j].p} vs ${s.p}`);
  }
  assert.notEqual(pageSamples[0].text, pageSamples[1].text, 'seeds 3 and 4 write differently');
  const greedy = await page.evaluate(() => spherewalk.sample({ prompt: 'the ', tokens: 30, temperature: 0 }));
  assert.ok(greedy[0].steps.every((s) => s.top[0][0] === s.text), 'greedy takes the best candidate');
  // Bad settings: clear messages, and the page's worker goes on working.
  const refused = (s) => page.evaluate((s) => spherewalk.sample(s).then(() => 'resolved', (e) => e.message), s);
  assert.match(await refused({ tokens: 0 }), /tokens must be from 1 to 10000/);
  assert.match(await refused({ tokens: 10001 }), /tokens must be from 1 to 10000/);
  assert.match(await refused({ temperature: -1 }), /temperature/);
  assert.match(await refused({ top_p: 0 }), /top_p must be in \(0, 1\]/);
  assert.match(await refused({ top_p: 1.5 }), /top_p/);
  assert.match(await refused({ prompt: 'a\u00e9' }), /"\u00e9"/);
  assert.match(await refused({ tokenz: 3 }), /unknown field `tokenz`/);
  const circular = await page.evaluate(() => { const o = {}; o.o = o; return spherewalk.sample(o).then(() => 'resolved', (e) => e.message); });
  assert.match(circular, /cannot be read as JSON/);
  const empty = await page.evaluate(() => spherewalk.sample({ prompt: '', tokens: 5 }));
  assert.equal(empty[0].steps.length, 5, 'an empty prompt starts from the data\'s first token');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
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
    await page.click('#start');
    await stepTo(page, from, 120_000);
    const fps = await page.evaluate(() => new Promise((done) => {
      let n = 0; const t0 = performance.now();
      const f = () => { n++; if (performance.now() - t0 < 2000) requestAnimationFrame(f); else done(n / 2); };
      requestAnimationFrame(f);
    }));
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
    notes.push(`${name}: ${fps} frames/s while training, Pause in ${waits.join(', ')} ms (a step ${stepMs} ms)`);
    assert.ok(median(waits) <= 300 + stepMs, `${name}: Pause took ${waits} ms`);
    assert.ok(fps >= 10, `${name}: ${fps} frames per second`);
    await page.click('#start');
    await waitPhase(page, ['paused']);
  }
  t.diagnostic(notes.join('; '));
  assert.deepEqual(problems.filter((p) => !/WebGL|GPU stall/i.test(p)), [], 'no console errors or exceptions');
});

test('first screen in plain words: what the model learns, a loss with its yardstick, a GPU error a teacher can read aloud', { timeout: 120_000 }, async (t) => {
  // Without WebGPU in the browser: the page asks for an adapter and gets none.
  const { page, problems } = await launch(t, { args: CHROMIUM_FLAGS.filter((f) => f !== '--enable-unsafe-webgpu').concat(['--disable-features=WebGPU']), viewport: { width: 1280, height: 800 } });
  await open(page, '');
  const lead = page.locator('#lead');
  assert.equal((await lead.textContent()).trim(), 'A 2-layer transformer learns to predict the next character of a made-up grammar.');
  const box = await lead.boundingBox();
  const title = await page.locator('h1').boundingBox();
  assert.ok(box.y < title.y + title.height, 'on the title\'s line, the first thing read');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  // The loss chart's own baseline line for a uniform guess gives the same number.
  const guess = Number((await textOf(page, '#yardsticks')).match(/guessing: ([\d.]+)/)[1]);
  const vocab = JSON.parse(await page.evaluate(() => spherewalk.experiment())).train.model.vocab || null;
  const chartGuess = Number((await textOf(page, '#baselines')).match(/a uniform guess among the \d+ symbols scores ([\d.]+)/)?.[1]);
  assert.equal(guess, chartGuess, `guessing ${guess} on the stats, ${chartGuess} under the loss chart (vocab ${vocab})`);
  assert.match(await page.getAttribute('#yardsticks', 'title'), /a uniform guess scores [\d.]+, letter frequencies alone [\d.]+/);
  const line = await textOf(page, '#backend');
  t.diagnostic(`backend line: ${line}`);
  assert.match(line, /^Backend: CPU \(auto: this browser offers no GPU to the page\)/);
  assert.doesNotMatch(line, /compiled in|adapter found/, 'the graphics stack\'s words are behind "details"');
  assert.match(await textOf(page, '#backend-details'), /no GPU adapter/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-first-screen.png') });
  assert.deepEqual(problems.filter((p) => !/WebGPU|GPU/i.test(p)), [], 'no console errors or exceptions');
});

test('chart text is drawn at its CSS size on every screen: 12 px at 1280x800 and on a phone, 24 px in the projector view at 1920x1080, where no text is smaller and the picture stays on the first screen', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  // What a chart says it drew, and what the canvas's pixels make of it on the screen.
  const charts = () => page.evaluate(() => ['loss-chart', 'entropy-chart'].map((id) => {
    const c = document.getElementById(id);
    return { id, font: Number(c.dataset.fontPx), perCss: c.width / c.clientWidth, dpr: devicePixelRatio, shown: c.clientWidth };
  }));
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  // Every chart on screen (presenter mode shows the loss chart, not the entropy panel).
  const check = async (where, want) => {
    await page.waitForFunction((w) => ['loss-chart', 'entropy-chart'].every((id) => { const c = document.getElementById(id); return c.clientWidth === 0 || Number(c.dataset.fontPx) === w; }), want, { timeout: 10_000 });
    const shown = (await charts()).filter((c) => c.shown > 0);
    assert.ok(shown.some((c) => c.id === 'loss-chart'), `${where}: the loss chart is on the page`);
    for (const c of shown) {
      assert.equal(c.font, want, `${where}: ${c.id} draws its labels at ${c.font} CSS px`);
      assert.ok(Math.abs(c.perCss - c.dpr) < 0.02, `${where}: ${c.id}'s pixels are the screen's (${c.perCss} per CSS px, ${c.shown} px shown)`);
    }
  };
  await check('1280x800', 12);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.click('#step-once');
  await stepTo(page, 2, 30_000);
  await check('phone', 12);
  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.click('#presenter');
  await check('presenter mode at 1920x1080', 24);
  await page.locator('#panel-loss').screenshot({ path: join(ARTIFACTS, 'panel-loss-presenter.png') });
  // The projector view: every visible text, in the page and in every canvas, at 24 px or more; the
  // picture whole on the first screen; the panel the preset is about kept.
  const room = () => page.evaluate(() => {
    const small = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const e = walker.currentNode.parentElement;
      if (!walker.currentNode.textContent.trim() || !e.checkVisibility()) continue;
      const px = parseFloat(getComputedStyle(e).fontSize);
      if (px < 24) small.push(`${e.tagName.toLowerCase()}#${e.id} "${walker.currentNode.textContent.trim().slice(0, 30)}": ${px} px`);
    }
    const canvases = [...document.querySelectorAll('canvas')].filter((c) => c.checkVisibility() && c.clientWidth > 0).map((c) => ({ id: c.id, font: Number(c.dataset.fontPx) }));
    const sphere = document.getElementById('sphere').getBoundingClientRect();
    return { small, canvases, sphereBottom: sphere.bottom + scrollY, brownian: document.getElementById('panel-brownian').checkVisibility(), entropy: document.getElementById('panel-entropy').checkVisibility() };
  });
  for (const [preset, panel] of [['sphere', null], ['brownian', 'brownian'], ['joma', 'entropy'], ['race', null]]) {
    await open(page, `#preset=${preset}`);
    if ((await page.getAttribute('html', 'data-presenter')) !== 'on') await page.keyboard.press('p');
    await page.click('#start');
    await stepTo(page, 25, 30_000);
    await page.click('#start');
    await waitPhase(page, ['paused']);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(300);
    const r = await room();
    t.diagnostic(`projector, preset ${preset}: canvases ${r.canvases.map((c) => `${c.id} ${c.font} px`).join(', ')}; sphere ends at ${r.sphereBottom.toFixed(0)} px`);
    assert.deepEqual(r.small, [], `preset ${preset}: texts under 24 px in the projector view`);
    assert.ok(r.canvases.length >= 3 && r.canvases.every((c) => c.font >= 24), `preset ${preset}: every canvas draws its text at 24 px or more`);
    assert.ok(r.sphereBottom <= 1080, `preset ${preset}: the sphere ends at ${r.sphereBottom} px, on the first screen`);
    if (panel) assert.ok(r[panel], `preset ${preset}: its panel stays in the projector view`);
    if (preset === 'brownian') await page.screenshot({ path: join(ARTIFACTS, 'page-projector-brownian.png') });
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-projector.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('phone: every control on the page is a touch target of at least 24x24 CSS px; Start stays on screen with the sphere, and the tour card with its panel', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  const small = await page.evaluate(() => [...document.querySelectorAll('button, input, select, textarea, summary, a[href]')]
    .filter((e) => e.checkVisibility?.())
    .map((e) => { const r = e.getBoundingClientRect(); return { what: e.id || `${e.tagName.toLowerCase()} "${(e.textContent || '').trim().slice(0, 20)}"`, w: r.width, h: r.height }; })
    .filter((x) => x.w < 24 || x.h < 24));
  assert.deepEqual(small, [], 'controls smaller than 24x24');
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-targets.png') });
  const box = (sel) => page.evaluate((q) => { const r = document.querySelector(q).getBoundingClientRect(); return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }; }, sel);
  const onScreen = (b) => b.bottom > 0 && b.top < 844 && b.right > 0 && b.left < 390;
  // The sphere in the middle of the screen: Start (and Step, Reset, the pace) still within reach.
  await page.evaluate(() => document.getElementById('sphere').scrollIntoView({ block: 'center' }));
  const [start, sphere] = [await box('#start'), await box('#sphere')];
  assert.ok(start.top >= 0 && start.bottom <= 844 && onScreen(sphere), `Start ${JSON.stringify(start)} and the sphere ${JSON.stringify(sphere)} on screen together`);
  assert.ok(start.bottom <= sphere.top, 'the bar does not cover the sphere');
  await page.click('#start');
  await waitPhase(page, ['training']);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-sphere.png') });
  // The tour on a phone: a sheet at the bottom, its panel above it, both on screen, every step.
  await page.click('#tour-start');
  for (let n = 1; n <= 6; n++) {
    if (n > 1) await page.click('#tour-next');
    await page.waitForFunction((k) => document.getElementById('tour')?.dataset.step === String(k), n);
    await page.waitForTimeout(300);
    const panel = await page.evaluate(() => document.querySelector('.tour-focus').id);
    const [card, target] = [await box('#tour'), await box(`#${panel}`)];
    assert.ok(onScreen(card) && card.bottom <= 845 && card.top >= 0, `step ${n}: the card on screen (${JSON.stringify(card)})`);
    assert.ok(target.top < card.top - 40 && target.bottom > 60, `step ${n}: #${panel} on screen above the card (${JSON.stringify(target)})`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-tour.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

// ---------------------------------------------------------------- a real model (GPT-2)

/** Where `cargo xtask test` serves the random-weight GPT-2 (engine/tests/gpt2/fixture.py) under the
 * hub's path layout: `<page>/hub/<id>/resolve/main/{config.json,model.safetensors}`. */
const FIXTURE_ID = 'spherewalk/gpt2-fixture';
const FIXTURE_DIR = join(HERE, '..', 'dist', 'hub', FIXTURE_ID, 'resolve', 'main');
const MODEL_TEXT = 'The Brownian motion in the transformer model: tokens walk on the sphere.';

async function openModel(page, { fetch = true } = {}) {
  await page.goto('about:blank');
  await page.goto(`${PAGE_URL}?hub=${encodeURIComponent(PAGE_URL + 'hub')}`, { waitUntil: 'load' });
  await page.waitForSelector('#start');
  await page.click('#mode-model');
  await page.fill('#hub-id', FIXTURE_ID);
  if (fetch) await page.click('#hub-fetch');
}

test('a real model: GPT-2 fetched under the hub\'s layout reads a text on every layer, as lab inspect and lab sample do', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.match(await textOf(page, '#model-opened'), /12 layers, 4 heads, width 64/);

  // The pieces, the heatmap's labels and the sphere's depth slider against the native CLI.
  const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, '--text', MODEL_TEXT, '--json'], { encoding: 'utf8' }));
  const pieces = await page.$$eval('#model-tokens .piece', (els) => els.map((e) => e.textContent));
  const visible = cli.pieces.map((p) => p.replaceAll(' ', '\u2423'));
  assert.deepEqual(pieces, visible);
  assert.deepEqual((await page.getAttribute('#attention', 'data-labels')).split('\x1f'), visible);
  assert.equal(await page.getAttribute('#depth', 'max'), String(cli.n_layer));
  assert.equal(cli.n_layer, 12);
  assert.equal(await page.$$eval('#model-layers tbody tr', (r) => r.length), 13);
  // The same reading through the JS API, in the browser's worker (wasm), against the native numbers.
  const sameAsNative = (web, on) => {
    assert.deepEqual(web.tokens, cli.tokens);
    const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4 * Math.max(Math.abs(b), 1), `${on}, ${what}: ${a} in the page, ${b} natively`);
    cli.layers.forEach((l, i) => {
      close(web.layers[i].residual_norm, l.residual_norm, `|x| entering layer ${i}`);
      close(web.layers[i].radius.mean, l.radius.mean, `radius at layer ${i}`);
      close(web.layers[i].gain.mean_rel_offset, l.gain.mean_rel_offset, `gain's offset at layer ${i}`);
      l.heads.forEach((h, j) => {
        close(web.layers[i].heads[j].entropy, h.entropy, `entropy of layer ${i} head ${j}`);
        close(web.layers[i].heads[j].kernel_tv_mean, h.kernel_tv_mean, `kernel TV of layer ${i} head ${j}`);
      });
    });
    cli.next.forEach((row, i) => row.forEach(([, p], k) => close(web.next[i][k][1], p, `candidate ${k} after token ${i}`)));
  };
  const web = await page.evaluate((text) => spherewalk.inspect(text), MODEL_TEXT);
  sameAsNative(web, 'CPU');
  // Auto on a software adapter (SwiftShader) reads on the CPU, and says so.
  assert.match(web.on, /^CPU \(.*software/);
  assert.match(await textOf(page, '#model-on'), /^This reading ran on CPU/);
  // WebGPU picked: the GPU's forward (the trainer's WGSL kernels) reads it, to the same numbers.
  await page.selectOption('#backend-choice', 'webgpu');
  const gpu = await page.evaluate((text) => spherewalk.inspect(text), MODEL_TEXT);
  assert.match(gpu.on, /^WebGPU/);
  sameAsNative(gpu, 'WebGPU');
  assert.match(await textOf(page, '#model-on'), /^This reading ran on WebGPU/);
  await page.selectOption('#backend-choice', 'auto');
  // The model's first guess after the text, as the CLI computed it.
  const [word, p] = cli.next[cli.next.length - 1][0];
  assert.ok((await textOf(page, '#model-next')).includes(`"${word.replaceAll(' ', '\u2423')}" ${Math.round(100 * p)}%`));
  // Any piece picked shows what the model expects after it: the third, as the CLI computed it.
  await page.click('#model-tokens .piece >> nth=2');
  assert.equal(await page.getAttribute('#model-tokens .piece >> nth=2', 'aria-pressed'), 'true');
  const [third, p3] = cli.next[2][0];
  assert.ok((await textOf(page, '#model-next')).includes(`"${third.replaceAll(' ', '\u2423')}" ${Math.round(100 * p3)}%`));
  for (const id of ['#model-kernel', '#model-brownian', '#model-flow', '#verdict-markov']) {
    assert.equal(await page.getAttribute(id, 'data-settled'), 'true', id);
  }

  // What it writes equals lab sample --model with the same settings (greedy, 20 tokens).
  await page.click('#model-write');
  await page.waitForSelector('#model-written strong', { timeout: 60_000 });
  const sample = JSON.parse(execFileSync(LAB_BIN, ['sample', '--model', FIXTURE_DIR, '--prompt', MODEL_TEXT, '--tokens', '20', '--temperature', '0', '--json'], { encoding: 'utf8' }));
  assert.equal(await textOf(page, '#model-written strong'), sample.text.trim());
  await page.screenshot({ path: join(ARTIFACTS, 'page-gpt2.png') });

  // Opened again after a reload: from the browser's cache, with no request for the weights.
  const weights = () => requests.filter((u) => u.endsWith('/model.safetensors')).length;
  const before = weights();
  assert.equal(before, 1);
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.equal(weights(), before, 'the second opening read the cache');

  // Back to training: the run's panels return, the model's controls go.
  await page.click('#mode-train');
  assert.equal(await page.isVisible('#panel-model'), false);
  assert.equal(await page.isVisible('#start'), true);
  assert.deepEqual(problems, []);
});

test('a real model: a cancelled download and a refused cache lose nothing, and bad files are named', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  // The weights come slowly, so Cancel is pressed while they are on their way.
  await page.route('**/model.safetensors', async (route) => {
    await new Promise((r) => setTimeout(r, 3000));
    await route.continue().catch(() => {});
  });
  await openModel(page);
  await page.waitForSelector('#model-cancel');
  await page.click('#model-cancel');
  await page.waitForSelector('#model-error');
  assert.match(await textOf(page, '#model-error'), /cancelled: nothing was opened/);
  assert.equal(await page.isVisible('#model-opened'), false);

  // Storage refuses the files: the model opens anyway, and the page says it will fetch them again.
  await page.unroute('**/model.safetensors');
  await page.addInitScript(() => {
    // (about:blank, on the way, is not a secure context: it has no Cache.)
    if (typeof Cache !== 'undefined') {
      Cache.prototype.put = () => Promise.reject(new DOMException('the quota is used up', 'QuotaExceededError'));
    }
  });
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.match(await textOf(page, '#model-message'), /would not keep .*QuotaExceededError|would not keep .*quota/);

  // Files picked from disk: a pickle, and a truncated safetensors, each refused by name.
  const config = { name: 'config.json', mimeType: 'application/json', buffer: readFileSync(join(FIXTURE_DIR, 'config.json')) };
  await page.setInputFiles('#model-files', [config, { name: 'pytorch_model.bin', mimeType: 'application/octet-stream', buffer: Buffer.from('PK\x03\x04') }]);
  assert.match(await textOf(page, '#model-error'), /PyTorch pickle/);
  const whole = readFileSync(join(FIXTURE_DIR, 'model.safetensors'));
  await page.setInputFiles('#model-files', [config, { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: whole.subarray(0, whole.length - 1000) }]);
  await page.waitForFunction(() => /truncated/.test(document.getElementById('model-error')?.textContent ?? ''), null, { timeout: 60_000 });
  // The model opened before is still open (both fit), and still reads.
  assert.match(await textOf(page, '#model-opened'), new RegExp(`^${FIXTURE_ID}: 12 layers`));
  assert.equal(await page.$$eval('#model-tokens .piece', (els) => els.length) > 0, true);
  await page.setInputFiles('#model-files', [join(FIXTURE_DIR, 'config.json'), join(FIXTURE_DIR, 'model.safetensors')]);
  await page.waitForFunction(() => /^model\.safetensors: 12 layers/.test(document.getElementById('model-opened')?.textContent ?? ''), null, { timeout: 120_000 });
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  assert.equal(await page.isVisible('#model-error'), false);
  assert.deepEqual(problems.filter((p) => !p.includes('model.safetensors')), []);
});
