// The page as a teacher hosts it: dist/ copied into a sub-folder of a plain static server
// (`cargo xtask test` serves target/www with `python3 -m http.server`). From there it loads with
// every URL relative to it, says it is loading until its engine is there, keeps a first visit
// small, works offline after one visit, takes a new build only through its reload line, explains
// itself when opened from the disk, and embeds one panel in another page's iframe.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ARTIFACTS, FIXTURE_ID, HUB_URL, PAGE_URL, WWW, launch, stepOf, textOf, waitReady } from './helpers.mjs';

const SITE = new URL(PAGE_URL);
const ORIGIN = SITE.origin;

/** The file under WWW that a URL of the test server names (null for another host). */
function fileOf(url) {
  const u = new URL(url);
  if (u.origin !== ORIGIN) return null;
  let path = decodeURIComponent(u.pathname);
  if (path.endsWith('/')) path += 'index.html';
  const file = join(WWW, path);
  return existsSync(file) ? file : null;
}

/** The build id the open page was served from (index.html's meta line). */
const buildOf = (page) => page.evaluate(() => document.querySelector('meta[name=spherewalk-build]')?.content);

async function fastest(page) {
  await page.selectOption('#pace', '0');
}

test('hosted in a sub-folder: every request stays under it, the engine says it is loading, and a first visit is small', { timeout: 180_000 }, async (t) => {
  const { context, page, problems } = await launch(t);
  const requests = [];
  context.on('request', (r) => requests.push(r));
  // Hold the engine back until the page has been looked at while it loads.
  let release;
  const held = new Promise((r) => { release = r; });
  await context.route('**/worker_bg.wasm', async (route) => {
    await held;
    await route.continue();
  });
  await page.goto(PAGE_URL, { waitUntil: 'load' });
  await page.waitForSelector('#start[data-loading]', { timeout: 60_000 });
  const start = await textOf(page, '#start');
  assert.match(start, /^Loading the engine \(\d+\.\d of \d+\.\d MB\)$/, `Start says the engine is loading, with its size: ${start}`);
  assert.ok(await page.isVisible('#engine-progress'), 'a progress bar beside Start');
  assert.match(await textOf(page, '#estimate'), /once the engine has loaded/, 'the estimate waits for the engine');
  assert.equal(await textOf(page, '#status'), 'loading', 'the status says loading, not idle or training');
  // A press now starts the run as soon as it can, and says so; nothing pretends to train.
  await fastest(page);
  await page.click('#start');
  assert.match(await textOf(page, '#start'), /^Starts once loaded/);
  assert.match(await textOf(page, '#starts-when-loaded'), /starts as soon as the engine has loaded/);
  await page.waitForTimeout(800);
  assert.equal(await textOf(page, '#status'), 'loading');
  assert.equal(await stepOf(page), 0);
  release();
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 10, null, { timeout: 90_000 });
  assert.equal(await page.isVisible('#engine-progress'), false, 'the bar is gone once the engine runs');
  assert.equal(await textOf(page, '#status'), 'training');

  // Every file came from the sub-folder (relative URLs), none from the server's root.
  const urls = requests.map((r) => r.url()).filter((u) => u.startsWith(ORIGIN));
  const outside = urls.filter((u) => !u.startsWith(SITE.href));
  assert.deepEqual(outside, [], 'no request leaves the page\'s folder');
  for (const name of ['index.html', 'boot.js', 'worker_loader.js', 'worker.js', 'worker_bg.wasm']) {
    assert.ok(urls.some((u) => new URL(u).pathname.endsWith(name === 'index.html' ? '/' : `/${name}`)), `${name} was loaded from the folder`);
  }
  // What the training page needed before its first steps, at gzip -9: at most 1.55 MB. (1.5 MB
  // until 2026-12-08, when the model mode's sections, its logit lens and the verdicts' claims took
  // it to 1.53 MB: most of both wasm files is serde code for every message of both workers, which
  // giving each worker its own messages is to cut.)
  const seen = new Set();
  let gz = 0;
  const sizes = [];
  for (const r of requests) {
    const file = fileOf(r.url());
    if (!file || seen.has(file) || r.serviceWorker()) continue;
    seen.add(file);
    const n = gzipSync(readFileSync(file), { level: 9 }).length;
    sizes.push(`${file.slice(WWW.length)}: ${(n / 1024).toFixed(0)} KiB`);
    gz += n;
  }
  writeFileSync(join(ARTIFACTS, 'first-visit.txt'), `${sizes.join('\n')}\ntotal ${(gz / 1024).toFixed(0)} KiB at gzip -9\n`);
  assert.ok(gz <= 1.55e6, `the first visit loads ${(gz / 1e6).toFixed(2)} MB at gzip -9 (at most 1.55 MB): ${sizes.join(', ')}`);
  assert.ok(![...seen].some((f) => /model|tokenizer|vocab|merges/.test(f)), 'no model or vocabulary on the training page');

  // The English preset fetches its text from the folder too.
  await page.goto('about:blank');
  await page.goto(`${PAGE_URL}#preset=english`, { waitUntil: 'load' });
  await waitReady(page);
  await page.waitForFunction(() => /Pride and Prejudice/.test(document.getElementById('lead')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.ok(requests.some((r) => r.url() === new URL('data/austen.txt', PAGE_URL).href), 'data/austen.txt from the page\'s folder');
  assert.deepEqual(problems, [], 'no console errors or failed requests');
});

test('a host that serves the folder without its trailing slash: the page moves to it and runs', { timeout: 120_000 }, async (t) => {
  const { context, page } = await launch(t);
  const bare = PAGE_URL.replace(/\/$/, '');
  const html = readFileSync(join(WWW, SITE.pathname, 'index.html'));
  await context.route(bare, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: html }));
  await page.goto(bare, { waitUntil: 'load' });
  await waitReady(page);
  assert.equal(page.url(), PAGE_URL, 'the address gained its slash');
  await fastest(page);
  await page.click('#start');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 5, null, { timeout: 60_000 });
});

