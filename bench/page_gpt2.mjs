// GPT-2 in the page, timed in headless Chromium: opening a model served under the hub's layout,
// then 64-token readings (every layer's panels, then the depth fits) and greedy writing.
//
//   python3 engine/tests/gpt2/fixture.py /tmp/gpt2 --size gpt2      # GPT-2 small's sizes, random weights
//   trunk build --release && mkdir -p dist/hub/spherewalk/gpt2-small/resolve
//   ln -sfn /tmp/gpt2 dist/hub/spherewalk/gpt2-small/resolve/main
//   python3 -m http.server 8099 --directory dist --bind 127.0.0.1 &
//   node bench/page_gpt2.mjs [--backend webgpu]
//
// Another family the same way: engine/tests/families/fixture.py OUT --family gpt_neox --size
// pythia-160m (or --family llama --size smollm2-135m), served as MODEL_ID; its fixture's small
// tokenizer cuts about a token a character, so TEXT_CHARS=60 reads about 60 tokens.
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
const MODEL = process.env.MODEL_ID ?? 'spherewalk/gpt2-small';
const backend = process.argv.includes('--backend') ? process.argv[process.argv.indexOf('--backend') + 1] : 'auto';
const READINGS = 4;

const dir = mkdtempSync(join(tmpdir(), 'spherewalk-gpt2-'));
const ctx = await chromium.launchPersistentContext(dir, {
  executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-dev-shm-usage'],
  viewport: { width: 1280, height: 800 },
});
const page = ctx.pages()[0] ?? (await ctx.newPage());
page.on('console', (m) => m.type() === 'error' && console.log('console error:', m.text()));
await page.goto(`${URL}?hub=${encodeURIComponent(URL + 'hub')}`);
await page.waitForSelector('#start');
await page.selectOption('#backend-choice', backend);
await page.click('#mode-model');
await page.fill('#hub-id', MODEL);
let t0 = Date.now();
await page.click('#hub-fetch');
await page.waitForSelector('#model-tokens .piece', { timeout: 600_000 });
console.log(`${MODEL}: fetched, opened and the text box read in ${Date.now() - t0} ms`);
await page.waitForFunction(() => !document.getElementById('model-busy'), null, { timeout: 120_000 });

const phrase = 'The Brownian motion in the transformer model: tokens walk on the sphere. ';
for (let i = 0; i < READINGS; i++) {
  // A new text each time (the page reads again only what changed); 62-64 tokens.
  const text = `${i} ${phrase.repeat(4).slice(0, Number(process.env.TEXT_CHARS ?? 330))}`;
  const r = await page.evaluate(async (text) => {
    const before = document.getElementById('model-tokens').textContent;
    const t0 = performance.now();
    let panels = null;
    const watch = (async () => {
      while (panels === null) {
        await new Promise((r) => requestAnimationFrame(r));
        if (document.getElementById('model-tokens')?.textContent !== before) panels = performance.now() - t0;
      }
    })();
    const reading = await spherewalk.inspect(text); // resolves once the depth fits have arrived
    const all = performance.now() - t0;
    await watch;
    return { panels, all, tokens: reading.tokens.length, on: reading.on };
  }, text);
  console.log(`reading ${i}: ${r.tokens} tokens, every layer's panels ${r.panels.toFixed(0)} ms, with the depth fits ${r.all.toFixed(0)} ms, on ${r.on}`);
}
t0 = Date.now();
await page.click('#model-write');
await page.waitForSelector('#model-written .tok', { state: 'attached', timeout: 300_000 });
const s = (Date.now() - t0) / 1000;
console.log(`greedy writing of 20 tokens after the last text: ${(20 / s).toFixed(1)} tokens/s (${s.toFixed(2)} s, the prompt included)`);
await ctx.close();
rmSync(dir, { recursive: true, force: true });
