// trace.js: a trace's page, /trace/{id}: summary, downloads, and three
// views of the same model (model.js): the waterfall of spans and records
// (virtualised: only the rows in view are in the DOM), the flame graph and
// the icicle (flame.js, on a canvas). A details panel shows the selected
// span or record; the search box finds nodes inside the trace.
import * as api from './api.js';
import { buildModel, findNodes } from './model.js';
import { flameView } from './flame.js';
import { el, errorBox, fmtDur, fmtLocal, fmtUTC, nsToDate, fmtInt, attrText, colorOf } from './util.js';

const ROW = 22;           // px per waterfall row
const OVERSCAN = 12;      // rows rendered above and below the viewport
const AUTO_EXPAND = 300;  // traces with at most this many nodes open fully

export async function render(app, { arg, params }) {
  const id = arg.trim();
  document.title = `Trace ${id} · ztsd`;
  if (!/^[0-9a-fA-F]{1,32}$/.test(id)) {
    app.replaceChildren(errorBox(`"${id}" is not a trace id: want up to 32 hexadecimal digits.`, el('a', { href: '/search' }, 'Search traces')));
    return;
  }
  app.replaceChildren(el('p', { class: 'loading' }, `Loading trace ${id}…`));
  const t0 = performance.now();
  let roots, warnings;
  try {
    ({ roots, warnings } = await api.getTrace(id));
  } catch (err) {
    const what = err.status === 404 ? `Trace ${id} is not in this store (${err.message}).` : `Trace ${id} cannot be shown: ${err.message}`;
    app.replaceChildren(errorBox(what, el('a', { href: '/search' }, 'Search traces')));
    return;
  }
  const t1 = performance.now();
  if (roots.length === 0) {
    app.replaceChildren(errorBox(warnings.length
      ? `Trace ${id} cannot be shown: all its spans are in damaged chunks (${warnings.map(api.warningText).join('; ')}).`
      : `Trace ${id} has no spans.`, el('a', { href: '/search' }, 'Search traces')));
    return;
  }
  const model = buildModel(roots);
  const t2 = performance.now();
  const page = new TracePage(app, id, model, params);
  page.mount();
  if (warnings.length) {
    app.querySelector('.trace-head').append(el('div', { class: 'warn-box', role: 'alert' },
      el('strong', null, 'Incomplete: '), `${warnings.length} damaged chunk${warnings.length === 1 ? '' : 's'} left out of this trace: `,
      warnings.map(api.warningText).join('; ')));
  }
  // For the browser test and anyone curious: how long opening took, up to
  // the first frame painted with the rows in it (performance.now() counts
  // from the start of the navigation).
  requestAnimationFrame(() => setTimeout(() => {
    const t3 = performance.now();
    window.ztsdTiming = { fetchMs: t1 - t0, buildMs: t2 - t1, renderMs: t3 - t2, readyMs: t3, nodes: model.nodes.length };
    document.body.dataset.traceReady = 'true';
  }, 0));
}

class TracePage {
  constructor(app, id, model, params) {
    this.app = app;
    this.id = id;
    this.m = model;
    this.nodes = model.nodes;
    this.collapsed = new Uint8Array(this.nodes.length);
    if (this.nodes.length > AUTO_EXPAND) {
      // Big traces open with spans expanded and each span's records folded
      // below their first level.
      for (const n of this.nodes) if (n.kind === 'rec' && n.kids.length && this.nodes[n.parent].kind === 'rec') this.collapsed[n.idx] = 1;
    }
    this.visible = [];
    this.selected = -1;
    this.matches = [];
    this.matchSet = new Set();
    this.matchPos = -1;
    this.view = params.get('view') || 'waterfall';
    this.flame = null;
  }

