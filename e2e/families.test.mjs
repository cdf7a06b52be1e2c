// Other model families in the page: a GPT-NeoX (Pythia's layout, F16) fetched at a revision of its
// training (`id@step1000`), and a Llama with shared key/value heads and a tied head, each from the
// random-weight fixtures of engine/tests/families/fixture.py under the hub's path layout, read in
// the page's worker to the numbers native `lab inspect` gives for the same files.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ARTIFACTS, LAB_BIN, WWW, launch, openModel, textOf } from './helpers.mjs';

const TEXT = 'the heat in the tea and the stars';

for (const [id, revision, family, block] of [
  ['spherewalk/pythia-fixture', 'step1000', 'GPT-NeoX', /rotary positions on 4 dims.*parallel attention and MLP/],
  ['spherewalk/llama-fixture', 'main', 'Llama', /RMSNorm.*gated MLP.*4 query heads share 2 key\/value heads/],
]) {
  test(`${family} fetched as ${id}@${revision} reads every layer as lab inspect does, on the CPU and on WebGPU`, { timeout: 180_000 }, async (t) => {
    const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
    const requests = [];
    page.on('request', (r) => requests.push(r.url()));
    await openModel(page, { fetch: false });
    await page.fill('#hub-id', `${id}@${revision}`);
    await page.click('#hub-fetch');
    await page.waitForSelector('#model-tokens', { timeout: 120_000 });
    assert.ok(requests.some((u) => u.includes(`/${id}/resolve/${revision}/model.safetensors`)), 'fetched at the revision');
    assert.ok(requests.some((u) => u.endsWith(`/resolve/${revision}/tokenizer.json`)), 'with its own tokenizer');
    assert.equal(await textOf(page, '#panel-model h2'), `A real model: ${family}`);
    assert.match(await textOf(page, '#model-opened'), block);

    const dir = join(WWW, 'hub', id, 'resolve', revision);
    const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', dir, '--text', TEXT, '--json'], { encoding: 'utf8' }));
    assert.equal(cli.family, family);
    const web = await page.evaluate((text) => spherewalk.inspect(text), TEXT);
    assert.deepEqual(web.tokens, cli.tokens);
    assert.deepEqual(web.pieces, cli.pieces);
    const close = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4 * Math.max(Math.abs(b), 1), `${what}: ${a} in the page, ${b} natively`);
    cli.layers.forEach((l, i) => {
      close(web.layers[i].residual_norm, l.residual_norm, `|x| entering layer ${i}`);
      close(web.layers[i].radius.mean, l.radius.mean, `radius at layer ${i}`);
      l.heads.forEach((h, j) => close(web.layers[i].heads[j].entropy, h.entropy, `entropy of layer ${i} head ${j}`));
    });
    cli.next.forEach((row, i) => row.forEach(([, p], k) => close(web.next[i][k][1], p, `candidate ${k} after token ${i}`)));
    // WebGPU picked: the GPU's kernels for this block (RMSNorm, rotary, gated, parallel) read it,
    // to the same numbers.
    await page.selectOption('#backend-choice', 'webgpu');
    const gpu = await page.evaluate((text) => spherewalk.inspect(text), TEXT);
    assert.match(gpu.on, /^WebGPU/);
    cli.layers.forEach((l, i) => l.heads.forEach((h, j) => close(gpu.layers[i].heads[j].entropy, h.entropy, `WebGPU: entropy of layer ${i} head ${j}`)));
    cli.next.forEach((row, i) => row.forEach(([, p], k) => close(gpu.next[i][k][1], p, `WebGPU: candidate ${k} after token ${i}`)));
    await page.screenshot({ path: join(ARTIFACTS, `page-${family.toLowerCase()}.png`) });
    assert.deepEqual(problems, [], 'no console errors');
  });
}

test('a revision kept only as pytorch_model.bin is fetched and read without running its pickle, as its safetensors reads', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await openModel(page, { fetch: false });
  // step0 holds config.json, tokenizer.json and torch.save's file of step1000's weights.
  await page.fill('#hub-id', 'spherewalk/pythia-fixture@step0');
  await page.click('#hub-fetch');
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.ok(requests.some((u) => u.endsWith('/resolve/step0/pytorch_model.bin')), 'asked for the .bin after the safetensors');
  const cli = JSON.parse(execFileSync(LAB_BIN, ['inspect', '--model', join(WWW, 'hub', 'spherewalk', 'pythia-fixture', 'resolve', 'step1000'), '--text', TEXT, '--json'], { encoding: 'utf8' }));
  const web = await page.evaluate((text) => spherewalk.inspect(text), TEXT);
  assert.deepEqual(web.tokens, cli.tokens);
  cli.layers.forEach((l, i) => l.heads.forEach((h, j) => {
    assert.ok(Math.abs(web.layers[i].heads[j].entropy - h.entropy) <= 1e-4, `layer ${i} head ${j}: ${web.layers[i].heads[j].entropy} from the .bin, ${h.entropy} natively`);
  }));
  assert.deepEqual(problems.filter((p) => !/404/.test(p)), [], 'no console errors but the missing safetensors');
});
