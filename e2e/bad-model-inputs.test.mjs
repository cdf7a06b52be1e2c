// Nothing hangs, nothing is lost, for real models too: bad downloads are never kept, a model the
// tab cannot hold is refused before its weights come, the last Fetch wins, a server that stops
// sending is given up (and Cancel works from the first byte), a refused model never closes the
// open one, the page says where the files came from; the scripting API answers every bad argument
// with a rejected promise; a crashed worker settles what waited on it.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import {
  ARTIFACTS, FIXTURE_DIR, FIXTURE_ID, HUB_URL, PAGE_URL, launch, open, openModel, stepTo, textOf, waitReady,
} from './helpers.mjs';

const fixtureUrl = (file) => `${HUB_URL}/${FIXTURE_ID}/resolve/main/${file}`;
const errorOf = (page) => textOf(page, '#model-error');
const waitError = (page, re, timeout = 60_000) =>
  page.waitForFunction((s) => new RegExp(s).test(document.getElementById('model-error')?.textContent ?? ''), re.source, { timeout });
const waitOpened = (page, re, timeout = 120_000) =>
  page.waitForFunction((s) => new RegExp(s).test(document.getElementById('model-opened')?.textContent ?? ''), re.source, { timeout });

test('a bad download is never kept: an HTML page, a body cut short and a broken cached copy are refused or fetched again', { timeout: 240_000 }, async (t) => {
  const { context, page } = await launch(t);
  const asked = [];
  context.on('request', (r) => asked.push(r.url()));

  // A 200 HTML page served as config.json: named, and not kept.
  await context.route(fixtureUrl('config.json'), (route) =>
    route.fulfill({ status: 200, contentType: 'text/html', body: '<!doctype html><title>Sign in</title>' }));
  await openModel(page);
  await waitError(page, /config\.json is an HTML page, not JSON/);
  await context.unroute(fixtureUrl('config.json'));

  // The weights cut short by the server: refused from their own header, and not kept.
  const whole = readFileSync(join(FIXTURE_DIR, 'model.safetensors'));
  await context.route(fixtureUrl('model.safetensors'), (route) =>
    route.fulfill({ status: 200, contentType: 'application/octet-stream', body: whole.subarray(0, whole.length >> 1) }));
  await page.click('#hub-fetch');
  await waitError(page, /truncated .*nothing was kept/);
  await context.unroute(fixtureUrl('model.safetensors'));

  // Neither was kept: the next Fetch asks the hub and opens.
  await page.click('#hub-fetch');
  await waitOpened(page, /^spherewalk\/gpt2-fixture: 12 layers/);

  // A copy cut in half in the browser's cache (a full disk): dropped and fetched again.
  await page.evaluate(async ({ url, half }) => {
    const cache = await caches.open('spherewalk-models');
    await cache.put(url, new Response(new Uint8Array(half)));
  }, { url: fixtureUrl('model.safetensors'), half: [...whole.subarray(0, 4096)] });
  const before = asked.filter((u) => u.endsWith('model.safetensors')).length;
  await page.click('#hub-fetch');
  await page.waitForFunction(() => /kept in this browser was broken .*fetched again/.test(document.getElementById('model-message')?.textContent ?? ''), null, { timeout: 120_000 });
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  assert.equal(asked.filter((u) => u.endsWith('model.safetensors')).length, before + 1, 'the weights were fetched again');
  assert.equal(await page.isVisible('#model-error'), false);

  // "Fetch again" drops this browser's copies and asks the hub for every file.
  const again = asked.length;
  await page.click('#model-refetch');
  for (let i = 0; i < 600 && !asked.slice(again).some((u) => u.endsWith('model.safetensors')); i++) await page.waitForTimeout(100);
  // The line above still names the model open before: the busy line says when this one is read.
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 120_000 });
  await waitOpened(page, /^spherewalk\/gpt2-fixture: 12 layers/);
  const fetched = asked.slice(again).map((u) => u.split('/').pop());
  for (const f of ['config.json', 'tokenizer.json', 'model.safetensors']) assert.ok(fetched.includes(f), `${f} asked again: ${fetched}`);
  // Where the files came from: this page's link names another hub than Hugging Face.
  const source = await textOf(page, '#model-source');
  const state = await page.evaluate(() => ['model-message', 'model-error', 'model-busy'].map((id) => `${id}: ${document.getElementById(id)?.textContent}`).join('; '));
  assert.match(source, /^Files from 127\.0\.0\.1:\d+, not from huggingface\.co/, state);
});

