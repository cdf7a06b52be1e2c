// A training history in the page, timed in headless Chromium: checkpoints of pythia-14m's sizes
// (random weights, one seed each, served under the hub's revision layout) run twice through
// spherewalk.history: the first run downloads them (from a local server), the second takes them
// from the browser's cache, so its time per checkpoint is the page's own work (reading the files
// in the model worker, the weights to f32, the forward, every lens and the depth fits).
//
//   bench/history_native.sh                  # makes target/bench-models/pythia-14m-history (16 checkpoints)
//   cargo xtask dist && mkdir -p dist/hub/spherewalk
//   ln -sfn "$PWD/target/bench-models/pythia-14m-history" dist/hub/spherewalk/pythia-14m
//   python3 -m http.server 8099 --directory dist --bind 127.0.0.1 &
//   node bench/page_history.mjs [--steps 0,1,2,...]
//
// Uses e2e's playwright-core and the system Chromium (no browser download).

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');

const URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8099/';
const HUB = process.env.SPHEREWALK_HUB ?? `${URL}hub`;
const MODEL = process.env.MODEL_ID ?? 'spherewalk/pythia-14m';
const at = process.argv.indexOf('--steps');
const STEPS = at > 0 ? process.argv[at + 1] : '0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 4000, 16000, 64000, 143000';
const TEXT = 'The Brownian motion in the transformer model: tokens walk on the sphere.';

const dir = mkdtempSync(join(tmpdir(), 'spherewalk-history-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  viewport: { width: 1280, height: 800 },
});
const page = ctx.pages()[0] ?? (await ctx.newPage());
page.on('console', (m) => m.type() === 'error' && !/404/.test(m.text()) && console.log('console error:', m.text()));
await page.goto(`${URL}?hub=${encodeURIComponent(HUB)}`);
await page.waitForSelector('#start:not([data-loading])', { timeout: 120_000 });
await page.click('#mode-model');
const n = STEPS.split(',').length;
const rows = [];
for (const run of ['downloaded', 'from the cache']) {
  const ms = await page.evaluate(async ([model, steps, text]) => {
    const t0 = performance.now();
    await spherewalk.history({ model, steps, text });
    return performance.now() - t0;
  }, [MODEL, STEPS, TEXT]);
  rows.push(`| ${run} | ${n} | ${(ms / 1000).toFixed(1)} | ${(ms / 1000 / n).toFixed(2)} |`);
}
console.log('| run | checkpoints | total (s) | per checkpoint (s) |');
console.log('|---|---|---|---|');
for (const r of rows) console.log(r);
await ctx.close();
rmSync(dir, { recursive: true, force: true });
