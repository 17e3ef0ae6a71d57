package queryapi_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/internal/querytest"
	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// flatSpan is one span with its resource and scope, normalised for
// comparison (attributes sorted by key).
type flatSpan struct {
	resource []*commonpb.KeyValue
	scope    *commonpb.InstrumentationScope
	span     *tracepb.Span
}

func sortKV(kvs []*commonpb.KeyValue) {
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
}

func flatten(rss []*tracepb.ResourceSpans, traceID []byte) map[string]flatSpan {
	out := map[string]flatSpan{}
	for _, rs := range rss {
		res := proto.Clone(rs.GetResource()).(interface{ GetAttributes() []*commonpb.KeyValue }).GetAttributes()
		sortKV(res)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				if !bytes.Equal(sp.TraceId, traceID) {
					continue
				}
				c := proto.Clone(sp).(*tracepb.Span)
				sortKV(c.Attributes)
				for _, e := range c.Events {
					sortKV(e.Attributes)
				}
				for _, l := range c.Links {
					sortKV(l.Attributes)
				}
				out[fmt.Sprintf("%x", c.SpanId)] = flatSpan{res, ss.Scope, c}
			}
		}
	}
	return out
}

// TestProtoRoundTrip: what an OTLP client sent comes back, span for span,
// from the protobuf trace the Tempo API writes (decoded with the OTLP
// protobuf types).
func TestProtoRoundTrip(t *testing.T) {
	load := querytest.Load()
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	for i := 0; i < querytest.Traces; i++ {
		var id trace.TraceID
		copy(id[:], querytest.TraceID(i))
		roots, err := db.GetTrace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		pw := queryapi.NewProtoWriter(queryapi.Flatten(roots))
		var buf bytes.Buffer
		n, err := pw.WriteTo(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if int(n) != pw.Size() || buf.Len() != pw.Size() {
			t.Fatalf("trace %d: wrote %d bytes (buffer %d), Size said %d", i, n, buf.Len(), pw.Size())
		}
		var got tracepb.TracesData
		if err := proto.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("trace %d: the written protobuf does not decode: %v", i, err)
		}
		want := flatten(load.ResourceSpans, querytest.TraceID(i))
		have := flatten(got.ResourceSpans, querytest.TraceID(i))
		if len(want) != 3 || len(have) != len(want) {
			t.Fatalf("trace %d: %d spans back, want %d", i, len(have), len(want))
		}
		for sid, w := range want {
			h, ok := have[sid]
			if !ok {
				t.Fatalf("trace %d: span %s missing", i, sid)
			}
			if !proto.Equal(h.span, w.span) {
				t.Errorf("trace %d span %s:\n got %v\nwant %v", i, sid, h.span, w.span)
			}
			if !proto.Equal(h.scope, w.scope) {
				t.Errorf("trace %d span %s scope: got %v want %v", i, sid, h.scope, w.scope)
			}
			if len(h.resource) != len(w.resource) {
				t.Errorf("trace %d span %s resource: got %v want %v", i, sid, h.resource, w.resource)
				continue
			}
			for k := range w.resource {
				if !proto.Equal(h.resource[k], w.resource[k]) {
					t.Errorf("trace %d span %s resource: got %v want %v", i, sid, h.resource, w.resource)
				}
			}
		}
	}
}

