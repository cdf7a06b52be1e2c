// The page's run estimate against page runs "as fast as possible", in headless Chromium: for each
// size, what the line beside the pace said before the start (`engine::session::duration`: the
// schedule priced at rates the page measured on this computer) and how long the run took, with the
// measured rates beside them.
//
//   cargo xtask serve &              # the page on http://127.0.0.1:8080/
//   node bench/page_estimate.mjs [ROUNDS]
//
// Uses e2e's playwright-core and the system Chromium (no browser download).

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');

const URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8080/';
const ROUNDS = Number(process.argv[2] ?? 1);
// The four sizes the training rate was first fitted to, and wide ones where validation and
// writing are most of the run: a full window (every written token reads it again), and a long
// context (tokens written one at a time).
const SIZES = [
  { d_model: 32, layers: 2, heads: 4, context: 32, batch: 8, steps: 400 },
  { d_model: 64, layers: 2, heads: 4, context: 32, batch: 8, steps: 200 },
  { d_model: 64, layers: 2, heads: 4, context: 64, batch: 16, steps: 100 },
  { d_model: 128, layers: 4, heads: 4, context: 64, batch: 8, steps: 60 },
  { d_model: 1024, layers: 1, heads: 8, context: 16, batch: 2, steps: 16 },
  { d_model: 512, layers: 2, heads: 8, context: 128, batch: 2, steps: 20 },
  { d_model: 256, layers: 2, heads: 4, context: 128, batch: 4, steps: 40 },
  { d_model: 1024, layers: 1, heads: 8, context: 64, batch: 2, steps: 16 },
];

const dir = mkdtempSync(join(tmpdir(), 'spherewalk-estimate-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  viewport: { width: 1280, height: 800 },
});
const page = ctx.pages()[0] ?? (await ctx.newPage());
page.on('console', (m) => m.type() === 'error' && console.log('console error:', m.text()));
const rows = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const size of SIZES) {
    await page.goto(`${URL}#s=${encodeURIComponent(JSON.stringify({ ...size, steps_per_second: 0 }))}`);
    await page.waitForSelector('#start');
    await page.waitForFunction(() => document.getElementById('estimate')?.dataset.rates, null, { timeout: 120_000 });
    const said = (await page.textContent('#estimate')).trim();
    const rates = JSON.parse(await page.getAttribute('#estimate', 'data-rates'));
    const expected = Number(said.match(/about (\d+(?:\.\d+)?) (s|min)/)?.[1] ?? NaN) * (/about [\d.]+ min/.test(said) ? 60 : 1);
    const t0 = Date.now();
    await page.click('#start');
    await page.waitForFunction(() => document.getElementById('status')?.dataset.phase === 'done', null, { timeout: 900_000, polling: 200 });
    const took = (Date.now() - t0) / 1000;
    const name = `d${size.d_model} L${size.layers} T${size.context} B${size.batch} ${size.steps} steps`;
    rows.push({ name, expected, took, rates });
    const r = `train ${rates.train_gflops.toFixed(1)} GFLOP/s, read ${rates.read_gflops.toFixed(1)}, rows ${rates.row_gb_per_s.toFixed(1)} GB/s, start ${rates.start_s.toFixed(2)} s`;
    console.log(`${name.padEnd(30)} said ${String(expected).padStart(5)} s  took ${took.toFixed(1).padStart(6)} s  (${(took / expected).toFixed(2)}x)  ${r}`);
  }
}
await ctx.close();
rmSync(dir, { recursive: true, force: true });
