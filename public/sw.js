// Spherewalk's service worker: after one visit the page works offline.
//
// This file is a template: `cargo xtask dist` (xtask/src/dist.rs) writes the build's id and the
// list of its files into the copy in dist/. The worker keeps one build whole in one cache: a new
// build installs beside it and waits until the page's "A new version of the lab is ready" line is
// pressed (the page then reloads) or every tab of the lab is closed, so a page never runs half of
// one build and half of another. Models fetched from a hub are not this worker's: the page keeps
// them in its own cache.
const BUILD = '__SPHEREWALK_BUILD__';
const FILES = ["__SPHEREWALK_FILES__"];
const PREFIX = 'spherewalk-page-';
const CACHE = PREFIX + BUILD;
const SCOPE = new URL('./', self.location).href;
// The model worker is for the model mode only: kept when first used, not fetched on every first visit.
const LATER = (f) => f.startsWith('reader');

self.addEventListener('install', (event) => {
  // Revalidated, never taken from the HTTP cache as it is: an unhashed file (worker_bg.wasm) of
  // an earlier build must not enter this one. A file the server still has costs a 304.
  const requests = FILES.filter((f) => !LATER(f)).map((f) => new Request(f, { cache: 'no-cache' }));
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(requests)));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key.startsWith(PREFIX) && key !== CACHE) await caches.delete(key);
    }
    // The first visit's page is served by this build from now on (offline after one visit).
    await self.clients.claim();
  })());
});

self.addEventListener('message', (event) => {
  if (event.data === 'take-new-build') self.skipWaiting();
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET' || !request.url.startsWith(SCOPE)) return;
  let path = request.url.slice(SCOPE.length).split(/[?#]/)[0];
  if (path === '') path = 'index.html';
  // Anything else (a model under ?hub=, a file of another site) goes to the network as usual.
  if (!FILES.includes(path)) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    const hit = await cache.match(path);
    // A worker's address keeps its query (`worker_loader.js?worker=reader`): a cached response
    // would give the worker the cached URL, without it, so the copy is handed over as a new
    // response, which takes the request's URL.
    if (hit) return request.url.includes('?') ? new Response(hit.body, hit) : hit;
    const response = await fetch(request);
    if (response.ok && LATER(path)) await cache.put(path, response.clone());
    return response;
  })());
});
