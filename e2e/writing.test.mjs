// The model writes: samples at each evaluation, candidates on hover, baselines on the loss chart,
// and spherewalk.sample against lab sample.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ARTIFACTS, LAB_BIN, launch, phase, stepOf, textOf, open, waitPhase, labTrain, rel,
} from './helpers.mjs';

/** The writing panel's latest sample (its step, text, and each written character's p and
 * candidates) once its step is at least `least`, else null: runs in the page, so a wait on it reads
 * the sample in the same turn as the check (a fast run writes its next sample within tens of ms). */
const sampleFrom = (least) => {
  const el = document.getElementById('writing-sample');
  const parse = (s) => (s ? s.split('|').map((x) => { const i = x.lastIndexOf(':'); return [x.slice(0, i), Number(x.slice(i + 1))]; }) : []);
  const w = {
    step: el?.dataset.step === undefined ? null : Number(el.dataset.step),
    text: el?.dataset.text ?? null,
    tokens: [...(el?.querySelectorAll('.tok') ?? [])].map((s) => ({ p: Number(s.dataset.p), top: parse(s.dataset.top), title: s.title })),
    history: document.querySelectorAll('#writing-history li').length,
    predictions: [...document.querySelectorAll('#next-char .pred')].map((s) => ({ p: Number(s.dataset.p), top: parse(s.dataset.top) })),
  };
  return w.step !== null && w.step >= least ? w : null;
};

const writingAt = async (page, least, timeout) => (await page.waitForFunction(sampleFrom, least, { timeout, polling: 5 })).jsonValue();

