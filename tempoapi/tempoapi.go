package tempoapi

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/traceql"
)

// Version is the Tempo version /api/status/buildinfo reports: the API
// level these handlers follow (Grafana enables features by it).
const Version = "2.8.0"

// DefaultLimit and DefaultSpansPerSpanSet are Tempo's search defaults.
const (
	DefaultLimit           = 20
	DefaultSpansPerSpanSet = 3
)

// API serves the Tempo HTTP API.
type API struct {
	db  *storedir.DB
	log *slog.Logger
}

// New returns the API over db.
func New(db *storedir.DB, log *slog.Logger) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &API{db: db, log: log}
}

// maxSeconds bounds times in seconds so that nanoseconds fit an int64.
const maxSeconds = math.MaxInt64/1_000_000_000 - 1

// Routes returns the routes to mount on the server. /api/traces/{id} is
// not among them: that path is jaeger-query's too, and jaegerapi hands a
// request for it that accepts application/protobuf (Tempo's) to
// TraceV1Handler.
func (a *API) Routes() []server.Route {
	r := func(pattern string, h http.HandlerFunc) server.Route {
		return server.Route{Pattern: pattern, Access: server.AccessRead, Handler: h}
	}
	return []server.Route{
		r("GET /api/echo", a.handleEcho),
		r("GET /api/status/buildinfo", a.handleBuildInfo),
		r("GET /api/v2/traces/{id}", a.handleTraceV2),
		r("GET /api/search", a.handleSearch),
		r("GET /api/search/tags", a.handleTagsV1),
		r("GET /api/v2/search/tags", a.handleTagsV2),
		r("GET /api/search/tag/{tag}/values", a.handleTagValuesV1),
		r("GET /api/v2/search/tag/{tag}/values", a.handleTagValuesV2),
	}
}

// TraceV1Handler serves Tempo's /api/traces/{id} (the path value "id").
func (a *API) TraceV1Handler() http.Handler { return http.HandlerFunc(a.handleTraceV1) }

type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// fail writes Tempo's plain-text error.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	var qe *traceql.Error
	st := http.StatusInternalServerError
	switch {
	case errors.As(err, &ae):
		st = ae.status
	case errors.As(err, &qe):
		st = http.StatusBadRequest
	default:
		st, _ = server.StatusOf(err)
	}
	if st >= 500 {
		a.log.Error("tempo API request failed", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(st)
	fmt.Fprintln(w, err.Error())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (a *API) handleEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("echo"))
}

func (a *API) handleBuildInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]string{"version": Version, "revision": "ztsd", "branch": "", "buildUser": "",
		"buildDate": "", "goVersion": runtime.Version()})
}

// parseTraceID reads up to 32 hex digits (leading zeros may be left out).
func parseTraceID(s string) (trace.TraceID, error) {
	var id trace.TraceID
	if s == "" || len(s) > 32 {
		return id, badRequest("trace id %q: want 1 to 32 hex digits", s)
	}
	s = strings.Repeat("0", 32-len(s)) + s
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, badRequest("trace id %q: not hex", s)
	}
	if id.IsZero() {
		return id, badRequest("trace id %q is zero", s)
	}
	return id, nil
}

func (a *API) readTrace(r *http.Request) ([]*trace.Span, error) {
	id, err := parseTraceID(r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"start", "end"} {
		if s := r.URL.Query().Get(k); s != "" {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				return nil, badRequest("%s=%q: want seconds since the epoch", k, s)
			}
		}
	}
	roots, err := a.db.GetTrace(r.Context(), id)
	if errors.Is(err, storedir.ErrNotFound) {
		return nil, &apiError{http.StatusNotFound, fmt.Sprintf("trace not found: %s", id)}
	}
	if err != nil {
		return nil, err
	}
	return queryapi.Flatten(roots), nil
}

func wantsProto(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/protobuf")
}

