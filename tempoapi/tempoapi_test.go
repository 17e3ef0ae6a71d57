package tempoapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/internal/querytest"
	"github.com/ztsd/ztsd/jaegerapi"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tempoapi"
)

func newServer(t *testing.T, db *storedir.DB) *httptest.Server {
	tempo := tempoapi.New(db, nil)
	routes := append(jaegerapi.New(db, nil, tempo.TraceV1Handler()).Routes(), tempo.Routes()...)
	srv := server.New(db, server.Options{Access: server.Access{Disabled: true}, Routes: routes})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, ts *httptest.Server, path string, header map[string]string) (int, http.Header, []byte) {
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
	return resp.StatusCode, resp.Header, b
}

type searchResponse struct {
	Traces []struct {
		TraceID           string `json:"traceID"`
		RootServiceName   string `json:"rootServiceName"`
		RootTraceName     string `json:"rootTraceName"`
		StartTimeUnixNano string `json:"startTimeUnixNano"`
		DurationMs        uint32 `json:"durationMs"`
		SpanSets          []struct {
			Spans []struct {
				SpanID            string `json:"spanID"`
				Name              string `json:"name"`
				StartTimeUnixNano string `json:"startTimeUnixNano"`
				DurationNanos     string `json:"durationNanos"`
				Attributes        []struct {
					Key   string `json:"key"`
					Value struct {
						StringValue string `json:"stringValue"`
						IntValue    string `json:"intValue"`
					} `json:"value"`
				} `json:"attributes"`
			} `json:"spans"`
			Matched uint32 `json:"matched"`
		} `json:"spanSets"`
	} `json:"traces"`
	Metrics map[string]any `json:"metrics"`
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// TestGrafanaTempoDataSource replays the requests of Grafana's Tempo data
// source (pkg/tsdb/tempo: trace.go, search.go; the query editor's tag
// pickers): "Save & test" (/api/echo), build info, tag names and values,
// a TraceQL search (query.Encode() order, Accept: application/json) and
// the trace view (/api/v2/traces/{id}?start&end with
// Accept: application/protobuf, falling back to /api/traces/{id}).
func TestGrafanaTempoDataSource(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t), querytest.SampleSpans(t))
	ts := newServer(t, db)
	start, end := querytest.Base.Add(-time.Hour).Unix(), querytest.Base.Add(time.Hour).Unix()

	code, _, body := get(t, ts, "/api/echo", nil)
	if code != 200 || string(body) != "echo" {
		t.Fatalf("/api/echo: %d %q", code, body)
	}
	code, _, body = get(t, ts, "/api/status/buildinfo", nil)
	var bi map[string]string
	decode(t, body, &bi)
	if code != 200 || bi["version"] != tempoapi.Version {
		t.Errorf("buildinfo: %d %s", code, body)
	}

	// Tag pickers.
	code, _, body = get(t, ts, fmt.Sprintf("/api/v2/search/tags?scope=resource&start=%d&end=%d", start, end), nil)
	var tags struct {
		Scopes []struct {
			Name string
			Tags []string
		}
	}
	decode(t, body, &tags)
	if code != 200 || len(tags.Scopes) != 1 || tags.Scopes[0].Name != "resource" || !has(tags.Scopes[0].Tags, "service.name") || !has(tags.Scopes[0].Tags, "host.name") {
		t.Errorf("v2 tags: %d %s", code, body)
	}
	code, _, body = get(t, ts, "/api/v2/search/tags", nil)
	decode(t, body, &tags)
	if code != 200 || len(tags.Scopes) != 3 || !has(tags.Scopes[1].Tags, "http.status_code") || has(tags.Scopes[1].Tags, "host.name") {
		t.Errorf("v2 tags, all scopes: %d %s", code, body)
	}
	code, _, body = get(t, ts, fmt.Sprintf("/api/v2/search/tag/resource.service.name/values?q=%s&start=%d&end=%d",
		url.QueryEscape("{}"), start, end), nil)
	var vals struct {
		TagValues []struct{ Type, Value string }
	}
	decode(t, body, &vals)
	if code != 200 || len(vals.TagValues) < 6 || vals.TagValues[0].Type != "string" {
		t.Errorf("service values: %d %s", code, body)
	}
	code, _, body = get(t, ts, "/api/v2/search/tag/span.http.status_code/values", nil)
	decode(t, body, &vals)
	if code != 200 || len(vals.TagValues) != 2 || vals.TagValues[0] != (struct{ Type, Value string }{"int", "200"}) {
		t.Errorf("status code values: %d %s", code, body)
	}
	code, _, body = get(t, ts, "/api/search/tags", nil)
	var v1 struct{ TagNames []string }
	decode(t, body, &v1)
	if code != 200 || !has(v1.TagNames, "http.method") {
		t.Errorf("v1 tags: %d %s", code, body)
	}
	code, _, body = get(t, ts, "/api/search/tag/http.method/values", nil)
	var v1v struct{ TagValues []string }
	decode(t, body, &v1v)
	if code != 200 || strings.Join(v1v.TagValues, ",") != "GET,POST" {
		t.Errorf("v1 tag values: %d %s", code, body)
	}

	// The TraceQL search the query builder writes.
	q := `{ resource.service.name = "payments" && span.http.status_code = 500 && duration > 5ms && status = error && name =~ "POST.*" }`
	params := url.Values{"q": {q}, "limit": {"20"}, "spss": {"3"}, "start": {fmt.Sprint(start)}, "end": {fmt.Sprint(end)}}
	code, _, body = get(t, ts, "/api/search?"+params.Encode(), map[string]string{"Accept": "application/json"})
	var sr searchResponse
	decode(t, body, &sr)
	if code != 200 || len(sr.Traces) != 2 {
		t.Fatalf("search: %d %s", code, body)
	}
	tr := sr.Traces[0]
	if tr.TraceID != fmt.Sprintf("%x", querytest.TraceID(3)) || tr.RootServiceName != "checkout" || tr.RootTraceName != "GET /checkout" ||
		tr.DurationMs != 15 || tr.StartTimeUnixNano != fmt.Sprint(querytest.Base.Add(3*time.Minute).UnixNano()) {
		t.Errorf("search trace: %+v", tr)
	}
	if len(tr.SpanSets) != 1 || tr.SpanSets[0].Matched != 1 || tr.SpanSets[0].Spans[0].Name != "POST /charge" ||
		tr.SpanSets[0].Spans[0].DurationNanos != "5500000" {
		t.Errorf("span set: %+v", tr.SpanSets)
	}

	// The trace view: TraceByIDResponse, field 1 = the Trace.
	id := fmt.Sprintf("%x", querytest.TraceID(3))
	pb := map[string]string{"Accept": "application/protobuf"}
	code, hdr, body := get(t, ts, fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", id, start, end), pb)
	if code != 200 || hdr.Get("Content-Type") != "application/protobuf" {
		t.Fatalf("v2 trace: %d %s", code, body)
	}
	num, typ, n := protowire.ConsumeTag(body)
	if num != 1 || typ != protowire.BytesType || n < 0 {
		t.Fatalf("TraceByIDResponse: first field %d type %d", num, typ)
	}
	inner, m := protowire.ConsumeBytes(body[n:])
	if m < 0 || n+m != len(body) {
		t.Fatalf("TraceByIDResponse: field 1 of %d bytes in a body of %d", m, len(body))
	}
	var td tracepb.TracesData // tempopb.Trace has TracesData's layout
	if err := proto.Unmarshal(inner, &td); err != nil {
		t.Fatal(err)
	}
	if spans := countSpans(&td); spans != 3 {
		t.Errorf("v2 trace: %d spans, want 3", spans)
	}
	// The v1 fallback, also protobuf: the bare Trace.
	code, _, body1 := get(t, ts, "/api/traces/"+id, pb)
	if code != 200 || !bytes.Equal(body1, inner) {
		t.Errorf("v1 trace: %d, %d bytes, want the v2 body's Trace (%d bytes)", code, len(body1), len(inner))
	}
	// Unknown trace: 404 (Grafana then tries v1, also 404).
	code, _, _ = get(t, ts, "/api/v2/traces/0123456789abcdef0123456789abcdef", pb)
	if code != 404 {
		t.Errorf("unknown trace: %d", code)
	}
	// JSON when asked.
	code, _, body = get(t, ts, "/api/v2/traces/"+id, map[string]string{"Accept": "application/json"})
	var js struct {
		Trace struct {
			ResourceSpans []json.RawMessage `json:"resourceSpans"`
		} `json:"trace"`
	}
	decode(t, body, &js)
	if code != 200 || len(js.Trace.ResourceSpans) != 2 {
		t.Errorf("v2 JSON trace: %d %s", code, body)
	}
}

