// Shared pieces of the browser tests of the Spherewalk page: e2e/<feature>.test.mjs, one file per
// feature. Run by `cargo xtask test`, or by hand:
//   SPHEREWALK_URL=http://127.0.0.1:8080/ node --test --test-concurrency=1 e2e/*.test.mjs
// while `cargo xtask serve` runs (or `npm test` in e2e/). One file at a time, as when the tests
// were one file: they time steps and frames, and write to the same e2e/artifacts/. (The shell
// expands the glob: `node --test e2e/` finds the files on Node 20 only.)
//
// The tests drive the system Chromium (never a downloaded browser) with playwright-core.
// Screenshots land in e2e/artifacts/ (page*.png, panel-*.png).

import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ARTIFACTS = join(HERE, 'artifacts');
export const PAGE_URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8080/';
// Where the GPT-2 fixture is served under the hub's path layout, and its folder on disk
// (`cargo xtask test` writes it beside the page, never on the network).
export const HUB_URL = process.env.SPHEREWALK_HUB ?? new URL('hub', PAGE_URL).href;
// The static server's folder: the page under a/b/spherewalk/, the next build under next/.
export const WWW = process.env.SPHEREWALK_WWW ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'target', 'www');
export const EXECUTABLE = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// The native lab, for comparing the page's numbers with the CLI's.
export const LAB_BIN = process.env.LAB_BIN ?? join(dirname(fileURLToPath(import.meta.url)), '..', 'target', 'debug', 'lab');
// How long the whole default run may take in the browser.
export const RUN_TIMEOUT_MS = Number(process.env.SPHEREWALK_RUN_TIMEOUT_MS ?? 300_000);

export const CHROMIUM_FLAGS = [
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
export function readPage(page) {
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
export function contrastReport(page) {
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

export const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

// ---------------------------------------------------------------- the lab's features

/** A fresh headless Chromium with the page's problems (console errors, exceptions) collected. */
export async function launch(t, { preferences, profile, ...options } = {}) {
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
    // The offline copy is tested on its own (hosting.test.mjs); elsewhere a service worker
    // between the page and the tests' routes would only blur what they test.
    serviceWorkers: 'block',
    ...options,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  t.after(async () => {
    await page.screenshot({ path: join(ARTIFACTS, 'page-features-last.png'), fullPage: true }).catch(() => {});
    await context.close().catch(() => {});
    // The browser's last processes may still be writing the profile as it closes: retried.
    rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
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

export const phase = (page) => page.evaluate(() => document.getElementById('status')?.dataset.phase);
export const stepOf = (page) => page.evaluate(() => Number(document.getElementById('step')?.textContent));
export const textOf = (page, sel) => page.evaluate((s) => document.querySelector(s)?.textContent?.trim() ?? null, sel);
export const valueOf = (page, sel) => page.evaluate((s) => document.querySelector(s)?.value ?? null, sel);
export const settingsOf = (page) =>
  page.evaluate(() =>
    Object.fromEntries(
      ['preset', 'data', 'd-model', 'layers', 'heads', 'context', 'activation', 'causal', 'optimizer', 'lr', 'steps', 'seed']
        .map((id) => [id, document.getElementById(id)?.value ?? null]),
    ),
  );

export async function open(page, hash) {
  // A change of the hash alone would not reload the page.
  await page.goto('about:blank');
  await page.goto(PAGE_URL + hash, { waitUntil: 'load' });
  await waitReady(page);
}

export async function setField(page, sel, value) {
  await page.fill(sel, String(value));
  await page.dispatchEvent(sel, 'change');
}

export async function waitPhase(page, phases, timeout = 60_000) {
  await page.waitForFunction((ps) => ps.includes(document.getElementById('status')?.dataset.phase), phases, {
    timeout,
    polling: 50,
  });
}

/** Pixels of a canvas that differ from its top-left (background) pixel. */
export const inkOf = (page, sel) =>
  page.evaluate((s) => {
    const c = document.querySelector(s);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] !== d[0] || d[i + 1] !== d[1] || d[i + 2] !== d[2]) n++;
    return n;
  }, sel);

export const snapshot = (page, sel) => page.evaluate((s) => document.querySelector(s).toDataURL(), sel);

/** Animation frames and training steps per second over `ms` of training, measured in the page. */
export const ratesOver = (page, ms) =>
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

// ---------------------------------------------------------------- keeping the run

/** Reads a safetensors header: { header, dataStart }. */
export function safetensorsHeader(buf) {
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.subarray(8, 8 + n).toString('utf8')), dataStart: 8 + n };
}

export const trainLosses = (page) =>
  page.evaluate(() => (document.getElementById('loss-chart')?.dataset.trainLosses ?? '').split(',').filter((x) => x !== '').map(Number));

export async function stepTo(page, n, timeout = 60_000) {
  await page.waitForFunction((k) => Number(document.getElementById('step')?.textContent) >= k, n, { timeout, polling: 20 });
}

// ---------------------------------------------------------------- the session in its worker

/** The native `lab` on `experiment` (JSON text): its eval lines and summary. */
export function labTrain(experiment, extra = []) {
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
export const rel = (a, b) => Math.abs(a - b) / Math.max(Math.abs(b), 1e-12);

// ---------------------------------------------------------------- a real model (GPT-2)

/** Where `cargo xtask test` serves the random-weight GPT-2 (engine/tests/gpt2/fixture.py) under the
 * hub's path layout: `<page>/hub/<id>/resolve/main/{config.json,model.safetensors}`. */
export const FIXTURE_ID = 'spherewalk/gpt2-fixture';
export const FIXTURE_DIR = process.env.SPHEREWALK_FIXTURE_DIR ?? join(WWW, 'hub', FIXTURE_ID, 'resolve', 'main');

export async function openModel(page, { fetch = true } = {}) {
  await page.goto('about:blank');
  await page.goto(`${PAGE_URL}?hub=${encodeURIComponent(HUB_URL)}`, { waitUntil: 'load' });
  await waitReady(page);
  await page.click('#mode-model');
  await page.fill('#hub-id', FIXTURE_ID);
  if (fetch) await page.click('#hub-fetch');
}

/** Waits until the page is drawn and its engine has loaded (Start no longer says "Loading"). */
export async function waitReady(page, timeout = 60_000) {
  await page.waitForSelector('#start:not([data-loading])', { timeout });
}