  mount() {
    const m = this.m;
    const first = m.topLevel[0];
    const root = first.span;
    const d = nsToDate(m.base);
    const sources = new Set();
    for (const n of this.nodes) if (n.kind === 'span') {
      const a = n.span.attrs || {};
      sources.add(a['service.name'] || [a['source.format'] || n.span.source, a['source.file']].filter(Boolean).join(' · '));
    }
    const errors = this.nodes.filter((n) => n.error).length;
    const header = el('section', { class: 'trace-head' },
      el('h1', null, first.error ? el('span', { class: 'err-mark' }, '!') : null, first.name),
      el('div', { class: 'facts' },
        fact('Trace', el('span', { class: 'mono' }, this.id)),
        fact('Start', el('span', { title: fmtUTC(d) }, fmtLocal(d))),
        fact('Duration', fmtDur(m.duration)),
        fact('Spans', fmtInt(m.spans)),
        fact('Records', fmtInt(m.records)),
        fact('Errors', fmtInt(errors)),
        fact('Source', [...sources].filter(Boolean).join(', ') || root.source)),
      el('div', { class: 'downloads' }, 'Download: ',
        el('a', { href: api.traceURL(this.id), download: this.id + '.jsonl' }, 'Trace JSON'), ' · ',
        el('a', { href: api.traceURL(this.id, 'chrome'), download: this.id + '.chrome.json', title: 'open in ui.perfetto.dev or chrome://tracing' }, 'Chrome / Perfetto'), ' · ',
        el('a', { href: api.traceURL(this.id, 'svg'), download: this.id + '.svg' }, 'SVG timeline')));

    this.findInput = el('input', { id: 'find', type: 'search', placeholder: 'Find in trace (name, attribute, exception)', 'aria-label': 'Find in trace' });
    this.findInfo = el('span', { class: 'find-info', id: 'find-info' });
    this.findInput.addEventListener('input', () => this.find(this.findInput.value));
    this.findInput.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') { ev.preventDefault(); this.step(ev.shiftKey ? -1 : 1); } });
    const tabs = el('div', { class: 'tabs', role: 'tablist' },
      ['waterfall', 'flame', 'icicle'].map((v) => el('button', { type: 'button', class: 'tab', dataset: { view: v }, onclick: () => this.setView(v) },
        { waterfall: 'Waterfall', flame: 'Flame graph', icicle: 'Icicle' }[v])));
    const tools = el('div', { class: 'trace-tools' }, tabs,
      el('div', { class: 'find' }, this.findInput,
        el('button', { type: 'button', class: 'icon', title: 'Previous match (Shift+Enter)', onclick: () => this.step(-1) }, '↑'),
        el('button', { type: 'button', class: 'icon', title: 'Next match (Enter)', onclick: () => this.step(1) }, '↓'),
        this.findInfo),
      el('div', { class: 'wf-buttons' },
        el('button', { type: 'button', onclick: () => this.expandAll(true) }, 'Expand all'),
        el('button', { type: 'button', onclick: () => this.expandAll(false) }, 'Collapse records'),
        el('label', { class: 'check' }, el('input', { type: 'checkbox', id: 'crit-toggle', checked: true, onchange: (ev) => { this.wfBody.classList.toggle('show-crit', ev.target.checked); } }), ' Critical path')));

    // Waterfall: a header with the time ruler, a scroller with a spacer
    // as tall as all visible rows, and a window of row elements.
    this.ruler = el('div', { class: 'wf-ruler' });
    this.wfHead = el('div', { class: 'wf-row wf-header' }, el('div', { class: 'c-name' }, 'Span / record'), el('div', { class: 'c-num' }, 'Self'), el('div', { class: 'c-num' }, 'Total'), el('div', { class: 'c-bar' }, this.ruler));
    this.spacer = el('div', { class: 'wf-spacer' });
    this.rowsEl = el('div', { class: 'wf-rows' });
    this.scroller = el('div', { class: 'wf-scroll', id: 'waterfall' }, this.spacer, this.rowsEl);
    this.scroller.addEventListener('scroll', () => this.schedule());
    this.rowsEl.addEventListener('click', (ev) => this.onRowClick(ev));
    this.wfBody = el('div', { class: 'waterfall show-crit' }, this.wfHead, this.scroller);
    this.flameHost = el('div', { class: 'flame-host', id: 'flame' });
    this.details = el('aside', { class: 'details', id: 'details' }, el('p', { class: 'hint' }, 'Select a span or record to see its details.'));
    this.main = el('div', { class: 'trace-main' }, el('div', { class: 'trace-views' }, this.wfBody, this.flameHost), this.details);
    this.app.replaceChildren(el('div', { class: 'trace-page' }, header, tools, this.main));
    this.resizeObs = new ResizeObserver(() => { this.schedule(); if (this.flame) this.flame.resize(); });
    this.resizeObs.observe(this.scroller);
    this.resizeObs.observe(this.flameHost);
    this.recompute();
    this.renderRuler();
    this.setView(this.view, true);
    this.select(0);
    this.renderRows();
  }