func countSpans(td *tracepb.TracesData) int {
	n := 0
	for _, rs := range td.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	return n
}

func has(list []string, s string) bool {
	i := sort.SearchStrings(list, s)
	return i < len(list) && list[i] == s
}

func TestSearchQueries(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t), querytest.SampleSpans(t))
	ts := newServer(t, db)
	for q, want := range map[string]int{
		`{}`:                                     20,
		`{ resource.service.name = "checkout" }`: 4,
		`{ resource.service.name = "checkout" && kind = client }`:   4,
		`{ span.http.status_code = 500 }`:                           2,
		`{ span.http.status_code >= 500 }`:                          2,
		`{ span.http.status_code != 500 && .http.method = "POST" }`: 2,
		`{ status = ok }`: 2,
		`{ status = error || span.link.reason = "x" }`:                       2,
		`{ duration < 6ms && resource.service.name = "payments" }`:           4,
		`{ name = "charge" || name = "POST /charge" }`:                       4,
		`{ name !~ ".*checkout.*" && resource.service.name = "zorka http" }`: 1,
		`{ resource.service.name = "atf" && duration > 0ns }`:                2,
		`{ span.cart.express = true }`:                                       2,
	} {
		code, _, body := get(t, ts, "/api/search?"+url.Values{"q": {q}}.Encode(), nil)
		var sr searchResponse
		decode(t, body, &sr)
		if code != 200 || len(sr.Traces) != want {
			t.Errorf("%s: %d, %d traces, want %d: %s", q, code, len(sr.Traces), want, body)
		}
	}
	// maxDuration and minDuration (Grafana's search form) narrow q.
	for params, want := range map[string]int{
		"maxDuration=6ms":                 4, // the payments spans (5.5ms)
		"maxDuration=6ms&minDuration=6ms": 0,
		"minDuration=13ms":                3, // the roots of traces 1-3 (12+i ms)
	} {
		code, _, body := get(t, ts, "/api/search?q="+url.QueryEscape(`{ resource.service.name = "payments" || resource.service.name = "checkout" }`)+"&"+params, nil)
		var sr searchResponse
		decode(t, body, &sr)
		if code != 200 || len(sr.Traces) != want {
			t.Errorf("%s: %d, %d traces, want %d: %s", params, code, len(sr.Traces), want, body)
		}
	}
	for q, want := range map[string]string{
		`{ .a = 1 } | count() > 1`:  "pipelines",
		`{ rootServiceName = "x" }`: `"rootServiceName" is not a supported field`,
		`{ name =~ "(" }`:           "bad regular expression",
	} {
		code, _, body := get(t, ts, "/api/search?"+url.Values{"q": {q}}.Encode(), nil)
		if code != 400 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want 400 naming %q", q, code, body, want)
		}
	}
	for p, want := range map[string]string{"limit=x": "limit", "start=now": "start", "spss=-2": "spss", "color=red": "unknown search parameter",
		"tags=broken": "not key=value", "minDuration=soon": "minDuration"} {
		code, _, body := get(t, ts, "/api/search?"+p, nil)
		if code != 400 || !strings.Contains(string(body), want) {
			t.Errorf("?%s: %d %s, want 400 naming %q", p, code, body, want)
		}
	}
	// Tempo's older tag search.
	code, _, body := get(t, ts, "/api/search?"+url.Values{"tags": {`service.name=payments http.status_code="500"`}, "minDuration": {"1ms"}}.Encode(), nil)
	var sr searchResponse
	decode(t, body, &sr)
	if code != 200 || len(sr.Traces) != 2 {
		t.Errorf("tag search: %d %s", code, body)
	}
}

