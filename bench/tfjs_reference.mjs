#!/usr/bin/env node
// The lab's benchmark model in TF.js 4.22 (wasm backend), step for step beside the page's own
// engine (`spherewalk.bench`, the CPU path in its worker), in one headless Chromium, one run.
//
// Same model as bench/pytorch_reference.py and `lab bench`: Pre-LN GELU (tanh) causal transformer,
// separate Q/K/V/O projections with biases, MLP 4d, AdamW-style Adam step with the gradient
// clipped to norm 1, random tokens over a vocabulary of 64 (ours trains on its grammar data,
// whose vocabulary is smaller: its FLOPs are counted by the engine). The page is not cross-origin
// isolated, so TF.js picks its single-threaded SIMD build; ours runs in one worker, and in two (a
// second worker computes half of each step's shards, as the page does on a machine with two cores).
// Beside them, the same `spherewalk.bench` spec natively (`lab bench --spec`, on one thread and on
// every core): how far the browser's step is from the native one, core for core and at best. The
// size `page` is the page's default experiment.
//
// Usage (the page built and served, as for the browser tests):
//   npm install --prefix bench          # TF.js, once (not part of CI)
//   cargo xtask serve &                 # or any static server of dist/
//   cargo build --release -p engine --bin lab   # the native column (LAB=path to use another)
//   SPHEREWALK_URL=http://127.0.0.1:8080/ node bench/tfjs_reference.mjs [--steps 20] [--sizes page,tiny,small]
// Prints a table: ms per step for TF.js, the page (one and two workers) and native, and the ratios.

import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(HERE, '..', 'e2e', 'package.json'));
const { chromium } = require('playwright-core');
const TFJS = join(HERE, 'node_modules', '@tensorflow');

const PAGE_URL = process.env.SPHEREWALK_URL ?? 'http://127.0.0.1:8080/';
const EXECUTABLE = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const LAB = process.env.LAB ?? join(HERE, '..', 'target', 'release', 'lab');
const SIZES = {
  page: { d: 32, layers: 2, heads: 4, t: 32, b: 8 },
  tiny: { d: 32, layers: 1, heads: 2, t: 32, b: 8 },
  small: { d: 64, layers: 2, heads: 4, t: 64, b: 16 },
  medium: { d: 128, layers: 4, heads: 4, t: 128, b: 16 },
};

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const STEPS = Number(arg('steps', 20));
const NAMES = arg('sizes', 'page,tiny,small').split(',');

/** One TF.js training step timed `steps` times after 3 untimed ones (runs in the page). */
async function tfjsBench({ d, layers, heads, t, b, steps }) {
  /* global tf */
  tf.wasm.setWasmPaths('/tfjs/');
  await tf.setBackend('wasm');
  await tf.ready();
  const V = 64;
  const hs = d / heads;
  const normal = (shape) => tf.variable(tf.randomNormal(shape, 0, 0.02));
  const fill = (shape, x) => tf.variable(tf.fill(shape, x));
  const linear = (i, o) => ({ w: normal([i, o]), b: fill([o], 0) });
  const norm = () => ({ g: fill([d], 1), b: fill([d], 0) });
  const model = {
    wte: normal([V, d]),
    wpe: normal([t, d]),
    blocks: Array.from({ length: layers }, () => ({
      ln1: norm(), q: linear(d, d), k: linear(d, d), v: linear(d, d), o: linear(d, d),
      ln2: norm(), fc: linear(d, 4 * d), proj: linear(4 * d, d),
    })),
    lnf: norm(),
    head: linear(d, V),
  };
  const mask = tf.mul(tf.sub(1, tf.linalg.bandPart(tf.ones([t, t]), -1, 0)), -1e9);
  const ln = (x, p) => {
    const { mean, variance } = tf.moments(x, -1, true);
    return tf.add(tf.mul(tf.div(tf.sub(x, mean), tf.sqrt(tf.add(variance, 1e-5))), p.g), p.b);
  };
  const lin = (x, p) => tf.add(tf.matMul(x, p.w), p.b);
  const split = (x) => tf.transpose(tf.reshape(x, [b, t, heads, hs]), [0, 2, 1, 3]);
  const gelu = (x) => {
    const inner = tf.mul(tf.add(x, tf.mul(tf.mul(tf.mul(x, x), x), 0.044715)), Math.sqrt(2 / Math.PI));
    return tf.mul(tf.mul(x, 0.5), tf.add(tf.tanh(inner), 1));
  };
  // The embedding as a one-hot product: the wasm backend has no kernel for gather's gradient.
  const tokens = tf.oneHot(tf.randomUniform([b * t], 0, V, 'int32'), V).toFloat();
  const targets = tf.oneHot(tf.randomUniform([b * t], 0, V, 'int32'), V);
  const loss = () => {
    let x = tf.reshape(tf.add(tf.reshape(tf.matMul(tokens, model.wte), [b, t, d]), model.wpe), [b * t, d]);
    for (const blk of model.blocks) {
      const h = ln(x, blk.ln1);
      const [q, k, v] = [blk.q, blk.k, blk.v].map((p) => split(lin(h, p)));
      const p = tf.softmax(tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(hs)), mask));
      const y = tf.reshape(tf.transpose(tf.matMul(p, v), [0, 2, 1, 3]), [b * t, d]);
      x = tf.add(x, lin(y, blk.o));
      x = tf.add(x, lin(gelu(lin(ln(x, blk.ln2), blk.fc)), blk.proj));
    }
    return tf.losses.softmaxCrossEntropy(targets, lin(ln(x, model.lnf), model.head));
  };
  const opt = tf.train.adam(1e-3);
  const times = [];
  // The warm-up of spherewalk.bench: at least 3 untimed steps and at least a second of them, while
  // the browser swaps optimised code into the hot wasm functions.
  const warmStart = performance.now();
  let warm = 0;
  for (let i = 0; i < steps + warm; i++) {
    const warming = times.length === 0 && (i < 3 || (i < 2000 && performance.now() - warmStart < 1000));
    if (warming) warm++;
    const start = performance.now();
    tf.tidy(() => {
      const { value, grads } = tf.variableGrads(loss);
      const all = Object.values(grads);
      const total = tf.sqrt(tf.addN(all.map((g) => tf.sum(tf.square(g)))));
      const scale = tf.minimum(1, tf.div(1, tf.add(total, 1e-6)));
      opt.applyGradients(Object.fromEntries(Object.entries(grads).map(([n, g]) => [n, tf.mul(g, scale)])));
      value.dataSync(); // the step is done only when its loss is on the host
    });
    if (!warming) times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { ms_per_step: times[times.length >> 1], backend: tf.getBackend(), simd: await tf.env().getAsync('WASM_HAS_SIMD_SUPPORT'), threads: await tf.env().getAsync('WASM_HAS_MULTITHREAD_SUPPORT') };
}

