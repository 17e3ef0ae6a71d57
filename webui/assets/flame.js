// flame.js: the flame graph and icicle of a trace's records, drawn on a
// canvas. Identical call paths (span and record names from the top) are
// merged, so a frame's width is the total time spent in that path across
// the whole trace and repeated calls add up. The flame graph puts the
// roots at the bottom, the icicle at the top. Click a frame to zoom to it,
// click the bottom (flame) / top (icicle) frame or "Reset zoom" to go back;
// hover for name, total, self and calls.
import { el, fmtDur, fmtInt, colorOf } from './util.js';

const RH = 18; // px per frame row

// merge builds the merged call tree: {name, total, self, calls, kids: Map, depth, parent}.
export function mergeTree(nodes) {
  const root = { name: 'all', total: 0, self: 0, calls: 0, kids: new Map(), depth: 0, parent: null, nodes: [] };
  const at = new Array(nodes.length);
  let maxDepth = 0;
  for (const n of nodes) {
    const parent = n.parent >= 0 ? at[n.parent] : root;
    let f = parent.kids.get(n.name);
    if (!f) {
      f = { name: n.name, total: 0, self: 0, calls: 0, kids: new Map(), depth: parent.depth + 1, parent, nodes: [], error: false };
      parent.kids.set(n.name, f);
      if (f.depth > maxDepth) maxDepth = f.depth;
    }
    f.total += Math.max(0, n.dur);
    f.self += n.self;
    f.calls += n.rec ? n.rec.calls || 1 : 1;
    f.error = f.error || n.error;
    if (f.nodes.length < 1) f.nodes.push(n.idx);
    at[n.idx] = f;
  }
  for (const f of root.kids.values()) root.total += f.total;
  root.calls = 1;
  layout(root, 0, root.total);
  return { root, maxDepth };
}

// layout gives every frame x (in ns units) and w; children that add up to
// more than their parent (asynchronous child spans) are scaled to fit.
function layout(f, x, w) {
  f.x = x;
  f.w = w;
  const kids = [...f.kids.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const sum = kids.reduce((s, k) => s + k.total, 0);
  const scale = sum > w && sum > 0 ? w / sum : 1;
  let cx = x;
  for (const k of kids) {
    layout(k, cx, k.total * scale);
    cx += k.total * scale;
  }
  f.sorted = kids;
}

export function flameView(nodes, { onSelect }) {
  const { root, maxDepth } = mergeTree(nodes);
  const canvas = el('canvas', { class: 'flame-canvas', id: 'flame-canvas' });
  const tip = el('div', { class: 'flame-tip', hidden: true });
  const crumb = el('span', { class: 'crumb' });
  const reset = el('button', { type: 'button', onclick: () => zoom(root) }, 'Reset zoom');
  const info = el('div', { class: 'flame-bar' }, reset, crumb,
    el('span', { class: 'hint' }, `${fmtInt(countFrames(root))} distinct call paths, ${maxDepth} deep · click a frame to zoom`));
  const scroll = el('div', { class: 'flame-scroll' }, canvas, tip);
  const element = el('div', { class: 'flame' }, info, scroll);
  let mode = 'flame', focus = root, highlight = '', rects = [];

  function zoom(f) {
    focus = f;
    const path = [];
    for (let p = f; p; p = p.parent) path.unshift(p.name);
    crumb.textContent = path.join(' › ');
    draw();
  }

  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const cssW = Math.max(300, (scroll.clientWidth || element.clientWidth || 812) - 12); // less the padding
    const cssH = Math.min(32000, (maxDepth + 1) * RH);
    canvas.style.width = cssW + 'px';
    canvas.style.height = cssH + 'px';
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const x0 = focus.x, span = focus.w || 1;
    const sx = (x) => ((x - x0) / span) * cssW;
    const yOf = (d) => (mode === 'icicle' ? d * RH : cssH - (d + 1) * RH);
    const q = highlight.toLowerCase();
    rects = [];
    const stack = [root];
    while (stack.length) {
      const f = stack.pop();
      const inFocusPath = isAncestor(f, focus);
      let px, pw;
      if (inFocusPath) { px = 0; pw = cssW; } else {
        px = sx(f.x); pw = (f.w / span) * cssW;
        if (px + pw < 0 || px > cssW || pw < 0.3) continue;
      }
      const y = yOf(f.depth);
      if (y > -RH && y < cssH) {
        const match = q && f.name.toLowerCase().includes(q);
        ctx.fillStyle = f === root ? '#d8dde6' : f.error ? '#e05263' : colorOf(f.name);
        ctx.globalAlpha = q && !match ? 0.35 : 1;
        ctx.fillRect(px, y + 1, Math.max(pw - 0.5, 0.5), RH - 2);
        if (match) { ctx.strokeStyle = '#1d2430'; ctx.lineWidth = 1.5; ctx.strokeRect(px + 0.75, y + 1.75, Math.max(pw - 2, 0.5), RH - 3.5); }
        ctx.globalAlpha = 1;
        if (pw > 28) {
          ctx.fillStyle = f.error ? '#fff' : '#1d2430';
          ctx.save();
          ctx.beginPath(); ctx.rect(px, y, pw - 2, RH); ctx.clip();
          ctx.fillText(f === root ? `all (${fmtDur(root.total)})` : f.name, Math.max(px, 0) + 3, y + RH / 2);
          ctx.restore();
        }
        rects.push({ f, x: px, y, w: pw });
      }
      if (inFocusPath && f !== focus) { for (const k of f.sorted) if (isAncestor(k, focus)) stack.push(k); } else for (const k of f.sorted) stack.push(k);
    }
  }

  function hit(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    for (let i = rects.length - 1; i >= 0; i--) {
      const b = rects[i];
      if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + RH) return b.f;
    }
    return null;
  }

  canvas.addEventListener('mousemove', (ev) => {
    const f = hit(ev);
    if (!f) { tip.hidden = true; return; }
    tip.hidden = false;
    tip.replaceChildren(el('strong', null, f.name), el('br'),
      `total ${fmtDur(f.total)} (${((f.total / (root.total || 1)) * 100).toFixed(1)}%) · self ${fmtDur(f.self)} · ${fmtInt(f.calls)} call${f.calls === 1 ? '' : 's'}`);
    const sr = scroll.getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - sr.left + 12, sr.width - 320) + 'px';
    tip.style.top = ev.clientY - sr.top + scroll.scrollTop + 14 + 'px';
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (ev) => {
    const f = hit(ev);
    if (!f) return;
    zoom(f === focus && f.parent ? f.parent : f);
    if (f.nodes.length) onSelect(f.nodes[0]);
  });

  return {
    element,
    setMode(m) { mode = m; zoom(focus); if (m === 'flame') requestAnimationFrame(() => { scroll.scrollTop = scroll.scrollHeight; }); },
    highlight(text) { highlight = text || ''; draw(); },
    resize() { draw(); },
    frames: () => rects.length,
  };
}

function isAncestor(a, b) {
  for (let p = b; p; p = p.parent) if (p === a) return true;
  return false;
}

function countFrames(f) {
  let n = 0;
  const st = [f];
  while (st.length) { const x = st.pop(); n++; for (const k of x.kids.values()) st.push(k); }
  return n - 1;
}