/** A hub that misbehaves, as a test's own server: answers with CORS as the real hub does. */
async function misbehavingHub(t, routes) {
  const asked = [];
  const server = createServer((req, res) => {
    asked.push(req.url);
    res.setHeader('Access-Control-Allow-Origin', '*');
    const route = routes[req.url];
    if (!route) {
      res.writeHead(404).end('not found');
      return;
    }
    route(req, res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${server.address().port}`, asked };
}

test('a model the tab cannot hold is refused before its weights download, and a server that stops sending is given up', { timeout: 240_000 }, async (t) => {
  const base = JSON.parse(readFileSync(join(FIXTURE_DIR, 'config.json'), 'utf8'));
  const json = (value) => (req, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(value));
  const hub = await misbehavingHub(t, {
    // gpt2-xl's sizes: 1.56 billion weights, 5.8 GiB as f32: refused from config.json alone.
    '/adv/xl/resolve/main/config.json': json({ ...base, n_embd: 1600, n_head: 25, n_layer: 48, n_positions: 1024, n_ctx: 1024 }),
    // gpt2-large's: 2.9 GiB of weights fit the tab's 3 GiB, but not with its 3.1 GB file beside them.
    '/adv/large/resolve/main/config.json': json({ ...base, n_embd: 1280, n_head: 20, n_layer: 36, n_positions: 1024, n_ctx: 1024 }),
    '/adv/large/resolve/main/tokenizer.json': (req, res) => res.writeHead(200).end(readFileSync(join(FIXTURE_DIR, 'tokenizer.json'))),
    '/adv/large/resolve/main/model.safetensors': (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': '3250000000' });
      res.write(Buffer.alloc(1 << 16));
    },
    // Weights with no length announced that never end: stopped at the most such a model's
    // weights can take (each weight in 8 bytes, a header), not when the tab runs out of memory.
    '/adv/endless/resolve/main/config.json': json(base),
    '/adv/endless/resolve/main/tokenizer.json': (req, res) => res.writeHead(200).end(readFileSync(join(FIXTURE_DIR, 'tokenizer.json'))),
    '/adv/endless/resolve/main/model.safetensors': (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      const chunk = Buffer.alloc(1 << 20);
      let open = true;
      res.on('close', () => { open = false; });
      const more = () => { while (open && res.write(chunk)); };
      res.on('drain', more);
      more();
    },
    // Headers, then nothing.
    '/adv/stall/resolve/main/config.json': (req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': '500' });
      res.flushHeaders();
    },
  });
  const { page } = await launch(t);
  await page.goto(`${PAGE_URL}?hub=${encodeURIComponent(hub.url)}`, { waitUntil: 'load' });
  await waitReady(page);
  await page.click('#mode-model');
  await page.fill('#hub-id', 'adv/xl');
  await page.click('#hub-fetch');
  await waitError(page, /opening this model needs about 5\.8 GiB .*over the memory limit of 3\.0 GiB/);
  assert.deepEqual(hub.asked.filter((u) => u.startsWith('/adv/xl/')), ['/adv/xl/resolve/main/config.json'], 'nothing but config.json was asked for');
  await page.fill('#hub-id', 'adv/large');
  await page.click('#hub-fetch');
  await waitError(page, /opening this model needs about [\d.]+ GiB \(weights 2\.[89] GiB, and the file 3\.0 GiB while it is read\), over the memory limit of 3\.0 GiB/);
  assert.equal(await page.isVisible('#model-progress'), false, 'the download stopped');

  await page.fill('#hub-id', 'adv/endless');
  await page.click('#hub-fetch');
  await waitError(page, /the weights' file is [\d.]+ MiB, more than this model's weights can take \(at most [\d.]+ MiB\) \(after \d+ bytes of model\.safetensors, with no end announced: nothing was kept\)/);
  assert.equal(await page.isVisible('#model-progress'), false, 'the endless download stopped');

  // A config.json whose server sends headers and then nothing: Cancel shows at once and works;
  // left alone, the download is given up after 20 s with a sentence.
  await page.fill('#hub-id', 'adv/stall');
  await page.click('#hub-fetch');
  await page.waitForSelector('#model-cancel', { timeout: 5000 });
  await page.click('#model-cancel');
  await waitError(page, /cancelled: nothing was opened/);
  await page.click('#hub-fetch');
  await waitError(page, /the server stopped sending config\.json \(nothing for 20 s\)/, 40_000);
});

test('a second Fetch while the first downloads: the first is cancelled, the last choice wins', { timeout: 180_000 }, async (t) => {
  const { context, page } = await launch(t);
  await context.route(fixtureUrl('model.safetensors'), async (route) => {
    await new Promise((r) => setTimeout(r, 4000));
    await route.continue().catch(() => {});
  });
  await context.route(`${HUB_URL}/spherewalk/second/resolve/main/**`, (route) =>
    route.fetch({ url: fixtureUrl(route.request().url().split('/').pop()) }).then((r) => route.fulfill({ response: r })));
  await openModel(page);
  await page.waitForSelector('#model-cancel');
  await page.fill('#hub-id', 'spherewalk/second');
  await page.click('#hub-fetch');
  await waitOpened(page, /^spherewalk\/second: 12 layers/);
  await page.waitForTimeout(6000);
  assert.match(await textOf(page, '#model-opened'), /^spherewalk\/second: /, 'the first download, ended later, replaced nothing');
  assert.equal(await page.isVisible('#model-error'), false);
});

test('picked files: a refused config keeps the open model, the config is found by name, non-finite weights are named, a lab checkpoint opens as a run', { timeout: 240_000 }, async (t) => {
  const { page } = await launch(t);
  await openModel(page);
  await waitOpened(page, /^spherewalk\/gpt2-fixture: 12 layers/);
  await page.waitForSelector('#model-tokens', { timeout: 120_000 });
  const file = (name, buffer, mimeType = 'application/octet-stream') => ({ name, mimeType, buffer });
  const config = readFileSync(join(FIXTURE_DIR, 'config.json'), 'utf8');
  const tokenizer = file('tokenizer.json', readFileSync(join(FIXTURE_DIR, 'tokenizer.json')), 'application/json');
  const weights = readFileSync(join(FIXTURE_DIR, 'model.safetensors'));
  // Another architecture's config: refused by name, and the model open before stays open.
  await page.setInputFiles('#model-files', [file('config.json', Buffer.from(config.replace('"gpt2"', '"t5"'))), tokenizer, file('model.safetensors', weights)]);
  await waitError(page, /model_type is "t5".*spherewalk\/gpt2-fixture is still open/);
  assert.match(await textOf(page, '#model-opened'), /^spherewalk\/gpt2-fixture: 12 layers/);
  await page.click('#model-read');
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  assert.ok((await page.$$eval('#model-tokens .piece', (els) => els.length)) > 0, 'it still reads');
  // A non-finite weight is refused with its tensor.
  const nan = Buffer.from(weights);
  nan.writeFloatLE(Number.NaN, nan.length - 4);
  await page.setInputFiles('#model-files', [file('config.json', Buffer.from(config)), tokenizer, file('model.safetensors', nan)]);
  await waitError(page, /tensor ln_f\.bias holds NaN at element 63/);
  // generation_config.json beside config.json: the config is found by its name.
  await page.setInputFiles('#model-files', [file('generation_config.json', Buffer.from('{"do_sample": false}')), file('config.json', Buffer.from(config)), tokenizer, file('model.safetensors', weights)]);
  await waitOpened(page, /^model\.safetensors: 12 layers/);
  assert.match(await textOf(page, '#model-source'), /^From your files/);

  // The lab's own checkpoint picked in the model mode: it opens as a run in the training mode.
  await page.click('#mode-train');
  await page.click('#step-once');
  await stepTo(page, 1);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#download-model')]);
  const path = join(ARTIFACTS, 'lab-checkpoint.safetensors');
  await dl.saveAs(path);
  await page.click('#reset');
  await page.click('#mode-model');
  await page.setInputFiles('#model-files', path);
  await page.waitForFunction(() => /at step 1 of/.test(document.getElementById('model-note')?.textContent ?? ''), null, { timeout: 30_000 });
  assert.equal(await page.isVisible('#mode-model'), true, 'back in the training mode, with the run');
  assert.equal(Number(await textOf(page, '#step')), 1);
});

test('the scripting API answers every bad argument with a rejected promise, and a crashed worker settles what waited on it', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1);
  const rejection = (src) => page.evaluate(async (src) => {
    try {
      await (0, eval)(src);
      return 'resolved';
    } catch (e) {
      return `rejected: ${e && e.message}`;
    }
  }, src);
  const cases = [
    ['spherewalk.inspect(5)', /inspect\(text\) takes a string, not the number 5/],
    ['spherewalk.inspect({})', /takes a string, not object/],
    ["spherewalk.inspect('a\\ud800b')", /lone surrogate/],
    ['spherewalk.sample(() => 1)', /must be an object of settings, not a function/],
    ['spherewalk.sample(Symbol("x"))', /not a Symbol/],
    ['spherewalk.sample({ toJSON() {} })', /has no JSON text/],
    ['spherewalk.sample({ temperature: NaN })', /temperature is NaN; give a finite number/],
    ["spherewalk.sample({ prompt: 'x\\ud800' })", /prompt holds a lone surrogate/],
    ['spherewalk.sample({ seed: 2 ** 53 })', /at most 2\^53 - 1/],
    ['spherewalk.sample({ samples: 100, tokens: 10000 })', /at most 2000 tokens and 10 samples/],
    ['spherewalk.train(() => 1)', /not a function/],
    ['spherewalk.train({ ...JSON.parse(spherewalk.experiment()), train: { ...JSON.parse(spherewalk.experiment()).train, steps: 1e9 } })', /over the page's limit of 1000000/],
    ['spherewalk.bench(5)', /not the number 5/],
    // A Proxy whose traps throw is read through Reflect: a rejection, not an exception.
    ['spherewalk.sample(new Proxy({}, { ownKeys() { throw new Error("no keys"); } }))', /the sample settings cannot be read: .*no keys/],
    // A signal that had aborted before the call: the run never begins.
    ['(() => { const c = new AbortController(); c.abort(); return spherewalk.train(JSON.parse(spherewalk.experiment()), null, { signal: c.signal }); })()', /stopped: the script's signal had aborted before the run began/],
    ["spherewalk.history({ model: 'a/b', steps: '1', text: 5 })", /history\(spec\): text is the number 5, not a string/],
    ["spherewalk.history({ model: 'a/b', steps: '1', text: 'x\\ud800' })", /text holds a lone surrogate/],
  ];
  for (const [src, want] of cases) {
    const got = await rejection(src);
    assert.match(got, new RegExp(`^rejected: .*${want.source}`), `${src} -> ${got}`);
  }
  // A run a script started is stopped by its signal.
  const stopped = await rejection(`(() => { const c = new AbortController(); const e = JSON.parse(spherewalk.experiment()); e.train.steps = 100000; const p = spherewalk.train(e, null, { signal: c.signal }); setTimeout(() => c.abort(), 500); return p; })()`);
  assert.match(stopped, /^rejected: stopped/);
  // The page still works: a step.
  await page.click('#step-once');
  await stepTo(page, 2);

  // The training worker crashes while a script waits for its samples (asked after the trap, so
  // they are still waiting): the promise is rejected; asked after the crash, at once.
  const waiting = await page.evaluate(() => {
    spherewalk.testing.trapWorker();
    return spherewalk.sample({ tokens: 20 }).then(() => 'resolved', (e) => `rejected: ${e.message}`);
  });
  assert.match(waiting, /^rejected: the training worker crashed/);
  assert.match(await rejection('spherewalk.sample({ tokens: 20 })'), /^rejected: the training worker crashed .*Restart and resume/);
  await page.waitForSelector('#restart-worker');
  await page.click('#restart-worker');
  await page.waitForSelector('#crashed', { state: 'detached', timeout: 30_000 });
  await page.waitForTimeout(1000);
  assert.doesNotMatch((await textOf(page, '#error')) ?? '', /saved run/, 'a restart with nothing saved does not look for a saved run');

  // The model worker crashes while a reading waits: the reading is rejected, the page says so,
  // and the model opens again.
  await openModel(page);
  await waitOpened(page, /^spherewalk\/gpt2-fixture: 12 layers/);
  await page.waitForSelector('#model-busy', { state: 'detached', timeout: 60_000 });
  const reading = await page.evaluate(() => {
    spherewalk.testing.trapModelWorker();
    return spherewalk.inspect('a text').then(() => 'resolved', (e) => `rejected: ${e.message}`);
  });
  assert.match(reading, /^rejected: The model's worker crashed/);
  await waitError(page, /The model's worker crashed .*open the model again/);
  assert.equal(await page.isVisible('#model-opened'), false, 'no model is said to be running');
  await page.click('#hub-fetch');
  await waitOpened(page, /^spherewalk\/gpt2-fixture: 12 layers/);
  const unexpected = problems.filter((p) => !/crashed|unreachable|RuntimeError/.test(p));
  assert.deepEqual(unexpected, [], 'no other console errors');
});
