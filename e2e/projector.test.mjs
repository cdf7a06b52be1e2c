// The projector shows the subject: at 1920x1080 in presenter mode and at 1280x800, each preset's and
// each tour step's panel is on the first screen beside the sphere, with Start; the race's charts
// keep their legends off the data; the writing reads as words with its candidates on a click; a
// real model keeps its text, Read, Write, pieces and candidates on the projector; on a phone the
// sphere is on the first screen and the tour's card never covers its panel.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ARTIFACTS, launch, open, openModel, textOf, waitReady } from './helpers.mjs';
import { join } from 'node:path';

/** How much of `sel` shows on the screen: visible height, its height, and whether it is whole. */
const seen = (page, sel) => page.evaluate((q) => {
  const e = document.querySelector(q);
  if (!e || !e.checkVisibility()) return { visible: 0, height: 0, whole: false, top: null };
  const r = e.getBoundingClientRect();
  const visible = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
  return { visible, height: r.height, whole: r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth, top: r.top };
}, sel);

async function checkStage(page, what, t) {
  const subject = await page.evaluate(() => document.documentElement.dataset.subject);
  assert.ok(subject, `${what}: the page names its subject`);
  const [s, sphere, start] = [await seen(page, `#${subject}`), await seen(page, '#sphere'), await seen(page, '#start')];
  t.diagnostic(`${what}: #${subject} ${Math.round(s.visible)} of ${Math.round(s.height)} px on screen; sphere ${Math.round(sphere.visible)} of ${Math.round(sphere.height)}`);
  assert.ok(s.visible >= Math.min(400, 0.6 * s.height), `${what}: #${subject} shows ${s.visible} of ${s.height} px`);
  assert.ok(sphere.visible >= 0.5 * sphere.height, `${what}: the sphere shows ${sphere.visible} of ${sphere.height} px`);
  assert.ok(start.whole, `${what}: Start is whole on the screen`);
}

/** Every button of the tour's card can be clicked where it is drawn (nothing clips or covers it). */
async function cardButtonsClickable(page, what) {
  const blocked = await page.evaluate(() => ['tour-run', 'tour-prev', 'tour-next', 'tour-fold', 'tour-leave'].filter((id) => {
    const b = document.getElementById(id);
    const r = b.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return !(hit === b || b.contains(hit));
  }));
  assert.deepEqual(blocked, [], `${what}: the card's buttons are there to click`);
}

for (const [width, height, presenter] of [[1920, 1080, true], [1280, 800, false]]) {
  test(`the stage at ${width}x${height}${presenter ? ' in presenter mode' : ''}: each preset's and tour step's panel beside the sphere, Start on screen, the card's buttons clickable`, { timeout: 300_000 }, async (t) => {
    const { page, problems } = await launch(t, { viewport: { width, height } });
    const shot = (name) => page.screenshot({ path: join(ARTIFACTS, `stage-${width}-${name}.png`) });
    for (const preset of ['brownian', 'joma', 'race', 'english']) {
      await open(page, `#preset=${preset}`);
      if (presenter) await page.keyboard.press('p');
      await page.selectOption('#pace', '0');
      await page.click('#start');
      await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 40, null, { timeout: 60_000 });
      await page.waitForTimeout(1000);
      await checkStage(page, `preset ${preset}`, t);
      await shot(`preset-${preset}`);
      await page.click('#start');
    }
    for (let n = 1; n <= 6; n++) {
      await open(page, `#tour=${n}`);
      if (presenter) await page.keyboard.press('p');
      await page.selectOption('#pace', '0');
      await page.click('#tour-run');
      await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 40, null, { timeout: 60_000 });
      await page.waitForTimeout(1000);
      await checkStage(page, `tour step ${n}`, t);
      await cardButtonsClickable(page, `tour step ${n}`);
      // The card never covers a panel: it is a cell of the stage.
      const overlaps = await page.evaluate(() => {
        const c = document.getElementById('tour').getBoundingClientRect();
        return [...document.querySelectorAll('.stage > .panel:not(#tour), .stage-column > .panel')].filter((p) => p.checkVisibility()).map((p) => [p.id, p.getBoundingClientRect()])
          .filter(([, r]) => r.right > c.left && r.left < c.right && r.bottom > c.top && r.top < c.bottom).map(([id]) => id);
      });
      assert.deepEqual(overlaps, [], `tour step ${n}: the card covers no panel`);
      await shot(`tour-${n}`);
      await page.click('#tour-run');
    }
    assert.deepEqual(problems, [], 'no console errors');
  });
}

