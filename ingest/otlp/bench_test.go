package otlp

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/trace"
)

// countingAppender counts what it is given and keeps nothing.
type countingAppender struct {
	spans, records, appends atomic.Int64
}

func (a *countingAppender) Append(_ context.Context, spans []*trace.Span) error {
	var recs int64
	for _, s := range spans {
		recs += s.Recs
	}
	a.spans.Add(int64(len(spans)))
	a.records.Add(recs)
	a.appends.Add(1)
	return nil
}

// realisticRequest is traffic shaped like DESIGN.md's budget: traces of
// spansPerTrace spans with 6 attributes each, under a resource with the
// attributes an SDK sets; every fifth span has an event.
func realisticRequest(traces, spansPerTrace int) *collectortrace.ExportTraceServiceRequest {
	ss := &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp", Version: "0.60.0"}}
	n := 0
	for t := range traces {
		tid := make([]byte, 16)
		binary.BigEndian.PutUint64(tid, uint64(t+1))
		binary.BigEndian.PutUint64(tid[8:], 0x9e3779b97f4a7c15*uint64(t+1))
		for s := range spansPerTrace {
			n++
			sid := binary.BigEndian.AppendUint64(nil, uint64(n))
			span := &tracepb.Span{
				TraceId: tid, SpanId: sid, Name: []string{"GET /api/orders", "SELECT orders", "redis GET", "POST /payments"}[s%4],
				Kind:              tracepb.Span_SpanKind(1 + s%3),
				StartTimeUnixNano: uint64(1_712_000_000_000_000_000 + int64(n)*1000), EndTimeUnixNano: uint64(1_712_000_000_000_000_000 + int64(n)*1000 + 25_000),
				Attributes: []*commonpb.KeyValue{
					kv("http.request.method", strVal("GET")),
					kv("http.route", strVal("/api/orders/{id}")),
					kv("http.response.status_code", intVal(200)),
					kv("server.address", strVal("orders.internal")),
					kv("user.id", strVal("u-"+strconv.Itoa(n%1000))),
					kv("db.system", strVal("postgresql")),
				},
				Status: &tracepb.Status{},
			}
			if s > 0 {
				span.ParentSpanId = binary.BigEndian.AppendUint64(nil, uint64(n-s))
			}
			if n%5 == 0 {
				span.Events = []*tracepb.Span_Event{{TimeUnixNano: span.StartTimeUnixNano + 100, Name: "cache.miss",
					Attributes: []*commonpb.KeyValue{kv("key", strVal("order:"+strconv.Itoa(n)))}}}
			}
			ss.Spans = append(ss.Spans, span)
		}
	}
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			kv("service.name", strVal("orders")), kv("service.version", strVal("1.4.2")),
			kv("host.name", strVal("web-17")), kv("process.pid", intVal(4242)),
			kv("telemetry.sdk.name", strVal("opentelemetry")), kv("telemetry.sdk.language", strVal("go")),
			kv("telemetry.sdk.version", strVal("1.47.0")),
		}},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
}

func benchmarkDecode(b *testing.B, contentType string, body []byte, spansPerOp int) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		spans, rejected, _, err := Decode(body, contentType, Options{})
		if err != nil || rejected != 0 || len(spans) != spansPerOp {
			b.Fatalf("%d spans, %d rejected, %v", len(spans), rejected, err)
		}
	}
	reportSpanRate(b, cpu0, spansPerOp)
}

// reportSpanRate reports spans per second of wall time and per second of
// process CPU time; the latter stays meaningful on a machine shared with
// other work.
func reportSpanRate(b *testing.B, cpu0 time.Duration, spansPerOp int) {
	n := float64(spansPerOp) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "spans/s")
	if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(n/cpu, "spans/cpu-s")
	}
}

// BenchmarkDecodeProtobuf decodes and maps a 100-span request.
func BenchmarkDecodeProtobuf(b *testing.B) {
	body, err := proto.Marshal(realisticRequest(10, 10))
	if err != nil {
		b.Fatal(err)
	}
	benchmarkDecode(b, ContentTypeProtobuf, body, 100)
}

