// What a room sees at the end of every tour step's run, on a projector (1920x1080, presenter
// mode), a laptop (1280x800) and a phone (390x844): the tour's card holds its whole text and its
// buttons on the screen, and on the projector and the laptop the chart the step talks about stays
// in view from its start to its end, however long its verdicts grow; every canvas is drawn at the
// shape it is shown (its pixels' aspect within 3% of its box's), every chart's plot 160 px tall or more.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ARTIFACTS, launch, open } from './helpers.mjs';

/** The chart each step's panel opens with. */
const CHARTS = { 'panel-brownian': 'brownian-chart', 'panel-loss': 'loss-chart', 'panel-entropy': 'entropy-chart' };

/** The card's text cut off (px hidden in it or its body), and its buttons off the screen. */
const card = (page) => page.evaluate(() => {
  const tour = document.getElementById('tour');
  const body = tour.querySelector('.tour-body');
  const cut = Math.max(tour.scrollHeight - tour.clientHeight, body.scrollHeight - body.clientHeight);
  const off = [...tour.querySelectorAll('.tour-buttons button')].filter((b) => {
    const r = b.getBoundingClientRect();
    return r.top < 0 || r.bottom > innerHeight || r.left < 0 || r.right > innerWidth;
  }).map((b) => b.id);
  return { cut, off, panel: tour.dataset.panel };
});

/** The share of canvas `id` on the screen now (0 to 1). */
const seen = (page, id) => page.evaluate((id) => {
  const r = document.getElementById(id).getBoundingClientRect();
  const h = Math.max(0, Math.min(r.bottom, innerHeight) - Math.max(r.top, 0));
  const w = Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0));
  return r.width * r.height > 0 ? (w * h) / (r.width * r.height) : 0;
}, id);

/** Canvases on the page whose pixels are stretched over 3% to fill their box. */
const stretched = (page) => page.evaluate(() => [...document.querySelectorAll('canvas')]
  .filter((c) => c.checkVisibility() && c.clientWidth >= 50 && c.clientHeight >= 50)
  .map((c) => [c.id, (c.width / c.height) / (c.clientWidth / c.clientHeight)])
  .filter(([, r]) => Math.abs(r - 1) > 0.03)
  .map(([id, r]) => `${id} ${r.toFixed(2)}x`));

/** Charts whose plot (inside the caption, axes and legend) is under 160 px tall. */
const crushed = (page) => page.evaluate(() => [...document.querySelectorAll('canvas[data-plot-bottom]')]
  .filter((c) => c.checkVisibility())
  .map((c) => [c.id, Number(c.dataset.plotBottom) - Number(c.dataset.plotTop)])
  .filter(([, h]) => h < 159)
  .map(([id, h]) => `${id} ${h} px`));