test('the race on the projector: charts of 300 px and more with their legends under the plot, one entry an entrant, the table inside its panel', { timeout: 240_000 }, async (t) => {
  const { page } = await launch(t, { viewport: { width: 1920, height: 1080 } });
  await open(page, '#preset=race');
  await page.keyboard.press('p');
  await page.selectOption('#pace', '0');
  // Two runs of the same entrants: an earlier curve is named once, not once a run.
  for (let run = 0; run < 3; run++) {
    await page.click('#start');
    await page.waitForFunction(() => ['done'].includes(document.getElementById('status')?.dataset.phase), null, { timeout: 120_000 });
    if (run < 2) await page.click('#reset');
  }
  for (const id of ['loss-chart', 'race-chart']) {
    const c = await page.evaluate((id) => {
      const e = document.getElementById(id);
      return { height: e.getBoundingClientRect().height, plot: Number(e.dataset.plotBottom), legend: Number(e.dataset.legendTop), labels: e.dataset.legend.split('|') };
    }, id);
    t.diagnostic(`${id}: ${Math.round(c.height)} px tall, plot ends at ${c.plot}, legend from ${c.legend}: ${c.labels.join(', ')}`);
    assert.ok(c.height >= 300, `${id} is ${c.height} px tall`);
    assert.ok(c.legend > c.plot, `${id}: the legend is under the plot`);
    assert.equal(new Set(c.labels).size, c.labels.length, `${id}: each entry once: ${c.labels}`);
  }
  const loss = await page.evaluate(() => document.getElementById('loss-chart').dataset.legend.split('|'));
  assert.ok(loss.includes('cgfac lr 0.03') && loss.includes('adam lr 0.01'), `one entry an entrant: ${loss}`);
  assert.ok(loss.filter((l) => l.startsWith('earlier')).length <= 2, `earlier runs named once each: ${loss}`);
  const table = await page.evaluate(() => {
    const [t, p] = [document.getElementById('race-stats').parentElement.getBoundingClientRect(), document.getElementById('panel-loss').getBoundingClientRect()];
    return t.right <= p.right + 0.5 && t.left >= p.left - 0.5;
  });
  assert.ok(table, 'the race table stays inside its panel');
  await page.screenshot({ path: join(ARTIFACTS, 'stage-1920-race-done.png') });
});

test('the model writes in words a room can read: underlined characters, candidates on a click, earlier samples whole, a steady time per step', { timeout: 240_000 }, async (t) => {
  const { page } = await launch(t, { viewport: { width: 1920, height: 1080 } });
  await open(page, '#preset=english');
  await page.keyboard.press('p');
  await page.selectOption('#pace', '0');
  await page.click('#start');
  await page.waitForFunction(() => document.querySelectorAll('#writing-history li').length >= 2, null, { timeout: 120_000 });
  // A word is one word: no background per character, an underline under each.
  const style = await page.evaluate(() => {
    const s = getComputedStyle(document.querySelector('#writing-sample .tok'));
    return { bg: s.backgroundColor, line: s.textDecorationLine, font: parseFloat(s.fontSize) };
  });
  assert.equal(style.bg, 'rgba(0, 0, 0, 0)', 'no shading box per character');
  assert.match(style.line, /underline/);
  assert.ok(style.font >= 24, `writing at ${style.font} px on the projector`);
  // A click on a character opens its candidates, as large as the page's text.
  const tok = page.locator('#writing-sample .tok').nth(3);
  const want = (await tok.getAttribute('data-top')).split('|').length;
  await tok.click();
  await page.waitForSelector('#writing-candidates');
  assert.equal(await page.locator('#writing-candidates tr').count(), want, 'every candidate listed');
  const boxFont = await page.evaluate(() => parseFloat(getComputedStyle(document.querySelector('#writing-candidates td')).fontSize));
  assert.ok(boxFont >= 24, `the candidates at ${boxFont} px`);
  // Earlier samples whole (no "…"), newest first, each with its step.
  const history = await page.evaluate(() => [...document.querySelectorAll('#writing-history li')].map((li) => ({ step: Number(li.dataset.step), clipped: li.scrollWidth > li.clientWidth + 1, ellipsis: getComputedStyle(li).textOverflow })));
  assert.ok(history.every((h) => !h.clipped && h.ellipsis !== 'ellipsis'), `samples whole: ${JSON.stringify(history)}`);
  assert.ok(history.every((h, i) => i === 0 || history[i - 1].step > h.step), 'newest first');
  // The time per step holds still: its median over the last chunks.
  const times = [];
  for (let i = 0; i < 16; i++) {
    times.push(parseFloat(await textOf(page, '#speed')));
    await page.waitForTimeout(250);
  }
  const ok = times.filter(Number.isFinite);
  t.diagnostic(`time per step shown: ${ok.join(', ')} ms`);
  assert.ok(Math.max(...ok) <= 2.5 * Math.min(...ok), `a steady time per step: ${ok}`);
  await page.screenshot({ path: join(ARTIFACTS, 'stage-1920-writing.png') });
});

