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
  const spanName = (sp) => (sp.root && sp.root.method) || sp.type || sp.span_id || '(span)';
  const byStart = (a, b) => a.start - b.start;
  // Depth-first with an explicit stack: traces may nest hundreds deep.
  // A stack entry is a node not yet numbered; its children are made when
  // it is popped, sorted by start, and pushed in reverse.
  const stack = [];
  const top = roots.map((sp) => newNode('span', spanName(sp), Number(sp.start - base), sp.duration_ns, sp, sp.root || null, 0, -1));
  top.sort(byStart);
  for (let i = top.length - 1; i >= 0; i--) stack.push(top[i]);
  let records = 0;
  while (stack.length) {
    const n = stack.pop();
    n.idx = nodes.length;
    nodes.push(n);
    if (n.parent >= 0) nodes[n.parent].kids.push(n.idx);
    if (n.rec) records++;
    const kids = [];
    const depth = n.depth + 1;
    if (n.rec && n.rec.children) {
      const spanStart = n.kind === 'span' ? n.start : n.spanStart;
      for (const r of n.rec.children) {
        const k = newNode('rec', r.method || '(record)', spanStart + r.start_ns, r.duration_ns, n.span, r, depth, n.idx);
        k.spanStart = spanStart;
        kids.push(k);
      }
    }
    if (n.kind === 'span' && n.span.spans) {
      for (const c of n.span.spans) kids.push(newNode('span', spanName(c), Number(c.start - base), c.duration_ns, c, c.root || null, depth, n.idx));
    }
    if (kids.length > 1) kids.sort(byStart);
    for (let i = kids.length - 1; i >= 0; i--) stack.push(kids[i]);
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
  return { nodes, base, spans: allSpans.length, records, duration: end, topLevel };
}

function newNode(kind, name, start, dur, span, rec, depth, parent) {
  return {
    kind, name, start, dur, end: start + Math.max(0, dur), self: 0, depth, parent, kids: [], last: 0, span, rec,
    error: kind === 'span' ? !!span.error || !!(rec && rec.exception) : !!rec.exception, crit: false, idx: 0, spanStart: 0,
  };
}

function subtreeEnd(n, nodes) {
  let e = n.end;
  for (let i = n.idx; i <= n.last; i++) if (nodes[i].end > e) e = nodes[i].end;
  return e;
}

// selfTime is the node's duration not covered by any of its children
// (which are in start order).
function selfTime(n, nodes) {
  if (!n.kids.length) return Math.max(0, n.dur);
  let covered = 0, curS = 0, curE = -Infinity;
  for (const k of n.kids) {
    const c = nodes[k];
    const s = c.start > n.start ? c.start : n.start, e = c.end < n.end ? c.end : n.end;
    if (e <= s) continue;
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
    const kids = n.kids.map((k) => nodes[k]);
    if (kids.length > 1) kids.sort((a, b) => b.end - a.end);
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
