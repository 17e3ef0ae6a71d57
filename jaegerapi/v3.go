package jaegerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// v3Error writes the grpc-gateway error body jaeger-query's v3 API writes.
func (a *API) v3Error(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	if errors.Is(err, storedir.ErrNotFound) {
		st = http.StatusNotFound
	}
	if st >= 500 {
		a.log.Error("jaeger v3 API request failed", "path", r.URL.Path, "err", err)
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"httpCode": st, "message": err.Error()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	w.Write(append(body, '\n'))
}

func (a *API) handleV3Services(w http.ResponseWriter, r *http.Request) {
	svcs, err := queryapi.Services(r.Context(), a.db)
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"services": svcs})
}

func (a *API) handleV3Operations(w http.ResponseWriter, r *http.Request) {
	kind := r.FormValue("spanKind")
	if kind == "" {
		kind = r.FormValue("span_kind")
	}
	ops, err := a.operations(r.Context(), r.FormValue("service"), kind)
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	writeJSON(w, map[string]any{"operations": ops})
}

func (a *API) handleV3Trace(w http.ResponseWriter, r *http.Request) {
	id, err := parseTraceID(r.PathValue("id"))
	if err != nil {
		a.v3Error(w, r, &BadRequest{fmt.Sprintf("malformed parameter trace_id: %v", err)})
		return
	}
	roots, err := a.db.GetTrace(r.Context(), id)
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"result":`))
	if err := queryapi.WriteJSON(w, queryapi.Flatten(roots), queryapi.JSONStyle{}); err != nil {
		a.log.Error("jaeger v3 API: writing a trace", "trace", id, "err", err)
		return
	}
	w.Write([]byte("}\n"))
}

// ParseV3Search parses the v3 find-traces parameters, by their canonical
// camelCase names (Jaeger 2.x, what Jaeger UI sends since its migration)
// or the snake_case names they replace (the canonical one wins when both
// are given, an empty value is absent): query.serviceName,
// query.operationName, query.attributes (a JSON object of strings, as the
// v1 API's tags), query.startTimeMin and query.startTimeMax (RFC 3339,
// both required), query.durationMin, query.durationMax, query.searchDepth
// (or query.num_traces: the limit), query.rawTraces (no effect).
func ParseV3Search(v map[string][]string) (queryapi.Search, error) {
	get := func(names ...string) (val, name string) {
		for _, k := range names {
			if vs := v[k]; len(vs) > 0 && vs[0] != "" {
				return vs[0], k
			}
		}
		return "", names[0]
	}
	var s queryapi.Search
	svc, _ := get("query.serviceName", "query.service_name")
	op, _ := get("query.operationName", "query.operation_name")
	c := queryapi.Conjunct{Service: svc, Operation: op}
	if attrs, name := get("query.attributes"); attrs != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(attrs), &m); err != nil {
			return s, &BadRequest{fmt.Sprintf("malformed parameter %s: want a JSON object of strings: %v", name, err)}
		}
		if err := addTagTerms(&c, m); err != nil {
			return s, err
		}
	}
	tmin, nmin := get("query.startTimeMin", "query.start_time_min")
	tmax, nmax := get("query.startTimeMax", "query.start_time_max")
	if tmin == "" || tmax == "" {
		return s, &BadRequest{"query.startTimeMin and query.startTimeMax (or query.start_time_min and query.start_time_max) are required"}
	}
	for _, t := range []struct {
		key, val string
		dst      *int64
	}{{nmin, tmin, &s.SinceNS}, {nmax, tmax, &s.UntilNS}} {
		tt, err := time.Parse(time.RFC3339Nano, t.val)
		if err != nil {
			return s, &BadRequest{fmt.Sprintf("malformed parameter %s: %v", t.key, err)}
		}
		*t.dst = tt.UnixNano()
	}
	s.UntilNS++
	var maxDur int64
	for _, t := range []struct {
		names []string
		dst   *int64
	}{{[]string{"query.durationMin", "query.duration_min"}, &c.MinDurationNS}, {[]string{"query.durationMax", "query.duration_max"}, &maxDur}} {
		if d, name := get(t.names...); d != "" {
			dd, err := time.ParseDuration(d)
			if err != nil || dd < 0 {
				return s, &BadRequest{fmt.Sprintf("malformed parameter %s: %q is not a duration", name, d)}
			}
			*t.dst = int64(dd)
		}
	}
	c.MaxDurationNS = maxDur
	s.Limit = DefaultLimit
	if n, name := get("query.searchDepth", "query.search_depth", "query.num_traces"); n != "" {
		k, err := strconv.Atoi(n)
		if err != nil || k < 0 {
			return s, &BadRequest{fmt.Sprintf("malformed parameter %s: %q", name, n)}
		}
		if k > 0 {
			s.Limit = min(k, storedir.MaxSearchLimit)
		}
	}
	s.Any = []queryapi.Conjunct{c}
	return s, nil
}

func (a *API) handleV3Search(w http.ResponseWriter, r *http.Request) {
	s, err := ParseV3Search(r.URL.Query())
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	hits, _, err := queryapi.FindTraces(r.Context(), a.db, s)
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	if len(hits) == 0 {
		a.v3Error(w, r, fmt.Errorf("No traces found: %w", storedir.ErrNotFound))
		return
	}
	// The v3 API answers one TracesData with every trace's resource spans:
	// the spans of all hits are written through one writer, trace by trace.
	var spans []*trace.Span
	for _, h := range hits {
		roots, err := a.db.GetTrace(r.Context(), h.TraceID)
		if errors.Is(err, storedir.ErrNotFound) {
			continue
		}
		if err != nil {
			a.v3Error(w, r, err)
			return
		}
		spans = append(spans, queryapi.Flatten(roots)...)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"result":`))
	if err := queryapi.WriteJSON(w, spans, queryapi.JSONStyle{}); err != nil {
		a.log.Error("jaeger v3 API: writing traces", "err", err)
		return
	}
	w.Write([]byte("}\n"))
}

