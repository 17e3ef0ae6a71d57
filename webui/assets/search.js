// search.js: the search page, /search?…. The URL holds the whole query, so
// a search is a link; the form writes the URL and the page renders from it.
//
// URL parameters: service (a name from /v1/services: a service.name, or
// an imported source file), source and thread (attribute pickers), op (an
// operation: a span's root record method, matched exactly by the daemon's
// operation=), attr=key:value (repeatable), text, min and max (durations
// like 5ms, the daemon's min_duration= and max_duration=), errors=true,
// range (15m … 7d, all or custom) with since/until (ISO times) for
// custom, limit, cursor, page.
//
// A result row is a trace: its root span's name, service and counts and
// the trace's span count and duration come from the search answer's
// "traces" (one per result); the matching span stands in for a trace
// whose root span is not stored.
import * as api from './api.js';
import { el, errorBox, fmtDur, fmtLocal, fmtUTC, nsToDate, fmtInt } from './util.js';

const pickers = [
  { param: 'source', key: 'source.format', label: 'Source format' },
  { param: 'thread', key: 'thread', label: 'Thread' },
];
const ranges = [['all', 'Any time'], ['15m', 'Last 15 minutes'], ['1h', 'Last hour'], ['3h', 'Last 3 hours'],
  ['6h', 'Last 6 hours'], ['12h', 'Last 12 hours'], ['24h', 'Last 24 hours'], ['2d', 'Last 2 days'],
  ['7d', 'Last 7 days'], ['custom', 'Absolute range…']];
const rangeNS = { '15m': 900e9, '1h': 3600e9, '3h': 3 * 3600e9, '6h': 6 * 3600e9, '12h': 12 * 3600e9, '24h': 86400e9, '2d': 2 * 86400e9, '7d': 7 * 86400e9 };
const limits = [20, 50, 100, 500];

// parseDuration turns "5ms", "1.5s", "250us" or plain nanoseconds into ns.
export function parseDuration(s) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|min|h)?\s*$/.exec(s);
  if (!m) return null;
  const mult = { ns: 1, us: 1e3, 'µs': 1e3, ms: 1e6, s: 1e9, m: 60e9, min: 60e9, h: 3600e9 }[m[2] || 'ns'];
  return Math.round(Number(m[1]) * mult);
}

// apiQuery maps the page's URL parameters onto /v1/search parameters, or
// throws an Error naming the bad parameter.
export function apiQuery(p, services) {
  const q = new URLSearchParams();
  if (p.get('service')) {
    const svc = (services || []).find((s) => s.name === p.get('service'));
    if (!svc) q.append('attr', `service.name:${p.get('service')}`);
    else if (svc.attrs) for (const [k, v] of Object.entries(svc.attrs)) q.append('attr', `${k}:${v}`);
    else q.append('attr', `${svc.attr}:${svc.value}`);
  }
  for (const pk of pickers) if (p.get(pk.param)) q.append('attr', `${pk.key}:${p.get(pk.param)}`);
  for (const a of p.getAll('attr')) {
    if (!a.includes(':') || a.startsWith(':')) throw new Error(`attribute filter "${a}": want key:value`);
    q.append('attr', a);
  }
  if (p.get('op')) q.set('operation', p.get('op'));
  if (p.get('text')) q.set('text', p.get('text'));
  let minNS = 0;
  if (p.get('min')) {
    minNS = parseDuration(p.get('min'));
    if (minNS === null) throw new Error(`min duration "${p.get('min')}": want a duration like 5ms, 1.5s or 250us`);
    q.set('min_duration', String(minNS));
  }
  if (p.get('max')) {
    const ns = parseDuration(p.get('max'));
    if (ns === null || ns === 0) throw new Error(`max duration "${p.get('max')}": want a duration above 0 like 5ms, 1.5s or 250us`);
    if (ns < minNS) throw new Error(`max duration "${p.get('max')}" is below the min duration "${p.get('min')}"`);
    q.set('max_duration', String(ns));
  }
  if (p.get('errors') === 'true') q.set('errors', 'true');
  const range = p.get('range') || 'all';
  if (range === 'custom') {
    for (const k of ['since', 'until']) {
      const v = p.get(k);
      if (!v) continue;
      const t = new Date(v);
      if (Number.isNaN(t.getTime())) throw new Error(`${k} "${v}": want a date and time like 2026-05-15T10:00`);
      q.set(k, t.toISOString());
    }
  } else if (range !== 'all') {
    if (!rangeNS[range]) throw new Error(`time range "${range}": want one of ${Object.keys(rangeNS).join(', ')}, all or custom`);
    q.set('since', new Date(Date.now() - rangeNS[range] / 1e6).toISOString());
  }
  const limit = p.get('limit') || '20';
  if (!/^\d+$/.test(limit) || +limit < 1 || +limit > 10000) throw new Error(`limit "${limit}": want 1 to 10000`);
  q.set('limit', limit);
  if (p.get('cursor')) q.set('cursor', p.get('cursor'));
  return q;
}