test('offline after one visit, and a new build only through the reload line, never mixed', { timeout: 300_000 }, async (t) => {
  const site = join(WWW, SITE.pathname);
  const next = join(WWW, 'next', 'spherewalk');
  const old = join(WWW, 'previous-build');
  t.after(() => {
    // The folder as it was, for the tests after this one.
    if (existsSync(old)) {
      renameSync(site, next);
      renameSync(old, site);
    }
  });
  const { context, page, problems } = await launch(t, { serviceWorkers: 'allow' });
  await page.goto(PAGE_URL, { waitUntil: 'load' });
  await waitReady(page);
  await page.waitForSelector('#offline', { timeout: 120_000 });
  const first = await buildOf(page);
  assert.match(first, /^[0-9a-f]{16}$/, 'a sealed build');

  // The network goes away; the page reloads from its offline copy, trains and writes.
  await context.setOffline(true);
  await page.reload({ waitUntil: 'load' });
  await waitReady(page);
  assert.equal(await buildOf(page), first);
  await fastest(page);
  await page.click('#start');
  await page.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 10, null, { timeout: 90_000 });
  await page.waitForFunction(() => (document.getElementById('writing-sample')?.dataset.text ?? '').length > 0, null, { timeout: 60_000 });
  await page.click('#start'); // pause
  await context.setOffline(false);

  // A new build is deployed. The open page learns of it, says so, and keeps its own build.
  renameSync(site, old);
  renameSync(next, site);
  await page.evaluate(() => navigator.serviceWorker.getRegistration().then((r) => r.update()));
  await page.waitForSelector('#update', { timeout: 120_000 });
  assert.match(await textOf(page, '#update'), /A new version of the lab is ready/);
  assert.equal(await buildOf(page), first, 'the open page keeps its build until its line is pressed');
  // A plain reload still gets the whole old build (the new one waits), so nothing is mixed.
  await page.reload({ waitUntil: 'load' });
  await waitReady(page);
  assert.equal(await buildOf(page), first);
  await page.waitForSelector('#update', { timeout: 60_000 });
  // The line's button takes the new build: the page reloads into it.
  await Promise.all([page.waitForEvent('load', { timeout: 60_000 }), page.click('#take-update')]);
  await waitReady(page);
  const second = await buildOf(page);
  assert.match(second, /^[0-9a-f]{16}$/);
  assert.notEqual(second, first, 'the new build after the reload line');
  assert.equal(await page.isVisible('#update'), false);
  assert.deepEqual(problems.filter((p) => !/ERR_INTERNET_DISCONNECTED|net::ERR/.test(p)), [], 'no console errors');
});