for (const [width, height, presenter] of [[1920, 1080, true], [1280, 800, false], [390, 844, false]]) {
  test(`every tour step at ${width}x${height}${presenter ? ' in presenter mode' : ''}: the card whole and on screen after its run${width > 500 ? ', its chart in view throughout' : ''}`, { timeout: 600_000 }, async (t) => {
    const { page, problems } = await launch(t, { viewport: { width, height } });
    for (let n = 1; n <= 6; n++) {
      await open(page, `#tour=${n}`);
      if (presenter) await page.keyboard.press('p');
      await page.selectOption('#pace', '0');
      await page.click('#tour-run');
      const panel = await page.evaluate(() => document.querySelector('.tour-focus')?.id);
      const chart = width > 500 ? CHARTS[panel] : undefined;
      const shares = [];
      if (chart) {
        await page.waitForSelector(`#${chart}`);
        shares.push(await seen(page, chart));
      }
      await page.waitForFunction(() => document.getElementById('tour-verdict')?.dataset.settled === 'true', null, { timeout: 240_000, polling: 250 });
      // The ended run's last frames and the flow fit, drawn.
      await page.waitForTimeout(1500);
      if (chart) shares.push(await seen(page, chart));
      const c = await card(page);
      assert.deepEqual(await stretched(page), [], `step ${n} at ${width}x${height}: canvases drawn at another shape`);
      assert.deepEqual(await crushed(page), [], `step ${n} at ${width}x${height}: plots too short to read`);
      await page.screenshot({ path: join(ARTIFACTS, `screen-${width}-tour-${n}.png`) });
      t.diagnostic(`step ${n}: card cut by ${c.cut} px, buttons off screen ${JSON.stringify(c.off)}${chart ? `, #${chart} ${shares.map((s) => `${Math.round(100 * s)}%`).join(' then ')} in view` : ''}`);
      assert.ok(c.cut <= 1, `step ${n} at ${width}x${height}: the card's text is cut by ${c.cut} px`);
      assert.deepEqual(c.off, [], `step ${n} at ${width}x${height}: the card's buttons are on the screen`);
      for (const s of shares) assert.ok(s >= 0.9, `step ${n} at ${width}x${height}: #${chart} is ${Math.round(100 * s)}% in view`);
    }
    assert.deepEqual(problems, [], 'no console errors');
  });
}

/** The chart each preset's story asks a class to watch. */
const PRESET_CHARTS = { brownian: 'brownian-chart', joma: 'entropy-chart', race: 'loss-chart', english: 'loss-chart' };

for (const [width, height, presenter] of [[1920, 1080, true], [1280, 800, false]]) {
  test(`every preset at ${width}x${height}${presenter ? ' in presenter mode' : ''}: the chart its story talks about stays in view from setup to the run's end`, { timeout: 600_000 }, async (t) => {
    const { page, problems } = await launch(t, { viewport: { width, height } });
    for (const [preset, chart] of Object.entries(PRESET_CHARTS)) {
      await open(page, `#preset=${preset}`);
      if (presenter) await page.keyboard.press('p');
      await page.selectOption('#pace', '0');
      await page.waitForSelector(`#${chart}`);
      const shares = [await seen(page, chart)];
      await page.click('#start');
      await page.waitForFunction(() => document.getElementById('status')?.textContent?.trim() === 'done', null, { timeout: 300_000, polling: 250 });
      await page.waitForTimeout(1500);
      shares.push(await seen(page, chart));
      await page.screenshot({ path: join(ARTIFACTS, `screen-${width}-preset-${preset}.png`) });
      t.diagnostic(`${preset}: #${chart} ${shares.map((x) => `${Math.round(100 * x)}%`).join(' then ')} in view`);
      for (const x of shares) assert.ok(x >= 0.9, `${preset} at ${width}x${height}: #${chart} is ${Math.round(100 * x)}% in view`);
    }
    assert.deepEqual(problems, [], 'no console errors');
  });
}

test('first screens: the presets at 1280x800, an estimate that never moves the page, a phone header whose buttons hold their labels, embeds inside 800x600', { timeout: 300_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  await open(page, '');
  // The presets are offered on the first screen, and picking one there is picking it in the settings.
  const picker = await page.locator('#run-preset').boundingBox();
  assert.ok(picker && picker.y >= 0 && picker.y + picker.height <= 800, `the presets on the first screen: ${JSON.stringify(picker)}`);
  await page.selectOption('#run-preset', 'brownian');
  assert.equal(await page.inputValue('#preset'), 'brownian', 'the settings follow the first screen\'s choice');
  // Every pace says a different estimate (one is measured first): the stage stays where it was.
  const top = () => page.evaluate(() => Math.round(document.querySelector('.stage').getBoundingClientRect().top + scrollY));
  const at = await top();
  const said = new Set();
  for (const pace of ['2', '60', '0', '16']) {
    await page.selectOption('#pace', pace);
    await page.waitForTimeout(pace === '0' ? 4000 : 300);
    said.add(await page.textContent('#estimate'));
    assert.equal(await top(), at, `the stage stays at y ${at} with the estimate "${await page.textContent('#estimate')}"`);
  }
  assert.ok(said.size >= 3, `the estimate changed: ${[...said].join(' | ')}`);

  // A phone: the header's buttons hold their labels, and Start is on the first screen.
  const phone = await page.context().browser().newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await open(phone, '');
  const cut = await phone.$$eval('header button', (bs) => bs.filter((b) => b.checkVisibility() && b.scrollWidth > b.clientWidth + 1).map((b) => `${b.id} ${b.scrollWidth}>${b.clientWidth}`));
  assert.deepEqual(cut, [], 'no header button cuts its label');
  const start = await phone.locator('#start').boundingBox();
  assert.ok(start.y + start.height <= 844, `Start on the phone's first screen: ${JSON.stringify(start)}`);
  await phone.screenshot({ path: join(ARTIFACTS, 'screen-390-first.png') });
  await phone.close();

  // Each embeddable panel inside an 800x600 frame: nothing to scroll, every figure whole.
  await page.setViewportSize({ width: 800, height: 600 });
  for (const panel of ['sphere', 'loss', 'attention', 'writing']) {
    await open(page, `#embed=${panel}`);
    // After a few steps: the figure drawn, its verdicts measured.
    await page.click('#start');
    await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 30, null, { timeout: 60_000 });
    await page.click('#start');
    await page.waitForTimeout(500);
    const fit = await page.evaluate(() => ({
      scroll: document.scrollingElement.scrollHeight,
      out: [...document.querySelectorAll('canvas')].filter((c) => c.checkVisibility() && c.getBoundingClientRect().bottom > innerHeight + 1).map((c) => `${c.id} to ${Math.round(c.getBoundingClientRect().bottom)}`),
    }));
    assert.ok(fit.scroll <= 601, `#embed=${panel}: the page is ${fit.scroll} px tall in a 600 px frame`);
    assert.deepEqual(fit.out, [], `#embed=${panel}: figures inside the frame`);
    await page.screenshot({ path: join(ARTIFACTS, `screen-800-embed-${panel}.png`) });
  }
  assert.deepEqual(problems, [], 'no console errors');
});
