// A model's training history in the page: checkpoints served under the hub's revision layout
// (the GPT-NeoX fixture at steps 0, 1000, 2000 and 4000; step 0 kept only as torch.save's file of
// step 1000's weights) fetched, read and dropped one at a time, to the numbers native
// `lab history` gives for the same folders; the copy found; cancelled and resumed from the cache.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ARTIFACTS, LAB_BIN, WWW, launch, openModel, textOf } from './helpers.mjs';

const ID = 'spherewalk/pythia-fixture';
const TEXT = 'the heat in the tea and the stars';

test('a training history: each checkpoint\'s entropy per layer as lab history has it, the copy found, cancel and resume', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await openModel(page, { fetch: false });
  // The history is one of the model mode's sections: its tab shows it.
  await page.click('#section-history');
  assert.match(await textOf(page, '#history-plan'), /^16 checkpoints of EleutherAI\/pythia-14m, about 853 MB to download/);
  await page.fill('#history-model', ID);
  await page.fill('#history-steps', '0, 1000, 2000, 4000');
  await page.fill('#history-text', TEXT);
  assert.match(await textOf(page, '#history-plan'), /^4 checkpoints of spherewalk\/pythia-fixture/);

  // Cancelled while step 2000's weights are on their way: what came stays measured.
  await page.route('**/step2000/model.safetensors', async (route) => {
    await new Promise((r) => setTimeout(r, 4000));
    await route.continue().catch(() => {});
  });
  await page.click('#history-start');
  await page.waitForFunction(() => /step 2000/.test(document.getElementById('history-status')?.textContent ?? ''), null, { timeout: 60_000 });
  await page.click('#history-cancel');
  await page.waitForSelector('#history-error');
  assert.match(await textOf(page, '#history-error'), /cancelled/);
  assert.equal(await page.getAttribute('#history-chart', 'data-points'), '2');
  await page.unroute('**/step2000/model.safetensors');

  // Start again: the two checkpoints already here come from the browser's cache.
  // (Step 0 has no model.safetensors: asking for it again finds nothing, its .bin is kept.)
  const weights = (path) => requests.filter((u) => u.endsWith(path)).length;
  const kept = ['/resolve/step0/pytorch_model.bin', '/resolve/step1000/model.safetensors'];
  const before = kept.map(weights);
  await page.click('#history-start');
  await page.waitForFunction(() => document.getElementById('history-verdicts')?.dataset.settled === 'true', null, { timeout: 120_000 });
  assert.deepEqual(before, [1, 1]);
  assert.deepEqual(kept.map(weights), before, 'resumed from the cache');

  const dirs = [0, 1000, 2000, 4000].map((s) => join(WWW, 'hub', ID, 'resolve', `step${s}`));
  const cli = JSON.parse(execFileSync(LAB_BIN, ['history', ...dirs.flatMap((d) => ['--model', d]), '--text', TEXT, '--json'], { encoding: 'utf8' }));
  assert.deepEqual(cli.steps, [0, 1000, 2000, 4000]);
  assert.deepEqual(cli.identical, [[1000, 0]], 'step 1000 is the .bin of step 0 read natively too');
  const values = JSON.parse(await page.getAttribute('#history-chart', 'data-values'));
  assert.equal(values.length, 4);
  values.forEach((row, k) => row.forEach((e, l) => {
    assert.ok(Math.abs(e - cli.entropy[k][l]) <= 1e-4, `step ${cli.steps[k]} layer ${l}: ${e} in the page, ${cli.entropy[k][l]} natively`);
  }));
  assert.match(await textOf(page, '#history-identical'), /Step 1000 has exactly step 0's weights/);
  const verdicts = await page.$$eval('#history-verdicts li', (lis) => lis.map((li) => [li.dataset.kind, li.textContent]));
  assert.deepEqual(verdicts.map((v) => v[0]), cli.verdict.map((v) => v.kind));
  verdicts.forEach(([, words], l) => assert.ok(words.startsWith(`Layer ${l}'s attention entropy`), words));
  // The same run through the JS API resolves to lab history's object; a second call while it runs
  // is refused (it would have cancelled the first and answered both), and the visitor's text stays.
  await page.fill('#history-text', 'the visitor typed this');
  const [scripted, second] = await page.evaluate(([id, text]) => {
    const first = spherewalk.history({ model: id, steps: '0, 1000, 2000, 4000', text });
    const again = spherewalk.history({ model: id, steps: '0, 1000', text }).then(() => 'resolved', (e) => `rejected: ${e.message}`);
    return Promise.all([first, again]);
  }, [ID, TEXT]);
  assert.match(second, /^rejected: a history is being read for an earlier call/);
  assert.equal(await page.inputValue('#history-text'), 'the visitor typed this');
  await page.fill('#history-text', TEXT);
  assert.deepEqual(scripted.steps, cli.steps);
  scripted.entropy.forEach((row, k) => row.forEach((e, l) => assert.ok(Math.abs(e - cli.entropy[k][l]) <= 1e-4)));
  await page.locator('#model-history').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS, 'model-history.png') });

  // A checkpoint whose weights fail to read (NaN) stops the run, and is not kept: once the hub
  // serves the right file, Start again reads it. A browser with no room to keep a checkpoint says so.
  const dropCached = (step) => page.evaluate(async (s) => {
    const cache = await caches.open('spherewalk-models');
    for (const r of await cache.keys()) if (r.url.includes(`/step${s}/`)) await cache.delete(r);
  }, step);
  await dropCached(2000);
  await page.route('**/step2000/model.safetensors', async (route) => {
    const body = Buffer.from(await (await route.fetch()).body());
    const header = 8 + Number(body.readBigUInt64LE(0));
    body.fill(0xff, header);
    await route.fulfill({ status: 200, body, headers: { 'content-type': 'application/octet-stream' } });
  });
  await page.click('#history-start');
  await page.waitForSelector('#history-error', { timeout: 60_000 });
  assert.match(await textOf(page, '#history-error'), /^step 2000: .*a weight must be a finite number.*Start again fetches them anew/);
  await page.unroute('**/step2000/model.safetensors');
  await dropCached(4000);
  await page.evaluate(() => {
    Cache.prototype.put = () => Promise.reject(new DOMException('no room', 'QuotaExceededError'));
  });
  await page.click('#history-start');
  await page.waitForFunction(() => document.getElementById('history-verdicts')?.dataset.settled === 'true', null, { timeout: 120_000 });
  assert.deepEqual(JSON.parse(await page.getAttribute('#history-chart', 'data-values')), values, 'the same history once the file is right');
  assert.match(await textOf(page, '#history-notes'), /would not keep .*no room: the browser's storage for this site is full/);

  // A checkpoint opens in the lenses.
  await page.click('#history-open button >> text="step 4000"');
  await page.waitForFunction(() => /^spherewalk\/pythia-fixture@step4000: 3 layers/.test(document.getElementById('model-opened')?.textContent ?? ''), null, { timeout: 60_000 });
  assert.deepEqual(problems.filter((p) => !/404|aborted|ERR_ABORTED/.test(p)), []);
});