// handleTraceV1 answers a tempopb.Trace: protobuf when asked, else JSON
// {"batches": [ResourceSpans…]}.
func (a *API) handleTraceV1(w http.ResponseWriter, r *http.Request) {
	spans, err := a.readTrace(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if wantsProto(r) {
		pw := queryapi.NewProtoWriter(spans)
		w.Header().Set("Content-Type", "application/protobuf")
		w.Header().Set("Content-Length", strconv.Itoa(pw.Size()))
		if _, err := pw.WriteTo(w); err != nil {
			a.log.Warn("tempo API: writing a trace", "err", err)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	a.writeJSONTrace(w, spans, `{"batches":`, "}\n")
}

// writeJSONTrace writes the OTLP JSON resource spans array between prefix
// and suffix (the TracesData object's braces and key are stripped).
func (a *API) writeJSONTrace(w http.ResponseWriter, spans []*trace.Span, prefix, suffix string) {
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(prefix)
	err := queryapi.WriteJSON(&stripWriter{w: bw, skip: len(`{"resourceSpans":`), trimLast: 1}, spans,
		queryapi.JSONStyle{Base64IDs: true, EnumNames: true})
	if err != nil {
		a.log.Warn("tempo API: writing a trace", "err", err)
		return
	}
	bw.WriteString(suffix)
	bw.Flush()
}

// stripWriter drops the first skip bytes and holds back the last trimLast
// bytes of what is written through it.
type stripWriter struct {
	w        *bufio.Writer
	skip     int
	trimLast int
	held     []byte
}

func (s *stripWriter) Write(p []byte) (int, error) {
	n := len(p)
	if s.skip > 0 {
		k := min(s.skip, len(p))
		s.skip -= k
		p = p[k:]
	}
	s.held = append(s.held, p...)
	if len(s.held) > s.trimLast {
		out := s.held[:len(s.held)-s.trimLast]
		if _, err := s.w.Write(out); err != nil {
			return 0, err
		}
		s.held = append(s.held[:0], s.held[len(s.held)-s.trimLast:]...)
	}
	return n, nil
}

// handleTraceV2 answers a TraceByIDResponse: protobuf (field 1: the
// Trace) when asked, else JSON {"trace": {"resourceSpans": […]}}.
func (a *API) handleTraceV2(w http.ResponseWriter, r *http.Request) {
	spans, err := a.readTrace(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if wantsProto(r) {
		pw := queryapi.NewProtoWriter(spans)
		size := pw.Size()
		var hdr []byte
		hdr = protowire.AppendTag(hdr, 1, protowire.BytesType)
		hdr = protowire.AppendVarint(hdr, uint64(size))
		w.Header().Set("Content-Type", "application/protobuf")
		w.Header().Set("Content-Length", strconv.Itoa(len(hdr)+size))
		w.Write(hdr)
		if _, err := pw.WriteTo(w); err != nil {
			a.log.Warn("tempo API: writing a trace", "err", err)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	a.writeJSONTrace(w, spans, `{"trace":{"resourceSpans":`, "}}\n")
}

// searchRequest is a parsed /api/search.
type searchRequest struct {
	search queryapi.Search
	keys   []string
}

// parseSearch reads q (TraceQL), tags (logfmt key=value pairs, Tempo's
// older search), minDuration, maxDuration, limit, start and end (seconds
// since the epoch) and spss (spans per span set).
func parseSearch(v map[string][]string) (*searchRequest, error) {
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	for k := range v {
		switch k {
		case "q", "tags", "minDuration", "maxDuration", "limit", "start", "end", "spss":
		default:
			return nil, badRequest("unknown search parameter %q", k)
		}
	}
	req := &searchRequest{}
	q := get("q")
	if q == "" {
		q = "{}"
	}
	conj, keys, err := Translate(q)
	if err != nil {
		return nil, err
	}
	req.keys = keys
	if len(conj) == 0 {
		conj = []queryapi.Conjunct{{}}
	}
	var extra queryapi.Conjunct
	if t := get("tags"); t != "" {
		pairs, err := parseLogfmt(t)
		if err != nil {
			return nil, err
		}
		for _, p := range pairs {
			if p[0] == queryapi.AttrServiceName || p[0] == "service" {
				extra.Service = p[1]
			} else {
				extra.Attrs = append(extra.Attrs, trace.Attr{Key: p[0], Value: trace.String(p[1])})
			}
			req.keys = append(req.keys, p[0])
		}
	}
	var maxDur int64
	for _, t := range []struct {
		key string
		dst *int64
	}{{"minDuration", &extra.MinDurationNS}, {"maxDuration", &maxDur}} {
		if s := get(t.key); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 {
				return nil, badRequest("%s=%q: want a duration like 100ms", t.key, s)
			}
			*t.dst = int64(d)
		}
	}
	for i := range conj {
		c := &conj[i]
		if extra.Service != "" {
			if c.Service != "" && c.Service != extra.Service {
				svc := extra.Service
				inner := c.Check
				c.Check = func(sp *trace.Span) bool {
					return queryapi.ServiceOf(sp) == svc && (inner == nil || inner(sp))
				}
			} else {
				c.Service = extra.Service
			}
		}
		c.Attrs = append(c.Attrs, extra.Attrs...)
		c.MinDurationNS = max(c.MinDurationNS, extra.MinDurationNS)
		if maxDur > 0 && (c.MaxDurationNS == 0 || maxDur < c.MaxDurationNS) {
			c.MaxDurationNS = maxDur // an index term
		}
	}
	s := &req.search
	s.Any = conj
	for _, t := range []struct {
		key string
		dst *int64
	}{{"start", &s.SinceNS}, {"end", &s.UntilNS}} {
		if v := get(t.key); v != "" {
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil || sec < 0 || sec > maxSeconds {
				return nil, badRequest("%s=%q: want seconds since the epoch", t.key, v)
			}
			*t.dst = sec * 1e9
		}
	}
	if s.UntilNS != 0 {
		s.UntilNS += 1e9 // end is inclusive, at second precision
	}
	s.Limit = DefaultLimit
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("limit=%q: want a positive number", v)
		}
		if n > 0 {
			s.Limit = min(n, storedir.MaxSearchLimit)
		}
	}
	s.PerTrace = DefaultSpansPerSpanSet
	if v := get("spss"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("spss=%q: want a positive number", v)
		}
		if n > 0 {
			s.PerTrace = min(n, 100)
		}
	}
	return req, nil
}

// parseLogfmt reads key=value pairs separated by spaces; a value may be
// "quoted".
func parseLogfmt(s string) ([][2]string, error) {
	var out [][2]string
	for i := 0; i < len(s); {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i == len(s) {
			break
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq <= 0 {
			return nil, badRequest("tags: %q at offset %d is not key=value", s[i:], i)
		}
		key := s[i : i+eq]
		i += eq + 1
		var val string
		if i < len(s) && s[i] == '"' {
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, badRequest("tags: unterminated quoted value at offset %d", i)
			}
			uq, err := strconv.Unquote(s[i : j+1])
			if err != nil {
				return nil, badRequest("tags: bad quoted value at offset %d: %v", i, err)
			}
			val, i = uq, j+1
		} else {
			j := strings.IndexByte(s[i:], ' ')
			if j < 0 {
				j = len(s) - i
			}
			val, i = s[i:i+j], i+j
		}
		out = append(out, [2]string{key, val})
	}
	return out, nil
}

// The search answer is written by hand into one buffer (Tempo's
// SearchResponse JSON: traces with traceID, rootServiceName,
// rootTraceName, startTimeUnixNano, durationMs, spanSet and spanSets of
// spans with spanID, name, startTimeUnixNano, durationNanos, attributes;
// metrics): it is the whole cost of the answer beyond the index, so no
// per-field strings or reflection.

// rootNotReceived is what Tempo names a trace whose root span it has not
// seen.
const rootNotReceived = "<root span not yet received>"

func (a *API) handleSearch(w http.ResponseWriter, r *http.Request) {
	req, err := parseSearch(r.URL.Query())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	req.search.Heads = true
	hits, truncated, err := queryapi.FindTraces(r.Context(), a.db, req.search)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	// The answer goes out in pieces of about flushAt bytes; a failure
	// after the first piece can only end the answer early (and is logged).
	const flushAt = 4096
	b := make([]byte, 0, flushAt+1024)
	wrote := false
	w.Header().Set("Content-Type", "application/json")
	b = append(b, `{"traces":[`...)
	var set []byte // one trace's span set, written twice (spanSet, spanSets)
	n := 0
	for _, h := range hits {
		// The head comes with the index search when it could read it
		// (an index-only query), else it is read here.
		var root *trace.Span
		var start, end int64
		if h.Head != nil {
			root, start, end = h.Head.Root, h.Head.StartNS, h.Head.EndNS
		} else {
			root, start, end, _, err = a.db.TraceHead(r.Context(), h.TraceID)
			if errors.Is(err, storedir.ErrNotFound) {
				continue
			}
			if err != nil && wrote {
				a.log.Error("tempo search: reading a trace head after the answer began", "trace", h.TraceID, "err", err)
				return
			}
			if err != nil {
				a.fail(w, r, err)
				return
			}
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"traceID":"`...)
		b = hex.AppendEncode(b, h.TraceID[:])
		b = append(b, `","rootServiceName":`...)
		if root != nil {
			b = queryapi.AppendJSONString(b, queryapi.ServiceOf(root))
			if name := queryapi.OperationOf(root); name != "" {
				b = append(b, `,"rootTraceName":`...)
				b = queryapi.AppendJSONString(b, name)
			}
		} else {
			b = queryapi.AppendJSONString(b, rootNotReceived)
		}
		b = append(b, `,"startTimeUnixNano":"`...)
		b = strconv.AppendInt(b, start, 10)
		b = append(b, `","durationMs":`...)
		b = strconv.AppendInt(b, (end-start)/1e6, 10)
		set = appendSpanSet(set[:0], h.Spans, req.keys)
		b = append(b, `,"spanSet":`...)
		b = append(b, set...)
		b = append(b, `,"spanSets":[`...)
		b = append(b, set...)
		b = append(b, "]}"...)
		if len(b) >= flushAt {
			w.Write(b)
			b, wrote = b[:0], true
		}
	}
	b = append(b, `],"metrics":{"completedJobs":1,"inspectedTraces":`...)
	b = strconv.AppendInt(b, int64(len(hits)), 10)
	b = append(b, `,"totalJobs":1`...)
	if truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, "}}\n"...)
	w.Write(b)
}

// appendSpanID appends id as trace.SpanID.String writes it.
func appendSpanID(b []byte, id trace.SpanID) []byte {
	if id == 0 {
		return b
	}
	var raw [8]byte
	binary.BigEndian.PutUint64(raw[:], uint64(id))
	return hex.AppendEncode(b, raw[:])
}

// appendSpanSet appends a span set: the matching spans with their service
// and the attributes the query names (keys).
func appendSpanSet(b []byte, spans []*trace.Span, keys []string) []byte {
	b = append(b, `{"spans":[`...)
	for i, sp := range spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"spanID":"`...)
		b = appendSpanID(b, sp.SpanID)
		b = append(b, `","name":`...)
		b = queryapi.AppendJSONString(b, queryapi.OperationOf(sp))
		b = append(b, `,"startTimeUnixNano":"`...)
		b = strconv.AppendInt(b, sp.StartNS, 10)
		b = append(b, `","durationNanos":"`...)
		b = strconv.AppendInt(b, sp.DurationNS, 10)
		b = append(b, `","attributes":[{"key":"`+queryapi.AttrServiceName+`","value":{"stringValue":`...)
		b = queryapi.AppendJSONString(b, queryapi.ServiceOf(sp))
		b = append(b, "}}"...)
		for _, k := range keys {
			if k == queryapi.AttrServiceName {
				continue
			}
			if v, ok := sp.Attrs.Get(k); ok {
				b = append(b, `,{"key":`...)
				b = queryapi.AppendJSONString(b, k)
				b = append(b, `,"value":`...)
				b = queryapi.AppendAnyValueJSON(b, &v)
				b = append(b, '}')
			}
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"matched":`...)
	b = strconv.AppendInt(b, int64(len(spans)), 10)
	return append(b, '}')
}

// MaxTagSpans bounds the newest spans a span-name listing reads: no index
// lists root methods, so the names are those of recent spans.
const MaxTagSpans = 1000

// MaxTagNames bounds a tag-name listing.
const MaxTagNames = 10000

var intrinsicTags = []string{"duration", "kind", "name", "status"}

// tagNames lists the span attribute keys the index holds, split into
// resource scope (the OpenTelemetry resource namespaces: service.*,
// host.*, …) and span scope; the otel.* keys ztsd writes for OTLP fields
// are the intrinsics and are left out. start and end are checked and, as
// keys are listed per store, do not narrow the listing.
func (a *API) tagNames(r *http.Request) (resource, span []string, err error) {
	for _, k := range []string{"start", "end"} {
		if v := r.URL.Query().Get(k); v != "" {
			if sec, err := strconv.ParseInt(v, 10, 64); err != nil || sec < 0 || sec > maxSeconds {
				return nil, nil, badRequest("%s=%q: want seconds since the epoch", k, v)
			}
		}
	}
	keys, err := a.db.AttributeKeys(r.Context(), MaxTagNames)
	if err != nil {
		return nil, nil, err
	}
	rs, ss := map[string]bool{queryapi.AttrServiceName: true}, map[string]bool{}
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "otel."):
		case queryapi.IsResourceKey(k):
			rs[k] = true
		default:
			ss[k] = true
		}
	}
	return sortedKeys(rs), sortedKeys(ss), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *API) handleTagsV1(w http.ResponseWriter, r *http.Request) {
	res, span, err := a.tagNames(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	set := map[string]bool{}
	for _, k := range append(res, span...) {
		set[k] = true
	}
	writeJSON(w, map[string]any{"tagNames": sortedKeys(set)})
}

type scopeJSON struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

func (a *API) handleTagsV2(w http.ResponseWriter, r *http.Request) {
	scope := r.URL.Query().Get("scope")
	switch scope {
	case "", "all", "resource", "span", "intrinsic":
	default:
		a.fail(w, r, badRequest("scope=%q: want resource, span, intrinsic or none", scope))
		return
	}
	res, span, err := a.tagNames(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var scopes []scopeJSON
	if scope == "" || scope == "all" || scope == "resource" {
		scopes = append(scopes, scopeJSON{"resource", res})
	}
	if scope == "" || scope == "all" || scope == "span" {
		scopes = append(scopes, scopeJSON{"span", span})
	}
	if scope == "" || scope == "all" || scope == "intrinsic" {
		scopes = append(scopes, scopeJSON{"intrinsic", intrinsicTags})
	}
	writeJSON(w, map[string]any{"scopes": scopes})
}

// MaxTagValues bounds a tag-values answer.
const MaxTagValues = 1000

type tagValue struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// tagValues lists the values of a tag: "resource.service.name" (or
// "service.name") the services, the intrinsics their fixed values (name:
// the operations seen), any other key its indexed values. A q that scopes
// the listing (valueScope) narrows name, service and attribute values to
// those of the spans matching it (scopedValues); status and kind stay
// their fixed keywords.
func (a *API) tagValues(r *http.Request, tag string) ([]tagValue, error) {
	key := tag
	for _, p := range []string{"resource.", "span.", "."} {
		if k, ok := strings.CutPrefix(tag, p); ok {
			key = k
			break
		}
	}
	typed := func(typ string, vals []string) []tagValue {
		out := make([]tagValue, len(vals))
		for i, v := range vals {
			out[i] = tagValue{typ, v}
		}
		return out
	}
	switch tag {
	case "status":
		return typed("keyword", []string{"error", "ok", "unset"}), nil
	case "kind":
		return typed("keyword", []string{"unspecified", "internal", "server", "client", "producer", "consumer"}), nil
	case "duration":
		return []tagValue{}, nil
	}
	if conj, ok := valueScope(r.URL.Query().Get("q")); ok {
		return a.scopedValues(r, tag, key, conj)
	}
	if tag == "name" {
		ops, err := a.names(r)
		return typed("string", ops), err
	}
	if key == queryapi.AttrServiceName {
		svcs, err := queryapi.Services(r.Context(), a.db)
		return typed("string", svcs), err
	}
	vals, err := a.db.AttributeValues(r.Context(), key, MaxTagValues)
	if err != nil {
		return nil, err
	}
	out := make([]tagValue, len(vals))
	for i, v := range vals {
		out[i] = typedValue(v)
	}
	return out, nil
}

// valueScope reads a tag-value listing's q (the query being edited, which
// Grafana sends to scope the values): conjuncts when it is a TraceQL query
// of the subset with at least one condition; else (empty, "{}", or outside
// the subset, as an unfinished query often is) the listing is not scoped.
func valueScope(q string) ([]queryapi.Conjunct, bool) {
	if q == "" {
		return nil, false
	}
	conj, _, err := Translate(q)
	if err != nil || len(conj) == 0 {
		return nil, false
	}
	for _, c := range conj {
		if c.Service == "" && len(c.Attrs) == 0 && c.Operation == "" && c.MinDurationNS == 0 && c.MaxDurationNS == 0 && !c.ErrorsOnly && c.Check == nil {
			return nil, false // an alternative without conditions: every span
		}
	}
	return conj, true
}

// scopedValues lists the values tag takes on the newest MaxTagSpans spans
// matching conj (read as a search reads them, see queryapi.FindSpans), at
// most MaxTagValues, sorted.
func (a *API) scopedValues(r *http.Request, tag, key string, conj []queryapi.Conjunct) ([]tagValue, error) {
	spans, _, err := queryapi.FindSpans(r.Context(), a.db, queryapi.Search{Any: conj}, MaxTagSpans)
	if err != nil {
		return nil, err
	}
	vals := map[tagValue]bool{}
	for _, sp := range spans {
		switch {
		case tag == "name":
			vals[tagValue{"string", queryapi.OperationOf(sp)}] = true
		case key == queryapi.AttrServiceName:
			vals[tagValue{"string", queryapi.ServiceOf(sp)}] = true
		default:
			v, ok := sp.Attrs.Get(key)
			if !ok && sp.Root != nil {
				v, ok = sp.Root.Attrs.Get(key)
			}
			if ok {
				vals[typedValue(v.Text())] = true
			}
		}
		if len(vals) >= MaxTagValues {
			break
		}
	}
	out := make([]tagValue, 0, len(vals))
	for v := range vals {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Value < out[j].Value })
	return out, nil
}

// typedValue types an indexed value's text as Tempo does: int, bool or
// string.
func typedValue(v string) tagValue {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return tagValue{"int", v}
	}
	if v == "true" || v == "false" {
		return tagValue{"bool", v}
	}
	return tagValue{"string", v}
}

// names lists the span names of the newest MaxTagSpans spans.
func (a *API) names(r *http.Request) ([]string, error) {
	res, err := a.db.Search(r.Context(), storedir.Query{Spans: true, Limit: MaxTagSpans})
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, sp := range res.Spans {
		set[queryapi.OperationOf(sp)] = true
	}
	return sortedKeys(set), nil
}

func (a *API) handleTagValuesV1(w http.ResponseWriter, r *http.Request) {
	vals, err := a.tagValues(r, r.PathValue("tag"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = v.Value
	}
	writeJSON(w, map[string]any{"tagValues": out})
}

func (a *API) handleTagValuesV2(w http.ResponseWriter, r *http.Request) {
	vals, err := a.tagValues(r, r.PathValue("tag"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"tagValues": vals})
}
