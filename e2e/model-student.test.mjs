// A real model a student can read (the GPT-2 fixture under the hub's layout): every block of
// statistics opens with a sentence whose numbers are the engine's, its symbols explained; two
// texts side by side as lab inspect --compare has them; labels that never overlap, the rest on
// hover; the walk through depth played; the blocks in columns on a wide screen.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { ARTIFACTS, LAB_BIN, launch, textOf, FIXTURE_DIR, openModel } from './helpers.mjs';

const FIRST = 'The Brownian motion in the transformer model: tokens walk on the sphere.';
const SECOND = 'The Brownian motion in the transformer model: tokens dance on the sphere.';
const numbers = (t) => (t.match(/-?\d+(\.\d+)?/g) ?? []).map(Number);
const lab = (args) => execFileSync(LAB_BIN, ['inspect', '--model', FIXTURE_DIR, ...args], { encoding: 'utf8' });

test('a student reads a real model: sentences with the engine\'s numbers, two texts side by side, labels apart, the walk through depth', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await openModel(page);
  await page.waitForSelector('#model-layers tbody tr', { timeout: 120_000 });
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  const cli = JSON.parse(lab(['--text', FIRST, '--json']));
  const cliText = lab(['--text', FIRST]);

  // Each block opens with its heading and a sentence, and says what its symbols mean.
  for (const id of ['#model-layers-block', '#model-kernel-block', '#model-depth-block', '#model-compare']) {
    const first = await page.$eval(id, (b) => [...b.children].slice(0, 2).map((e) => e.tagName).join(' '));
    assert.equal(first, 'H3 P', `${id} opens with a heading and a sentence`);
  }
  for (const id of ['#model-layers-block', '#model-kernel-block', '#model-depth-block', '#model-compare']) {
    assert.ok(await page.$(`${id} details.explain`), `${id} has its "What is this?"`);
  }
  const titles = await page.$$eval('#model-layers thead th', (ths) => ths.map((th) => th.title));
  assert.ok(titles.every((x) => x.length > 20), `every column head explains itself on hover: ${titles}`);
  const keys = await page.$$eval('#model-depth-block dl dt', (d) => d.map((e) => e.textContent));
  for (const symbol of ['R²', 'KS', 'D', 'β']) assert.ok(keys.includes(symbol), `${symbol} explained: ${keys}`);

  // The kernel's sentence: the heads' mean total variation and its range, as percentages.
  const kernel = await textOf(page, '#model-kernel-words');
  const tv = cli.layers.flatMap((l) => l.heads.map((h) => h.kernel_tv_mean));
  const said = numbers(kernel);
  for (const want of [100 * tv.reduce((a, b) => a + b, 0) / tv.length, 100 * Math.min(...tv), 100 * Math.max(...tv), tv.length]) {
    assert.ok(said.some((n) => Math.abs(n - want) <= 0.51), `${want} in "${kernel}"`);
  }
  assert.ok(cliText.includes(kernel), 'lab inspect says the same sentence');
  // The depth sentence: R², KS against its critical value, and the two fits' errors.
  const depth = await textOf(page, '#model-depth-words');
  const { brownian, flow } = cli.depth;
  const inDepth = numbers(depth);
  for (const want of [brownian.r_squared, brownian.ks, brownian.ks_critical, flow.rmse_particles, flow.rmse_brownian]) {
    assert.ok(inDepth.some((n) => Math.abs(n - want) <= 0.0051), `${want} in "${depth}"`);
  }
  assert.match(depth, brownian.ks <= brownian.ks_critical ? /spread like Brownian walkers'/ : /spread unlike Brownian walkers'/);
  assert.ok(cliText.includes(depth.split(' Here ')[0]), 'lab inspect opens the depth with the same words');

  // Two texts side by side: the changed token marked in each, the layers as lab inspect --compare.
  // Its own section: the tab shows it, and the reading steps aside.
  await page.click('#section-compare');
  assert.equal(await page.isVisible('#model-layers'), false, 'one section at a time');
  await page.fill('#model-text-b', SECOND);
  await page.click('#model-compare-run');
  await page.waitForSelector('#model-compare-layers tbody tr', { timeout: 60_000 });
  const cmp = JSON.parse(lab(['--text', FIRST, '--compare', SECOND, '--json']));
  const changed = await page.$$eval('#model-compare-sides .compare-side', (sides) =>
    sides.map((s) => [...s.querySelectorAll('.piece.changed')].map((e) => e.textContent)));
  assert.deepEqual(changed, [['\u2423walk'], ['\u2423dance']]);
  const rows = await page.$$eval('#model-compare-layers tbody tr', (trs) => trs.map((tr) => [Number(tr.dataset.mean), Number(tr.dataset.max), tr.textContent]));
  assert.equal(rows.length, cmp.layers.length);
  rows.forEach(([mean, max], l) => {
    assert.ok(Math.abs(mean - cmp.layers[l].mean_angle) < 0.05, `layer ${l}: moved ${mean} degrees in the page, ${cmp.layers[l].mean_angle} natively`);
    assert.ok(Math.abs(max - cmp.layers[l].max_angle) < 0.05, `layer ${l}: at most ${max} in the page, ${cmp.layers[l].max_angle} natively`);
  });
  assert.ok(cmp.layers.some((l) => l.mean_angle > 1), 'the change reaches the tokens after it');
  const cmpWords = await textOf(page, '#model-compare-words');
  const cliCmp = lab(['--text', FIRST, '--compare', SECOND]).split('\n').find((l) => l.startsWith('The texts part'));
  assert.ok(cliCmp, 'lab inspect --compare says it in words');
  const [ours, theirs] = [numbers(cmpWords), numbers(cliCmp)];
  assert.equal(ours.length, theirs.length, `${cmpWords}\n${cliCmp}`);
  ours.forEach((n, i) => assert.ok(Math.abs(n - theirs[i]) <= 0.051, `number ${i}: ${n} in the page, ${theirs[i]} natively`));
  const k = cmp.first_change;
  assert.ok(cmpWords.startsWith(`The texts part at token ${k + 1}: " walk" against " dance". The ${k} tokens before it stay at exactly the same place`), cmpWords);
  const nextSides = await page.$$eval('.compare-next', (ps) => ps.map((p) => p.textContent));
  cmp.next.forEach((row, i) => assert.ok(nextSides[i].includes(`${Math.round(100 * row[0][1])}%`), `${nextSides[i]} against ${row[0]}`));
  await page.locator('#model-compare').scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(ARTIFACTS, 'model-compare.png') });
  // A comparison that fails (an empty second text) says why, and no older comparison stays beside it.
  await page.fill('#model-text-b', '');
  await page.click('#model-compare-run');
  await page.waitForSelector('#model-compare-error', { timeout: 60_000 });
  assert.match(await textOf(page, '#model-compare-error'), /empty/);
  assert.equal(await page.locator('#model-compare-layers').count(), 0, 'the earlier comparison is gone');
  await page.fill('#model-text-b', SECOND);

  // Labels never overlap; a token whose label was left out is named when the pointer is over it.
  const sphere = (name) => page.evaluate((n) => document.getElementById('sphere').dataset[n], name);
  const boxesAt = async () => {
    const b = (await sphere('labelBoxes')).split(',').map(Number);
    return Array.from({ length: b.length / 4 }, (_, i) => b.slice(4 * i, 4 * i + 4));
  };
  let crowded = null;
  for (let d = 0; d <= 12; d++) {
    await page.fill('#depth', String(d));
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50))));
    const boxes = await boxesAt();
    const side = await page.evaluate(() => document.getElementById('sphere').clientWidth);
    for (const [x, y, w, h] of boxes) {
      assert.ok(x >= 0 && y >= 0 && x + w <= side + 0.1 && y + h <= side + 0.1, `depth ${d}: a label at ${[x, y, w, h]} is cut by the canvas's edge (${side} px)`);
    }
    for (let i = 0; i < boxes.length; i++) {
      for (let j = 0; j < i; j++) {
        const [a, b] = [boxes[i], boxes[j]];
        const apart = a[0] + a[2] <= b[0] || b[0] + b[2] <= a[0] || a[1] + a[3] <= b[1] || b[1] + b[3] <= a[1];
        assert.ok(apart, `depth ${d}: labels ${i} and ${j} overlap: ${a} and ${b}`);
      }
    }
    const labelled = (await sphere('labelled')).split(',').map(Number);
    if (crowded === null && labelled.length < Number(await sphere('points'))) crowded = { d, labelled };
  }
  assert.ok(crowded, 'some depth crowds its tokens (the fixture\'s later layers do)');
  await page.fill('#depth', String(crowded.d));
  const screen = (await sphere('screen')).split(',').map(Number);
  const hidden = Array.from({ length: screen.length / 3 }, (_, i) => i).find((i) => !crowded.labelled.includes(i));
  const box = await page.locator('#sphere').boundingBox();
  await page.mouse.move(box.x + screen[3 * hidden], box.y + screen[3 * hidden + 1]);
  await page.waitForFunction((i) => document.getElementById('sphere').dataset.labelled.split(',').map(Number).includes(i), hidden, { timeout: 5_000 }).catch(() => {});
  const over = (await sphere('labelled')).split(',').map(Number);
  // The dot under the pointer may be another one drawn on top of it: that one is named then.
  const under = Array.from({ length: screen.length / 3 }, (_, i) => i)
    .filter((i) => Math.hypot(screen[3 * i] - screen[3 * hidden], screen[3 * i + 1] - screen[3 * hidden + 1]) < 12);
  assert.ok(under.some((i) => over.includes(i) && !crowded.labelled.includes(i)), `hovering token ${hidden} names it (labelled ${over})`);
  await page.mouse.move(box.x - 20, box.y - 20);

  // Play through depth: the slider walks from the first layer to the final norm, then stops.
  await page.click('#depth-play');
  const seen = new Set();
  const end = Date.now() + 20_000;
  while (Date.now() < end) {
    seen.add(await textOf(page, '#depth-value'));
    if ((await textOf(page, '#depth-play')) === 'Play through depth') break;
    await page.waitForTimeout(150);
  }
  assert.equal(await textOf(page, '#depth-value'), 'final');
  assert.ok(seen.size >= 6, `the walk passes through the layers: ${[...seen]}`);

  // From 1200 px the sphere, the attention and the model's text side by side, the section under
  // all three with the reading's blocks in columns.
  await page.click('#section-reading');
  for (const [w, h] of [[1280, 800], [1600, 900]]) {
    await page.setViewportSize({ width: w, height: h });
    const [a, b, m, body] = await Promise.all(['#panel-sphere', '#panel-attention', '.model-head', '.model-body'].map((s) => page.locator(s).boundingBox()));
    assert.ok(b.x >= a.x + a.width - 1 && Math.abs(b.y - a.y) < 2, `at ${w}: the sphere and the attention side by side: ${JSON.stringify([a, b])}`);
    assert.ok(m.x >= b.x + b.width - 1 && Math.abs(m.y - a.y) < 2, `at ${w}: the model's text beside them: ${JSON.stringify(m)}`);
    assert.ok(body.y >= Math.max(a.y + a.height, b.y + b.height, m.y + m.height) - 1 && body.width > 0.9 * w, `at ${w}: the section under them: ${JSON.stringify(body)}`);
    const [l, k] = await Promise.all(['#model-layers-block', '#model-kernel-block'].map((s) => page.locator(s).boundingBox()));
    assert.ok(k.x >= l.x + l.width - 1 && Math.abs(k.y - l.y) < 2, `at ${w}: the blocks side by side: ${JSON.stringify([l, k])}`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'model-wide.png'), fullPage: true });
  assert.deepEqual(problems, []);
});