// TestExpandRecords: a call tree shows as child spans; zero-length leaf
// records and exceptions as events; ids are stable and unique.
func TestExpandRecords(t *testing.T) {
	sp := &trace.Span{TraceID: trace.TraceID{1}, SpanID: 0x42, StartNS: 1_000_000, DurationNS: 900, Source: trace.SourceZorka,
		Type: "HTTP", Error: true, Attrs: trace.Attrs{{Key: "component", Value: trace.String("http")}},
		Root: &trace.Record{Method: "Valve.invoke", DurationNS: 900, Children: []*trace.Record{
			{Method: "mark", StartNS: 5},
			{Method: "Servlet.service", StartNS: 10, DurationNS: 500, Children: []*trace.Record{
				{Method: "Dao.query", StartNS: 20, DurationNS: 100, Attrs: trace.Attrs{{Key: "db.statement", Value: trace.String("select 1")}},
					Exception: &trace.Exception{Class: "SQLException", Message: "gone",
						Stack: []trace.StackFrame{{Class: "Dao", Method: "query", File: "Dao.java", Line: 7}}}},
				{Method: "log", StartNS: 300},
			}},
		}}}
	var views []queryapi.Span
	collect := func() []queryapi.Span {
		var out []queryapi.Span
		if err := queryapi.Expand(sp, func(v *queryapi.Span) error { out = append(out, *v); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	views = collect()
	if len(views) != 3 {
		t.Fatalf("%d view spans, want 3 (the span and 2 record-spans)", len(views))
	}
	s, servlet, dao := views[0], views[1], views[2]
	if s.Name != "Valve.invoke" || s.Service != "zorka http" || s.Status != queryapi.StatusError || s.Record {
		t.Errorf("span view: %+v", s)
	}
	if len(s.Events) != 1 || s.Events[0].Name != "mark" || s.Events[0].TimeNS != 1_000_005 {
		t.Errorf("span events: %+v", s.Events)
	}
	if v, _ := s.Attrs.Get(queryapi.AttrSpanType); v.Str != "HTTP" {
		t.Errorf("span type attr: %v", s.Attrs)
	}
	if servlet.ParentID != 0x42 || servlet.Name != "Servlet.service" || servlet.StartNS != 1_000_010 || servlet.DurationNS != 500 || !servlet.Record {
		t.Errorf("servlet record-span: %+v", servlet)
	}
	if len(servlet.Events) != 1 || servlet.Events[0].Name != "log" {
		t.Errorf("servlet events: %+v", servlet.Events)
	}
	if dao.ParentID != servlet.SpanID || dao.Status != queryapi.StatusError || len(dao.Events) != 1 {
		t.Fatalf("dao record-span: %+v", dao)
	}
	ex := dao.Events[0]
	if typ, _ := ex.Attrs.Get("exception.type"); ex.Name != "exception" || typ.Str != "SQLException" {
		t.Errorf("exception event: %+v", ex)
	}
	if st, _ := ex.Attrs.Get("exception.stacktrace"); st.Str != "SQLException: gone\n\tat Dao.query(Dao.java:7)\n" {
		t.Errorf("stack trace: %q", st.Str)
	}
	again := collect()
	ids := map[trace.SpanID]bool{}
	for i := range views {
		if again[i].SpanID != views[i].SpanID {
			t.Errorf("view %d: id %v then %v", i, views[i].SpanID, again[i].SpanID)
		}
		if ids[views[i].SpanID] || views[i].SpanID == 0 {
			t.Errorf("view %d: id %v repeated or zero", i, views[i].SpanID)
		}
		ids[views[i].SpanID] = true
	}
}

// TestServiceMapping: every source gets a service and searches for it
// find its spans.
func TestServiceMapping(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t), querytest.SampleSpans(t))
	ctx := context.Background()
	svcs, err := queryapi.Services(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"checkout", "payments", "zorka http", "wtf cff-js-node.wtf-trace", "dial9 demo-2026-03-18-small.bin",
		"atf session_20250101_120000/pid_4242/thread_0/index.atf", "zorka", "wtf", "atf", "dial9"}
	have := map[string]bool{}
	for _, s := range svcs {
		have[s] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("services %v lack %q", svcs, w)
		}
	}
	for _, svc := range want {
		hits, _, err := queryapi.FindTraces(ctx, db, queryapi.Search{Any: []queryapi.Conjunct{{Service: svc}}, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 {
			t.Errorf("service %q: no traces", svc)
			continue
		}
		for _, h := range hits {
			got := queryapi.ServiceOf(h.Spans[0])
			if got != svc && !(svc == h.Spans[0].Source) {
				t.Errorf("service %q: hit of service %q", svc, got)
			}
		}
	}
	ops, err := queryapi.Operations(ctx, db, "zorka http", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Name != "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)" {
		t.Errorf("zorka http operations: %+v", ops)
	}
	ops, err = queryapi.Operations(ctx, db, "checkout", "client")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0] != (queryapi.Operation{Name: "charge", Kind: queryapi.KindClient}) {
		t.Errorf("checkout client operations: %+v", ops)
	}
}

// TestFindTracesIsOneSearch: a filter the index answers costs exactly the
// /v1/search of the same filter, and gives the same traces in the same
// order.
func TestFindTracesIsOneSearch(t *testing.T) {
	db := querytest.OpenDB(t, querytest.LoadSpans(t))
	ctx := context.Background()
	hits, _, err := queryapi.FindTraces(ctx, db, queryapi.Search{Limit: 10, Any: []queryapi.Conjunct{{
		Service: "payments", Attrs: []trace.Attr{{Key: "http.status_code", Value: trace.String("500")}}, ErrorsOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Search(ctx, storedir.Query{Limit: 10, ErrorsOnly: true, Attrs: []trace.Attr{
		{Key: "service.name", Value: trace.String("payments")}, {Key: "http.status_code", Value: trace.String("500")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || len(res.Spans) != len(hits) {
		t.Fatalf("%d hits, /v1/search %d, want 2 each", len(hits), len(res.Spans))
	}
	for i := range hits {
		if hits[i].TraceID != res.Spans[i].TraceID {
			t.Errorf("hit %d: %s, /v1/search %s", i, hits[i].TraceID, res.Spans[i].TraceID)
		}
	}
	// An operation is an exact text plus a check of the span name.
	hits, _, err = queryapi.FindTraces(ctx, db, queryapi.Search{Limit: 10, Any: []queryapi.Conjunct{{Service: "checkout", Operation: "charge"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != querytest.Traces {
		t.Fatalf("operation charge: %d traces, want %d", len(hits), querytest.Traces)
	}
	for _, h := range hits {
		if queryapi.OperationOf(h.Spans[0]) != "charge" {
			t.Errorf("operation charge: hit %q", queryapi.OperationOf(h.Spans[0]))
		}
	}
}

// TestLargeTraceStreams: a trace of 10,000 spans is written with one
// span's encoding held at a time.
func TestLargeTraceStreams(t *testing.T) {
	const n = 10000
	spans := make([]*trace.Span, n)
	for i := range spans {
		spans[i] = &trace.Span{TraceID: trace.TraceID{9}, SpanID: trace.SpanID(i + 1), StartNS: int64(1e18) + int64(i)*1000,
			DurationNS: 500, Source: trace.SourceOTLP, Type: "internal",
			Attrs: trace.Attrs{{Key: "i", Value: trace.Int(int64(i))}, {Key: "service.name", Value: trace.String("big")}},
			Root:  &trace.Record{Method: fmt.Sprintf("op-%d", i%7), DurationNS: 500}}
		if i > 0 {
			spans[i].ParentID = 1
		}
	}
	db := querytest.OpenDB(t, spans)
	roots, err := db.GetTrace(context.Background(), trace.TraceID{9})
	if err != nil {
		t.Fatal(err)
	}
	flat := queryapi.Flatten(roots)
	if len(flat) != n {
		t.Fatalf("%d spans read, want %d", len(flat), n)
	}
	pw := queryapi.NewProtoWriter(flat)
	cw := &countingWriter{}
	if _, err := pw.WriteTo(cw); err != nil {
		t.Fatal(err)
	}
	if cw.n != int64(pw.Size()) || cw.maxWrite > 64<<10 {
		t.Fatalf("wrote %d bytes (Size %d), largest single write %d", cw.n, pw.Size(), cw.maxWrite)
	}
	if held := queryapi.ProtoWriterBuffer(pw); held > 4<<10 {
		t.Fatalf("the writer holds a %d-byte buffer after a trace of %d bytes: more than one span", held, cw.n)
	}
}

type countingWriter struct{ n, maxWrite int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	c.maxWrite = max(c.maxWrite, int64(len(p)))
	return len(p), nil
}
