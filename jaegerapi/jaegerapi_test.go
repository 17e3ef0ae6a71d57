package jaegerapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/querytest"
	"github.com/ztsd/ztsd/jaegerapi"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tempoapi"
)

// newServer serves the Jaeger (and Tempo) routes over db as the daemon
// mounts them.
func newServer(t *testing.T, db *storedir.DB) *httptest.Server {
	tempo := tempoapi.New(db, nil)
	routes := append(jaegerapi.New(db, nil, tempo.TraceV1Handler()).Routes(), tempo.Routes()...)
	srv := server.New(db, server.Options{Access: server.Access{Disabled: true}, Routes: routes})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// grafanaAccept is the Accept header Grafana's backend service sends
// with its JSON requests.
const grafanaAccept = "application/json, text/plain, */*"

func get(t *testing.T, ts *httptest.Server, path string, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

type jaegerResponse struct {
	Data   json.RawMessage `json:"data"`
	Total  int             `json:"total"`
	Limit  int             `json:"limit"`
	Offset int             `json:"offset"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type jTrace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType, TraceID, SpanID string
		} `json:"references"`
		StartTime int64 `json:"startTime"`
		Duration  int64 `json:"duration"`
		Tags      []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"tags"`
		Logs []struct {
			Timestamp int64 `json:"timestamp"`
			Fields    []struct {
				Key   string `json:"key"`
				Type  string `json:"type"`
				Value any    `json:"value"`
			} `json:"fields"`
		} `json:"logs"`
		ProcessID string   `json:"processID"`
		Warnings  []string `json:"warnings"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
		Tags        []struct {
			Key   string `json:"key"`
			Type  string `json:"type"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"processes"`
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// encodeURIComponent is JavaScript's, which Grafana applies to path
// segments and query parameters.
func encodeURIComponent(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// TestGrafanaJaegerDataSource replays what Grafana's Jaeger data source
// sends (public/app/plugins/datasource/jaeger: datasource.ts,
// components/SearchForm.tsx): "Save & test", the service and operation
// pickers, a search and the trace view.
func TestGrafanaJaegerDataSource(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t), querytest.SampleSpans(t))
	ts := newServer(t, db)
	h := map[string]string{"Accept": grafanaAccept}

	// Save & test: GET /api/services must list at least one service.
	code, body := get(t, ts, "/api/services", h)
	var r jaegerResponse
	decode(t, body, &r)
	var services []string
	decode(t, r.Data, &services)
	if code != 200 || len(services) == 0 || r.Total != len(services) || r.Errors != nil {
		t.Fatalf("/api/services: %d %s", code, body)
	}
	for _, want := range []string{"checkout", "payments", "zorka http", "wtf cff-js-node.wtf-trace",
		"atf session_20250101_120000/pid_4242/thread_0/index.atf", "dial9 demo-2026-03-18-small.bin"} {
		if !sort.StringsAreSorted(services) || !contains(services, want) {
			t.Errorf("services %v: want %q, sorted", services, want)
		}
	}

	// The operation picker, for a plain service and for mapped ones whose
	// names need escaping.
	for svc, want := range map[string]string{
		"checkout":   "GET /checkout,charge",
		"zorka http": "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)",
		"atf session_20250101_120000/pid_4242/thread_0/index.atf": "main",
	} {
		code, body := get(t, ts, "/api/services/"+encodeURIComponent(svc)+"/operations", h)
		var r jaegerResponse
		decode(t, body, &r)
		var ops []string
		decode(t, r.Data, &ops)
		if code != 200 || strings.Join(ops, ",") != want {
			t.Errorf("operations of %q: %d %s, want %s", svc, code, body, want)
		}
	}

	// The search Grafana sends: the form's fields in this order, the time
	// range in µs, lookback=custom; tags as a JSON object (converted from
	// logfmt).
	start := querytest.Base.Add(-time.Hour).UnixMicro()
	end := querytest.Base.Add(time.Hour).UnixMicro()
	q := fmt.Sprintf("service=checkout&operation=%s&tags=%s&minDuration=1ms&maxDuration=1s&limit=20&start=%d&end=%d&lookback=custom",
		encodeURIComponent("GET /checkout"), encodeURIComponent(`{"http.status_code":"500"}`), start, end)
	code, body = get(t, ts, "/api/traces?"+q, h)
	decode(t, body, &r)
	var traces []jTrace
	decode(t, r.Data, &traces)
	if code != 200 || len(traces) != 2 || r.Errors != nil {
		t.Fatalf("search: %d: %d traces %s", code, len(traces), body)
	}
	for _, tr := range traces {
		if len(tr.Spans) != 3 || len(tr.Processes) != 2 {
			t.Errorf("trace %s: %d spans, %d processes", tr.TraceID, len(tr.Spans), len(tr.Processes))
		}
	}
	// Newest first: traces 3 and 1 have status 500.
	if traces[0].TraceID != fmt.Sprintf("%x", querytest.TraceID(3)) || traces[1].TraceID != fmt.Sprintf("%x", querytest.TraceID(1)) {
		t.Errorf("search order: %s, %s", traces[0].TraceID, traces[1].TraceID)
	}

	// The trace view: GET /api/traces/{id}.
	id := fmt.Sprintf("%x", querytest.TraceID(1))
	code, body = get(t, ts, "/api/traces/"+encodeURIComponent(id), h)
	decode(t, body, &r)
	decode(t, r.Data, &traces)
	if code != 200 || len(traces) != 1 || traces[0].TraceID != id {
		t.Fatalf("trace view: %d %s", code, body)
	}
	tr := traces[0]
	byOp := map[string]int{}
	for i, sp := range tr.Spans {
		byOp[sp.OperationName] = i
	}
	root := tr.Spans[byOp["GET /checkout"]]
	pay := tr.Spans[byOp["POST /charge"]]
	charge := tr.Spans[byOp["charge"]]
	if len(root.References) != 0 || len(charge.References) != 1 || charge.References[0].RefType != "CHILD_OF" ||
		charge.References[0].SpanID != root.SpanID || pay.References[0].SpanID != charge.SpanID {
		t.Errorf("references: root %v charge %v pay %v", root.References, charge.References, pay.References)
	}
	if root.StartTime != querytest.Base.Add(time.Minute).UnixMicro() || root.Duration != 13000 {
		t.Errorf("root times: %d + %d µs", root.StartTime, root.Duration)
	}
	tags := map[string]string{}
	for _, tg := range root.Tags {
		tags[tg.Key] = fmt.Sprintf("%s:%v", tg.Type, tg.Value)
	}
	for k, v := range map[string]string{"http.status_code": "int64:500", "cart.total": "float64:13.5", "cart.express": "bool:false",
		"cart.items": `string:["book",2]`, "span.kind": "string:server", "otel.status_code": "string:ERROR", "error": "bool:true",
		"otel.status_description": "string:payment failed", "w3c.tracestate": "string:vendor=ztsd",
		"otel.scope.name": "string:ztsd.querytest", "otel.scope.version": "string:1.0.0"} {
		if tags[k] != v {
			t.Errorf("root tag %s = %q, want %q", k, tags[k], v)
		}
	}
	if len(root.Logs) != 1 || root.Logs[0].Fields[0].Value != "cart loaded" || root.Logs[0].Timestamp != root.StartTime+1000 {
		t.Errorf("root logs: %+v", root.Logs)
	}
	if p := tr.Processes[pay.ProcessID]; p.ServiceName != "payments" || len(p.Tags) != 1 || p.Tags[0].Key != "host.name" {
		t.Errorf("payments process: %+v", p)
	}
	if len(pay.Logs) != 1 || len(pay.Logs[0].Fields) != 3 || pay.Logs[0].Fields[0].Value != "exception" {
		t.Errorf("exception log: %+v", pay.Logs)
	}

	// Method-call records of other sources: the Zorka trace by id.
	code, body = get(t, ts, "/api/traces?service=zorka%20http&limit=20&lookback=custom", h)
	decode(t, body, &r)
	decode(t, r.Data, &traces)
	if code != 200 || len(traces) != 1 || traces[0].Processes["p1"].ServiceName != "zorka http" ||
		traces[0].Spans[0].StartTime != 1556820267280000 {
		t.Fatalf("zorka search: %d %s", code, body)
	}

	// An unknown trace: 404 with Jaeger's structured error.
	code, body = get(t, ts, "/api/traces/0123456789abcdef", h)
	decode(t, body, &r)
	if code != 404 || len(r.Errors) != 1 || r.Errors[0].Code != 404 {
		t.Errorf("unknown trace: %d %s", code, body)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestRecordsAsChildSpans: a WTF trace's nested scopes show as child
// spans, its instant events as logs.
func TestRecordsAsChildSpans(t *testing.T) {
	db := querytest.OpenDB(t, querytest.SampleSpans(t))
	ts := newServer(t, db)
	code, body := get(t, ts, "/api/traces?service=wtf%20cff-js-node.wtf-trace&limit=50", nil)
	var r jaegerResponse
	decode(t, body, &r)
	var traces []jTrace
	decode(t, r.Data, &traces)
	if code != 200 || len(traces) == 0 {
		t.Fatalf("wtf search: %d %s", code, body)
	}
	records, logs := 0, 0
	for _, tr := range traces {
		ids := map[string]bool{}
		for _, sp := range tr.Spans {
			ids[sp.SpanID] = true
		}
		for _, sp := range tr.Spans {
			for _, tg := range sp.Tags {
				if tg.Key == "ztsd.record" {
					records++
					if len(sp.References) != 1 || !ids[sp.References[0].SpanID] {
						t.Errorf("record-span %s: parent %v not in its trace", sp.SpanID, sp.References)
					}
				}
			}
			logs += len(sp.Logs)
		}
	}
	if records == 0 || logs == 0 {
		t.Errorf("WTF traces show %d record-spans and %d logs; want both", records, logs)
	}
}

func TestSearchErrors(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ts := newServer(t, db)
	for q, want := range map[string]string{
		"":                           "parameter 'service' is required",
		"service=x&minDuration=fast": "unable to parse param 'minDuration'",
		"service=x&minDuration=2s&maxDuration=1s":     "'maxDuration' should be greater than 'minDuration'",
		"service=x&tags=%7Bbad":                       "malformed 'tags' parameter",
		"service=x&tag=nocolon":                       "malformed 'tag' parameter",
		"service=x&start=yesterday":                   "unable to parse param 'start'",
		"service=x&limit=-1":                          "unable to parse param 'limit'",
		"service=x&traceID=xyz":                       "cannot parse traceID param",
		"service=x&color=red":                         `unknown parameter "color"`,
		"service=x&tags=%7B%22error%22%3A%22no%22%7D": "only error=true is searchable",
	} {
		code, body := get(t, ts, "/api/traces?"+q, nil)
		var r jaegerResponse
		decode(t, body, &r)
		if code != 400 || len(r.Errors) != 1 || r.Errors[0].Code != 400 || !strings.Contains(r.Errors[0].Msg, want) {
			t.Errorf("?%s: %d %s, want 400 with %q", q, code, body, want)
		}
	}
}

// TestV3 covers the v3 API Jaeger UI 2.x calls.
func TestV3(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ts := newServer(t, db)
	code, body := get(t, ts, "/api/v3/services", nil)
	var svcs struct{ Services []string }
	decode(t, body, &svcs)
	if code != 200 || strings.Join(svcs.Services, ",") != "checkout,payments" {
		t.Errorf("v3 services: %d %s", code, body)
	}
	code, body = get(t, ts, "/api/v3/operations?service=checkout&span_kind=server", nil)
	if code != 200 || string(body) != `{"operations":[{"name":"GET /checkout","spanKind":"server"}]}`+"\n" {
		t.Errorf("v3 operations: %d %s", code, body)
	}
	id := fmt.Sprintf("%x", querytest.TraceID(0))
	code, body = get(t, ts, "/api/v3/traces/"+id, nil)
	var res struct {
		Result struct {
			ResourceSpans []struct {
				Resource   struct{ Attributes []struct{ Key string } }
				ScopeSpans []struct {
					Spans []struct {
						TraceID string `json:"traceId"`
						SpanID  string `json:"spanId"`
						Name    string
						Kind    int
					}
				}
			}
		}
	}
	decode(t, body, &res)
	if code != 200 || len(res.Result.ResourceSpans) != 2 || res.Result.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceID != id {
		t.Fatalf("v3 trace: %d %s", code, body)
	}
	min, max := querytest.Base.Add(-time.Hour).Format(time.RFC3339Nano), querytest.Base.Add(time.Hour).Format(time.RFC3339Nano)
	code, body = get(t, ts, "/api/v3/traces?query.service_name=payments&query.start_time_min="+url.QueryEscape(min)+
		"&query.start_time_max="+url.QueryEscape(max)+"&query.num_traces=2", nil)
	decode(t, body, &res)
	n := 0
	for _, rs := range res.Result.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	if code != 200 || n != 6 {
		t.Errorf("v3 find traces: %d: %d spans, want 2 traces of 3: %s", code, n, body)
	}
	code, body = get(t, ts, "/api/v3/traces?query.service_name=payments", nil)
	if code != 400 || !strings.Contains(string(body), `"httpCode":400`) {
		t.Errorf("v3 find without times: %d %s", code, body)
	}
	code, body = get(t, ts, "/api/v3/traces/0123456789abcdef0123456789abcdef", nil)
	if code != 404 || !strings.Contains(string(body), `"httpCode":404`) {
		t.Errorf("v3 unknown trace: %d %s", code, body)
	}
}

func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{"service=checkout&operation=GET%20%2Fx&tags=%7B%22a%22%3A%22b%22%7D&minDuration=1ms&maxDuration=1s&limit=20&start=1&end=2&lookback=custom",
		"traceID=abc&traceID=def", "service=x&tag=a:b:c&tags=%7B%7D", "service=%00&limit=99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := jaegerapi.ParseSearch(v)
		if err != nil {
			var br *jaegerapi.BadRequest
			if !asBadRequest(err, &br) {
				t.Fatalf("ParseSearch(%q): %v is not a BadRequest", raw, err)
			}
			return
		}
		if p.Search.Limit < 1 || p.Search.Limit > storedir.MaxSearchLimit {
			t.Fatalf("ParseSearch(%q): limit %d", raw, p.Search.Limit)
		}
	})
}

func asBadRequest(err error, br **jaegerapi.BadRequest) bool {
	b, ok := err.(*jaegerapi.BadRequest)
	*br = b
	return ok
}

func FuzzParseV3Search(f *testing.F) {
	for _, s := range []string{"query.service_name=x&query.start_time_min=2026-01-01T00%3A00%3A00Z&query.start_time_max=2026-01-02T00%3A00%3A00Z&query.num_traces=20",
		"query.start_time_min=x&query.start_time_max=y", "query.serviceName=x&query.attributes=%7B%22error%22%3A%22true%22%7D&query.startTimeMin=2026-01-01T00%3A00%3A00Z&query.startTimeMax=2026-01-02T00%3A00%3A00Z&query.searchDepth=5",
		"query.attributes=%7B%22span.kind%22%3A%22x%22%7D&query.durationMax=1ms", "query.duration_min=1ms&query.duration_max=-1s&query.start_time_min=2026-01-01T00%3A00%3A00Z&query.start_time_max=2026-01-01T00%3A00%3A00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		s, err := jaegerapi.ParseV3Search(v)
		if err != nil {
			var br *jaegerapi.BadRequest
			if !asBadRequest(err, &br) {
				t.Fatalf("ParseV3Search(%q): %v is not a BadRequest", raw, err)
			}
			return
		}
		if s.Limit < 1 || s.Limit > storedir.MaxSearchLimit || len(s.Any) != 1 {
			t.Fatalf("ParseV3Search(%q): %+v", raw, s)
		}
	})
}

// TestV3TraceSummaries checks GET /api/v3/trace-summaries against the
// Load: whole JSON of the two newest payments traces (one with errors),
// the published shape (Jaeger's apiv3 traceSummaryJSON), an empty answer
// and a bad parameter.
func TestV3TraceSummaries(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ts := newServer(t, db)
	min, max := querytest.Base.Add(-time.Hour).Format(time.RFC3339Nano), querytest.Base.Add(time.Hour).Format(time.RFC3339Nano)
	times := "&query.start_time_min=" + url.QueryEscape(min) + "&query.start_time_max=" + url.QueryEscape(max)
	code, body := get(t, ts, "/api/v3/trace-summaries?query.service_name=payments&query.num_traces=2"+times, nil)
	t0 := func(i int) int64 { return querytest.Base.Add(time.Duration(i) * time.Minute).UnixNano() }
	want := fmt.Sprintf(`{"summaries":[`+
		`{"traceId":"%x","rootServiceName":"checkout","rootOperationName":"GET /checkout","minStartTimeUnixNano":"%d","maxEndTimeUnixNano":"%d","spanCount":3,"errorSpanCount":2,"orphanSpanCount":0,"services":[{"name":"checkout","spanCount":2,"errorSpanCount":1},{"name":"payments","spanCount":1,"errorSpanCount":1}]},`+
		`{"traceId":"%x","rootServiceName":"checkout","rootOperationName":"GET /checkout","minStartTimeUnixNano":"%d","maxEndTimeUnixNano":"%d","spanCount":3,"errorSpanCount":0,"orphanSpanCount":0,"services":[{"name":"checkout","spanCount":2,"errorSpanCount":0},{"name":"payments","spanCount":1,"errorSpanCount":0}]}]}`+"\n",
		querytest.TraceID(3), t0(3), t0(3)+15e6, querytest.TraceID(2), t0(2), t0(2)+14e6)
	if code != 200 || string(body) != want {
		t.Errorf("trace summaries: %d\n got %s\nwant %s", code, body, want)
	}
	code, body = get(t, ts, "/api/v3/trace-summaries?query.service_name=payments&query.duration_min=1h"+times, nil)
	if code != 200 || string(body) != `{"summaries":[]}`+"\n" {
		t.Errorf("no trace: %d %s", code, body)
	}
	// The camelCase names Jaeger UI sends now, and query.attributes.
	camel := "/api/v3/trace-summaries?query.serviceName=payments&query.searchDepth=10&query.attributes=" +
		url.QueryEscape(`{"http.status_code":"500"}`) + "&query.startTimeMin=" + url.QueryEscape(min) + "&query.startTimeMax=" + url.QueryEscape(max)
	code, body = get(t, ts, camel, nil)
	var sums struct {
		Summaries []struct {
			TraceID        string `json:"traceId"`
			ErrorSpanCount int
		}
	}
	decode(t, body, &sums)
	if code != 200 || len(sums.Summaries) != 2 || sums.Summaries[0].TraceID != fmt.Sprintf("%x", querytest.TraceID(3)) ||
		sums.Summaries[1].TraceID != fmt.Sprintf("%x", querytest.TraceID(1)) || sums.Summaries[1].ErrorSpanCount != 2 {
		t.Errorf("camelCase search with attributes: %d %s", code, body)
	}
	code, body = get(t, ts, strings.Replace(camel, "/api/v3/trace-summaries", "/api/v3/traces", 1)+"&query.durationMax=6ms", nil)
	if code != 200 || strings.Count(string(body), `"spanId"`) != 6 {
		t.Errorf("camelCase v3 traces: %d %s", code, body)
	}
	code, body = get(t, ts, "/api/v3/operations?service=checkout&spanKind=client", nil)
	if code != 200 || string(body) != `{"operations":[{"name":"charge","spanKind":"client"}]}`+"\n" {
		t.Errorf("v3 operations by spanKind: %d %s", code, body)
	}
	code, body = get(t, ts, "/api/v3/traces?query.serviceName=payments&query.attributes=x"+times, nil)
	if code != 400 || !strings.Contains(string(body), "query.attributes") {
		t.Errorf("bad query.attributes: %d %s", code, body)
	}
	code, body = get(t, ts, "/api/v3/trace-summaries?query.service_name=payments&query.num_traces=x"+times, nil)
	if code != 400 || !strings.Contains(string(body), "query.num_traces") {
		t.Errorf("bad num_traces: %d %s", code, body)
	}
}

// TestV3TraceSummaryCountsRecordSpans checks a summary counts the spans
// /api/v3/traces/{id} shows (record-spans included) and their time range.
func TestV3TraceSummaryCountsRecordSpans(t *testing.T) {
	db := querytest.OpenDB(t, querytest.SampleSpans(t))
	ts := newServer(t, db)
	code, body := get(t, ts, "/api/v3/trace-summaries?query.service_name=wtf%20cff-js-node.wtf-trace&query.num_traces=50"+
		"&query.start_time_min=1970-01-01T00:00:00Z&query.start_time_max=2100-01-01T00:00:00Z", nil)
	var sums struct {
		Summaries []struct {
			TraceID              string `json:"traceId"`
			SpanCount            int    `json:"spanCount"`
			MinStartTimeUnixNano string
			MaxEndTimeUnixNano   string
		}
	}
	decode(t, body, &sums)
	if code != 200 || len(sums.Summaries) == 0 {
		t.Fatalf("wtf summaries: %d %s", code, body)
	}
	most := 0
	for _, s := range sums.Summaries {
		most = max(most, s.SpanCount)
		_, tb := get(t, ts, "/api/v3/traces/"+s.TraceID, nil)
		var res struct {
			Result struct {
				ResourceSpans []struct {
					ScopeSpans []struct {
						Spans []struct {
							Start string `json:"startTimeUnixNano"`
							End   string `json:"endTimeUnixNano"`
						}
					}
				}
			}
		}
		decode(t, tb, &res)
		n, minS, maxE := 0, int64(0), int64(0)
		for _, rs := range res.Result.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					st, _ := strconv.ParseInt(sp.Start, 10, 64)
					en, _ := strconv.ParseInt(sp.End, 10, 64)
					if n == 0 || st < minS {
						minS = st
					}
					if n == 0 || en > maxE {
						maxE = en
					}
					n++
				}
			}
		}
		if s.SpanCount != n || s.MinStartTimeUnixNano != strconv.FormatInt(minS, 10) ||
			s.MaxEndTimeUnixNano != strconv.FormatInt(maxE, 10) {
			t.Errorf("trace %s: summary %+v; the trace shows %d spans over [%d, %d]", s.TraceID, s, n, minS, maxE)
		}
	}
	if most < 2 {
		t.Errorf("no summary counts record-spans: %s", body)
	}
}