// BenchmarkDecodeJSON decodes and maps the same request as OTLP JSON.
func BenchmarkDecodeJSON(b *testing.B) {
	benchmarkDecode(b, ContentTypeJSON, toOTLPJSON(b, realisticRequest(10, 10), false), 100)
}

// BenchmarkMapRequest maps an already unmarshalled request (what the gRPC
// service does after grpc-go decoded the message).
func BenchmarkMapRequest(b *testing.B) {
	req := realisticRequest(10, 10)
	opt := Options{}.withDefaults()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		spans, _, _, err := mapRequest(req, nil, opt)
		if err != nil || len(spans) != 100 {
			b.Fatal(err)
		}
	}
	reportSpanRate(b, cpu0, 100)
}

// stubSpans returns n finished SDK spans (10 per trace, 6 attributes each)
// for driving exporters directly.
func stubSpans(n int) []sdktrace.ReadOnlySpan {
	res := resource.NewSchemaless(attribute.String("service.name", "orders"), attribute.String("host.name", "web-17"),
		attribute.String("telemetry.sdk.language", "go"))
	stubs := make(tracetest.SpanStubs, 0, n)
	start := time.Unix(1_712_000_000, 0)
	for i := range n {
		var tid oteltrace.TraceID
		binary.BigEndian.PutUint64(tid[:], uint64(i/10+1))
		var sid, pid oteltrace.SpanID
		binary.BigEndian.PutUint64(sid[:], uint64(i+1))
		stub := tracetest.SpanStub{
			Name:        "GET /api/orders",
			SpanContext: oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: oteltrace.FlagsSampled}),
			SpanKind:    oteltrace.SpanKindServer,
			StartTime:   start.Add(time.Duration(i) * time.Microsecond),
			EndTime:     start.Add(time.Duration(i)*time.Microsecond + 25*time.Microsecond),
			Attributes: []attribute.KeyValue{
				attribute.String("http.request.method", "GET"), attribute.String("http.route", "/api/orders/{id}"),
				attribute.Int("http.response.status_code", 200), attribute.String("server.address", "orders.internal"),
				attribute.String("user.id", "u-"+strconv.Itoa(i%1000)), attribute.String("db.system", "postgresql"),
			},
			Resource:             res,
			InstrumentationScope: instrumentation.Scope{Name: "otelhttp", Version: "0.60.0"},
		}
		if i%10 != 0 {
			binary.BigEndian.PutUint64(pid[:], uint64(i-i%10+1))
			stub.Parent = oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: pid})
		}
		stubs = append(stubs, stub)
	}
	return stubs.Snapshots()
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGRPCExportSDK drives the gRPC service on loopback with the
// SDK's otlptracegrpc exporter, in batches of 512 spans (the SDK's default
// export batch), from 4 concurrent exporters. spans/cpu-s counts the whole
// process: the SDK client and the server.
func BenchmarkGRPCExportSDK(b *testing.B) {
	app := &countingAppender{}
	addr := startGRPC(b, "tcp", app, Options{})
	const batch, clients = 512, 4
	spans := stubSpans(batch)
	exps := make([]sdktrace.SpanExporter, clients)
	for i := range exps {
		exps[i] = newGRPCExporter(b, "tcp", addr, false)
	}
	ctx := context.Background()
	if err := exps[0].ExportSpans(ctx, spans); err != nil { // connect
		b.Fatal(err)
	}
	app.spans.Store(0)
	cpu0 := cpuTime()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, exp := range exps {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := exp.ExportSpans(ctx, spans); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if got, n := app.spans.Load(), int64(b.N)*batch; got != n {
		b.Fatalf("stored %d spans, exported %d", got, n)
	}
	reportSpanRate(b, cpu0, batch)
}

// BenchmarkHTTPExportSDK does the same over OTLP/HTTP with the SDK's
// otlptracehttp exporter (protobuf, gzip).
func BenchmarkHTTPExportSDK(b *testing.B) {
	app := &countingAppender{}
	srv := httptest.NewServer(NewHTTPHandler(app, Options{}))
	defer srv.Close()
	const batch = 512
	spans := stubSpans(batch)
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if err := exp.ExportSpans(ctx, spans); err != nil {
			b.Fatal(err)
		}
	}
	reportSpanRate(b, cpu0, batch)
}

