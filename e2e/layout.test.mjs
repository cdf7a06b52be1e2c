// Layout and reading: the first screen at 1280x800 and on a phone, presenter mode and the keys,
// WCAG AA contrast, touch, the first screen in plain words, chart text sizes, touch targets.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  ARTIFACTS, CHROMIUM_FLAGS, contrastReport, launch, phase, textOf, open, waitPhase, stepTo,
} from './helpers.mjs';

test('layout: the picture is on the first screen at 1280x800, and a phone does not scroll sideways', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  for (const id of ['panel-sphere', 'panel-loss', 'panel-attention', 'start', 'pace']) {
    const b = await page.locator(`#${id}`).boundingBox();
    assert.ok(b && b.x >= 0 && b.y >= 0 && b.x + b.width <= 1280 && b.y + b.height <= 800, `#${id} inside 1280x800 on load: ${JSON.stringify(b)}`);
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-1280x800.png') });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no horizontal scroll at 390 px (scroll width ${width})`);
  const start = await page.locator('#start').boundingBox();
  assert.ok(start.y + start.height <= 844, `Start is on the phone's first screen (${start.y})`);
  await page.screenshot({ path: join(ARTIFACTS, 'page-390x844.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('presenter mode and the keys', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  await page.evaluate(() => document.activeElement?.blur());
  await page.keyboard.press('p');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.presenter), 'on', 'P enters presenter mode');
  // The settings stay (a tour step asks the class to change one), below the picture.
  const settings = await page.locator('#panel-settings').boundingBox();
  assert.ok(settings.y >= 800, `the settings below the first screen (${settings.y})`);
  for (const id of ['#panel-sphere', '#panel-loss', '#panel-attention', '#start']) assert.ok(await page.isVisible(id), `${id} stays`);
  const size = await page.evaluate(() => parseFloat(getComputedStyle(document.body).fontSize));
  assert.ok(size >= 20, `large type (${size}px)`);
  await page.keyboard.press('ArrowRight');
  await stepTo(page, 1, 30_000);
  await page.keyboard.press('ArrowRight');
  await stepTo(page, 2, 30_000);
  assert.equal(await phase(page), 'paused', 'the right arrow steps');
  await page.keyboard.press('Space');
  await waitPhase(page, ['training']);
  await page.keyboard.press('Space');
  await waitPhase(page, ['paused']);
  const stageTop = async () => (await page.locator('#panel-sphere').boundingBox()).y;
  const before = await stageTop();
  await page.keyboard.press('?');
  assert.match(await textOf(page, '#keys-help'), /Space.*start, pause.*presenter mode.*full screen/s);
  assert.equal(await stageTop(), before, 'the list of keys floats over the page: the picture stays where it was');
  await page.screenshot({ path: join(ARTIFACTS, 'page-presenter.png') });
  await page.keyboard.press('Escape');
  assert.equal(await page.$('#keys-help'), null, 'Escape closes the list');
  await page.keyboard.press('p');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.presenter), undefined);
  assert.ok(await page.isVisible('#panel-settings'));
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('contrast: every text meets WCAG AA in the light and the dark theme, and in presenter mode', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '#tour=1');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  for (const theme of ['light', 'dark']) {
    if ((await page.evaluate(() => document.documentElement.dataset.theme)) !== theme) await page.click('#theme');
    await page.waitForFunction((th) => document.documentElement.dataset.theme === th, theme);
    for (const presenter of [false, true]) {
      if (presenter) await page.keyboard.press('p');
      const { checked, bad } = await contrastReport(page);
      t.diagnostic(`${theme}${presenter ? ', presenter' : ''}: ${checked} texts checked`);
      assert.ok(checked > 50, `the check saw the page's texts (${checked})`);
      assert.deepEqual(bad, [], `${theme} theme${presenter ? ' in presenter mode' : ''}: texts below AA`);
      if (presenter) await page.keyboard.press('p');
    }
  }
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('touch: one finger scrolls the page over the sphere, two fingers turn it, and the toggle turns it with one', { timeout: 120_000 }, async (t) => {
  const { context, page, problems } = await launch(t, { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  const cdp = await context.newCDPSession(page);
  const box = {};
  const inView = async () => {
    await page.evaluate(() => document.getElementById('sphere').scrollIntoView({ block: 'start' }));
    Object.assign(box, await page.locator('#sphere').boundingBox());
  };
  const touch = async (type, points) => cdp.send('Input.dispatchTouchEvent', { type, touchPoints: points.map(([x, y], id) => ({ x, y, id })) });
  const swipe = async (fingers, dx, dy) => {
    const at = fingers.map((f) => [box.x + box.width / 2 + f, box.y + box.height / 2]);
    await touch('touchStart', at);
    for (let i = 1; i <= 10; i++) await touch('touchMove', at.map(([x, y]) => [x + (dx * i) / 10, y + (dy * i) / 10]));
    await touch('touchEnd', []);
    await page.waitForTimeout(300);
  };
  const yaw = async () => Number(await page.getAttribute('#sphere', 'data-yaw'));
  const scrollY = () => page.evaluate(() => window.scrollY);
  assert.ok(await page.isVisible('#one-finger'), 'a touch screen shows the one-finger toggle');
  await inView();
  let [yaw0, y0] = [await yaw(), await scrollY()];
  await swipe([0], 0, -200);
  assert.ok((await scrollY()) > y0 + 50, `one finger up scrolls the page (${y0} -> ${await scrollY()})`);
  assert.equal(await yaw(), yaw0, 'and does not turn the ball');
  await inView();
  yaw0 = await yaw();
  await swipe([-30, 30], 120, 0);
  assert.ok((await yaw()) > yaw0 + 0.3, `two fingers turn the ball (yaw ${yaw0} -> ${await yaw()})`);
  await page.check('#one-finger');
  assert.equal(await page.evaluate(() => getComputedStyle(document.getElementById('sphere')).touchAction), 'none');
  await inView();
  yaw0 = await yaw();
  await swipe([0], 120, 0);
  assert.ok((await yaw()) > yaw0 + 0.3, `with the toggle one finger turns it (yaw ${yaw0} -> ${await yaw()})`);
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('first screen in plain words: what the model learns, a loss with its yardstick, a GPU error a teacher can read aloud', { timeout: 120_000 }, async (t) => {
  // Without WebGPU in the browser: the page asks for an adapter and gets none.
  const { page, problems } = await launch(t, { args: CHROMIUM_FLAGS.filter((f) => f !== '--enable-unsafe-webgpu').concat(['--disable-features=WebGPU']), viewport: { width: 1280, height: 800 } });
  await open(page, '');
  const lead = page.locator('#lead');
  assert.equal((await lead.textContent()).trim(), 'A 2-layer transformer learns to predict the next character of a made-up grammar.');
  const box = await lead.boundingBox();
  const title = await page.locator('h1').boundingBox();
  assert.ok(box.y < title.y + title.height, 'on the title\'s line, the first thing read');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  // The loss chart's own baseline line for a uniform guess gives the same number.
  const guess = Number((await textOf(page, '#yardsticks')).match(/guessing: ([\d.]+)/)[1]);
  const vocab = JSON.parse(await page.evaluate(() => spherewalk.experiment())).train.model.vocab || null;
  const chartGuess = Number((await textOf(page, '#baselines')).match(/a uniform guess among the \d+ symbols scores ([\d.]+)/)?.[1]);
  assert.equal(guess, chartGuess, `guessing ${guess} on the stats, ${chartGuess} under the loss chart (vocab ${vocab})`);
  assert.match(await page.getAttribute('#yardsticks', 'title'), /a uniform guess scores [\d.]+, letter frequencies alone [\d.]+/);
  const line = await textOf(page, '#backend');
  t.diagnostic(`backend line: ${line}`);
  assert.match(line, /^Backend: CPU \(auto: this browser offers no GPU to the page\)/);
  assert.doesNotMatch(line, /compiled in|adapter found/, 'the graphics stack\'s words are behind "details"');
  assert.match(await textOf(page, '#backend-details'), /no GPU adapter/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-first-screen.png') });
  assert.deepEqual(problems.filter((p) => !/WebGPU|GPU/i.test(p)), [], 'no console errors or exceptions');
});

test('chart text is drawn at its CSS size on every screen: 12 px at 1280x800 and on a phone, 24 px in the projector view at 1920x1080, where no text is smaller and the picture stays on the first screen', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1280, height: 800 } });
  // What a chart says it drew, and what the canvas's pixels make of it on the screen.
  const charts = () => page.evaluate(() => ['loss-chart', 'entropy-chart'].map((id) => {
    const c = document.getElementById(id);
    return { id, font: Number(c.dataset.fontPx), perCss: c.width / c.clientWidth, dpr: devicePixelRatio, shown: c.clientWidth };
  }));
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  // Every chart on screen (presenter mode shows the loss chart, not the entropy panel).
  const check = async (where, want) => {
    await page.waitForFunction((w) => ['loss-chart', 'entropy-chart'].every((id) => { const c = document.getElementById(id); return c.clientWidth === 0 || Number(c.dataset.fontPx) === w; }), want, { timeout: 10_000 });
    const shown = (await charts()).filter((c) => c.shown > 0);
    assert.ok(shown.some((c) => c.id === 'loss-chart'), `${where}: the loss chart is on the page`);
    for (const c of shown) {
      assert.equal(c.font, want, `${where}: ${c.id} draws its labels at ${c.font} CSS px`);
      assert.ok(Math.abs(c.perCss - c.dpr) < 0.02, `${where}: ${c.id}'s pixels are the screen's (${c.perCss} per CSS px, ${c.shown} px shown)`);
    }
  };
  await check('1280x800', 12);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.click('#step-once');
  await stepTo(page, 2, 30_000);
  await check('phone', 12);
  await page.setViewportSize({ width: 1920, height: 1080 });
  await page.click('#presenter');
  await check('presenter mode at 1920x1080', 24);
  await page.locator('#panel-loss').screenshot({ path: join(ARTIFACTS, 'panel-loss-presenter.png') });
  // The projector view: every visible text, in the page and in every canvas, at 24 px or more; the
  // picture whole on the first screen; the panel the preset is about kept.
  const room = () => page.evaluate(() => {
    const small = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const e = walker.currentNode.parentElement;
      if (!walker.currentNode.textContent.trim() || !e.checkVisibility()) continue;
      const px = parseFloat(getComputedStyle(e).fontSize);
      if (px < 24) small.push(`${e.tagName.toLowerCase()}#${e.id} "${walker.currentNode.textContent.trim().slice(0, 30)}": ${px} px`);
    }
    const canvases = [...document.querySelectorAll('canvas')].filter((c) => c.checkVisibility() && c.clientWidth > 0).map((c) => ({ id: c.id, font: Number(c.dataset.fontPx) }));
    const sphere = document.getElementById('sphere').getBoundingClientRect();
    return { small, canvases, sphereBottom: sphere.bottom + scrollY, brownian: document.getElementById('panel-brownian').checkVisibility(), entropy: document.getElementById('panel-entropy').checkVisibility() };
  });
  for (const [preset, panel] of [['sphere', null], ['brownian', 'brownian'], ['joma', 'entropy'], ['race', null]]) {
    await open(page, `#preset=${preset}`);
    if ((await page.getAttribute('html', 'data-presenter')) !== 'on') await page.keyboard.press('p');
    await page.click('#start');
    await stepTo(page, 25, 30_000);
    await page.click('#start');
    await waitPhase(page, ['paused']);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.waitForTimeout(300);
    const r = await room();
    t.diagnostic(`projector, preset ${preset}: canvases ${r.canvases.map((c) => `${c.id} ${c.font} px`).join(', ')}; sphere ends at ${r.sphereBottom.toFixed(0)} px`);
    assert.deepEqual(r.small, [], `preset ${preset}: texts under 24 px in the projector view`);
    assert.ok(r.canvases.length >= 3 && r.canvases.every((c) => c.font >= 24), `preset ${preset}: every canvas draws its text at 24 px or more`);
    assert.ok(r.sphereBottom <= 1080, `preset ${preset}: the sphere ends at ${r.sphereBottom} px, on the first screen`);
    if (panel) assert.ok(r[panel], `preset ${preset}: its panel stays in the projector view`);
    if (preset === 'brownian') await page.screenshot({ path: join(ARTIFACTS, 'page-projector-brownian.png') });
  }
  await page.screenshot({ path: join(ARTIFACTS, 'page-projector.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('phone: every control on the page is a touch target of at least 24x24 CSS px; Start stays on screen with the sphere', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 390, height: 844 }, hasTouch: true, isMobile: true });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  const small = await page.evaluate(() => [...document.querySelectorAll('button, input, select, textarea, summary, a[href]')]
    .filter((e) => e.checkVisibility?.())
    .map((e) => { const r = e.getBoundingClientRect(); return { what: e.id || `${e.tagName.toLowerCase()} "${(e.textContent || '').trim().slice(0, 20)}"`, w: r.width, h: r.height }; })
    .filter((x) => x.w < 24 || x.h < 24));
  assert.deepEqual(small, [], 'controls smaller than 24x24');
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-targets.png') });
  const box = (sel) => page.evaluate((q) => { const r = document.querySelector(q).getBoundingClientRect(); return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }; }, sel);
  const onScreen = (b) => b.bottom > 0 && b.top < 844 && b.right > 0 && b.left < 390;
  // The sphere in the middle of the screen: Start (and Step, Reset, the pace) still within reach.
  await page.evaluate(() => document.getElementById('sphere').scrollIntoView({ block: 'center' }));
  const [start, sphere] = [await box('#start'), await box('#sphere')];
  assert.ok(start.top >= 0 && start.bottom <= 844 && onScreen(sphere), `Start ${JSON.stringify(start)} and the sphere ${JSON.stringify(sphere)} on screen together`);
  assert.ok(start.bottom <= sphere.top, 'the bar does not cover the sphere');
  await page.click('#start');
  await waitPhase(page, ['training']);
  await page.click('#start');
  await waitPhase(page, ['paused']);
  await page.screenshot({ path: join(ARTIFACTS, 'page-phone-sphere.png') });
  // (The tour on a phone, its card before its panel and never over it: projector.test.mjs.)
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});