// provisionalName is a result's name: its root record's method when the
// search answer carries it, else a name from its attributes until the
// root record is fetched.
function provisionalName(r) {
  if (r.root && r.root.method) return r.root.method;
  const a = r.attrs || {};
  if (a['call.method']) return String(a['call.method']);
  if (a['http.method'] && a['http.url']) return `${a['http.method']} ${a['http.url']}`;
  return r.type || r.source || '(unnamed)';
}

// traceRow is what a result row shows: the trace (the answer's traces[i])
// named and counted by its root span, or by the matching span r when the
// trace's root span is not stored.
function traceRow(r, t) {
  const head = t && t.root ? t.root : r;
  return {
    trace_id: r.trace_id,
    name: provisionalName(head),
    service: serviceOf(head),
    start: t ? BigInt(t.start_ns) : r.start,
    duration_ns: t ? t.duration_ns : r.duration_ns,
    spans: t ? t.spans : null,
    calls: head.calls, recs: head.recs, errors: head.errors,
    error: r.error || head.error,
  };
}

function serviceOf(r) {
  const a = r.attrs || {};
  if (a['service.name']) return String(a['service.name']);
  const parts = [a['source.format'] || r.source, a['source.file'], a['thread']].filter(Boolean);
  return parts.join(' · ');
}

// suggest fills a datalist with an attribute's stored values.
async function suggest(list, key) {
  try {
    const vals = await api.attributeValues(key, 200);
    list.replaceChildren(...vals.map((v) => el('option', { value: v })));
  } catch (_) {
    list.replaceChildren();
  }
}

function buildForm(p) {
  const f = el('form', { class: 'search-form', id: 'search-form', autocomplete: 'off' });
  const row = (label, input) => el('label', { class: 'field' }, el('span', null, label), input);
  // Service, then its operations (from the Jaeger query API) as
  // suggestions for the operation field.
  const svcSel = el('select', { name: 'service' }, el('option', { value: '' }, 'all'));
  const curSvc = p.get('service');
  if (curSvc) svcSel.append(el('option', { value: curSvc, selected: true }, curSvc));
  api.services().then((list) => {
    for (const s of list) if (s.name !== curSvc) svcSel.append(el('option', { value: s.name }, s.name));
  }).catch(() => { /* the search reports an unreachable daemon */ });
  const loadOps = () => {
    const list = document.getElementById('op-list');
    if (!svcSel.value || !list) return;
    api.operations(svcSel.value).then((ops) => list.replaceChildren(...ops.map((v) => el('option', { value: v })))).catch(() => {});
  };
  svcSel.addEventListener('change', loadOps);
  f.append(row('Service', svcSel));
  for (const pk of pickers) {
    const sel = el('select', { name: pk.param, 'data-key': pk.key }, el('option', { value: '' }, 'all'));
    const cur = p.get(pk.param);
    if (cur) sel.append(el('option', { value: cur, selected: true }, cur));
    api.attributeValues(pk.key, 500).then((vals) => {
      for (const v of vals) if (v !== cur) sel.append(el('option', { value: v }, v));
      if (vals.length === 0 && !cur) sel.disabled = true;
    }).catch(() => { /* the search itself will report an unreachable daemon */ });
    f.append(row(pk.label, sel));
  }
  const opList = el('datalist', { id: 'op-list' });
  const opInput = el('input', { name: 'op', value: p.get('op') || '', list: 'op-list', placeholder: 'root method, exactly' });
  opInput.addEventListener('focus', loadOps, { once: true });
  f.append(row('Operation', opInput), opList);
  const keyList = el('datalist', { id: 'attr-keys' });
  f.append(keyList);
  api.attributeKeys(2000).then((keys) => keyList.replaceChildren(...keys.map((k) => el('option', { value: k })))).catch(() => {});

  // Attribute filters: key:value rows with value suggestions for the key.
  const attrs = el('div', { class: 'attr-rows' });
  const addAttr = (val) => {
    const [k, ...rest] = (val || '').split(':');
    const list = el('datalist', { id: 'vals-' + Math.random().toString(36).slice(2) });
    const key = el('input', { class: 'attr-key', placeholder: 'key', value: k || '', list: 'attr-keys', 'aria-label': 'attribute key' });
    const value = el('input', { class: 'attr-value', placeholder: 'value', value: rest.join(':'), list: list.id, 'aria-label': 'attribute value' });
    const load = () => { if (key.value.trim()) suggest(list, key.value.trim()); };
    key.addEventListener('change', load);
    value.addEventListener('focus', load, { once: true });
    const rm = el('button', { type: 'button', class: 'icon', title: 'Remove filter', onclick: () => r.remove() }, '×');
    const r = el('div', { class: 'attr-row' }, key, el('span', null, '='), value, rm, list);
    attrs.append(r);
  };
  for (const a of p.getAll('attr')) addAttr(a);
  f.append(el('div', { class: 'field' }, el('span', null, 'Attributes'), attrs,
    el('button', { type: 'button', class: 'link', onclick: () => addAttr('') }, '+ attribute filter')));
  f.append(row('Text', el('input', { name: 'text', value: p.get('text') || '', placeholder: 'any string in the span' })));
  f.append(el('div', { class: 'pair' },
    row('Min duration', el('input', { name: 'min', value: p.get('min') || '', placeholder: 'e.g. 1ms' })),
    row('Max duration', el('input', { name: 'max', value: p.get('max') || '', placeholder: 'e.g. 2s' }))));
  f.append(el('label', { class: 'check' }, el('input', { type: 'checkbox', name: 'errors', checked: p.get('errors') === 'true' }), ' Errors only'));
  const range = el('select', { name: 'range' }, ranges.map(([v, t]) => el('option', { value: v, selected: (p.get('range') || 'all') === v }, t)));
  const custom = el('div', { class: 'pair custom-range' },
    row('From', el('input', { type: 'datetime-local', step: '1', name: 'since', value: p.get('since') || '' })),
    row('To', el('input', { type: 'datetime-local', step: '1', name: 'until', value: p.get('until') || '' })));
  const showCustom = () => { custom.hidden = range.value !== 'custom'; };
  range.addEventListener('change', showCustom);
  showCustom();
  f.append(row('Time range', range), custom);
  f.append(row('Results per page', el('select', { name: 'limit' }, limits.map((n) => el('option', { value: n, selected: String(n) === (p.get('limit') || '20') }, n)))));
  f.append(el('button', { type: 'submit', class: 'primary' }, 'Find traces'));

  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    const fd = new FormData(f);
    for (const name of ['service', 'source', 'thread', 'op', 'text', 'min', 'max', 'range', 'since', 'until', 'limit']) {
      const v = (fd.get(name) || '').trim();
      if (v && !(name === 'range' && v === 'all') && !(name === 'limit' && v === '20')) {
        if ((name === 'since' || name === 'until') && fd.get('range') !== 'custom') continue;
        q.set(name, v);
      }
    }
    for (const r of attrs.children) {
      const k = r.querySelector('.attr-key').value.trim(), v = r.querySelector('.attr-value').value;
      if (k) q.append('attr', `${k}:${v}`);
    }
    if (fd.get('errors')) q.set('errors', 'true');
    navigate(q);
  });
  return f;
}

