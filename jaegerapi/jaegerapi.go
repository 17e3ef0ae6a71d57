package jaegerapi

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// DefaultLimit is the number of traces a search returns without limit=,
// as jaeger-query's.
const DefaultLimit = 100

// API serves the Jaeger query API.
type API struct {
	db  *storedir.DB
	log *slog.Logger
	// protobufTrace answers /api/traces/{id} for clients that accept
	// application/protobuf: Tempo's data source, whose trace-by-id path
	// is the same as jaeger-query's.
	protobufTrace http.Handler
}

// New returns the API over db. protobufTrace, when not nil, serves
// GET /api/traces/{id} requests that accept application/protobuf (see
// tempoapi.API.TraceV1Handler).
func New(db *storedir.DB, log *slog.Logger, protobufTrace http.Handler) *API {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &API{db: db, log: log, protobufTrace: protobufTrace}
}

// Routes returns the routes to mount on the server (read access).
func (a *API) Routes() []server.Route {
	r := func(pattern string, h http.HandlerFunc) server.Route {
		return server.Route{Pattern: pattern, Access: server.AccessRead, Handler: h}
	}
	return []server.Route{
		r("GET /api/services", a.handleServices),
		r("GET /api/services/{service}/operations", a.handleOperationsLegacy),
		r("GET /api/operations", a.handleOperations),
		r("GET /api/traces", a.handleSearch),
		r("GET /api/traces/{id}", a.handleTrace),
		r("GET /api/v3/services", a.handleV3Services),
		r("GET /api/v3/operations", a.handleV3Operations),
		r("GET /api/v3/traces/{id}", a.handleV3Trace),
		r("GET /api/v3/traces", a.handleV3Search),
		r("GET /api/v3/trace-summaries", a.handleV3Summaries),
	}
}

// structuredResponse is jaeger-query's envelope.
type structuredResponse struct {
	Data   any               `json:"data"`
	Total  int               `json:"total"`
	Limit  int               `json:"limit"`
	Offset int               `json:"offset"`
	Errors []structuredError `json:"errors"`
}

type structuredError struct {
	Code    int    `json:"code,omitempty"`
	Msg     string `json:"msg"`
	TraceID string `json:"traceID,omitempty"`
}

// BadRequest is an invalid request parameter.
type BadRequest struct{ Msg string }

func (e *BadRequest) Error() string { return e.Msg }

