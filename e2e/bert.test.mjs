// BERT in the page: the random-weight BertForMaskedLM of engine/tests/families/bert.py fetched under
// the hub's path layout and read in the model worker to the numbers native `lab inspect` gives for
// the same files: its WordPiece tokens with [CLS] and [SEP], what it fills in at [MASK] (in words on
// the panel), where each head's walk settles (under the heatmap), no Write button but a sentence
// saying why, on the CPU and on WebGPU.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ARTIFACTS, LAB_BIN, WWW, launch, openModel, textOf } from './helpers.mjs';

const TEXT = 'The cats sat on the [MASK].';
const ID = 'spherewalk/bert-fixture';

test('BERT reads as lab inspect does, says what it fills in at [MASK] and where its walks settle', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1920, height: 1080 } });
  await openModel(page, { fetch: false });
  await page.fill('#hub-id', ID);
  await page.click('#hub-fetch');
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.equal(await textOf(page, '#panel-model h2'), 'A real model: BERT');
  assert.match(await textOf(page, '#model-opened'), /Post-LN/);

  const dir = join(WWW, 'hub', ID, 'resolve', 'main');
  const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', dir, '--text', TEXT, '--json'], { encoding: 'utf8' }));
  const web = await page.evaluate((text) => spherewalk.inspect(text), TEXT);
  assert.deepEqual(web.tokens, cli.tokens);
  assert.equal(web.pieces[0], '[CLS]');
  assert.deepEqual(web.masks, [7]);
  assert.equal(web.predicts, 'masked');
  const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4 * Math.max(Math.abs(b), 1), `${what}: ${a} in the page, ${b} natively`);
  cli.layers.forEach((l, i) => {
    close(web.layers[i].radius.max_rel_err, l.radius.max_rel_err, `radius error at depth ${i}`);
    l.heads.forEach((h, j) => {
      close(web.layers[i].heads[j].entropy, h.entropy, `entropy of layer ${i} head ${j}`);
      h.stationary.forEach((p, k) => close(web.layers[i].heads[j].stationary[k], p, `π_${k} of layer ${i} head ${j}`));
    });
  });

  // The panel says what BERT fills in at the mask, with the engine's candidates.
  const [best, p] = cli.next[7][0];
  const line = await textOf(page, '#model-next');
  assert.ok(line.startsWith('At "[MASK]" (token 8) the model fills in: '), line);
  assert.ok(line.includes(`"${best.trim()}" ${Math.round(100 * p)}%`), `${line} names ${best} ${p}`);
  await page.locator('#model-next').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS, 'page-bert-mask.png') });
  // No Write button: a sentence says why, and what to do instead.
  assert.equal(await page.locator('#model-write').count(), 0);
  assert.match(await textOf(page, '#model-fills'), /does not write left to right: put \[MASK\] in the text/);

  // Under the heatmap: where the chosen head's walk settles, as the engine computed it.
  await page.locator('#panel-attention').scrollIntoViewIfNeeded();
  const layer = Number(await page.inputValue('#att-layer'));
  const head = Number(await page.inputValue('#att-head'));
  const pi = cli.layers[layer].heads[head].stationary;
  const top = pi.indexOf(Math.max(...pi));
  const settles = await textOf(page, '#attention-stationary');
  assert.ok(settles.includes(`most on "${cli.pieces[top].trim()}" (token ${top + 1}) ${pi[top].toFixed(2)}`), `${settles} against π = ${pi}`);
  assert.match(await textOf(page, '#verdict-markov'), /Attention runs both ways/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-bert.png') });

  // WebGPU: the Post-LN block and the head's transform on the GPU's kernels, to the same numbers.
  await page.selectOption('#backend-choice', 'webgpu');
  const gpu = await page.evaluate((text) => spherewalk.inspect(text), TEXT);
  assert.match(gpu.on, /^WebGPU/);
  cli.layers.forEach((l, i) => l.heads.forEach((h, j) => close(gpu.layers[i].heads[j].entropy, h.entropy, `WebGPU: entropy of layer ${i} head ${j}`)));
  cli.next[7].forEach(([, q], k) => close(gpu.next[7][k][1], q, `WebGPU: candidate ${k} at the mask`));
  assert.deepEqual(problems, [], 'no console errors');
});