func FuzzSearchParams(f *testing.F) {
	for _, s := range []string{"q=%7B%7D&limit=20&spss=3&start=1&end=2", "tags=a%3Db+c%3D%22d+e%22&minDuration=1ms",
		"q=%7B+.a+%3D+1+%7C%7C+.b+%3D+2+%7D", "q=%7B&limit=0"} {
		f.Add(s)
	}
	db := querytest.OpenDB(f, querytest.LoadSpans(f))
	tempo := tempoapi.New(db, nil)
	h := server.New(db, server.Options{Access: server.Access{Disabled: true}, Routes: tempo.Routes()}).Handler()
	f.Fuzz(func(t *testing.T, raw string) {
		if _, err := url.ParseQuery(raw); err != nil {
			return
		}
		req, err := http.NewRequest("GET", "/api/search?"+raw, nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("?%s: %d %s", raw, rec.Code, rec.Body)
		}
	})
}

// TestTagValuesScopedByQ: Grafana sends the query being edited as q; a q
// of the subset narrows the values to those of the spans matching it, one
// outside it (or "{}") lists every value.
func TestTagValuesScopedByQ(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t), querytest.SampleSpans(t))
	ts := newServer(t, db)
	for _, c := range []struct{ tag, q, want string }{
		{"span.http.method", ``, "string:GET,string:POST"},
		{"span.http.method", `{}`, "string:GET,string:POST"},
		{"span.http.method", `{ resource.service.name = "payments" }`, "string:POST"},
		{"span.http.method", `{ resource.service.name = "checkout" && status = error }`, "string:GET"},
		{"span.http.status_code", `{ resource.service.name = "payments" && span.http.method = "POST" && status = ok }`, "int:200"},
		{"name", `{ kind = client }`, "string:charge"},
		{"name", `{ resource.service.name = "payments" || name = "charge" }`, "string:POST /charge,string:charge"},
		{"resource.service.name", `{ span.peer.service = "payments" }`, "string:checkout"},
		{"resource.host.name", `{ duration < 8ms }`, "string:pay-1,string:web-1"},
		{"resource.host.name", `{ duration <= 7ms }`, "string:pay-1,string:web-1"},
		{"name", `{ duration <= 6ms && span.http.method = "POST" }`, "string:POST /charge"},
		// An unfinished query is not of the subset: the listing is not scoped.
		{"span.http.method", `{ resource.service.name = "payments" && span.http.status_code = }`, "string:GET,string:POST"},
		// No span matches: no value.
		{"span.http.method", `{ resource.service.name = "nobody" }`, ""},
		// status keeps its keywords.
		{"status", `{ resource.service.name = "payments" }`, "keyword:error,keyword:ok,keyword:unset"},
	} {
		code, _, body := get(t, ts, "/api/v2/search/tag/"+c.tag+"/values?q="+url.QueryEscape(c.q), nil)
		var vals struct {
			TagValues []struct{ Type, Value string }
		}
		decode(t, body, &vals)
		var got []string
		for _, v := range vals.TagValues {
			got = append(got, v.Type+":"+v.Value)
		}
		if code != 200 || strings.Join(got, ",") != c.want {
			t.Errorf("%s values for q=%s: %d %v, want %s", c.tag, c.q, code, got, c.want)
		}
	}
	// v1 applies q too.
	code, _, body := get(t, ts, "/api/search/tag/http.method/values?q="+url.QueryEscape(`{ resource.service.name = "payments" }`), nil)
	if code != 200 || string(body) != `{"tagValues":["POST"]}`+"\n" {
		t.Errorf("v1 scoped values: %d %s", code, body)
	}
}