function navigate(q) {
  const s = q.toString();
  history.pushState(null, '', '/search' + (s ? '?' + s : ''));
  window.dispatchEvent(new PopStateEvent('popstate'));
}

// scatter draws duration over start time of the hits (as Jaeger does);
// a dot links to its trace.
function scatter(results) {
  const W = 900, H = 160, L = 56, B = 22, T = 8, R = 10;
  const svgNS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('class', 'scatter');
  svg.setAttribute('preserveAspectRatio', 'none');
  if (results.length === 0) return svg;
  const t = results.map((r) => Number(r.start / 1000n)); // µs
  let t0 = Math.min(...t), t1 = Math.max(...t);
  if (t1 === t0) { t0 -= 1e6; t1 += 1e6; }
  const dmax = Math.max(1, ...results.map((r) => r.duration_ns));
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const x = (v) => L + ((v - t0) / (t1 - t0)) * (W - L - R);
  const y = (d) => H - B - (d / dmax) * (H - B - T);
  add('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis' });
  add('line', { x1: L, y1: T, x2: L, y2: H - B, class: 'axis' });
  for (const f of [0, 0.5, 1]) {
    add('text', { x: L - 4, y: y(dmax * f) + 4, 'text-anchor': 'end', class: 'tick' }, fmtDur(dmax * f));
    const tv = t0 + (t1 - t0) * f;
    add('text', { x: x(tv), y: H - 6, 'text-anchor': f === 0 ? 'start' : f === 1 ? 'end' : 'middle', class: 'tick' }, fmtLocal(new Date(tv / 1e3)));
  }
  results.forEach((r, i) => {
    const a = document.createElementNS(svgNS, 'a');
    a.setAttribute('href', '/trace/' + r.trace_id);
    const c = document.createElementNS(svgNS, 'circle');
    c.setAttribute('cx', x(t[i]));
    c.setAttribute('cy', y(r.duration_ns));
    c.setAttribute('r', 4.5);
    c.setAttribute('class', r.error ? 'dot err' : 'dot');
    const title = document.createElementNS(svgNS, 'title');
    title.textContent = `${fmtDur(r.duration_ns)} at ${fmtUTC(nsToDate(r.start))}`;
    c.append(title);
    a.append(c);
    svg.append(a);
  });
  return svg;
}

