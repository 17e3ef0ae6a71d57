// model.js: a trace as the trace page draws it. Spans and their
// method-call records become one flat array of nodes in depth-first order
// (children by start time), with times in nanoseconds relative to the
// trace's first span start, self time, and the critical path.

// A node is a span (with its root record merged in) or a record.
//   kind 'span'|'rec', name, start, dur, end, self, depth, parent (index or
//   -1), kids (indices), last (index of the last node of its subtree),
//   span (the owning span), rec (the record, for a span its root record),
//   error, crit (on the critical path).

export function buildModel(roots) {
  let base = null;
  const allSpans = [];
  const walk = (sp) => { allSpans.push(sp); if (base === null || sp.start < base) base = sp.start; (sp.spans || []).forEach(walk); };
  roots.forEach(walk);
  const nodes = [];
  // Depth-first with an explicit stack: traces may nest hundreds deep.
  const make = (kind, name, start, dur, span, rec, depth, parent) => {
    const n = { kind, name, start, dur, end: start + Math.max(0, dur), self: 0, depth, parent, kids: [], last: 0, span, rec,
      error: kind === 'span' ? !!span.error || !!(rec && rec.exception) : !!rec.exception, crit: false, idx: 0 };
    return n;
  };
  const childEntries = (n) => {
    const out = [];
    const spanStart = Number(n.span.start - base);
    if (n.rec && n.rec.children) for (const r of n.rec.children) out.push({ kind: 'rec', rec: r, span: n.span, start: spanStart + r.start_ns });
    if (n.kind === 'span') for (const c of n.span.spans || []) out.push({ kind: 'span', span: c, rec: c.root || null, start: Number(c.start - base) });
    out.sort((a, b) => a.start - b.start);
    return out;
  };
  const spanName = (sp) => (sp.root && sp.root.method) || sp.type || sp.span_id || '(span)';
  const stack = [];
  const sortedRoots = [...roots].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  for (let i = sortedRoots.length - 1; i >= 0; i--) stack.push({ kind: 'span', span: sortedRoots[i], rec: sortedRoots[i].root || null, start: Number(sortedRoots[i].start - base), depth: 0, parent: -1 });
  while (stack.length) {
    const e = stack.pop();
    const n = e.kind === 'span'
      ? make('span', spanName(e.span), e.start, e.span.duration_ns, e.span, e.rec, e.depth, e.parent)
      : make('rec', e.rec.method || '(record)', e.start, e.rec.duration_ns, e.span, e.rec, e.depth, e.parent);
    n.idx = nodes.length;
    nodes.push(n);
    if (e.parent >= 0) nodes[e.parent].kids.push(n.idx);
    const kids = childEntries(n);
    for (let i = kids.length - 1; i >= 0; i--) stack.push({ ...kids[i], depth: e.depth + 1, parent: n.idx });
  }
  // Subtree ends (preorder: a subtree is contiguous) and self times.
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i];
    n.last = n.kids.length ? nodes[n.kids[n.kids.length - 1]].last : i;
    n.self = selfTime(n, nodes);
  }
  const topLevel = nodes.filter((n) => n.parent === -1);
  markCritical(topLevel, nodes);
  const end = Math.max(0, ...topLevel.map((n) => n.last >= 0 ? subtreeEnd(n, nodes) : n.end));
  return { nodes, base, spans: allSpans.length, records: countRecords(roots), duration: end, topLevel };
}

function subtreeEnd(n, nodes) {
  let e = n.end;
  for (let i = n.idx; i <= n.last; i++) if (nodes[i].end > e) e = nodes[i].end;
  return e;
}

function countRecords(roots) {
  let n = 0;
  const stack = [];
  const addSpan = (sp) => { if (sp.root) stack.push(sp.root); (sp.spans || []).forEach(addSpan); };
  roots.forEach(addSpan);
  while (stack.length) { const r = stack.pop(); n++; if (r.children) for (const c of r.children) stack.push(c); }
  return n;
}

// selfTime is the node's duration not covered by any of its children.
function selfTime(n, nodes) {
  if (!n.kids.length) return Math.max(0, n.dur);
  let covered = 0, curS = -Infinity, curE = -Infinity;
  const iv = n.kids.map((k) => [Math.max(nodes[k].start, n.start), Math.min(nodes[k].end, n.end)]).filter(([s, e]) => e > s);
  iv.sort((a, b) => a[0] - b[0]);
  for (const [s, e] of iv) {
    if (s > curE) { if (curE > curS) covered += curE - curS; curS = s; curE = e; } else if (e > curE) curE = e;
  }
  if (curE > curS) covered += curE - curS;
  return Math.max(0, n.dur - covered);
}

// markCritical marks the critical path: from the end of each top-level
// node backwards, the child that finished last before the current point,
// recursively (what Jaeger calls the critical path).
function markCritical(top, nodes) {
  const stack = [];
  for (const t of top) stack.push([t.idx, t.end]);
  while (stack.length) {
    const [i, until] = stack.pop();
    const n = nodes[i];
    n.crit = true;
    let cursor = Math.min(n.end, until);
    const kids = n.kids.map((k) => nodes[k]).sort((a, b) => b.end - a.end);
    for (const c of kids) {
      if (c.start >= cursor) continue;
      stack.push([c.idx, cursor]);
      cursor = c.start;
      if (cursor <= n.start) break;
    }
  }
}

// matches lists nodes whose name or attribute keys/values contain text
// (case-insensitive).
export function findNodes(nodes, text) {
  const q = text.toLowerCase();
  const out = [];
  if (!q) return out;
  const attrHit = (attrs) => {
    if (!attrs) return false;
    for (const [k, v] of Object.entries(attrs)) {
      if (k.toLowerCase().includes(q)) return true;
      if ((typeof v === 'string' ? v : JSON.stringify(v)).toLowerCase().includes(q)) return true;
    }
    return false;
  };
  for (const n of nodes) {
    if (n.name.toLowerCase().includes(q) || (n.kind === 'span' && attrHit(n.span.attrs)) || (n.rec && attrHit(n.rec.attrs))
      || (n.rec && n.rec.exception && (n.rec.exception.class + ' ' + n.rec.exception.message).toLowerCase().includes(q))) out.push(n.idx);
  }
  return out;
}
