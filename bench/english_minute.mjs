// What a class sees after a minute of "Learn to write English" in the browser: the validation loss
// and the model's latest sample at about 60 s of training, and at the end of the run.
//
//   cargo xtask serve &   # or any server of dist/
//   SPHEREWALK_URL=http://127.0.0.1:8080/ node bench/english_minute.mjs [--seconds 60]
//
// Uses e2e's playwright-core and the system Chromium (no browser download).

import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');

const URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8080/';
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECONDS = arg('--seconds', 60);

mkdirSync(join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e', 'artifacts'), { recursive: true });
const dir = mkdtempSync(join(tmpdir(), 'spherewalk-english-'));
const context = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
  viewport: { width: 1280, height: 800 },
});
const page = context.pages()[0] ?? (await context.newPage());
await page.goto(URL + '#preset=english', { waitUntil: 'load' });
await page.waitForSelector('#start');
const read = () =>
  page.evaluate(() => ({
    step: Number(document.getElementById('step')?.textContent),
    phase: document.getElementById('status')?.dataset.phase,
    val: document.getElementById('val-loss')?.textContent?.trim(),
    wrote_at: document.getElementById('writing-sample')?.dataset.step,
    text: document.getElementById('writing-sample')?.dataset.text,
    prompt: document.querySelector('#writing-sample .prompt')?.textContent,
    baselines: document.getElementById('baselines')?.textContent?.trim(),
    speed: document.getElementById('speed')?.textContent?.trim(),
  }));
await page.click('#start');
await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) > 0, null, { timeout: 120_000 });
const t0 = Date.now();
await page.waitForTimeout(SECONDS * 1000);
const minute = await read();
console.log(`after ${((Date.now() - t0) / 1000).toFixed(0)} s of training:`, JSON.stringify(minute, null, 2));
await page.waitForFunction(() => document.getElementById('status')?.dataset.phase === 'done', null, { timeout: 600_000 });
const end = await read();
console.log(`at the end (${((Date.now() - t0) / 1000).toFixed(0)} s):`, JSON.stringify(end, null, 2));
const artifacts = join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e', 'artifacts');
await page.screenshot({ path: join(artifacts, 'english-end.png') });
await page.hover('#writing-sample .tok >> nth=12');
await page.locator('#panel-writing').screenshot({ path: join(artifacts, 'panel-writing-english.png') });
await context.close();
rmSync(dir, { recursive: true, force: true });