test('with the service worker in control, the model worker starts from its own address: a real model opens', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { serviceWorkers: 'allow' });
  const url = `${PAGE_URL}?hub=${encodeURIComponent(HUB_URL)}`;
  await page.goto(url, { waitUntil: 'load' });
  await waitReady(page);
  await page.waitForSelector('#offline', { timeout: 120_000 });
  // The second visit: every file of the page, worker_loader.js included, comes from the copy.
  await page.reload({ waitUntil: 'load' });
  await waitReady(page);
  await page.click('#mode-model');
  await page.fill('#hub-id', FIXTURE_ID);
  await page.click('#hub-fetch');
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  assert.equal(await page.isVisible('#model-error'), false, await textOf(page, '#model-error') ?? '');
  assert.deepEqual(problems, [], 'no console errors');
});

test('opened from the disk (file://) the page says why it cannot run and how to serve it', { timeout: 60_000 }, async (t) => {
  const { page } = await launch(t);
  await page.goto(`file://${join(WWW, SITE.pathname, 'index.html')}`, { waitUntil: 'load' });
  await page.waitForSelector('#file-page', { timeout: 10_000 });
  const text = await textOf(page, 'body');
  assert.match(text, /opened from the disk/);
  assert.match(text, /python3 -m http\.server/);
  assert.match(text, /cargo xtask serve/);
});

test('#embed= shows one panel with a compact Start in another page\'s iframe, and trains', { timeout: 180_000 }, async (t) => {
  const { page, problems } = await launch(t, { viewport: { width: 1000, height: 800 } });
  const host = join(WWW, 'embed-test.html');
  writeFileSync(host, `<!doctype html><title>A course page</title><link rel="icon" href="data:,"><h1>Week 3: attention</h1>
    <iframe id="lab" src="${SITE.pathname}#embed=sphere&preset=brownian" width="720" height="540"></iframe>`);
  t.after(() => writeFileSync(host, ''));
  await page.goto(`${ORIGIN}/embed-test.html`, { waitUntil: 'load' });
  const frame = page.frameLocator('#lab');
  await frame.locator('#start:not([data-loading])').waitFor({ timeout: 60_000 });
  const shown = async (sel) => frame.locator(sel).isVisible();
  assert.equal(await shown('#panel-sphere'), true, 'the embedded panel');
  for (const hidden of ['header', '#panel-loss', '#panel-attention', '#panel-settings', '#step-once', '#pace', 'dl.stats']) {
    assert.equal(await shown(hidden), false, `${hidden} is not in the embed`);
  }
  // The panel fits its frame: the sphere whole inside 720x540.
  const box = await frame.locator('#sphere').boundingBox();
  const frameBox = await page.locator('#lab').boundingBox();
  assert.ok(box.y + box.height <= frameBox.y + frameBox.height + 1 && box.x + box.width <= frameBox.x + frameBox.width + 1,
    `the sphere (${JSON.stringify(box)}) fits the iframe (${JSON.stringify(frameBox)})`);
  await frame.locator('#start').click();
  const frameHandle = page.frame({ url: /#embed=sphere/ });
  await frameHandle.waitForFunction(() => Number(document.getElementById('step')?.textContent) >= 10, null, { timeout: 90_000 });
  await frameHandle.waitForFunction(() => (document.getElementById('sphere')?.dataset.points ?? '').length > 0, null, { timeout: 30_000 });
  assert.match(frameHandle.url(), /embed=sphere/, 'the address keeps the embed');
  await page.screenshot({ path: join(ARTIFACTS, 'embed-sphere.png') });
  assert.deepEqual(problems, [], 'no console errors');
});
