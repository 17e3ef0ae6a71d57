// app.js: the router. Every page path serves the same shell; this module
// picks the page module by path, and shows any error a page throws as a
// message in the page (never a blank page).
import { el, errorBox } from './util.js';

const pages = [
  { re: /^\/(search)?$/, nav: 'search', load: () => import('./search.js') },
  { re: /^\/trace\/([^/]*)$/, nav: 'search', load: () => import('./trace.js') },
  { re: /^\/stores$/, nav: 'stores', load: () => import('./stores.js') },
];

async function route() {
  const app = document.getElementById('app');
  const path = location.pathname;
  const page = pages.find((p) => p.re.test(path));
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', page && a.dataset.nav === page.nav);
  }
  if (!page) {
    app.replaceChildren(errorBox(`No page at ${path}.`, el('a', { href: '/search' }, 'Search traces')));
    return;
  }
  const m = path.match(page.re);
  try {
    const mod = await page.load();
    await mod.render(app, { params: new URLSearchParams(location.search), arg: m[1] ? decodeURIComponent(m[1]) : '' });
  } catch (err) {
    console.error(err);
    app.replaceChildren(errorBox(String(err && err.message ? err.message : err)));
  }
}

document.getElementById('goto').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const id = ev.target.elements.id.value.trim();
  if (id) location.href = '/trace/' + encodeURIComponent(id);
});
window.addEventListener('popstate', route);
route();
