package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

func openStore(tb testing.TB) *storedir.DB {
	tb.Helper()
	db, err := storedir.Open(context.Background(), tb.TempDir(), storedir.DefaultOptions())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// flatten lists a span tree depth first, clearing Children so that spans
// compare as they were sent.
func flatten(roots []*trace.Span) []*trace.Span {
	var out []*trace.Span
	var walk func(s *trace.Span)
	walk = func(s *trace.Span) {
		kids := s.Children
		c := *s
		c.Children = nil
		out = append(out, &c)
		for _, k := range kids {
			walk(k)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

// TestSDKThroughStore sends the test trace with the SDK's HTTP exporter,
// one request per span with children before their parents, into a real
// store: GET of the trace returns one tree holding every span with every
// field, and an attribute search by service.name finds them.
func TestSDKThroughStore(t *testing.T) {
	db := openStore(t)
	srv := httptest.NewServer(NewHTTPHandler(db, Options{}))
	defer srv.Close()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp, rec := newTestProvider(exp, true)
	tid := emitTestSpans(ctx, tp)
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	roots, err := db.GetTrace(ctx, trace.TraceID(tid))
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) != 1 || roots[0].Root.Method != "POST /checkout" || len(roots[0].Children) != 3 {
		t.Fatalf("%d roots; first %q with %d children", len(roots), roots[0].Root.Method, len(roots[0].Children))
	}
	for _, c := range roots[0].Children {
		if c.Root.Method == "SELECT orders" && (len(c.Children) != 1 || c.Children[0].Root.Method != "decode row") {
			t.Errorf("client span children %v", c.Children)
		}
	}
	compareWithSDK(t, rec.Ended(), flatten(roots))

	for _, tc := range []struct {
		attrs []trace.Attr
		spans bool
		want  int
	}{
		{[]trace.Attr{{Key: "service.name", Value: trace.String("checkout")}}, true, len(rec.Ended())},
		{[]trace.Attr{{Key: "service.name", Value: trace.String("checkout")}}, false, 1},
		{[]trace.Attr{{Key: "service.name", Value: trace.String("checkout")}, {Key: "otel.span.kind", Value: trace.String("client")}}, true, 1},
		{[]trace.Attr{{Key: "http.response.status_code", Value: trace.Int(402)}}, true, 1},
		{[]trace.Attr{{Key: "source.format", Value: trace.String("otlp")}}, true, len(rec.Ended())},
		{[]trace.Attr{{Key: "service.name", Value: trace.String("billing")}}, true, 0},
	} {
		res, err := db.Search(ctx, storedir.Query{Attrs: tc.attrs, Spans: tc.spans, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Spans) != tc.want {
			t.Errorf("search %v (spans=%v): %d results, want %d", tc.attrs, tc.spans, len(res.Spans), tc.want)
		}
	}
}

// TestJSONAndProtobufStoreIdentically posts the same request as protobuf
// and as OTLP JSON (gzip) into two stores; both give the same traces back.
func TestJSONAndProtobufStoreIdentically(t *testing.T) {
	req := sampleRequest()
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	bodies := []struct {
		contentType, encoding string
		body                  []byte
	}{
		{ContentTypeProtobuf, "", pb},
		{ContentTypeJSON, "gzip", gzipBytes(t, toOTLPJSON(t, req, true))},
	}
	var traces [2][]*trace.Span
	ctx := context.Background()
	for i, b := range bodies {
		db := openStore(t)
		h := NewHTTPHandler(db, Options{})
		r := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(b.body))
		r.Header.Set("Content-Type", b.contentType)
		if b.encoding != "" {
			r.Header.Set("Content-Encoding", b.encoding)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", b.contentType, w.Code, w.Body)
		}
		for _, id := range []string{sampleTraceA, sampleTraceB} {
			tid, _ := trace.ParseTraceID(id)
			roots, err := db.GetTrace(ctx, tid)
			if err != nil {
				t.Fatal(err)
			}
			traces[i] = append(traces[i], flatten(roots)...)
		}
	}
	if len(traces[0]) != 4 || len(traces[1]) != 4 {
		t.Fatalf("%d and %d spans stored", len(traces[0]), len(traces[1]))
	}
	want, _, _, _ := Decode(pb, ContentTypeProtobuf, Options{})
	for i := range traces[0] {
		if d := trace.Diff(traces[0][i], traces[1][i]); d != "" {
			t.Errorf("span %d: protobuf and JSON differ: %s", i, d)
		}
		found := false
		for _, w := range want {
			if w.SpanID == traces[0][i].SpanID {
				found = true
				if d := trace.Diff(w, traces[0][i]); d != "" {
					t.Errorf("span %s changed in the store: %s", w.SpanID, d)
				}
			}
		}
		if !found {
			t.Errorf("span %s stored but not sent", traces[0][i].SpanID)
		}
	}
}

// TestGRPCLoadStore is TestGRPCLoad into a real store (sync=batch): every
// acknowledged span is stored, and it reports spans/s, CPU and bytes on
// disk per span (data and indexes) next to DESIGN.md's budget.
func TestGRPCLoadStore(t *testing.T) {
	workers, traces, children := 4, 500, 4
	if testing.Short() {
		traces = 50
	}
	dir := t.TempDir()
	db, err := storedir.Open(context.Background(), dir, storedir.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	addr := startGRPC(t, "tcp", db, Options{})
	ctx := context.Background()
	acks := make([]*ackCountingExporter, workers)
	t0, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for w := range workers {
		acks[w] = &ackCountingExporter{SpanExporter: newGRPCExporter(t, "tcp", addr, false)}
		wg.Go(func() {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(acks[w], sdktrace.WithMaxQueueSize(traces*(children+1))),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", fmt.Sprintf("load-%d", w)),
					attribute.String("host.name", "loadgen"))))
			tracer := tp.Tracer("telemetrygen")
			for i := range traces {
				cctx, root := tracer.Start(ctx, "lets-go", oteltrace.WithSpanKind(oteltrace.SpanKindClient))
				for range children {
					_, c := tracer.Start(cctx, "okey-dokey", oteltrace.WithSpanKind(oteltrace.SpanKindServer),
						oteltrace.WithAttributes(attribute.String("net.peer.ip", "1.2.3.4"), attribute.String("peer.service", "telemetrygen-client"),
							attribute.Int("http.response.status_code", 200), attribute.String("http.route", "/api/orders/{id}"),
							attribute.Int("order.id", i)))
					c.End()
				}
				root.End()
			}
			if err := tp.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	var acked, failed int64
	for _, a := range acks {
		acked += a.acked.Load()
		failed += a.failed.Load()
	}
	var stored int64
	for _, st := range db.Stores() {
		stored += st.Spans
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var onDisk int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				onDisk += fi.Size()
			}
		}
		return nil
	})
	want := int64(workers * traces * (children + 1))
	if stored != acked || acked+failed != want || failed != 0 {
		t.Fatalf("stored %d spans, acknowledged %d, failed %d, generated %d", stored, acked, failed, want)
	}
	t.Logf("%d spans stored = acknowledged: %.0f spans/s (budget ≥ 100000), %.1f µs CPU per span (SDK clients, gRPC and store in one process), "+
		"%.0f bytes on disk per span incl. indexes (budget ≤ 60 for 6 attributes; children carry 10: 5 span, 2 resource, "+
		"otel.scope.name, otel.span.kind, source.format; roots 5)",
		acked, float64(acked)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(acked), float64(onDisk)/float64(acked))
}