// TestDurationBoundsAreIndexTerms: duration bounds become index terms
// (no span check, so no page bound), except bounds the index cannot say
// (duration < 1ns, duration <= 0ms), which stay checks.
func TestDurationBoundsAreIndexTerms(t *testing.T) {
	for q, want := range map[string][2]int64{
		`{ duration < 5ms }`:                    {0, 5e6 - 1},
		`{ duration <= 5ms && duration < 1s }`:  {0, 5e6},
		`{ duration > 1ms && duration <= 2ms }`: {1e6 + 1, 2e6},
	} {
		conj, _, err := tempoapi.Translate(q)
		if err != nil || len(conj) != 1 || conj[0].Check != nil || conj[0].MinDurationNS != want[0] || conj[0].MaxDurationNS != want[1] {
			t.Errorf("%s: %v %+v, want index bounds %v", q, err, conj, want)
		}
	}
	for _, q := range []string{`{ duration < 1ns }`, `{ duration <= 0ms }`} {
		conj, _, err := tempoapi.Translate(q)
		if err != nil || len(conj) != 1 || conj[0].Check == nil || conj[0].MaxDurationNS != 0 {
			t.Errorf("%s: %v %+v, want a check", q, err, conj)
		}
	}
}

// FuzzTagValuesQ: any q answers the tag-value listing (scoped or not)
// with 200 and valid JSON.
func FuzzTagValuesQ(f *testing.F) {
	for _, s := range []string{`{ resource.service.name = "payments" }`, `{}`, `{ span.http.status_code = }`,
		`{ name =~ "a(" }`, `{ duration < 1ns || kind = client }`, ""} {
		f.Add("span.http.method", s)
		f.Add("name", s)
	}
	db := querytest.OpenDB(f, querytest.LoadSpans(f))
	tempo := tempoapi.New(db, nil)
	h := server.New(db, server.Options{Access: server.Access{Disabled: true}, Routes: tempo.Routes()}).Handler()
	f.Fuzz(func(t *testing.T, tag, q string) {
		req, err := http.NewRequest("GET", "/api/v2/search/tag/"+url.PathEscape(tag)+"/values?q="+url.QueryEscape(q), nil)
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == 404 || rec.Code/100 == 3 {
			return // a tag path the router does not route here (empty, "." or with "/")
		}
		var v struct {
			TagValues []struct{ Type, Value string }
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &v) != nil {
			t.Fatalf("tag %q q %q: %d %s", tag, q, rec.Code, rec.Body)
		}
	})
}

