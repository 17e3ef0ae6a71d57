// api.js: the daemon's /v1 API and /metrics, as the pages use them. Errors
// carry the daemon's own message ({"error","code"}) so pages can show it.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(path, opts) {
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (err) {
    throw new ApiError(0, 'network', `cannot reach ztsd (${err.message})`);
  }
  if (!resp.ok) {
    let code = 'http_' + resp.status, msg = `${resp.status} ${resp.statusText}`;
    try {
      const body = await resp.json();
      if (body && body.error) { msg = body.error; code = body.code || code; }
    } catch (_) { /* not JSON */ }
    throw new ApiError(resp.status, code, msg);
  }
  return resp;
}

async function getJSON(path, opts) {
  return (await request(path, opts)).json();
}

// Epoch nanoseconds exceed 2^53: span start times are parsed as BigInt so
// offsets inside a trace stay exact.
const bigStart = /"start_ns":(-?\d{16,})/g;

function parseSpanJSON(text) {
  return JSON.parse(text.replace(bigStart, '"start_ns":"$1"'));
}

function fixSpan(sp) {
  sp.start = BigInt(sp.start_ns);
  for (const c of sp.spans || []) fixSpan(c);
  return sp;
}

// search runs GET /v1/search with the given URLSearchParams.
export async function search(params, signal) {
  const resp = await request('/v1/search?' + params.toString(), { signal });
  const body = parseSpanJSON(await resp.text());
  body.results.forEach(fixSpan);
  return body;
}

// getTrace returns the root spans of a trace (child spans in .spans) and
// the warnings about damaged chunks the daemon left out
// ([{store, offset, error}], from the X-Ztsd-Warnings header).
export async function getTrace(id, spanID, signal) {
  const q = spanID ? '?span=' + encodeURIComponent(spanID) : '';
  const resp = await request('/v1/traces/' + encodeURIComponent(id) + q, { signal });
  const text = await resp.text();
  const roots = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const v = parseSpanJSON(line);
    // A failure after the first line ends the stream with an error
    // trailer {"error","code","status"} instead of a span.
    if (v && v.error !== undefined && v.trace_id === undefined) throw new ApiError(v.status || 500, v.code || 'internal', v.error);
    roots.push(fixSpan(v));
  }
  let warnings = [];
  const h = resp.headers.get('X-Ztsd-Warnings');
  if (h) {
    try { warnings = JSON.parse(h); } catch (_) { warnings = [{ store: '?', offset: 0, error: h }]; }
  }
  return { roots, warnings };
}

// warningText describes one damaged-chunk warning.
export function warningText(w) {
  return `store ${w.store}, chunk at offset ${w.offset}: ${w.error}`;
}

export function traceURL(id, format) {
  return '/v1/traces/' + encodeURIComponent(id) + (format ? '?format=' + format : '');
}

export async function attributeValues(key, limit = 200, signal) {
  const body = await getJSON('/v1/attributes/' + encodeURIComponent(key) + '?limit=' + limit, { signal });
  return body.values || [];
}

// attributeKeys lists the attribute keys the stores hold.
export async function attributeKeys(limit = 1000, signal) {
  const body = await getJSON('/v1/attributes?limit=' + limit, { signal });
  return body.keys || [];
}

// services lists what spans' services are: service.name values and, for
// imported sources without one, their files ({name, attr, value, format}).
let servicesCache = null;
export function services() {
  if (!servicesCache) {
    servicesCache = getJSON('/v1/services').then((b) => b.services || []);
    servicesCache.catch(() => { servicesCache = null; });
  }
  return servicesCache;
}

// operations lists a service's operation (root span) names through the
// daemon's Jaeger query API.
export async function operations(service, signal) {
  const body = await getJSON('/api/operations?service=' + encodeURIComponent(service), { signal });
  return (body.data || []).map((o) => o.name);
}

export async function stores(signal) {
  return getJSON('/v1/stores', { signal });
}

// metrics reads the Prometheus text exposition into {name{labels}: value}.
export async function metrics(signal) {
  const text = await (await request('/metrics', { signal })).text();
  const out = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}