func statusOf(err error) int {
	var br *BadRequest
	if errors.As(err, &br) {
		return http.StatusBadRequest
	}
	st, _ := server.StatusOf(err)
	return st
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	if st >= 500 {
		a.log.Error("jaeger API request failed", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	json.NewEncoder(w).Encode(structuredResponse{Errors: []structuredError{{Code: st, Msg: err.Error()}}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (a *API) handleServices(w http.ResponseWriter, r *http.Request) {
	svcs, err := queryapi.Services(r.Context(), a.db)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, structuredResponse{Data: svcs, Total: len(svcs)})
}

func (a *API) handleOperationsLegacy(w http.ResponseWriter, r *http.Request) {
	ops, err := queryapi.Operations(r.Context(), a.db, r.PathValue("service"), "")
	if err != nil {
		a.fail(w, r, err)
		return
	}
	names := make([]string, 0, len(ops))
	for i, op := range ops {
		if i == 0 || ops[i-1].Name != op.Name {
			names = append(names, op.Name)
		}
	}
	writeJSON(w, structuredResponse{Data: names, Total: len(names)})
}

type operation struct {
	Name     string `json:"name"`
	SpanKind string `json:"spanKind"`
}

func (a *API) operations(ctx context.Context, service, kind string) ([]operation, error) {
	if service == "" {
		return nil, &BadRequest{"parameter 'service' is required"}
	}
	if kind != "" {
		if _, ok := queryapi.ParseKind(kind); !ok {
			return nil, &BadRequest{fmt.Sprintf("unsupported span kind: '%s'", kind)}
		}
	}
	ops, err := queryapi.Operations(ctx, a.db, service, kind)
	if err != nil {
		return nil, err
	}
	out := make([]operation, len(ops))
	for i, op := range ops {
		out[i] = operation{Name: op.Name, SpanKind: op.Kind.String()}
	}
	return out, nil
}

func (a *API) handleOperations(w http.ResponseWriter, r *http.Request) {
	ops, err := a.operations(r.Context(), r.FormValue("service"), r.FormValue("spanKind"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, structuredResponse{Data: ops, Total: len(ops)})
}

// SearchParams is a parsed /api/traces query.
type SearchParams struct {
	Search   queryapi.Search
	TraceIDs []trace.TraceID
}

// ParseSearch parses jaeger-query's search parameters: service,
// operation, tags (a JSON object of strings, repeatable), tag (key:value,
// repeatable), start and end (µs since the epoch), minDuration and
// maxDuration (Go durations: 1.2ms), limit, traceID (repeatable); lookback,
// prettyPrint, raw and spanKind are accepted and have no effect on ztsd.
func ParseSearch(v map[string][]string) (*SearchParams, error) {
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	for k := range v {
		switch k {
		case "service", "operation", "tags", "tag", "start", "end", "minDuration", "maxDuration", "limit",
			"traceID", "lookback", "prettyPrint", "raw", "spanKind":
		default:
			return nil, &BadRequest{fmt.Sprintf("unknown parameter %q", k)}
		}
	}
	p := &SearchParams{}
	for _, s := range v["traceID"] {
		id, err := parseTraceID(s)
		if err != nil {
			return nil, &BadRequest{fmt.Sprintf("cannot parse traceID param: %v", err)}
		}
		p.TraceIDs = append(p.TraceIDs, id)
	}
	c := queryapi.Conjunct{Service: get("service"), Operation: get("operation")}
	if c.Service == "" && len(p.TraceIDs) == 0 {
		return nil, &BadRequest{"parameter 'service' is required"}
	}
	tags := map[string]string{}
	for _, t := range v["tag"] {
		k, val, ok := strings.Cut(t, ":")
		if !ok {
			return nil, &BadRequest{fmt.Sprintf("malformed 'tag' parameter, expecting key:value, received: %s", t)}
		}
		tags[k] = val
	}
	for _, t := range v["tags"] {
		var m map[string]string
		if err := json.Unmarshal([]byte(t), &m); err != nil {
			return nil, &BadRequest{fmt.Sprintf("malformed 'tags' parameter, cannot unmarshal JSON: %v", err)}
		}
		for k, val := range m {
			tags[k] = val
		}
	}
	if err := addTagTerms(&c, tags); err != nil {
		return nil, err
	}
	var err error
	for _, t := range []struct {
		key string
		dst *int64
	}{{"start", &p.Search.SinceNS}, {"end", &p.Search.UntilNS}} {
		s := get(t.key)
		if s == "" {
			continue
		}
		us, err := strconv.ParseInt(s, 10, 64)
		if err != nil || us < 0 || us > math.MaxInt64/1000-1 {
			return nil, &BadRequest{fmt.Sprintf("unable to parse param '%s': %q is not microseconds since the epoch", t.key, s)}
		}
		*t.dst = us * 1000
	}
	if p.Search.UntilNS != 0 {
		p.Search.UntilNS += 1000 // end is inclusive, at µs precision
	}
	var maxDur int64
	for _, t := range []struct {
		key string
		dst *int64
	}{{"minDuration", &c.MinDurationNS}, {"maxDuration", &maxDur}} {
		s := get(t.key)
		if s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return nil, &BadRequest{fmt.Sprintf("unable to parse param '%s': %q is not a duration like 1.2ms", t.key, s)}
		}
		*t.dst = int64(d)
	}
	if maxDur != 0 && maxDur < c.MinDurationNS {
		return nil, &BadRequest{"'maxDuration' should be greater than 'minDuration'"}
	}
	c.MaxDurationNS = maxDur
	p.Search.Limit = DefaultLimit
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, &BadRequest{fmt.Sprintf("unable to parse param 'limit': %q", s)}
		}
		if n > 0 {
			p.Search.Limit = min(n, storedir.MaxSearchLimit)
		}
	}
	p.Search.Any = []queryapi.Conjunct{c}
	return p, err
}

// parseTraceID reads up to 32 hex digits (Jaeger drops leading zeros).
func parseTraceID(s string) (trace.TraceID, error) {
	var id trace.TraceID
	if s == "" || len(s) > 32 {
		return id, fmt.Errorf("trace id %q: want 1 to 32 hex digits", s)
	}
	s = strings.Repeat("0", 32-len(s)) + s
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("trace id %q: not hex", s)
	}
	if id.IsZero() {
		return id, fmt.Errorf("trace id %q is zero", s)
	}
	return id, nil
}

func (a *API) handleSearch(w http.ResponseWriter, r *http.Request) {
	p, err := ParseSearch(r.URL.Query())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ids := p.TraceIDs
	var errs []structuredError
	if len(ids) == 0 {
		hits, truncated, err := queryapi.FindTraces(r.Context(), a.db, p.Search)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		for _, h := range hits {
			ids = append(ids, h.TraceID)
		}
		if truncated {
			errs = append(errs, structuredError{Msg: fmt.Sprintf("search stopped after %d spans that needed checking; narrow the time range to see older traces",
				queryapi.MaxFilterPages*queryapi.FilterPageSize)})
		}
	}
	a.writeTraces(w, r, ids, errs, len(p.TraceIDs) > 0)
}

// writeTraces writes {"data": [trace…], …}, reading and writing one trace
// at a time.
func (a *API) writeTraces(w http.ResponseWriter, r *http.Request, ids []trace.TraceID, errs []structuredError, byID bool) {
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"data":[`)
	n := 0
	for _, id := range ids {
		roots, err := a.db.GetTrace(r.Context(), id)
		if errors.Is(err, storedir.ErrNotFound) {
			if byID {
				errs = append(errs, structuredError{Msg: "trace not found", TraceID: id.String()})
			}
			continue // deleted by retention since the search
		}
		if err != nil {
			a.log.Error("jaeger API: reading a trace", "trace", id, "err", err)
			errs = append(errs, structuredError{Code: http.StatusInternalServerError, Msg: err.Error(), TraceID: id.String()})
			continue
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		n++
		if err := writeTrace(bw, id, queryapi.Flatten(roots)); err != nil {
			a.log.Error("jaeger API: writing a trace", "trace", id, "err", err)
			return
		}
	}
	bw.WriteString(`],"total":0,"limit":0,"offset":0,"errors":`)
	if len(errs) == 0 {
		bw.WriteString("null")
	} else {
		b, _ := json.Marshal(errs)
		bw.Write(b)
	}
	bw.WriteString("}\n")
	bw.Flush()
}

func (a *API) handleTrace(w http.ResponseWriter, r *http.Request) {
	if a.protobufTrace != nil && strings.Contains(r.Header.Get("Accept"), "application/protobuf") {
		a.protobufTrace.ServeHTTP(w, r)
		return
	}
	id, err := parseTraceID(r.PathValue("id"))
	if err != nil {
		a.fail(w, r, &BadRequest{fmt.Sprintf("cannot parse traceID param: %v", err)})
		return
	}
	roots, err := a.db.GetTrace(r.Context(), id)
	if errors.Is(err, storedir.ErrNotFound) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(structuredResponse{Errors: []structuredError{{Code: http.StatusNotFound, Msg: "trace not found"}}})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"data":[`)
	if err := writeTrace(bw, id, queryapi.Flatten(roots)); err != nil {
		a.log.Error("jaeger API: writing a trace", "trace", id, "err", err)
		return
	}
	bw.WriteString(`],"total":0,"limit":0,"offset":0,"errors":null}` + "\n")
	bw.Flush()
}

// addTagTerms adds Jaeger search tags to c as index terms: error=true and
// otel.status_code=ERROR the error flag, span.kind the otel.span.kind
// attribute, any other key an attribute equality (value as text).
func addTagTerms(c *queryapi.Conjunct, tags map[string]string) error {
	for k, val := range tags {
		switch k {
		case "error":
			if val != "true" {
				return &BadRequest{fmt.Sprintf("tag error=%q: only error=true is searchable", val)}
			}
			c.ErrorsOnly = true
		case "otel.status_code":
			if val != "ERROR" {
				return &BadRequest{fmt.Sprintf("tag otel.status_code=%q: only ERROR is searchable", val)}
			}
			c.ErrorsOnly = true
		case "span.kind":
			kk, ok := queryapi.ParseKind(val)
			if !ok {
				return &BadRequest{fmt.Sprintf("tag span.kind=%q: not a span kind", val)}
			}

			c.Attrs = append(c.Attrs, trace.Attr{Key: "otel.span.kind", Value: trace.String(kk.String())})
		default:
			c.Attrs = append(c.Attrs, trace.Attr{Key: k, Value: trace.String(val)})
		}
	}
	return nil
}
