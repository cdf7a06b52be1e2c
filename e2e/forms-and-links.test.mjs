// Forms and links: a bad entry stays in place with its message and never reaches the link; a link
// with one bad value keeps the good ones.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { launch, textOf, valueOf, open, setField, stepTo } from './helpers.mjs';

test('forms keep a bad entry in place with its message and never write it into the link', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  const hash = () => page.evaluate(() => decodeURIComponent(location.hash));
  const before = await hash();
  for (const [id, text, message] of [
    ['#lr', '0,001', /decimal point, not a comma: "0\.001"/],
    ['#lr', 'abc', /must be a number such as 0\.001 or 1e-3/],
    ['#lr', 'NaN', /must be a finite number/],
    ['#lr', 'inf', /must be a finite number/],
    ['#lr', '-5', /must be positive/],
    ['#steps', '1e3', /whole number/],
    ['#steps', '-5', /whole number/],
    ['#steps', '1000000000', /at most 1000000/],
    ['#heads', '0', /at least 1/],
  ]) {
    await setField(page, id, text);
    const error = await textOf(page, `${id}-error`);
    assert.match(error ?? '', message, `${id} "${text}": ${error}`);
    assert.equal(await valueOf(page, id), text, `${id} keeps what was typed`);
    assert.equal(await page.getAttribute(id, 'aria-invalid'), 'true');
    assert.equal(await hash(), before, `${id} "${text}" does not reach the link`);
    assert.doesNotMatch(await hash(), /null/);
  }
  // A preset replaces the settings: the bad entries give way to its values.
  await setField(page, '#d-model', 'abc');
  await setField(page, '#steps', '-5');
  await page.selectOption('#preset', 'joma');
  const joma = JSON.parse(await page.evaluate(() => spherewalk.experiment()));
  assert.equal(await valueOf(page, '#d-model'), String(joma.train.model.d_model), 'the preset\'s width is shown');
  assert.equal(await valueOf(page, '#steps'), String(joma.train.steps));
  for (const id of ['#d-model', '#steps', '#heads']) {
    assert.equal(await textOf(page, `${id}-error`), '', `${id}: no message left`);
    assert.equal(await page.getAttribute(id, 'aria-invalid'), 'false');
  }
  await setField(page, '#lr', '1e-3');
  assert.equal(await textOf(page, '#lr-error'), '', 'a good entry clears the message');
  assert.match(await hash(), /"lr":0\.001/, 'scientific notation is read');
  await setField(page, '#steps', '300');
  await setField(page, '#heads', '4');
  assert.match(await hash(), /"steps":300/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('a link with one bad value keeps the good ones and marks the bad one; the address changes only on edits', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  const link = '#s=' + encodeURIComponent(JSON.stringify({ heads: 3, seed: 7, lr: 0.005, steps: 120 }));
  await open(page, link);
  assert.equal(await valueOf(page, '#seed'), '7', 'a good value is kept');
  assert.equal(await valueOf(page, '#steps'), '120');
  assert.equal(await valueOf(page, '#lr'), '0.005');
  assert.equal(await valueOf(page, '#heads'), '3', 'the bad value is shown where it was');
  assert.match(await textOf(page, '#heads-error'), /from the link: .*heads \(3\) must divide d_model \(32\)/);
  assert.match(await textOf(page, '#url-error'), /heads = 3 .*the rest is as linked/);
  assert.equal(await page.evaluate(() => location.hash), link, 'loading a link leaves the address as it is');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  assert.equal(await page.evaluate(() => location.hash), link, 'running leaves it too');
  await setField(page, '#heads', '4');
  assert.equal(await textOf(page, '#heads-error'), '');
  assert.match(await page.evaluate(() => decodeURIComponent(location.hash)), /"heads":4.*"seed":7/, 'an edit writes the address');
  // Fields that only fit together are good together.
  await open(page, '#s=' + encodeURIComponent(JSON.stringify({ d_model: 30, heads: 3 })));
  assert.equal(await page.$('#url-error'), null);
  assert.equal(await valueOf(page, '#d-model'), '30');
  // A preset the page does not have: custom, and said so; a pace the selector does not offer: the
  // preset's pace, and said so (the selector never shows one pace while the run goes at another).
  for (const pace of [-5, 17, 1e308]) {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ preset: 'nonsense', seed: 9, steps_per_second: pace })));
    assert.equal(await valueOf(page, '#preset'), 'custom', 'the selector names what the form holds');
    assert.equal(await valueOf(page, '#seed'), '9');
    const error = await textOf(page, '#url-error');
    assert.match(error, /preset = "nonsense" \(no preset is called "nonsense"\)/);
    assert.match(error, /steps_per_second = .*\(the page goes at 2, 5, 8, 12, 16, 30, 60 steps per second, or 0/);
    assert.ok(['2', '5', '8', '12', '16', '30', '60', '0'].includes(await valueOf(page, '#pace')));
  }
  // What a link wrote, as it wrote it.
  await open(page, '#preset=' + encodeURIComponent('<b>x</b>'));
  assert.match(await textOf(page, '#url-error'), /unknown preset "<b>x<\/b>"/);
  await open(page, '#tour=abc');
  assert.match(await textOf(page, '#url-error'), /tour step "abc"; the tour has steps 1 to/);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