test('the model writes: a sample at each evaluation, candidates on hover, baselines on the loss chart', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await open(page, '');
  await page.selectOption('#pace', '0');
  await page.click('#start');
  const first = await writingAt(page, 0, 60_000);
  const later = await writingAt(page, 100, 120_000);
  assert.equal(first.step, 0);
  assert.notEqual(later.text, first.text, 'the text changes as the model learns');
  assert.equal(later.tokens.length, [...later.text].length, 'one shaded span per written character');
  for (const s of [first, later]) {
    for (const tok of s.tokens) {
      assert.ok(tok.p > 0 && tok.p <= 1, `p ${tok.p}`);
      assert.ok(tok.top.length >= 1 && tok.top.length <= 5);
      const sum = tok.top.reduce((a, [, p]) => a + p, 0);
      assert.ok(sum <= 1 + 1e-3, `the candidates' probabilities sum to at most 1 (${sum})`);
      assert.ok(tok.top.every((c, i) => i === 0 || c[1] <= tok.top[i - 1][1] + 1e-9), 'best first');
      assert.match(tok.title, /the model's candidates: "/);
    }
    assert.equal(s.predictions.length, 32, 'the probe row: one prediction per position');
  }
  assert.ok(later.history >= 1, 'earlier samples stay visible');
  // The written text is on the first screen at 1280x800 (its top, measured from the top of the page).
  const top = await page.evaluate(() => document.getElementById('writing-sample').getBoundingClientRect().top + window.scrollY);
  assert.ok(top < 800 - 40, `the written text starts on the first screen (at ${top} px)`);
  await page.screenshot({ path: join(ARTIFACTS, 'page-writing-first-screen.png') });
  // Hovering a character shows its candidates (the title is the hover text).
  await page.hover('#writing-sample .tok >> nth=3');
  // The baselines are on the loss chart, and the words say what they are.
  const baselines = await page.evaluate(() => document.getElementById('loss-chart').dataset.baselines.split(',').map(Number));
  const vocab = await page.evaluate(() => JSON.parse(spherewalk.experiment()).train.model.vocab);
  assert.equal(baselines.length, 3);
  assert.ok(Math.abs(baselines[0] - Math.log(Math.max(vocab, 1))) < 1e-3 || baselines[0] > baselines[1], `ln V first: ${baselines}`);
  assert.ok(baselines[0] > baselines[1] && baselines[1] > baselines[2], `uniform > unigram > bigram: ${baselines}`);
  assert.match(await textOf(page, '#baselines'), /uniform guess among the \d+ symbols scores \d\.\d\d, letter frequencies \(unigram\) \d\.\d\d/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-writing.png') });
  await page.locator('#panel-writing').screenshot({ path: join(ARTIFACTS, 'panel-writing.png') });
  // Write more: a long sample with the panel's settings; a bad prompt is refused and changes nothing.
  if ((await phase(page)) === 'running') await page.click('#start');
  await waitPhase(page, ['paused', 'done']);
  const step = await stepOf(page);
  await page.click('#write-more');
  await page.waitForSelector('#writing-more .tok', { timeout: 30_000 });
  assert.equal(await page.locator('#writing-more .tok').count(), 200);
  await page.fill('#writing-prompt', 'a\u00e9');
  await page.dispatchEvent('#writing-prompt', 'change');
  await page.waitForSelector('#error', { timeout: 10_000 });
  assert.match(await textOf(page, '#error'), /the writing settings were not changed: .*"\u00e9"/);
  assert.equal(await stepOf(page), step, 'nothing changes in the run');
  t.diagnostic(`step 0 writes ${JSON.stringify(first.text.slice(0, 40))}; step ${later.step} writes ${JSON.stringify(later.text.slice(0, 40))}`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('spherewalk.sample writes what lab sample writes for the same model and seed, and refuses bad settings', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  const experiment = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  experiment.train.steps = 60;
  experiment.backend = 'cpu';
  const dir = mkdtempSync(join(tmpdir(), 'spherewalk-ckpt-'));
  labTrain(JSON.stringify(experiment), ['--save', dir]);
  await page.setInputFiles('#model-input', [join(dir, 'model.safetensors'), join(dir, 'config.json')]);
  await page.waitForSelector('#model-note', { timeout: 20_000 });
  const spec = { prompt: 'the ', tokens: 60, temperature: 1, seed: 3, samples: 2 };
  const pageSamples = await page.evaluate((s) => spherewalk.sample(s), spec);
  const native = execFileSync(LAB_BIN, ['sample', '--checkpoint', dir, '--prompt', 'the ', '--tokens', '60', '--seed', '3', '--samples', '2', '--json'], { encoding: 'utf8' })
    .trim().split('\n').map((l) => JSON.parse(l));
  rmSync(dir, { recursive: true, force: true });
  assert.equal(pageSamples.length, 2);
  for (const [i, n] of native.entries()) {
    const p = pageSamples[i];
    assert.equal(p.text, n.text, `seed ${n.seed}: the page's worker writes what lab writes`);
    assert.deepEqual(p.tokens, n.tokens);
    for (const [j, s] of n.steps.entries()) assert.ok(rel(p.steps[j].p, s.p) < 1e-4, `token ${j}: p ${p.steps[j].p} vs ${s.p}`);
  }
  assert.notEqual(pageSamples[0].text, pageSamples[1].text, 'seeds 3 and 4 write differently');
  const greedy = await page.evaluate(() => spherewalk.sample({ prompt: 'the ', tokens: 30, temperature: 0 }));
  assert.ok(greedy[0].steps.every((s) => s.top[0][0] === s.text), 'greedy takes the best candidate');
  // Bad settings: clear messages, and the page's worker goes on working.
  const refused = (s) => page.evaluate((s) => spherewalk.sample(s).then(() => 'resolved', (e) => e.message), s);
  assert.match(await refused({ tokens: 0 }), /tokens must be from 1 to 10000/);
  assert.match(await refused({ tokens: 10001 }), /tokens must be from 1 to 10000/);
  assert.match(await refused({ temperature: -1 }), /temperature/);
  assert.match(await refused({ top_p: 0 }), /top_p must be in \(0, 1\]/);
  assert.match(await refused({ top_p: 1.5 }), /top_p/);
  assert.match(await refused({ prompt: 'a\u00e9' }), /"\u00e9"/);
  assert.match(await refused({ tokenz: 3 }), /unknown field `tokenz`/);
  const circular = await page.evaluate(() => { const o = {}; o.o = o; return spherewalk.sample(o).then(() => 'resolved', (e) => e.message); });
  assert.match(circular, /cannot be read as JSON/);
  const empty = await page.evaluate(() => spherewalk.sample({ prompt: '', tokens: 5 }));
  assert.equal(empty[0].steps.length, 5, 'an empty prompt starts from the data\'s first token');
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
