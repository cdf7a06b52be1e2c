// The sphere and the chain: labels, arcs, playback, heatmap hover and verdicts; the 2-D canvas
// fallback without WebGL2.
// Shared helpers and how to run: helpers.mjs.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  ARTIFACTS, CHROMIUM_FLAGS, launch, textOf, open, waitPhase, inkOf, stepTo, labTrain, rel,
} from './helpers.mjs';

test('the sphere and the chain: labels, arcs = the engine attention row, great-circle playback, heatmap hover, verdicts that follow the data', { timeout: 240_000 }, async (t) => {
  const { page, problems } = await launch(t);
  await page.setViewportSize({ width: 1280, height: 800 });
  await open(page, '');
  assert.equal(await page.getAttribute('#sphere', 'data-empty'), 'Press Start or Step to see the tokens');
  await page.selectOption('#pace', '0');
  await page.click('#start');
  await waitPhase(page, ['done'], 120_000);
  const data = (name) => page.evaluate((n) => document.getElementById('sphere').dataset[n], name);
  const nums = (s) => (s ? s.split(',').map(Number) : []);
  const tokens = Number(await data('points'));
  assert.equal(tokens, 32, 'one point per probe token');
  // Labels where they fit, none covering another (the rest are named on hover: model-student.test.mjs).
  const labelled = nums(await data('labelled'));
  assert.equal(Number(await data('labels')), labelled.length);
  assert.ok(labelled.length >= tokens / 2 && labelled.length <= tokens, `${labelled.length} of ${tokens} tokens labelled`);
  assert.match(await textOf(page, '#sphere-legend'), /vowel.*consonant.*␣ space, ↵ newline/s, 'the legend names the colours and glyphs');
  await page.selectOption('#color-by', 'position');
  assert.match(await textOf(page, '#sphere-legend'), /position 0\s+31/, 'colour by position has its legend too');
  await page.selectOption('#color-by', 'kind');

  // In 3-D on WebGL2: the dot at the nearest token's place has its kind's colour (Okabe-Ito), lit.
  // This browser draws WebGL in software, so the page starts on the 2-D canvas and says so.
  assert.match(await data('renderer'), /^canvas 2d \(WebGL is drawn in software here/);
  await page.check('#webgl-anyway');
  await page.waitForFunction(() => document.getElementById('sphere').dataset.renderer === 'webgl2', null, { timeout: 10_000 });
  // The renderer is named before its first frame: the places and the pixel are read from a frame it drew.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 200)))));
  const screen = nums(await data('screen'));
  // The nearest token whose dot no label covers (labels are drawn over the dots).
  const boxes = nums(await data('labelBoxes'));
  const covered = (x, y) => Array.from({ length: boxes.length / 4 }, (_, i) => boxes.slice(4 * i, 4 * i + 4))
    .some(([bx, by, bw, bh]) => x >= bx - 3 && x <= bx + bw + 3 && y >= by - 3 && y <= by + bh + 3);
  // ... and no nearer dot hides.
  const hidden = (i) => Array.from({ length: tokens }, (_, j) => j)
    .some((j) => screen[3 * j + 2] > screen[3 * i + 2] && Math.hypot(screen[3 * j] - screen[3 * i], screen[3 * j + 1] - screen[3 * i + 1]) < 12);
  const front = Array.from({ length: tokens }, (_, i) => i)
    .filter((i) => !covered(screen[3 * i], screen[3 * i + 1]) && !hidden(i))
    .reduce((a, b) => (screen[3 * b + 2] > screen[3 * a + 2] ? b : a));
  const symbol = (await page.locator(`#sphere-token option[value="${front}"]`).textContent()).replace(/^\d+: /, '');
  const kinds = { vowel: [0xe6, 0x9f, 0x00], consonant: [0x00, 0x72, 0xb2], space: [0x00, 0x9e, 0x73], punctuation: [0xd5, 0x5e, 0x00], digit: [0xcc, 0x79, 0xa7], other: [0x56, 0xb4, 0xe9] };
  const kind = /^[aeiouy]$/i.test(symbol) ? 'vowel' : /^\p{L}$/u.test(symbol) ? 'consonant' : /^[␣↵⇥]$/.test(symbol) ? 'space' : /^\d$/.test(symbol) ? 'digit' : /^[!-/:-@[-`{-~]$/.test(symbol) ? 'punctuation' : 'other';
  const pixel = await page.evaluate(([x, y]) => {
    const c = document.getElementById('sphere');
    const s = c.width / c.clientWidth;
    return Array.from(c.getContext('2d').getImageData(Math.round(x * s), Math.round(y * s), 1, 1).data).slice(0, 3);
  }, [screen[3 * front], screen[3 * front + 1]]);
  const nearest = Object.entries(kinds).map(([k, c]) => [k, Math.hypot(...c.map((v, i) => v - pixel[i]))]).sort((a, b) => a[1] - b[1])[0][0];
  assert.equal(nearest, kind, `the nearest token ('${symbol}', ${kind}) is drawn in its colour at its place (pixel ${pixel})`);
  // Clicking a dot follows that token.
  const sphereBox = await page.locator('#sphere').boundingBox();
  await page.mouse.click(sphereBox.x + 1 + screen[3 * front], sphereBox.y + 1 + screen[3 * front + 1]);
  assert.equal(await data('selected'), String(front), 'a click on a dot selects its token');

  // The arcs of a selected token are its row of P^k, computed here from the engine's matrix.
  const rowOf = async (layer, head, k, i) =>
    page.evaluate(([l, h, k, i]) => {
      const p = Array.from(window.spherewalk.testing.attention(l, h));
      const n = Math.round(Math.sqrt(p.length));
      let row = p.slice(i * n, (i + 1) * n);
      for (let s = 1; s < k; s++) row = row.map((_, j) => row.reduce((acc, v, m) => acc + v * p[m * n + j], 0));
      return row;
    }, [layer, head, k, i]);
  await page.selectOption('#sphere-token', '9');
  for (const [layer, head, k] of [[0, 0, 1], [1, 2, 3]]) {
    await page.evaluate(([l, h, k]) => {
      for (const [id, v] of [['att-layer', l], ['att-head', h], ['att-k', k]]) {
        const e = document.getElementById(id);
        e.value = String(v);
        e.dispatchEvent(new Event('input', { bubbles: true }));
      }
    }, [layer, head, k]);
    await page.waitForTimeout(200);
    const drawn = nums(await data('arcRow'));
    const engine = await rowOf(layer, head, k, 9);
    assert.equal(drawn.length, tokens);
    const worst = Math.max(...drawn.map((v, j) => Math.abs(v - engine[j])));
    assert.ok(worst < 1e-5, `layer ${layer} head ${head} k ${k}: the arcs are the engine's row (max diff ${worst})`);
    const expectedArcs = engine.filter((v, j) => j !== 9 && v >= 0.01).length;
    assert.equal(Number(await data('arcs')), expectedArcs, 'one arc per token with P_ij >= 0.01');
    t.diagnostic(`token 9, layer ${layer}, head ${head}, k ${k}: ${expectedArcs} arcs`);
  }
  assert.match(await textOf(page, '#sphere-note'), /Arcs: where token 9 looks in layer 1, head 2, after 3 steps/);
  await page.locator('#panel-sphere').screenshot({ path: join(ARTIFACTS, 'panel-sphere-chain.png') });
  // The keyboard follows the next token; Escape lets go.
  await page.focus('#sphere');
  await page.keyboard.press(']');
  assert.equal(await data('selected'), '10');
  await page.keyboard.press('Escape');
  assert.equal(await data('selected'), '');
  assert.equal(Number(await data('arcs')), 0);

  // Between two recorded frames the tokens move along great circles and arrive at the next frame.
  const steps = await page.evaluate(() => window.spherewalk.testing.frameSteps());
  assert.ok(steps.length >= 50, `frames recorded often (${steps.length} over 400 steps)`);
  const k = Math.floor(steps.length / 2);
  const at = async (s) => {
    await page.evaluate((v) => {
      const e = document.getElementById('time');
      e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
    }, s);
    return nums(await data('positions'));
  };
  const [a, mid, almost, b] = [await at(steps[k]), await at((steps[k] + steps[k + 1]) / 2), await at(steps[k + 1] - 1e-3), await at(steps[k + 1])];
  const norms = (xs) => Array.from({ length: xs.length / 3 }, (_, i) => Math.hypot(xs[3 * i], xs[3 * i + 1], xs[3 * i + 2]));
  const moved = (x, y) => Math.max(...x.map((v, i) => Math.abs(v - y[i])));
  assert.ok(norms(mid).every((n) => Math.abs(n - 1) < 1e-5), 'half way, every token is on the sphere');
  assert.ok(moved(a, b) > 1e-4 && moved(mid, a) > 0 && moved(mid, b) > 0, 'half way is between the frames');
  assert.ok(moved(almost, b) <= 1e-3 * moved(a, b) + 1e-6, `the path ends at the next frame (${moved(almost, b)} left of ${moved(a, b)})`);
  assert.equal(Number(await data('shownStep')), steps[k + 1]);
  // Play runs through the history by itself; Live returns to the end.
  await at(steps[0]);
  await page.click('#sphere-play');
  await page.waitForFunction((s) => Number(document.getElementById('sphere').dataset.shownStep) > s + 5, steps[0], { timeout: 10_000 });
  await page.click('#sphere-play');
  assert.match(await textOf(page, '#sphere-play'), /Play/);
  await page.click('#time-live');

  // The heatmap: token labels, a colour scale and the exact P_ij under the pointer.
  await page.evaluate(() => {
    for (const [id, v] of [['att-layer', 0], ['att-head', 1], ['att-k', 1]]) {
      const e = document.getElementById(id);
      e.value = String(v);
      e.dispatchEvent(new Event('input', { bubbles: true }));
    }
  });
  await page.waitForTimeout(200);
  const [x0, y0, cell] = (await page.getAttribute('#attention', 'data-grid')).split(',').map(Number);
  const box = await page.locator('#attention').boundingBox();
  const [i, j] = [12, 4];
  await page.mouse.move(box.x + 1 + x0 + (j + 0.5) * cell, box.y + 1 + y0 + (i + 0.5) * cell);
  await page.waitForFunction(() => document.getElementById('attention').dataset.hoverP !== '', null, { timeout: 5_000 });
  const hovered = Number(await page.getAttribute('#attention', 'data-hover-p'));
  const p = await page.evaluate(([i, j]) => window.spherewalk.testing.attention(0, 1)[i * 32 + j], [i, j]);
  assert.ok(Math.abs(hovered - p) < 1e-6, `the hover shows the engine's P_12,4 (${hovered} vs ${p})`);
  assert.match(await textOf(page, '#attention-hover'), /token 12 '.+' looks at token 4 '.+' with probability P = \d\.\d{4}/);
  await page.locator('#panel-attention').screenshot({ path: join(ARTIFACTS, 'panel-attention-hover.png') });
  // The cells are the engine's matrix: at each cell's centre the colour's lightness ranks the
  // cells as P_ij does (viridis grows lighter with the value; a transposed or shifted matrix, or
  // another head's, ranks them otherwise), the zero cells above the causal diagonal are one colour,
  // and the largest P_ij is the lightest cell.
  const cells = await page.evaluate(([x0, y0, cell]) => {
    const c = document.getElementById('attention');
    const s = c.width / c.clientWidth;
    const img = c.getContext('2d').getImageData(0, 0, c.width, c.height);
    const p = Array.from(window.spherewalk.testing.attention(0, 1));
    const n = Math.round(Math.sqrt(p.length));
    const out = [];
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const [x, y] = [Math.round((x0 + (j + 0.5) * cell) * s), Math.round((y0 + (i + 0.5) * cell) * s)];
        const k = 4 * (y * img.width + x);
        const [r, g, b] = [img.data[k], img.data[k + 1], img.data[k + 2]];
        out.push({ i, j, p: p[i * n + j], light: 0.2126 * r + 0.7152 * g + 0.0722 * b, rgb: `${r},${g},${b}` });
      }
    }
    return out;
  }, [x0, y0, cell]);
  const rank = (xs) => {
    const order = xs.map((x, i) => [x, i]).sort((a, b) => a[0] - b[0]);
    const r = new Array(xs.length);
    for (let a = 0; a < order.length; ) {
      let b = a;
      while (b + 1 < order.length && order[b + 1][0] === order[a][0]) b++;
      for (let k = a; k <= b; k++) r[order[k][1]] = (a + b) / 2;
      a = b + 1;
    }
    return r;
  };
  const spearman = (xs, ys) => {
    const [rx, ry] = [rank(xs), rank(ys)];
    const m = (rx.length - 1) / 2;
    const dot = rx.reduce((acc, v, k) => acc + (v - m) * (ry[k] - m), 0);
    const sx = Math.sqrt(rx.reduce((acc, v) => acc + (v - m) ** 2, 0));
    const sy = Math.sqrt(ry.reduce((acc, v) => acc + (v - m) ** 2, 0));
    return dot / (sx * sy);
  };
  const rho = spearman(cells.map((c) => c.p), cells.map((c) => c.light));
  t.diagnostic(`heatmap: rank correlation of cell lightness with the engine's P_ij: ${rho.toFixed(4)} over ${cells.length} cells`);
  assert.ok(rho > 0.98, `the heatmap's cells rank as the engine's P does (Spearman ${rho})`);
  const zeros = new Set(cells.filter((c) => c.j > c.i).map((c) => c.rgb));
  assert.equal(zeros.size, 1, 'every cell above the causal diagonal has the colour of P = 0');
  const top = cells.reduce((a, b) => (b.p > a.p ? b : a));
  assert.ok(cells.every((c) => c.light <= top.light + 1e-9), `the largest P (${top.i},${top.j}) is the lightest cell`);

  // A verdict in words beside every science panel, and it follows the data: the same preset early
  // in training (a steady spread) and at its end (a jump, then a plateau).
  for (const id of ['verdict-sphere', 'verdict-markov', 'verdict-brownian']) assert.ok((await textOf(page, `#${id}`)).length > 40, `#${id} says it in words`);
  const brownianAfter = async (steps) => {
    await open(page, '#s=' + encodeURIComponent(JSON.stringify({ preset: 'brownian', steps, steps_per_second: 0 })));
    await page.click('#start');
    await waitPhase(page, ['done'], 120_000);
    await page.waitForFunction(() => (document.getElementById('verdict-brownian')?.textContent ?? '').length > 20, null, { timeout: 10_000 });
    return textOf(page, '#verdict-brownian .verdict-sentence');
  };
  const [early, late] = [await brownianAfter(12), await brownianAfter(300)];
  t.diagnostic(`Brownian verdict after 12 steps: ${early}`);
  t.diagnostic(`Brownian verdict after 300 steps: ${late}`);
  assert.notEqual(early.split('.')[0], late.split('.')[0], 'the verdict changes with the data');
  // The entropy chart plots the engine's curves: each layer's first, lowest and last point are
  // the run summary's initial, min and final.
  const plotted = JSON.parse(await page.getAttribute('#entropy-chart', 'data-values'));
  const engineSummary = await page.evaluate(() => window.spherewalk.testing.summary());
  assert.equal(plotted.length, engineSummary.entropy.length, 'one curve per layer');
  for (const [l, curve] of plotted.entries()) {
    const e = engineSummary.entropy[l];
    const ys = curve.map(([, y]) => y);
    const got = { initial: ys[0], min: Math.min(...ys), final: ys[ys.length - 1] };
    for (const k of ['initial', 'min', 'final']) assert.ok(Math.abs(got[k] - e[k]) < 1e-6, `layer ${l} entropy ${k}: chart ${got[k]}, engine ${e[k]}`);
    assert.equal(curve[curve.length - 1][0], engineSummary.steps, `layer ${l}'s curve ends at the last step`);
  }
  assert.match(late, /Not Brownian: the tokens move in one jump early in training and then stay put.*R² = -?[\d.]+ is below 0.*critical value/);
  // Brownian motion or particles: fitted once the run has ended, the same fit as `lab train
  // --flow`, and the particles drawn as diamonds beside the ghosts.
  await page.waitForFunction(() => document.getElementById('brownian-flow')?.dataset.better, null, { timeout: 30_000 });
  const flowAttr = await page.evaluate(() => ({ ...document.getElementById('brownian-flow').dataset }));
  const flowText = await textOf(page, '#verdict-flow .verdict-sentence');
  // Each verdict says with which paper's claim it agrees or not.
  assert.match(await textOf(page, '#verdict-brownian .verdict-label'), /^(Agrees with|Partly agrees with|Disagrees with) the Brownian paper \(tokens move like Brownian motion\)\.$/);
  t.diagnostic(`particles or Brownian: ${flowText}`);
  assert.match(flowText, /^(Brownian motion, not particles|Particles, not Brownian motion|Brownian motion comes closer than the particles' flow, but neither fits well).*Root-mean-square error/);
  // Never "Not Brownian" above a plain "Brownian motion fits better": the two answers read together.
  if (/^Not Brownian/.test(late)) assert.doesNotMatch(flowText, /^Brownian motion, not particles/);
  assert.equal(await page.getAttribute('#verdict-flow', 'data-settled'), 'true', 'the flow is fitted on the ended run: final');
  const flowDepth = Number(flowAttr.depth);
  const native = labTrain(await page.evaluate(() => window.spherewalk.experiment()), ['--flow', String(flowDepth)]).summary.flow;
  t.diagnostic(`lab train --flow ${flowDepth}: RMSE Brownian ${native.rmse_brownian}, particles ${native.rmse_particles} (beta ${native.beta}); page ${flowAttr.rmseBrownian}, ${flowAttr.rmseParticles} (beta ${flowAttr.beta})`);
  assert.equal(flowAttr.better, native.better, 'the page and the CLI name the same better model');
  for (const [page_, lab_, what] of [[flowAttr.rmseBrownian, native.rmse_brownian, 'Brownian RMSE'], [flowAttr.rmseParticles, native.rmse_particles, 'particles RMSE']]) {
    assert.ok(rel(Number(page_), lab_) < 0.05, `${what}: page ${page_}, lab ${lab_}`);
  }
  assert.ok(Math.abs(Math.log(Number(flowAttr.beta) / native.beta)) < 0.2, `beta: page ${flowAttr.beta}, lab ${native.beta}`);
  assert.equal(Number(await page.getAttribute('#brownian-flow-chart', 'data-points')), native.times.length);
  if (Number(await page.getAttribute('#sphere', 'data-ghosts')) > 0) {
    assert.equal(Number(await page.getAttribute('#sphere', 'data-particles')), native.points, 'one diamond per fitted token');
  }
  await page.locator('#panel-brownian').screenshot({ path: join(ARTIFACTS, 'panel-brownian.png') });
  assert.deepEqual(problems, [], 'no console errors or exceptions');
});

test('without WebGL2 the sphere falls back to the 2-D canvas and shows the same tokens', { timeout: 120_000 }, async (t) => {
  const { page, problems } = await launch(t, { args: [...CHROMIUM_FLAGS, '--disable-3d-apis'] });
  await open(page, '');
  await page.click('#step-once');
  await stepTo(page, 1, 30_000);
  await page.waitForFunction(() => Number(document.getElementById('sphere').dataset.points) === 32, null, { timeout: 10_000 });
  assert.match(await page.getAttribute('#sphere', 'data-renderer'), /^canvas 2d \(.*WebGL2/);
  assert.equal(Number(await page.getAttribute('#sphere', 'data-labels')), 32);
  assert.ok((await inkOf(page, '#sphere')) > 2000, 'the ball and its dots are drawn');
  assert.deepEqual(problems.filter((p) => !/WebGL|GPU/i.test(p)), [], 'no console errors or exceptions');
});
