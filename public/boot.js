// What the page does before its wasm runs, in plain JavaScript:
// - opened from the disk (file://), it says why the lab cannot run so and how to serve it;
// - it registers the service worker (sw.js) that keeps this build for offline use, and tells the
//   page when a new build is ready (`spherewalk-update` on window; `spherewalkBoot.update()`
//   takes it: the new build replaces this one and the page reloads, never a mix of the two).
(() => {
  if (location.protocol === 'file:') {
    document.documentElement.dataset.file = 'yes';
    addEventListener('DOMContentLoaded', () => {
      document.body.innerHTML = `<main class="lab file-page">
        <h1>Spherewalk</h1>
        <p id="file-page">This page was opened from the disk (a <code>file://</code> address). A browser does not
        run the lab's WebAssembly from there: it has to come from a web server, even one on your own computer.</p>
        <p>In this folder, run <code>python3 -m http.server 8000</code> and open
        <a href="http://localhost:8000/">http://localhost:8000/</a>; or upload the folder to any web space;
        or, in the repository, run <code>cargo xtask serve</code>.</p>
      </main>`;
    });
    return;
  }
  const boot = (window.spherewalkBoot = { offline: false, updateReady: false, update() {} });
  const say = (name) => dispatchEvent(new Event(name));
  if (!('serviceWorker' in navigator) || document.querySelector('meta[name=spherewalk-build][content=unsealed]')) {
    return;
  }
  let reloading = false;
  navigator.serviceWorker.addEventListener('controllerchange', () => {
    if (boot.taking && !reloading) {
      reloading = true;
      location.reload();
    }
  });
  navigator.serviceWorker.register('./sw.js').then((registration) => {
    // (A browser that blocks service workers may answer with no registration.)
    if (!registration) return undefined;
    const waiting = () => {
      if (registration.waiting && navigator.serviceWorker.controller) {
        boot.updateReady = true;
        boot.update = () => {
          boot.taking = true;
          registration.waiting.postMessage('take-new-build');
        };
        say('spherewalk-update');
      }
    };
    waiting();
    registration.addEventListener('updatefound', () => {
      const installing = registration.installing;
      installing?.addEventListener('statechange', () => {
        if (installing.state === 'installed') waiting();
      });
    });
    return navigator.serviceWorker.ready;
  }).then((ready) => {
    if (!ready) return;
    // Offline once this page itself is served by the worker (it claims the page on activation).
    const offline = () => {
      boot.offline = true;
      say('spherewalk-offline');
    };
    if (navigator.serviceWorker.controller) offline();
    else navigator.serviceWorker.addEventListener('controllerchange', offline, { once: true });
  }).catch((e) => console.warn('Spherewalk: no offline copy:', e));
})();
