// A teacher's first visit on school Wi-Fi, timed in headless Chromium: dist/ copied into a
// sub-folder of a plain static server (Python's: no compression, no cache headers), the network
// throttled by Chromium's own emulation (10 Mbit/s down, 5 up, 40 ms latency), a new profile each
// run. (The workers' downloads are throttled too: Start comes about 2 s after the page is drawn,
// 0.3 s without the emulation.) It prints what the first visit loads before the first
// step (bytes as sent, and at gzip -9 as a compressing host would send them), and the times to the
// page, to an enabled Start and to the first step when Start is pressed as soon as it shows.
//
//   cargo xtask dist && node bench/first_visit.mjs [--runs 3]
//
// Uses e2e's playwright-core and the system Chromium (no browser download).

import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const HERE = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(HERE, '..', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');

const runs = process.argv.includes('--runs') ? Number(process.argv[process.argv.indexOf('--runs') + 1]) : 3;
const dist = join(HERE, '..', 'dist');
if (!existsSync(join(dist, 'index.html'))) throw new Error('no dist/: run cargo xtask dist first');
const www = mkdtempSync(join(tmpdir(), 'spherewalk-www-'));
const site = join(www, 'school', 'spherewalk');
cpSync(dist, site, { recursive: true });
const port = 8000 + Math.floor(Math.random() * 900);
const server = spawn('/usr/bin/python3', ['-m', 'http.server', '--bind', '127.0.0.1', '--directory', www, String(port)], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const url = `http://127.0.0.1:${port}/school/spherewalk/`;
const MBIT = 1e6 / 8;

const rows = [];
try {
  for (let run = 0; run < runs; run++) {
    const profile = mkdtempSync(join(tmpdir(), 'spherewalk-visit-'));
    const ctx = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-background-networking'],
      viewport: { width: 1280, height: 800 },
      serviceWorkers: 'block',
    });
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    const cdp = await ctx.newCDPSession(page);
    const conditions = { offline: false, latency: 40, downloadThroughput: 10 * MBIT, uploadThroughput: 5 * MBIT };
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', conditions);
    const files = new Set();
    ctx.on('request', (r) => files.add(r.url()));
    const t0 = Date.now();
    await page.goto(url, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('#start', { timeout: 120_000 });
    const drawn = Date.now() - t0;
    await page.selectOption('#pace', '0');
    await page.click('#start');
    await page.waitForSelector('#start:not([data-loading])', { timeout: 120_000 });
    const ready = Date.now() - t0;
    await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 1, null, { timeout: 120_000, polling: 20 });
    const first = Date.now() - t0;
    let raw = 0;
    let gz = 0;
    for (const u of files) {
      const path = new URL(u).pathname;
      const file = join(www, decodeURIComponent(path.endsWith('/') ? `${path}index.html` : path));
      if (!u.startsWith(`http://127.0.0.1:${port}/`) || !existsSync(file)) continue;
      const bytes = readFileSync(file);
      raw += bytes.length;
      gz += gzipSync(bytes, { level: 9 }).length;
    }
    rows.push({ drawn, ready, first, raw, gz });
    await ctx.close();
    rmSync(profile, { recursive: true, force: true });
  }
} finally {
  server.kill();
  rmSync(www, { recursive: true, force: true });
}

const kb = (b) => `${(b / 1024).toFixed(0)} KiB`;
console.log(`First visit at 10 Mbit/s, 40 ms (Chromium's emulation), ${runs} runs, ${new Date().toISOString().slice(0, 10)}`);
console.log('| run | loaded (as sent) | at gzip -9 | page drawn | Start enabled | first step |');
console.log('|---|---|---|---|---|---|');
rows.forEach((r, i) => console.log(`| ${i + 1} | ${kb(r.raw)} | ${kb(r.gz)} | ${(r.drawn / 1000).toFixed(1)} s | ${(r.ready / 1000).toFixed(1)} s | ${(r.first / 1000).toFixed(1)} s |`));
