// util.js: DOM construction and number/time formatting shared by the pages.

// el builds an element: el('a', {href: '/x', class: 'y', onclick: f}, child...).
// Children are nodes or strings (set as text, never parsed as HTML).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else if (k === 'class') e.className = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k in e && typeof v !== 'string') e[k] = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// errorBox is the page's way of saying what went wrong.
export function errorBox(msg, ...extra) {
  return el('div', { class: 'error-box', role: 'alert' }, el('strong', null, 'Error: '), msg, extra.length ? el('div', null, ...extra) : null);
}

// fmtDur formats nanoseconds with three significant digits.
export function fmtDur(ns) {
  if (ns === undefined || ns === null || Number.isNaN(ns)) return '';
  const a = Math.abs(ns);
  const f = (v, u) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + u;
  if (a < 1e3) return ns + 'ns';
  if (a < 1e6) return f(ns / 1e3, 'µs');
  if (a < 1e9) return f(ns / 1e6, 'ms');
  if (a < 60e9) return f(ns / 1e9, 's');
  if (a < 3600e9) return f(ns / 60e9, 'min');
  return f(ns / 3600e9, 'h');
}

// nsToDate turns epoch nanoseconds (a BigInt or number) into a Date.
export function nsToDate(ns) {
  return new Date(typeof ns === 'bigint' ? Number(ns / 1000000n) : ns / 1e6);
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

// fmtLocal is a local timestamp with milliseconds.
export function fmtLocal(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

// fmtUTC is the ISO form, for tooltips.
export function fmtUTC(d) {
  return Number.isNaN(d.getTime()) ? 'invalid time' : d.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

export function fmtInt(n) {
  return Number(n).toLocaleString('en-US');
}

export function fmtBytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + u[i];
}

// colorOf picks a stable pastel colour for a name (errors use red).
export function colorOf(name) {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 16777619); }
  const hue = (h >>> 0) % 360;
  return `hsl(${hue} 55% 72%)`;
}

// attrText renders an attribute value (string, number, bool, list, map).
export function attrText(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

// debounce delays f until calls stop for ms.
export function debounce(f, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => f(...a), ms); };
}
