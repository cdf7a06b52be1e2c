// The guided tour: every step sets up its experiment, points at its panel and shows the measured
// conclusion (its numbers under the panel, shown once); until its run ends a verdict says what it
// measured so far and concludes nothing.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, launch, phase, textOf, open } from './helpers.mjs';

test('the guided tour: every step sets up its experiment, points at its panel and shows a measured verdict, provisional until it is final', { timeout: 420_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  const verdictOf = () => textOf(page, '#tour-verdict');
  // Each step: its title, its panel, the conclusion on the card, and the panel's own verdict with
  // the numbers behind it.
  const expected = [
    [/Tokens live on a sphere/, 'panel-sphere', /On the sphere/, ['verdict-sphere', /every token .* within [\d.e-]+ \(relative\)/]],
    [/Attention is a random walk/, 'panel-attention', /A Markov chain/, ['verdict-markov', /sums to 1 within/]],
    [/Softmax is a Gaussian kernel/, 'panel-attention', /(A|Near a|Far from a) Gaussian kernel/, ['verdict-kernel', /total variation of [\d.]+/]],
    [/Random walk or Brownian motion\?/, 'panel-brownian', /(Brownian|Partly Brownian|Not Brownian)/, ['verdict-brownian', /critical value/]],
    [/Second order against Adam/, 'panel-loss', /(Fewer steps with second order|Second order is not ahead in steps)/, ['race-verdict', /after \d+ steps cgfac lr 0\.03 is at loss [\d.]+, adam lr 0\.01 at [\d.]+/]],
    [/JoMA: sparse, then dense/, 'panel-entropy', /Layer 0: .*; Layer 1: /, ['verdict-joma-0', /entropy [\d.]+ → lowest/]],
  ];
  // Where the sphere's panel is on the page (not on the screen: the tour scrolls to its panel).
  const sphereOnPage = () => page.evaluate(() => {
    const r = document.getElementById('panel-sphere').getBoundingClientRect();
    return { x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height };
  });
  await open(page, '');
  const sphereAlone = await sphereOnPage();
  await open(page, '#tour=1');
  assert.deepEqual(await sphereOnPage(), sphereAlone, 'the tour box does not push the picture down');
  // Every 50 ms: a verdict marked settled keeps its answer for the rest of its run, and one that
  // is not settled is drawn as provisional; the conclusions a class reads change at most three
  // times over a step's run (measuring, one answer, one change, the final answer).
  await page.evaluate(() => {
    const v = (window.__verdicts = { seen: {}, violations: [], provisional: 0, settled: 0, said: {}, changes: {} });
    setInterval(() => {
      for (const e of document.querySelectorAll('.verdict[data-conclusion]')) {
        const c = e.dataset.conclusion ?? '';
        if (v.said[e.id] !== undefined && v.said[e.id] !== c) v.changes[e.id] = (v.changes[e.id] ?? 0) + 1;
        v.said[e.id] = c;
      }
      for (const e of document.querySelectorAll('.verdict[data-settled], #tour-verdict[data-settled]')) {
        if (e.dataset.settled === 'true') {
          v.settled++;
          const was = v.seen[e.id];
          if (was !== undefined && was !== e.dataset.agreement) v.violations.push(`${e.id}: settled ${was}, then ${e.dataset.agreement}`);
          v.seen[e.id] = e.dataset.agreement;
        } else if (e.dataset.settled === 'false') {
          // Before its run ends a verdict states no conclusion: it says what it measured so far.
          v.provisional++;
          if (!e.classList.contains('provisional')) v.violations.push(`${e.id} is not final and not drawn as provisional`);
          if (e.dataset.agreement !== 'not-yet' || e.dataset.conclusion) v.violations.push(`${e.id} concludes "${e.dataset.conclusion}" (${e.dataset.agreement}) before its run ends`);
          if (!/Measuring|not decided yet|too few/.test(e.textContent)) v.violations.push(`${e.id} is not final and does not say it is measuring: ${e.textContent.slice(0, 80)}`);
        }
      }
    }, 50);
  });
  const settledAt = [];
  const apart = async (panel) => page.evaluate((id) => {
    const [a, b] = [document.getElementById('tour').getBoundingClientRect(), document.getElementById(id).getBoundingClientRect()];
    return { apart: a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top, card: [a.left, a.top, a.width, a.height].map(Math.round), panel: [b.left, b.top, b.width, b.height].map(Math.round) };
  }, panel);
  for (const [i, [title, panel, verdict, [numbersId, numbers]]] of expected.entries()) {
    // Each step shows its own claim in the tour's box; steps 4, 5 and 6 open a new run, whose
    // verdicts start afresh.
    await page.evaluate((fresh) => {
      if (fresh) window.__verdicts.seen = {};
      delete window.__verdicts.seen['tour-verdict'];
      window.__verdicts.said = {};
      window.__verdicts.changes = {};
    }, i >= 3);
    assert.match(await textOf(page, '#tour-title'), new RegExp(`step ${i + 1} of 6: ${title.source}`));
    assert.ok(await page.evaluate((p) => document.getElementById(p).classList.contains('tour-focus'), panel), `step ${i + 1} points at #${panel}`);
    await page.waitForTimeout(200);
    const placed = await apart(panel);
    assert.ok(placed.apart, `step ${i + 1} at 1280x800: the card ${placed.card} does not cover #${panel} ${placed.panel}`);
    if ((await phase(page)) !== 'training' && (await phase(page)) !== 'done') {
      await page.selectOption('#pace', '0');
      // The card's own Start: no scrolling back to the top for it.
      assert.match(await textOf(page, '#tour-run'), /Start|Resume/);
      await page.click('#tour-run');
    }
    // The run goes on to its end; then the step's verdict is final (before, the card says measuring).
    await page.waitForFunction(() => document.getElementById('tour-verdict')?.dataset.settled === 'true', null, { timeout: 120_000, polling: 100 });
    // The card says the answer; the numbers are under the panel, once: the card holds none.
    assert.match(await verdictOf(), new RegExp(`^Measured: ${verdict.source}`));
    assert.doesNotMatch((await verdictOf()).replace(/Layer \d/g, ''), /\d/, 'the card repeats no number of the panel\'s verdict');
    await page.waitForFunction((id) => document.getElementById(id)?.dataset.settled === 'true', numbersId, { timeout: 30_000 });
    assert.match(await textOf(page, `#${numbersId}`), numbers, `#${numbersId} has the numbers`);
    await page.click('#tour-numbers');
    await page.waitForFunction((id) => { const r = document.getElementById(id).getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }, numbersId, { timeout: 5_000 });
    const changes = await page.evaluate(() => window.__verdicts.changes);
    t.diagnostic(`tour step ${i + 1}: conclusions changed ${JSON.stringify(changes)}`);
    for (const [id, n] of Object.entries(changes)) assert.ok(n <= 3, `step ${i + 1}: ${id} changed its conclusion ${n} times`);
    settledAt.push(await page.getAttribute('#tour-verdict', 'data-agreement'));
    t.diagnostic(`tour step ${i + 1}: ${await verdictOf()}`);
    assert.doesNotMatch(await verdictOf(), /Measuring|not decided/, 'a final verdict says its answer');
    if (i === 4) {
      // Step 5 builds on what step 4 measured, in its words.
      const opener = await textOf(page, '#tour-text');
      t.diagnostic(`step 5 opens: ${opener}`);
      const expectedOpener = { agrees: /^Step 4 measured a diffusion/, partly: /^Step 4 measured only part of a diffusion/, disagrees: /^Step 4 did not measure a diffusion/ }[settledAt[3]];
      assert.match(opener, expectedOpener, `step 4 ended "${settledAt[3]}"`);
    }
    // Each step starts clean: the race's English prompt and step 4's ghosts stay behind.
    if (i === 5) {
      assert.equal(await page.isVisible('#writing-error'), false, `no writing error after the JoMA run: ${await page.textContent('#writing-error').catch(() => '')}`);
      assert.doesNotMatch(await page.inputValue('#writing-prompt'), /child/, 'the race\'s prompt is not carried into the JoMA step');
    }
    if (i >= 4) assert.equal(await page.isChecked('#ghosts'), false, `step ${i + 1} starts without step 4's ghosts`);
    if (i + 1 < expected.length) {
      await page.click('#tour-next');
      await page.waitForFunction((n) => location.hash.includes(`tour=${n}`), i + 2, { timeout: 10_000 });
    }
  }
  // Ended runs grow their panels (the race chart, the verdicts): the card follows its panel (the
  // page checks every 400 ms) and keeps clear of it.
  await page.waitForFunction(() => {
    const [a, b] = [document.getElementById('tour').getBoundingClientRect(), document.getElementById('panel-entropy').getBoundingClientRect()];
    return a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top;
  }, null, { timeout: 2_000, polling: 50 }).catch(() => {});
  const after = await apart('panel-entropy');
  assert.ok(after.apart, `after the run the card ${after.card} does not cover the JoMA panel ${after.panel}`);
  const watch = await page.evaluate(() => window.__verdicts);
  t.diagnostic(`verdicts watched: ${watch.settled} settled and ${watch.provisional} provisional sightings`);
  assert.deepEqual(watch.violations, [], 'settled verdicts never change; unsettled ones are provisional');
  assert.ok(watch.provisional > 20 && watch.settled > 20, 'both kinds were seen');
  await page.screenshot({ path: join(ARTIFACTS, 'page-tour.png') });
  const tall = (await page.locator('#tour').boundingBox()).height;
  await page.click('#tour-fold');
  const folded = (await page.locator('#tour').boundingBox()).height;
  assert.ok(folded < tall * 0.8, `folding the box shrinks it (${tall} -> ${folded} px)`);
  assert.match(await verdictOf(), /Measured: Layer 0/, 'and keeps the verdict');
  // A link opens a step directly and hides what a class does not need.
  await open(page, '#tour=3&hide=settings,model');
  assert.match(await textOf(page, '#tour-title'), /step 3 of 6/);
  assert.equal(await page.isVisible('#panel-settings'), false, 'the settings are hidden');
  assert.equal(await page.isVisible('#download-model'), false, 'the model files are hidden');
  await open(page, '#tour=9');
  assert.match(await textOf(page, '#url-error'), /tour has steps 1 to 6/);
  // A projector's 1920x1080: every step's card clear of its panel too.
  await page.setViewportSize({ width: 1920, height: 1080 });
  for (const [i, [, panel]] of expected.entries()) {
    await open(page, `#tour=${i + 1}`);
    await page.waitForTimeout(300);
    const placed = await apart(panel);
    assert.ok(placed.apart, `step ${i + 1} at 1920x1080: the card ${placed.card} does not cover #${panel} ${placed.panel}`);
  }
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