const browser = await chromium.launch({ executablePath: EXECUTABLE, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
try {
  const page = await browser.newPage();
  // The TF.js files, served from bench/node_modules under the page's own origin.
  await page.route(`${PAGE_URL}tfjs/**`, (route) => {
    const name = new URL(route.request().url()).pathname.split('/').pop();
    const file = name.endsWith('.wasm') ? join(TFJS, 'tfjs-backend-wasm', 'dist', name)
      : name === 'tf.min.js' ? join(TFJS, 'tfjs', 'dist', name)
        : name === 'tf-backend-wasm.min.js' ? join(TFJS, 'tfjs-backend-wasm', 'dist', name)
          : name === 'bench.html' ? null : undefined;
    if (file === undefined) return route.fulfill({ status: 404 });
    if (file === null) {
      return route.fulfill({ contentType: 'text/html', body: '<!doctype html><script src="tf.min.js"></script><script src="tf-backend-wasm.min.js"></script>' });
    }
    return route.fulfill({ body: readFileSync(file), contentType: name.endsWith('.wasm') ? 'application/wasm' : 'text/javascript' });
  });
  const ours = await browser.newPage();
  await ours.goto(PAGE_URL);
  await ours.waitForFunction(() => typeof window.spherewalk?.bench === 'function', null, { timeout: 60_000 });
  await page.goto(`${PAGE_URL}tfjs/bench.html`);
  console.log(`Chromium ${browser.version()}, ${STEPS} timed steps per size (median), Adam, CPU`);
  console.log(`${'size'.padEnd(8)}${'TF.js wasm ms'.padStart(15)}${'ours 1 worker'.padStart(15)}${'ours 2 workers'.padStart(16)}`
    + `${'ours GFLOP/s'.padStart(14)}${'TF.js / ours 1w'.padStart(17)}${'TF.js / ours best'.padStart(19)}`
    + `${'native 1t ms'.padStart(14)}${'ours 1w / native 1t'.padStart(21)}${'native ms'.padStart(11)}${'ours best / native'.padStart(20)}`);
  for (const name of NAMES) {
    const s = SIZES[name];
    if (!s) throw new Error(`unknown size ${name} (page, tiny, small, medium)`);
    // Alternating, so a busy moment of the machine falls on both.
    const theirs = await page.evaluate(tfjsBench, { ...s, steps: STEPS });
    if (theirs.backend !== 'wasm' || !theirs.simd) throw new Error(`TF.js ran on ${JSON.stringify(theirs)}`);
    const spec = { d_model: s.d, layers: s.layers, heads: s.heads, context: s.t, batch: s.b, steps: STEPS };
    const one = await ours.evaluate((x) => window.spherewalk.bench(x), { ...spec, workers: 1 });
    const best = await ours.evaluate((x) => window.spherewalk.bench(x), { ...spec, workers: 0 });
    const lab = (args) => JSON.parse(execFileSync(LAB, [...args, 'bench', '--json', '--spec', JSON.stringify(spec)], { encoding: 'utf8' }));
    const native1 = lab(['--threads', '1']);
    const native = lab([]);
    const oursBest = Math.min(one.ms_per_step, best.ms_per_step);
    console.log(`${name.padEnd(8)}${theirs.ms_per_step.toFixed(1).padStart(15)}${one.ms_per_step.toFixed(1).padStart(15)}`
      + `${(best.workers === 2 ? best.ms_per_step.toFixed(1) : '-').padStart(16)}${best.gflops.toFixed(1).padStart(14)}`
      + `${(theirs.ms_per_step / one.ms_per_step).toFixed(2).padStart(17)}`
      + `${(theirs.ms_per_step / oursBest).toFixed(2).padStart(19)}`
      + `${native1.ms_per_step.toFixed(2).padStart(14)}${(one.ms_per_step / native1.ms_per_step).toFixed(2).padStart(21)}`
      + `${native.ms_per_step.toFixed(2).padStart(11)}${(oursBest / native.ms_per_step).toFixed(2).padStart(20)}`
      + (theirs.threads ? '  (TF.js multithreaded)' : ''));
  }
} finally {
  await browser.close();
}
