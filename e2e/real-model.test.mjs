// A real model (GPT-2, the random-weight fixture under the hub's layout): read on every layer as
// lab inspect and lab sample read it; cancelled downloads, refused caches and bad files.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS, HERE, LAB_BIN, WWW, launch, textOf, FIXTURE_ID, FIXTURE_DIR, openModel } from './helpers.mjs';

const MODEL_TEXT = 'The Brownian motion in the transformer model: tokens walk on the sphere.';

test('a real model: GPT-2 fetched under the hub\'s layout reads a text on every layer, as lab inspect and lab sample do', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  // Before a model opens, the sphere says how to get one (the model mode has no Start).
  await openModel(page, { fetch: false });
  await page.waitForFunction(() => document.getElementById('sphere')?.dataset.empty === 'Open a model to see its tokens');
  await page.click('#hub-fetch');
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
  // Follow token: its walk through all 13 depths (12 arcs) at any depth of the slider, in one
  // view for every depth (the engine's test checks that view against its own PCA).
  await page.selectOption('#sphere-token', '3');
  for (const d of ['0', '7']) {
    await page.fill('#depth', d);
    await page.waitForFunction(() => document.getElementById('sphere').dataset.path === '12', null, { timeout: 10_000 });
  }
  assert.match(await textOf(page, '#panel-sphere'), /The same three directions for every depth/);
  assert.match(await textOf(page, '#panel-sphere'), /The dark line is its walk through every depth/);
  assert.match(await textOf(page, '#panel-sphere'), /where token 3 looks in layer 7,/, 'the arcs are the depth\'s');
  await page.selectOption('#sphere-token', '');
  await page.waitForFunction(() => document.getElementById('sphere').dataset.path === '0');
  assert.equal(await page.$$eval('#model-layers tbody tr', (r) => r.length), 13);
  // The reading in plain words, with the table's numbers, as lab inspect's text output says it.
  const numbers = (t) => (t.match(/-?\d+(\.\d+)?/g) ?? []).map(Number);
  const words = await textOf(page, '#model-words');
  assert.match(words, /^Before each LayerNorm, a token's vector has an average length of [\d.]+ at layer 0, (growing|falling) to .* Each head's attention spreads over about/);
  const span = (xs) => [Math.min(...xs), Math.max(...xs)];
  // The stream's length as the table has it: at the first depth, at its longest and at the last.
  const lengths = cli.layers.map((l) => l.residual_norm);
  const [entLo, entHi] = span(cli.layers.flatMap((l) => l.heads.map((h) => h.entropy)));
  const said = numbers(words);
  for (const want of [lengths[0], Math.max(...lengths), lengths.at(-1), 8, Math.exp(entLo), Math.exp(entHi), entLo, entHi]) {
    assert.ok(said.some((n) => Math.abs(n - want) <= 0.051), `${want} in "${words}"`);
  }
  const cliText = execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, '--text', MODEL_TEXT], { encoding: 'utf8' });
  const cliWords = cliText.split('\n').find((l) => l.startsWith('Before each'));
  assert.ok(cliWords, cliText);
  numbers(cliWords).forEach((n, i) => assert.ok(Math.abs(n - said[i]) <= 0.051, `number ${i}: ${n} natively, ${said[i]} in the page`));
  assert.equal(await page.$$eval('#model-layers-key dt', (d) => d.length), 5, 'every column explained');
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
  // "Download reading": the JSON is what spherewalk.inspect returned (lab inspect --json's
  // report), and the layer table's CSV is lab inspect --csv's, number for number.
  const download = async (id) => {
    const [file] = await Promise.all([page.waitForEvent('download'), page.click(id)]);
    return { name: file.suggestedFilename(), text: readFileSync(await file.path(), 'utf8') };
  };
  const json = await download('#model-download-json');
  assert.equal(json.name, 'spherewalk_gpt2-fixture-reading.json');
  assert.deepEqual(JSON.parse(json.text), web);
  const csv = await download('#model-download-csv');
  const cliCsv = execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, '--text', MODEL_TEXT, '--csv'], { encoding: 'utf8' });
  const rowsOf = (t) => t.trim().split('\n').map((l) => l.split(','));
  const [ours, theirs] = [rowsOf(csv.text), rowsOf(cliCsv)];
  assert.deepEqual(ours[0], theirs[0], 'the header');
  assert.equal(ours.length, 1 + 12 * 4 + 1);
  ours.forEach((row, i) => row.forEach((v, j) => {
    const want = theirs[i][j];
    if (i === 0 || want === '' || j < 2) assert.equal(v, want, `row ${i} column ${j}`);
    else assert.ok(Math.abs(Number(v) - Number(want)) <= 1e-4 * Math.max(1, Math.abs(Number(want))), `row ${i} column ${j}: ${v} against ${want}`);
  }));
  // Auto on a software adapter (SwiftShader) reads on the CPU, and says so.
  assert.match(web.on, /^CPU \(.*software/);
  // Where it ran, in one plain line; the graphics stack's own words only behind "details".
  assert.match(await textOf(page, '#model-on'), /^This reading ran on the CPU: this browser's only GPU is a software one \(.+\), slower than the CPU\.$/);
  assert.match(await page.$eval('#model-on-details', (d) => d.textContent), /^details.*software/);
  // WebGPU picked: the GPU's forward (the trainer's WGSL kernels) reads it, to the same numbers.
  await page.selectOption('#backend-choice', 'webgpu');
  const gpu = await page.evaluate((text) => spherewalk.inspect(text), MODEL_TEXT);
  assert.match(gpu.on, /^WebGPU/);
  sameAsNative(gpu, 'WebGPU');
  assert.match(await textOf(page, '#model-on'), /^This reading ran on WebGPU \(.+\)\.$/);
  assert.equal(await page.$('#model-on-details'), null, 'nothing to explain when it ran where asked');
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

  // What it writes equals lab sample --model with the same settings: greedy (the default), then
  // drawn at a temperature among the top-k and top-p from a seed. Each token carries the
  // probability it was drawn with, and a click shows the candidates the CLI lists.
  const written = async (flags) => {
    const before = await page.evaluate(() => document.getElementById('model-written')?.dataset.text ?? null);
    await page.click('#model-write');
    await page.waitForFunction((b) => {
      const w = document.getElementById('model-written');
      return w && !document.getElementById('model-busy') && w.dataset.text !== b;
    }, before, { timeout: 60_000 });
    const cli = JSON.parse(execFileSync(LAB_BIN, ['sample', '--model', FIXTURE_DIR, '--prompt', MODEL_TEXT, '--tokens', '20', ...flags, '--json'], { encoding: 'utf8' }));
    assert.equal(await page.getAttribute('#model-written', 'data-text'), cli.text, `written with ${flags}`);
    const ps = await page.$$eval('#model-written .tok', (els) => els.map((e) => Number(e.dataset.p)));
    assert.equal(ps.length, cli.steps.length);
    ps.forEach((p, i) => assert.ok(Math.abs(p - cli.steps[i].p) < 1e-4, `token ${i}: p ${p} in the page, ${cli.steps[i].p} natively`));
    return cli;
  };
  assert.equal(await page.isDisabled('#model-top-k'), true, 'top-k means nothing when the most likely token is taken');
  await written(['--temperature', '0']);
  await page.$eval('#model-temperature', (e) => { e.value = '0.8'; e.dispatchEvent(new Event('change', { bubbles: true })); });
  await page.selectOption('#model-top-k', '40');
  await page.selectOption('#model-top-p', '0.9');
  await page.fill('#model-seed', '7');
  await page.dispatchEvent('#model-seed', 'change');
  const drawn = await written(['--temperature', '0.8', '--top-k', '40', '--top-p', '0.9', '--seed', '7']);
  await page.click('#model-written .tok >> nth=3');
  const rows = await page.$$eval('#model-candidates tr', (trs) => trs.map((tr) => tr.textContent));
  assert.equal(rows.length, drawn.steps[3].top.length);
  assert.ok(rows[0].includes(`${(drawn.steps[3].top[0][1] * 100).toFixed(1)}%`), `${rows[0]} against ${drawn.steps[3].top[0]}`);
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
  assert.match(await textOf(page, '#model-message'), /would not keep .*no room: the browser's storage for this site is full/);

  // Files picked from disk: a broken pickle, and a truncated safetensors, each refused by name.
  const config = { name: 'config.json', mimeType: 'application/json', buffer: readFileSync(join(FIXTURE_DIR, 'config.json')) };
  const tokenizer = join(FIXTURE_DIR, 'tokenizer.json');
  const asBuffer = (path, name, mimeType = 'application/json') => ({ name, mimeType, buffer: readFileSync(path) });
  await page.setInputFiles('#model-files', [config, asBuffer(tokenizer, 'tokenizer.json'), { name: 'pytorch_model.bin', mimeType: 'application/octet-stream', buffer: Buffer.from('PK\x03\x04') }]);
  await page.waitForFunction(() => /pytorch_model\.bin: not a readable zip/.test(document.getElementById('model-error')?.textContent ?? ''), null, { timeout: 60_000 });
  const whole = readFileSync(join(FIXTURE_DIR, 'model.safetensors'));
  // Without its tokenizer a model cannot read: the page says which file to add.
  await page.setInputFiles('#model-files', [join(FIXTURE_DIR, 'config.json'), join(FIXTURE_DIR, 'model.safetensors')]);
  await page.waitForFunction(() => /tokenizer is missing: open its tokenizer\.json/.test(document.getElementById('model-error')?.textContent ?? ''), null, { timeout: 60_000 });
  await page.setInputFiles('#model-files', [config, { name: 'tokenizer.json', mimeType: 'application/json', buffer: readFileSync(tokenizer) }, { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: whole.subarray(0, whole.length - 1000) }]);
  await page.waitForFunction(() => /truncated/.test(document.getElementById('model-error')?.textContent ?? ''), null, { timeout: 60_000 });
  // The model opened before is still open (both fit), and still reads.
  assert.match(await textOf(page, '#model-opened'), new RegExp(`^${FIXTURE_ID}: 12 layers`));
  assert.equal(await page.$$eval('#model-tokens .piece', (els) => els.length) > 0, true);
  await page.setInputFiles('#model-files', [join(FIXTURE_DIR, 'config.json'), tokenizer, join(FIXTURE_DIR, 'model.safetensors')]);
  await page.waitForFunction(() => /^model\.safetensors: 12 layers/.test(document.getElementById('model-opened')?.textContent ?? ''), null, { timeout: 120_000 });
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  assert.equal(await page.isVisible('#model-error'), false);

  // A checkpoint kept only as pytorch_model.bin (torch.save's zip, written by torch itself: the
  // GPT-NeoX fixture's weights) opens from disk and reads as lab inspect reads its safetensors.
  const neox = join(WWW, 'hub', 'spherewalk', 'pythia-fixture', 'resolve', 'step1000');
  const bin = { name: 'pytorch_model.bin', mimeType: 'application/octet-stream', buffer: readFileSync(join(HERE, '..', 'engine', 'tests', 'torch_bin', 'gpt_neox.bin')) };
  await page.setInputFiles('#model-files', [asBuffer(join(neox, 'config.json'), 'config.json'), asBuffer(join(neox, 'tokenizer.json'), 'tokenizer.json'), bin]);
  await page.waitForFunction(() => /^pytorch_model\.bin: 3 layers/.test(document.getElementById('model-opened')?.textContent ?? ''), null, { timeout: 120_000 });
  const text = 'the heat in the tea';
  const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', neox, '--text', text, '--json'], { encoding: 'utf8' }));
  const web = await page.evaluate((t) => spherewalk.inspect(t), text);
  assert.deepEqual(web.tokens, cli.tokens);
  cli.layers.forEach((l, i) => l.heads.forEach((h, j) => {
    assert.ok(Math.abs(web.layers[i].heads[j].entropy - h.entropy) <= 1e-4, `layer ${i} head ${j}: ${web.layers[i].heads[j].entropy} from the .bin, ${h.entropy} natively`);
  }));
  assert.deepEqual(problems.filter((p) => !p.includes('model.safetensors') && !p.includes('pytorch_model.bin')), []);
});

test('a long reading is cancelled: the worker stops, the model opens again from the browser\'s copy, the text stays', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  const before = await page.$$eval('#model-tokens .piece', (els) => els.map((e) => e.textContent));
  // A machine 400 times slower: the depth fits of one reading take minutes.
  await page.evaluate(() => window.spherewalk.testing.slowModelWorker(400));
  const longText = 'A slow reading that a student would rather stop: tokens walk on the sphere.';
  await page.fill('#model-text', longText);
  const script = page.evaluate((text) => window.spherewalk.inspect(text).then(() => 'resolved', (e) => `rejected: ${e.message}`), longText);
  await page.waitForSelector('#model-stop', { timeout: 60_000 });
  t.diagnostic(`busy with: ${await textOf(page, '#model-busy')}`);
  const stoppedAt = Date.now();
  await page.click('#model-stop');
  assert.match(await script, /^rejected: cancelled/, 'a script waiting on the reading hears it was cancelled');
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  t.diagnostic(`the model was open again ${Date.now() - stoppedAt} ms after Cancel`);
  assert.match(await textOf(page, '#model-message'), /^Cancelled: the model's worker was stopped/);
  assert.match(await textOf(page, '#model-opened'), /12 layers, 4 heads, width 64/, 'the model is open again');
  assert.equal(await page.inputValue('#model-text'), longText, 'the text stays');
  // Reopened without reading it: the worker is new (at full speed) and reads when asked.
  await page.fill('#model-text', MODEL_TEXT);
  await page.click('#model-read');
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  assert.deepEqual(await page.$$eval('#model-tokens .piece', (els) => els.map((e) => e.textContent)), before);
  assert.equal(await page.getAttribute('#model-brownian', 'data-settled'), 'true', 'the new worker finishes its depth fits');
  assert.deepEqual(problems, []);
});

test('the logit lens: every depth\'s top candidate and the answer\'s sentence as lab inspect --logit-lens gives them, and beside the sphere at the slider\'s depth', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  await page.fill('#model-text', MODEL_TEXT);
  await page.click('#model-read');
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, '--text', MODEL_TEXT, '--json', '--logit-lens'], { encoding: 'utf8' }));
  const cliText = execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, '--text', MODEL_TEXT, '--logit-lens'], { encoding: 'utf8' });
  await page.click('#model-lens-run');
  await page.waitForSelector('#model-lens-grid tbody tr', { timeout: 60_000 });
  const grid = await page.$$eval('#model-lens-grid tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => [Number(td.dataset.id), Number(td.dataset.rank)])));
  const lens = cli.logit_lens;
  assert.equal(grid.length, lens.depths.length, 'a row per depth, the output last');
  for (const [d, row] of grid.entries()) {
    assert.deepEqual(row, lens.depths[d].map((c) => [c.top[0][0], c.rank]), `depth ${d}: the top candidate and the answer's rank of each token`);
  }
  await page.locator('#model-lens-block').screenshot({ path: join(ARTIFACTS, 'model-lens.png') });
  const words = await textOf(page, '#model-lens-words');
  t.diagnostic(words);
  assert.ok(cliText.includes(words), `lab inspect --logit-lens says the same: ${words}`);
  // Beside the sphere, at the depth slider's layer: the followed (last) token's candidates there.
  await page.$eval('#depth', (e) => { e.value = '5'; e.dispatchEvent(new Event('input', { bubbles: true })); });
  const last = lens.depths[5].length - 1;
  const [, piece, p] = lens.depths[5][last].top[0];
  const now = await textOf(page, '#model-lens-now');
  assert.ok(now.startsWith('The logit lens at layer 5') && now.includes(`${Math.round(100 * p)}%`), `${now} has "${piece}"`);
  // A new reading drops the lens of the last one.
  await page.fill('#model-text', 'Another text.');
  await page.click('#model-read');
  await page.waitForSelector('#model-lens-grid', { state: 'detached', timeout: 60_000 });
  assert.deepEqual(problems, []);
});