  setView(v, initial) {
    if (!['waterfall', 'flame', 'icicle'].includes(v)) v = 'waterfall';
    this.view = v;
    for (const b of this.app.querySelectorAll('.tab')) b.classList.toggle('active', b.dataset.view === v);
    this.wfBody.hidden = v !== 'waterfall';
    this.flameHost.hidden = v === 'waterfall';
    for (const b of this.app.querySelectorAll('.wf-buttons')) b.hidden = v !== 'waterfall';
    if (v !== 'waterfall') {
      if (!this.flame) {
        this.flame = flameView(this.nodes, { onSelect: (idx) => this.select(idx) });
        this.flameHost.replaceChildren(this.flame.element);
      }
      this.flame.setMode(v);
      this.flame.highlight(this.findInput.value);
    } else {
      this.schedule();
    }
    if (!initial) {
      const u = new URL(location.href);
      if (v === 'waterfall') u.searchParams.delete('view'); else u.searchParams.set('view', v);
      history.replaceState(null, '', u);
    }
  }

  // recompute lists the nodes not hidden under a collapsed ancestor.
  recompute() {
    const vis = [];
    const nodes = this.nodes;
    for (let i = 0; i < nodes.length;) {
      vis.push(i);
      i = this.collapsed[i] ? nodes[i].last + 1 : i + 1;
    }
    this.visible = vis;
    this.spacer.style.height = vis.length * ROW + 'px';
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.renderRows(); });
  }

  renderRows() {
    if (this.view !== 'waterfall') return;
    const top = this.scroller.scrollTop, h = this.scroller.clientHeight || 600;
    const from = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const to = Math.min(this.visible.length, Math.ceil((top + h) / ROW) + OVERSCAN);
    const total = Math.max(1, this.m.duration);
    const frag = document.createDocumentFragment();
    for (let v = from; v < to; v++) {
      const n = this.nodes[this.visible[v]];
      const left = (n.start / total) * 100, width = Math.max(0, (n.dur / total) * 100);
      const cls = ['wf-row', n.kind, n.error ? 'err' : '', n.crit ? 'crit' : '', n.idx === this.selected ? 'sel' : '', this.matchSet.has(n.idx) ? 'match' : ''].join(' ');
      const toggle = n.kids.length
        ? el('button', { type: 'button', class: 'toggle', 'aria-label': this.collapsed[n.idx] ? 'expand' : 'collapse', dataset: { toggle: n.idx } }, this.collapsed[n.idx] ? '▸' : '▾')
        : el('span', { class: 'toggle leaf' });
      const name = el('div', { class: 'c-name', title: n.name }, toggle,
        n.kind === 'span' ? el('span', { class: 'kind' }, 'span') : null,
        n.error ? el('span', { class: 'err-mark' }, '!') : null,
        el('span', { class: 'label' }, n.name),
        n.kids.length && this.collapsed[n.idx] ? el('span', { class: 'more' }, ` +${fmtInt(n.last - n.idx)}`) : null);
      name.style.paddingLeft = 4 + Math.min(n.depth, 40) * 12 + 'px';
      const bar = el('div', { class: 'bar' });
      bar.style.left = left + '%';
      bar.style.width = `max(1px, ${width}%)`;
      if (!n.error) bar.style.background = colorOf(n.name);
      const barLabel = el('span', { class: 'bar-label' }, fmtDur(n.dur));
      if (left > 70) { barLabel.classList.add('left'); barLabel.style.right = (100 - left) + '%'; } else barLabel.style.left = `calc(${left + width}% + 4px)`;
      const row = el('div', { class: cls, dataset: { idx: n.idx }, role: 'row' }, name,
        el('div', { class: 'c-num' }, fmtDur(n.self)), el('div', { class: 'c-num' }, fmtDur(n.dur)),
        el('div', { class: 'c-bar' }, bar, barLabel));
      row.style.top = v * ROW + 'px';
      frag.append(row);
    }
    this.rowsEl.replaceChildren(frag);
  }

  renderRuler() {
    const total = Math.max(1, this.m.duration);
    const ticks = [];
    for (let i = 0; i <= 4; i++) {
      const t = el('span', { class: 'tick' }, fmtDur((total * i) / 4));
      t.style.left = i * 25 + '%';
      if (i === 4) t.classList.add('last');
      ticks.push(t);
    }
    this.ruler.replaceChildren(...ticks);
  }

  onRowClick(ev) {
    const tg = ev.target.closest('[data-toggle]');
    if (tg) {
      const i = Number(tg.dataset.toggle);
      this.collapsed[i] ^= 1;
      this.recompute();
      return;
    }
    const row = ev.target.closest('.wf-row');
    if (row) this.select(Number(row.dataset.idx));
  }

  expandAll(expand) {
    if (expand) this.collapsed.fill(0);
    else for (const n of this.nodes) this.collapsed[n.idx] = n.kind === 'rec' && n.kids.length ? 1 : 0;
    this.recompute();
  }

  // reveal expands n's ancestors and scrolls the waterfall to it.
  reveal(idx) {
    for (let p = this.nodes[idx].parent; p >= 0; p = this.nodes[p].parent) this.collapsed[p] = 0;
    this.recompute();
    const v = this.visible.indexOf(idx);
    const top = v * ROW, h = this.scroller.clientHeight;
    if (top < this.scroller.scrollTop || top > this.scroller.scrollTop + h - ROW) this.scroller.scrollTop = Math.max(0, top - h / 3);
  }

  select(idx) {
    if (idx < 0 || idx >= this.nodes.length) return;
    this.selected = idx;
    this.details.replaceChildren(...detailsOf(this.nodes[idx], this.nodes, this.m));
    this.schedule();
  }

  find(text) {
    this.matches = findNodes(this.nodes, text.trim());
    this.matchSet = new Set(this.matches);
    this.matchPos = -1;
    this.findInfo.textContent = text.trim() ? `${this.matches.length} match${this.matches.length === 1 ? '' : 'es'}` : '';
    if (this.flame) this.flame.highlight(text.trim());
    if (this.matches.length) this.step(1); else this.schedule();
  }

  step(dir) {
    if (!this.matches.length) return;
    this.matchPos = (this.matchPos + dir + this.matches.length) % this.matches.length;
    const idx = this.matches[this.matchPos];
    this.findInfo.textContent = `${this.matchPos + 1} of ${this.matches.length}`;
    if (this.view === 'waterfall') this.reveal(idx);
    this.select(idx);
  }
}