test('a real model on the projector keeps its text, Read, Write, pieces and candidates beside the sphere and the attention', { timeout: 180_000 }, async (t) => {
  const { page } = await launch(t, { viewport: { width: 1920, height: 1080 } });
  await openModel(page);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  // The button, not the key: the key is the text box's while it has the focus.
  await page.click('#presenter');
  await page.waitForFunction(() => document.documentElement.dataset.presenter === 'on');
  for (const sel of ['#model-text', '#model-read', '#model-write', '#model-tokens', '#model-next', '#sphere', '#attention', '#model-layers']) {
    assert.ok(await page.locator(sel).isVisible(), `${sel} is on the projector`);
  }
  // The sphere and the attention side by side, the text, Read and Write beside them.
  for (const sel of ['#model-text', '#model-read', '#model-write', '#sphere', '#attention']) {
    const s = await seen(page, sel);
    assert.ok(s.whole, `${sel} on the first screen`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'stage-1920-model.png') });
});

test('phone: the sphere on the first screen under the run bar; the tour card and its panel apart; tables scroll inside their panels', { timeout: 240_000 }, async (t) => {
  const { page } = await launch(t, { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  await open(page, '');
  const sphere = await seen(page, '#sphere');
  t.diagnostic(`phone: the sphere's top at ${Math.round(sphere.top)} px, ${Math.round(sphere.visible)} of ${Math.round(sphere.height)} px on screen`);
  assert.ok(sphere.visible >= 0.5 * sphere.height, 'the sphere on the first screen');
  const [bar, canvas] = await page.evaluate(() => ['#start', '#sphere'].map((q) => document.querySelector(q).getBoundingClientRect().bottom));
  assert.ok(bar < canvas, 'under the run bar');
  for (let n = 1; n <= 6; n++) {
    await open(page, `#tour=${n}`);
    await page.waitForTimeout(300);
    const panel = await page.evaluate(() => document.documentElement.dataset.subject);
    const [card, target] = await page.evaluate((p) => ['tour', p].map((id) => { const r = document.getElementById(id).getBoundingClientRect(); return { top: r.top, bottom: r.bottom }; }), panel);
    assert.ok(card.bottom <= target.top || target.bottom <= card.top, `step ${n}: the card is not over #${panel}`);
    assert.ok(card.top >= 0 && card.top < 844 && target.top < 844, `step ${n}: the card and #${panel} start on the first screen (${JSON.stringify({ card, target })})`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-tour.png') });
  // A real model's layer table scrolls inside its panel.
  await openModel(page);
  await page.waitForSelector('#model-layers tbody tr', { timeout: 120_000 });
  const wide = await page.evaluate(() => {
    const p = document.getElementById('panel-model');
    return { page: document.documentElement.scrollWidth, screen: innerWidth, panel: p.scrollWidth <= p.clientWidth + 1 };
  });
  assert.ok(wide.page <= wide.screen && wide.panel, `nothing widens the page: ${JSON.stringify(wide)}`);
});