// TestSearchTraceHeads: each trace's root service, root name, start and
// duration are the same whether the index search read them (one
// alternative), or they were read after it (several alternatives, or a
// checked term).
func TestSearchTraceHeads(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ts := newServer(t, db)
	for _, q := range []string{`{ resource.service.name = "payments" }`, `{ name = "charge" || name = "POST /charge" }`,
		`{ resource.service.name = "payments" && name =~ "POST.*" }`} {
		code, _, body := get(t, ts, "/api/search?"+url.Values{"q": {q}}.Encode(), nil)
		var sr searchResponse
		decode(t, body, &sr)
		if code != 200 || len(sr.Traces) != querytest.Traces {
			t.Fatalf("%s: %d %s", q, code, body)
		}
		for i, tr := range sr.Traces { // newest first: trace Traces-1-i
			n := querytest.Traces - 1 - i
			start := querytest.Base.Add(time.Duration(n) * time.Minute).UnixNano()
			if tr.TraceID != fmt.Sprintf("%x", querytest.TraceID(n)) || tr.RootServiceName != "checkout" || tr.RootTraceName != "GET /checkout" ||
				tr.StartTimeUnixNano != fmt.Sprint(start) || tr.DurationMs != uint32(12+n) {
				t.Errorf("%s: trace %d: %+v", q, n, tr)
			}
		}
	}
}