function fact(label, value) {
  return el('div', { class: 'fact' }, el('span', { class: 'k' }, label), el('span', { class: 'v' }, value));
}

function kv(rows) {
  return el('table', { class: 'kv' }, el('tbody', null, rows.map(([k, v]) => el('tr', null, el('th', null, k), el('td', null, v)))));
}

function attrTable(attrs) {
  const keys = Object.keys(attrs || {}).sort();
  if (!keys.length) return el('p', { class: 'hint' }, 'none');
  return kv(keys.map((k) => [k, attrText(attrs[k])]));
}

function exceptionView(x) {
  const parts = [];
  for (let depth = 0; x && depth < 64; depth++, x = x.cause) {
    parts.push(el('div', { class: 'exception' },
      el('div', { class: 'x-head' }, depth ? 'Caused by: ' : '', el('strong', null, x.class || '(no class)'), x.message ? ': ' + x.message : ''),
      x.stack && x.stack.length ? el('ol', { class: 'stack' }, x.stack.map((f) =>
        el('li', null, `${f.class}.${f.method}(${f.file || 'Unknown Source'}${f.line > 0 ? ':' + f.line : ''})`))) : el('p', { class: 'hint' }, 'no stack')));
  }
  return parts;
}

function detailsOf(n, nodes, m) {
  const sp = n.span, a = sp.attrs || {};
  const out = [el('h2', null, n.kind === 'span' ? 'Span' : 'Record', ': ', el('span', { class: 'dname' }, n.name))];
  const rows = [
    ['Start', `+${fmtDur(n.start)} (${fmtLocal(nsToDate(m.base + BigInt(Math.round(n.start))))})`],
    ['Duration', fmtDur(n.dur)],
    ['Self time', fmtDur(n.self)],
  ];
  if (n.rec) rows.push(['Calls', fmtInt(n.rec.calls)], ['Errors', fmtInt(n.rec.errors)]);
  if (n.rec && n.rec.open) rows.push(['Open', 'never ended in its source']);
  if (n.crit) rows.push(['Critical path', 'yes']);
  rows.push(['Children', fmtInt(n.kids.length)]);
  out.push(kv(rows));
  if (n.rec && n.rec.exception) out.push(el('h3', null, 'Exception'), ...exceptionView(n.rec.exception));
  if (n.kind === 'rec') out.push(el('h3', null, 'Record attributes'), attrTable(n.rec.attrs));
  else if (n.rec && n.rec.attrs) out.push(el('h3', null, 'Root record attributes'), attrTable(n.rec.attrs));
  out.push(el('h3', null, n.kind === 'span' ? 'Span' : 'In span ' + sp.span_id), kv([
    ['Span id', el('span', { class: 'mono' }, sp.span_id)],
    ['Parent', sp.parent_id ? el('span', { class: 'mono' }, sp.parent_id) : '(root)'],
    ['Type', sp.type || ''],
    ['Source format', a['source.format'] || sp.source || ''],
    ['Source file', a['source.file'] || ''],
    ['Thread', attrText(a['thread'] ?? '')],
    ['Records', fmtInt(sp.recs)],
  ].filter(([, v]) => v !== '')));
  out.push(el('h3', null, 'Span attributes'), attrTable(a));
  return out;
}
