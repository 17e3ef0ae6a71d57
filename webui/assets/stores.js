// stores.js: the stores page, /stores: each store's state, time range,
// spans, traces, chunks, bytes, compression and health, quarantined stores
// with their reason when the daemon reports them, and the ingest rate
// measured from /metrics (refreshed every few seconds while the page is
// open).
import * as api from './api.js';
import { el, errorBox, fmtLocal, fmtUTC, nsToDate, fmtInt, fmtBytes } from './util.js';

const REFRESH_MS = 3000;

// Times before 2000 are not wall-clock times (a writer's monotonic clock, a
// timebase of 0): shown as such, as `ztsctl stores` does, not as 1970.
const wallClockStartNS = 946684800000000000;

function when(ns) {
  if (!ns) return '—';
  if (ns < wallClockStartNS) return el('span', { title: `${ns} ns from an unknown origin` }, 'no wall clock');
  const d = nsToDate(ns);
  return el('span', { title: fmtUTC(d) }, fmtLocal(d));
}

// States of stores the daemon does not serve (storedir's quarantine).
const outOfService = { quarantined: 'bad', rebuilding: 'warn', orphaned: 'warn' };

function health(s) {
  if (outOfService[s.state] || s.reason) return el('span', { class: outOfService[s.state] || 'bad', title: s.reason || '' }, s.state || 'not served');
  if (s.index_lag_bytes > 0) return el('span', { class: 'warn' }, `re-indexing (${fmtBytes(s.index_lag_bytes)} behind)`);
  return el('span', { class: 'ok' }, 'ok');
}

let timer = 0;

export async function render(app) {
  document.title = 'Stores · ztsd';
  clearInterval(timer);
  const rate = el('span', { id: 'ingest-rate' }, 'measuring…');
  const totals = el('div', { class: 'facts' });
  const table = el('div', { id: 'stores' }, el('p', { class: 'loading' }, 'Loading stores…'));
  const quarantine = el('div', { id: 'quarantine' });
  app.replaceChildren(el('div', { class: 'stores-page' },
    el('h1', null, 'Stores'), totals,
    el('p', null, 'Ingest rate: ', rate, el('span', { class: 'hint' }, ' (spans acknowledged per second, from /metrics)')),
    table, quarantine));
  let last = null;
  const refresh = async () => {
    if (!document.body.contains(table)) { clearInterval(timer); return; }
    try {
      const [body, m] = await Promise.all([api.stores(), api.metrics().catch(() => null)]);
      draw(body);
      if (m) {
        const now = { t: performance.now(), spans: m.get('ztsd_ingest_spans_total') || 0, reqs: m.get('ztsd_ingest_requests_total') || 0 };
        if (last) {
          const dt = (now.t - last.t) / 1000;
          rate.textContent = `${fmtInt(Math.round((now.spans - last.spans) / dt))} spans/s, ${((now.reqs - last.reqs) / dt).toFixed(1)} requests/s`;
        } else {
          rate.textContent = `measuring… (${fmtInt(now.spans)} spans acknowledged since start)`;
        }
        last = now;
      } else {
        rate.textContent = 'not available (no access to /metrics)';
      }
    } catch (err) {
      table.replaceChildren(errorBox(err.message));
    }
  };
  const draw = (body) => {
    const list = body.stores || [];
    const sum = (k) => list.reduce((s, x) => s + (x[k] || 0), 0);
    totals.replaceChildren(
      fact('Stores', fmtInt(list.length)), fact('Spans', fmtInt(sum('spans'))), fact('Traces', fmtInt(sum('traces'))),
      fact('On disk', fmtBytes(sum('bytes'))));
    if (!list.length) {
      table.replaceChildren(el('p', { class: 'empty' }, 'No stores yet: nothing has been written.'));
    } else {
      table.replaceChildren(el('table', { class: 'store-table' },
        el('thead', null, el('tr', null, ['Store', 'State', 'First trace', 'Last trace', 'Spans', 'Traces', 'Chunks', 'Size', 'Compression', 'Checksums', 'Health']
          .map((h, i) => el('th', { class: i >= 4 && i <= 7 ? 'num' : null }, h)))),
        el('tbody', null, list.map((s) => el('tr', { class: 'store' },
          el('td', { class: 'mono' }, storeName(s)), el('td', null, s.location === 'remote' ? s.state + ', in the bucket' : s.state),
          el('td', null, when(s.first_ns)), el('td', null, when(s.last_ns)),
          el('td', { class: 'num' }, fmtInt(s.spans)), el('td', { class: 'num' }, fmtInt(s.traces)), el('td', { class: 'num' }, fmtInt(s.chunks)),
          el('td', { class: 'num' }, fmtBytes(s.bytes)), el('td', null, s.compression || '—'),
          el('td', null, s.checksums === undefined || !s.compression ? '—' : s.checksums ? 'CRC32' : 'off'), el('td', null, health(s)))))));
    }
    const q = list.filter((s) => outOfService[s.state] || s.reason);
    quarantine.replaceChildren(...(q.length ? [el('h2', null, 'Stores not served'), el('table', { class: 'store-table', id: 'quarantined' },
      el('thead', null, el('tr', null, el('th', null, 'Store'), el('th', null, 'State'), el('th', null, 'Reason'))),
      el('tbody', null, q.map((s) => el('tr', null, el('td', { class: 'mono' }, storeName(s)), el('td', null, health(s)), el('td', null, s.reason || '')))))] : []));
  };
  await refresh();
  timer = setInterval(refresh, REFRESH_MS);
}

// storeName names a store read from a bucket node/id: ids repeat across
// the nodes a query node serves.
function storeName(s) {
  return s.node ? s.node + '/' + s.id : s.id;
}

function fact(label, value) {
  return el('div', { class: 'fact' }, el('span', { class: 'k' }, label), el('span', { class: 'v' }, value));
}
