// Starts one of the page's workers: `worker_loader.js` runs the training worker (worker.js and
// worker_bg.wasm, built by Trunk from app/src/bin/worker.rs), `?worker=NAME` another of Trunk's
// workers (NAME.js and NAME_bg.wasm). With `&progress` in its address it
// tells the page how much of the engine has arrived ({loading: {got, total}}), so the page says
// "loading the engine (x of y MB)" instead of seeming to train; a file that cannot be loaded is
// said as the worker's crash ({crashed: why}), which the page shows with a way to try again.
//
// `cargo xtask dist` writes each worker's wasm size below: a host that compresses its files sends
// a length that is not the file's.
const WASM_SIZES = {};
const params = new URLSearchParams(self.location.search);
const NAME = /^[a-z]+$/.test(params.get('worker') ?? '') ? params.get('worker') : 'worker';
const progress = params.has('progress');

(async () => {
  const wasm = `./${NAME}_bg.wasm`;
  try {
    importScripts(`./${NAME}.js`);
    // At once, so the page shows the size before the first bytes arrive.
    if (progress) self.postMessage({ loading: { got: 0, total: WASM_SIZES[`${NAME}_bg.wasm`] || 0 } });
    let response = await fetch(wasm);
    if (!response.ok) throw new Error(`the server answered ${response.status} for ${wasm}`);
    if (progress && response.body) {
      const encoded = response.headers.has('Content-Encoding');
      const total = WASM_SIZES[`${NAME}_bg.wasm`] || (!encoded && Number(response.headers.get('Content-Length'))) || 0;
      let got = 0;
      let said = 0;
      const counted = response.body.pipeThrough(new TransformStream({
        transform(chunk, out) {
          got += chunk.byteLength;
          // About every 64 KB: enough for a smooth bar, few messages.
          if (got - said >= 65536 || got === total) {
            said = got;
            self.postMessage({ loading: { got, total } });
          }
          out.enqueue(chunk);
        },
      }));
      // Still a wasm Response, so the browser compiles while it downloads.
      response = new Response(counted, { headers: { 'Content-Type': 'application/wasm' } });
    }
    await wasm_bindgen({ module_or_path: response });
  } catch (e) {
    self.postMessage({ crashed: `the engine (${wasm}) could not be loaded: ${e && e.message ? e.message : e}` });
  }
})();