function resultRow(r) {
  const d = nsToDate(r.start);
  const name = el('a', { class: 'root-name', href: '/trace/' + r.trace_id }, r.name);
  return el('tr', { class: r.error ? 'result err' : 'result', dataset: { trace: r.trace_id } },
    el('td', null, r.error ? el('span', { class: 'err-mark', title: 'has errors' }, '!') : null, name,
      el('div', { class: 'sub mono' }, r.trace_id)),
    el('td', null, r.service),
    el('td', { title: fmtUTC(d) }, fmtLocal(d)),
    el('td', { class: 'num' }, fmtDur(r.duration_ns)),
    el('td', { class: 'num spans' }, r.spans === null ? '' : fmtInt(r.spans)),
    el('td', { class: 'num' }, fmtInt(r.calls)),
    el('td', { class: 'num recs' }, fmtInt(r.recs)),
    el('td', { class: 'num' }, fmtInt(r.errors)));
}

// warningsBox reports damaged chunks whose spans this page leaves out.
function warningsBox(warnings) {
  if (!warnings || !warnings.length) return null;
  return el('div', { class: 'warn-box', role: 'alert' }, el('strong', null, 'Incomplete: '),
    `${warnings.length} damaged chunk${warnings.length === 1 ? '' : 's'} left out of these results: `, warnings.map(api.warningText).join('; '));
}

let inflight = null;

export async function render(app, { params }) {
  if (inflight) inflight.abort();
  delete document.body.dataset.searchDone;
  const ctl = new AbortController();
  inflight = ctl;
  document.title = 'Search · ztsd';
  const results = el('section', { class: 'results', id: 'results' }, el('p', { class: 'loading' }, 'Searching…'));
  app.replaceChildren(el('div', { class: 'search-page' }, el('aside', { class: 'sidebar' }, buildForm(params)), results));

  let q;
  try {
    const svcs = params.get('service') ? await api.services().catch(() => []) : [];
    q = apiQuery(params, svcs);
  } catch (err) {
    results.replaceChildren(errorBox('Malformed query: ' + err.message));
    return;
  }
  let body;
  try {
    body = await api.search(q, ctl.signal);
  } catch (err) {
    if (ctl.signal.aborted) return;
    results.replaceChildren(errorBox(err.message));
    return;
  }
  const hits = body.results.map((r, i) => traceRow(r, (body.traces || [])[i]));
  const page = Number(params.get('page') || '1');
  const pager = el('div', { class: 'pager' });
  if (params.get('cursor')) {
    const first = new URLSearchParams(params);
    first.delete('cursor'); first.delete('page');
    pager.append(el('a', { href: '/search?' + first, class: 'button' }, '« First page'));
  }
  pager.append(el('span', { class: 'page-no' }, `Page ${page}`));
  if (body.cursor) {
    const nq = new URLSearchParams(params);
    nq.set('cursor', body.cursor); nq.set('page', String(page + 1));
    pager.append(el('a', { href: '/search?' + nq, class: 'button', id: 'next-page' }, 'Next page »'));
  }
  const count = el('h2', { class: 'count', id: 'result-count' },
    `${hits.length} trace${hits.length === 1 ? '' : 's'}`, body.cursor ? ' (more on the next page)' : '');
  if (hits.length === 0) {
    results.replaceChildren(...[count, warningsBox(body.warnings), el('p', { class: 'empty' }, 'No traces match. Widen the time range or remove a filter.'), pager].filter(Boolean));
    document.body.dataset.searchDone = location.search;
    return;
  }
  document.body.dataset.searchDone = location.search;
  const heads = [['Root', 'the root span\'s name'], ['Service / source', 'the root span\'s service'], ['Start (local)', 'the trace\'s first span'],
    ['Duration', 'first span start to last span end'], ['Spans', 'spans stored in the trace'], ['Calls', 'calls of the root span'],
    ['Records', 'records of the root span'], ['Errors', 'errors of the root span']];
  const table = el('table', { class: 'result-table' },
    el('thead', null, el('tr', null, heads.map(([h, title], i) => el('th', { class: i >= 3 ? 'num' : null, title }, h)))),
    el('tbody', null, hits.map(resultRow)));
  results.replaceChildren(...[count, warningsBox(body.warnings), scatter(hits), table, pager].filter(Boolean));
  // Operation suggestions: the root names seen here.
  const list = document.getElementById('op-list');
  if (list && !params.get('service')) list.replaceChildren(...[...new Set(hits.map((r) => r.name))].map((v) => el('option', { value: v })));
}