// ackCountingExporter counts the spans its exporter had acknowledged.
type ackCountingExporter struct {
	sdktrace.SpanExporter
	acked, failed atomic.Int64
}

func (e *ackCountingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.failed.Add(int64(len(spans)))
		return err
	}
	e.acked.Add(int64(len(spans)))
	return nil
}

// TestGRPCLoad is a telemetrygen-style load: workers with their own SDK
// pipeline (batch processor, otlptracegrpc exporter) each send traces of a
// root and child spans as fast as they can; the spans stored must equal
// the spans the exporters saw acknowledged, and every trace is complete.
func TestGRPCLoad(t *testing.T) {
	workers, traces, children := 4, 500, 4
	if testing.Short() {
		traces = 50
	}
	app := &countingAppender{}
	addr := startGRPC(t, "tcp", app, Options{})
	ctx := context.Background()
	acks := make([]*ackCountingExporter, workers)
	t0, cpu0 := time.Now(), cpuTime()
	var wg sync.WaitGroup
	for w := range workers {
		acks[w] = &ackCountingExporter{SpanExporter: newGRPCExporter(t, "tcp", addr, false)}
		wg.Go(func() {
			// A queue that holds every span: the batch processor drops
			// nothing, so each generated span is exported and answered.
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(acks[w], sdktrace.WithMaxQueueSize(traces*(children+1))),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", fmt.Sprintf("load-%d", w)))))
			tracer := tp.Tracer("telemetrygen")
			for range traces {
				cctx, root := tracer.Start(ctx, "lets-go", oteltrace.WithSpanKind(oteltrace.SpanKindClient),
					oteltrace.WithAttributes(attribute.String("net.peer.ip", "1.2.3.4"), attribute.String("peer.service", "telemetrygen-server")))
				for range children {
					_, c := tracer.Start(cctx, "okey-dokey", oteltrace.WithSpanKind(oteltrace.SpanKindServer),
						oteltrace.WithAttributes(attribute.String("net.peer.ip", "1.2.3.4"), attribute.String("peer.service", "telemetrygen-client")))
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
	want := int64(workers * traces * (children + 1))
	if got := app.spans.Load(); got != acked || acked+failed != want {
		t.Fatalf("stored %d spans, acknowledged %d, failed %d, generated %d", got, acked, failed, want)
	}
	t.Logf("%d spans in %d requests: %.0f spans/s, %.1f µs CPU per span (SDK clients and server in one process)",
		acked, app.appends.Load(), float64(acked)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(acked))
}

// TestTelemetrygen runs the OpenTelemetry Collector's load generator
// against the gRPC service when ZTSD_TELEMETRYGEN names its binary
// (go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@latest).
func TestTelemetrygen(t *testing.T) {
	bin := os.Getenv("ZTSD_TELEMETRYGEN")
	if bin == "" {
		t.Skip("ZTSD_TELEMETRYGEN is not set")
	}
	app := &countingAppender{}
	addr := startGRPC(t, "tcp", app, Options{})
	// --batch=false exports each span synchronously: telemetrygen's batch
	// processor drops spans when generation outruns export, so only
	// unbatched runs make "every generated span was acknowledged" exact
	// (telemetrygen exits non-zero on an export failure).
	const workers, traces, children = 2, 500, 4
	t0 := time.Now()
	cmd := exec.Command(bin, "traces", "--otlp-endpoint", addr, "--otlp-insecure", "--batch=false",
		"--workers", strconv.Itoa(workers), "--traces", strconv.Itoa(traces), "--child-spans", strconv.Itoa(children),
		"--rate", "0", "--service", "telemetrygen")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	elapsed := time.Since(t0)
	want := int64(workers * traces * (children + 1))
	if got := app.spans.Load(); got != want {
		t.Fatalf("stored %d spans, telemetrygen sent %d without an export failure\n%s", got, want, out)
	}
	t.Logf("telemetrygen: %d spans in %d requests, %.0f spans/s", want, app.appends.Load(), float64(want)/elapsed.Seconds())
}