// traceSummaryJSON is one trace of GET /api/v3/trace-summaries, in the
// shape jaeger-query's handler writes (ADR-010, Jaeger's apiv3
// summaries.go): hex trace id, times as decimal strings of Unix
// nanoseconds (left out when zero), counts as numbers.
type traceSummaryJSON struct {
	TraceID              string               `json:"traceId"`
	RootServiceName      string               `json:"rootServiceName"`
	RootOperationName    string               `json:"rootOperationName"`
	MinStartTimeUnixNano string               `json:"minStartTimeUnixNano,omitempty"`
	MaxEndTimeUnixNano   string               `json:"maxEndTimeUnixNano,omitempty"`
	SpanCount            int                  `json:"spanCount"`
	ErrorSpanCount       int                  `json:"errorSpanCount"`
	OrphanSpanCount      int                  `json:"orphanSpanCount"`
	Services             []serviceSummaryJSON `json:"services"`
}

type serviceSummaryJSON struct {
	Name           string `json:"name"`
	SpanCount      int    `json:"spanCount"`
	ErrorSpanCount int    `json:"errorSpanCount"`
}

func unixNanoString(ns int64) string {
	if ns <= 0 {
		return ""
	}
	return strconv.FormatInt(ns, 10)
}

// handleV3Summaries answers GET /api/v3/trace-summaries: the parameters of
// /api/v3/traces (ParseV3Search), per trace found its summary
// (queryapi.Summarize) instead of its spans. No trace found is an empty
// list.
func (a *API) handleV3Summaries(w http.ResponseWriter, r *http.Request) {
	s, err := ParseV3Search(r.URL.Query())
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	hits, _, err := queryapi.FindTraces(r.Context(), a.db, s)
	if err != nil {
		a.v3Error(w, r, err)
		return
	}
	out := make([]traceSummaryJSON, 0, len(hits))
	for _, h := range hits {
		roots, err := a.db.GetTrace(r.Context(), h.TraceID)
		if errors.Is(err, storedir.ErrNotFound) {
			continue
		}
		if err != nil {
			a.v3Error(w, r, err)
			return
		}
		ts := queryapi.Summarize(h.TraceID, roots)
		tj := traceSummaryJSON{TraceID: ts.TraceID.String(), RootServiceName: ts.RootServiceName,
			RootOperationName: ts.RootOperationName, MinStartTimeUnixNano: unixNanoString(ts.MinStartNS),
			MaxEndTimeUnixNano: unixNanoString(ts.MaxEndNS), SpanCount: ts.SpanCount,
			ErrorSpanCount: ts.ErrorSpanCount, OrphanSpanCount: ts.OrphanSpanCount,
			Services: make([]serviceSummaryJSON, len(ts.Services))}
		for i, sv := range ts.Services {
			tj.Services[i] = serviceSummaryJSON{sv.Name, sv.SpanCount, sv.ErrorSpanCount}
		}
		out = append(out, tj)
	}
	writeJSON(w, map[string]any{"summaries": out})
}
