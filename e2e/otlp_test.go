package e2e

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// Issue 10: OTLP/HTTP on the socket and the TCP listener, OTLP/gRPC on its
// own listener, sent by the OpenTelemetry Go SDK's exporters.

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// checkoutError is the error the root span records; its Go type name is
// what exception.type carries.
type checkoutError struct{ reason string }

func (e *checkoutError) Error() string { return "card declined: " + e.reason }

// everyAttributeType returns one attribute of each OpenTelemetry Go type.
func everyAttributeType() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("text.unicode", "zürich ✓ 東京"),
		attribute.Int64("http.response.status_code", 402),
		attribute.Int64("int.min", math.MinInt64),
		attribute.Float64("cart.total", 129.95),
		attribute.Float64("ratio.nan", math.NaN()),
		attribute.Float64("ratio.inf", math.Inf(1)),
		attribute.Bool("cart.gift", true),
		attribute.StringSlice("cart.items", []string{"sku-1", "sku-2", ""}),
		attribute.Int64Slice("cart.quantities", []int64{1, 2, -3}),
		attribute.Float64Slice("cart.prices", []float64{9.99, 0.5}),
		attribute.BoolSlice("cart.flags", []bool{true, false}),
		attribute.ByteSlice("payment.token", []byte{0, 1, 2, 0xfe, 0xff}),
		attribute.Slice("mixed.list", attribute.StringValue("a"), attribute.Int64Value(7),
			attribute.SliceValue(attribute.BoolValue(false), attribute.Float64Value(1.5)),
			attribute.MapValue(attribute.String("inner", "x"))),
		attribute.Map("customer", attribute.String("tier", "gold"), attribute.Int64("id", 42),
			attribute.Map("address", attribute.String("city", "Basel"), attribute.StringSlice("lines", []string{"Main St 1"}))),
		{Key: "empty.value"},
	}
}

// newCheckoutProvider is a tracer provider for service "checkout" that
// records every ended span and exports it through exp.
func newCheckoutProvider(exp sdktrace.SpanExporter, batch bool) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.25.0",
		attribute.String("service.name", "checkout"), attribute.String("service.version", "2.4.1"),
		attribute.String("host.name", "build-7"), attribute.Int64("process.pid", 4242))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec),
		sdktrace.WithSampler(sdktrace.AlwaysSample())}
	if batch {
		opts = append(opts, sdktrace.WithBatcher(exp))
	} else {
		opts = append(opts, sdktrace.WithSyncer(exp))
	}
	return sdktrace.NewTracerProvider(opts...), rec
}

// emitCheckoutSpans records one trace: a server root with every attribute
// type, a link, a trace state and a recorded error with its Go stack; a
// client child with an event and an internal grandchild; a producer; and a
// consumer with an OK status.
func emitCheckoutSpans(ctx context.Context, tp oteltrace.TracerProvider, base time.Time) {
	tracer := tp.Tracer("checkout/instrumentation", oteltrace.WithInstrumentationVersion("1.2.3"),
		oteltrace.WithInstrumentationAttributes(attribute.String("scope.team", "payments")))
	at := func(d time.Duration) time.Time { return base.Add(d) }
	ts, _ := oteltrace.ParseTraceState("vendor=abc")
	ctx = oteltrace.ContextWithSpanContext(ctx, oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: newTraceID(base), SpanID: oteltrace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: oteltrace.FlagsSampled, TraceState: ts, Remote: true}))
	linked := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  oteltrace.SpanID{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1}})

	ctx, root := tracer.Start(ctx, "POST /checkout", oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithTimestamp(at(0)), oteltrace.WithAttributes(everyAttributeType()...),
		oteltrace.WithLinks(oteltrace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("link.reason", "retry-of")}}))
	cctx, child := tracer.Start(ctx, "SELECT orders", oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithTimestamp(at(time.Millisecond)))
	child.AddEvent("query.sent", oteltrace.WithTimestamp(at(1500*time.Microsecond)),
		oteltrace.WithAttributes(attribute.String("db.statement", "SELECT * FROM orders WHERE id = ?"), attribute.Int("db.rows", 3)))
	_, grand := tracer.Start(cctx, "decode row", oteltrace.WithTimestamp(at(2*time.Millisecond)))
	grand.End(oteltrace.WithTimestamp(at(2500 * time.Microsecond)))
	child.End(oteltrace.WithTimestamp(at(4 * time.Millisecond)))
	_, producer := tracer.Start(ctx, "publish order", oteltrace.WithSpanKind(oteltrace.SpanKindProducer), oteltrace.WithTimestamp(at(5*time.Millisecond)))
	producer.End(oteltrace.WithTimestamp(at(6 * time.Millisecond)))
	_, consumer := tracer.Start(ctx, "consume ack", oteltrace.WithSpanKind(oteltrace.SpanKindConsumer), oteltrace.WithTimestamp(at(7*time.Millisecond)))
	consumer.SetStatus(otelcodes.Ok, "")
	consumer.End(oteltrace.WithTimestamp(at(8 * time.Millisecond)))
	root.RecordError(&checkoutError{reason: "insufficient funds"}, oteltrace.WithStackTrace(true),
		oteltrace.WithTimestamp(at(9*time.Millisecond)), oteltrace.WithAttributes(attribute.Bool("exception.escaped", true)))
	root.SetStatus(otelcodes.Error, "payment failed")
	root.End(oteltrace.WithTimestamp(at(10 * time.Millisecond)))
}

// newTraceID derives a distinct trace id per export from its base time.
func newTraceID(base time.Time) oteltrace.TraceID {
	var id oteltrace.TraceID
	copy(id[:], "e2e-otlp")
	binary.BigEndian.PutUint64(id[8:], uint64(base.UnixNano()))
	return id
}

// expectedValue is how ingest/otlp documents attribute values are stored.
func expectedValue(v attribute.Value) trace.Value {
	float := trace.Float // NaN and ±Inf stay floats
	var l []trace.Value
	switch v.Type() {
	case attribute.BOOL:
		return trace.Bool(v.AsBool())
	case attribute.INT64:
		return trace.Int(v.AsInt64())
	case attribute.FLOAT64:
		return float(v.AsFloat64())
	case attribute.STRING:
		return trace.String(v.AsString())
	case attribute.BYTESLICE:
		return trace.String(base64.StdEncoding.EncodeToString(v.AsByteSlice()))
	case attribute.BOOLSLICE:
		for _, b := range v.AsBoolSlice() {
			l = append(l, trace.Bool(b))
		}
	case attribute.INT64SLICE:
		for _, n := range v.AsInt64Slice() {
			l = append(l, trace.Int(n))
		}
	case attribute.FLOAT64SLICE:
		for _, f := range v.AsFloat64Slice() {
			l = append(l, float(f))
		}
	case attribute.STRINGSLICE:
		for _, s := range v.AsStringSlice() {
			l = append(l, trace.String(s))
		}
	case attribute.SLICE:
		for _, e := range v.AsSlice() {
			l = append(l, expectedValue(e))
		}
	case attribute.MAP:
		var m trace.Attrs
		for _, kv := range v.AsMap() {
			m.Set(string(kv.Key), expectedValue(kv.Value))
		}
		return trace.MapValue(m)
	default:
		return trace.Null()
	}
	return trace.List(l...)
}

func spanIDOf(id oteltrace.SpanID) trace.SpanID { return trace.SpanID(binary.BigEndian.Uint64(id[:])) }

// expectedOTLPSpan is the stored form of an SDK span by ingest/otlp's
// documented mapping, written against the SDK's own view of the span. The
// exception's stack frames are left to checkGoStack.
func expectedOTLPSpan(ro sdktrace.ReadOnlySpan) *trace.Span {
	sc := ro.SpanContext()
	s := &trace.Span{TraceID: trace.TraceID(sc.TraceID()), SpanID: spanIDOf(sc.SpanID()), Type: ro.SpanKind().String(),
		StartNS: ro.StartTime().UnixNano(), DurationNS: ro.EndTime().Sub(ro.StartTime()).Nanoseconds(), Calls: 1,
		Source: trace.SourceOTLP, Error: ro.Status().Code == otelcodes.Error}
	if p := ro.Parent(); p.SpanID().IsValid() {
		s.ParentID = spanIDOf(p.SpanID())
	}
	var a trace.Attrs
	for _, kv := range ro.Attributes() {
		a.Set(string(kv.Key), expectedValue(kv.Value))
	}
	for _, kv := range ro.Resource().Attributes() {
		a.Set(string(kv.Key), expectedValue(kv.Value))
	}
	a.Set("otel.resource.schema_url", trace.String(ro.Resource().SchemaURL()))
	scope := ro.InstrumentationScope()
	a.Set("otel.scope.name", trace.String(scope.Name))
	a.Set("otel.scope.version", trace.String(scope.Version))
	var sa trace.Attrs
	for _, kv := range scope.Attributes.ToSlice() {
		sa.Set(string(kv.Key), expectedValue(kv.Value))
	}
	a.Set("otel.scope.attributes", trace.MapValue(sa))
	a.Set("otel.span.kind", trace.String(ro.SpanKind().String()))
	switch ro.Status().Code {
	case otelcodes.Error:
		a.Set("otel.status.code", trace.String("error"))
	case otelcodes.Ok:
		a.Set("otel.status.code", trace.String("ok"))
	}
	if d := ro.Status().Description; d != "" {
		a.Set("otel.status.message", trace.String(d))
	}
	if ts := sc.TraceState().String(); ts != "" {
		a.Set("otel.trace_state", trace.String(ts))
	}
	var links []trace.Value
	for _, l := range ro.Links() {
		lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		var m, la trace.Attrs
		m.Set("trace_id", trace.String(hex.EncodeToString(lt[:])))
		m.Set("span_id", trace.String(hex.EncodeToString(ls[:])))
		for _, kv := range l.Attributes {
			la.Set(string(kv.Key), expectedValue(kv.Value))
		}
		if len(la) > 0 {
			m.Set("attributes", trace.MapValue(la))
		}
		links = append(links, trace.MapValue(m))
	}
	if len(links) > 0 {
		a.Set("otel.links", trace.List(links...))
	}
	a.Set("source.format", trace.String("otlp"))
	s.Attrs = a

	root := &trace.Record{Method: ro.Name(), DurationNS: s.DurationNS, Calls: 1}
	for _, ev := range ro.Events() {
		rec := &trace.Record{Method: ev.Name, StartNS: ev.Time.Sub(ro.StartTime()).Nanoseconds()}
		var ea trace.Attrs
		for _, kv := range ev.Attributes {
			switch {
			case ev.Name == "exception" && kv.Key == "exception.type":
				rec.Exception = exceptionOf(rec.Exception)
				rec.Exception.Class = kv.Value.AsString()
			case ev.Name == "exception" && kv.Key == "exception.message":
				rec.Exception = exceptionOf(rec.Exception)
				rec.Exception.Message = kv.Value.AsString()
			case ev.Name == "exception" && kv.Key == "exception.stacktrace":
				rec.Exception = exceptionOf(rec.Exception)
			default:
				ea.Set(string(kv.Key), expectedValue(kv.Value))
			}
		}
		rec.Attrs = ea
		if rec.Exception != nil {
			rec.Errors = 1
			root.Errors++
		}
		root.Children = append(root.Children, rec)
	}
	s.Root = root
	s.Recs = 1 + int64(len(root.Children))
	s.Errors = root.Errors
	return s
}

func exceptionOf(x *trace.Exception) *trace.Exception {
	if x == nil {
		return &trace.Exception{}
	}
	return x
}

// goFileLine is a file line of a Go stack trace.
var goFileLine = regexp.MustCompile(`^\t\S+\.go:\d+( \+0x[0-9a-f]+)?$`)

// checkGoStack checks the stored exception's frames against the recorded
// runtime.Stack text, independently of the parser: one frame per file
// line, each with its .go file and line, emitCheckoutSpans among them.
func checkGoStack(t *testing.T, ro sdktrace.ReadOnlySpan, x *trace.Exception) {
	t.Helper()
	var text string
	for _, ev := range ro.Events() {
		for _, kv := range ev.Attributes {
			if kv.Key == "exception.stacktrace" {
				text = kv.Value.AsString()
			}
		}
	}
	lines := 0
	for _, l := range strings.Split(text, "\n") {
		if goFileLine.MatchString(l) {
			lines++
		}
	}
	if x == nil || lines == 0 || len(x.Stack) != lines {
		t.Fatalf("exception %+v: %d frames for %d file lines of\n%s", x, len(x.Stack), lines, text)
	}
	found := false
	for i, f := range x.Stack {
		if f.Line <= 0 || !strings.HasSuffix(f.File, ".go") {
			t.Errorf("frame %d: %+v", i, f)
		}
		found = found || (f.Class == "github.com/ztsd/ztsd/e2e" && f.Method == "emitCheckoutSpans")
	}
	if !found {
		t.Errorf("no frame for e2e.emitCheckoutSpans in %+v", x.Stack)
	}
}

// compareStored reads every recorded span back from the daemon and
// compares it field by field with the mapping's expectation.
func compareStored(t *testing.T, c *client.Client, recorded []sdktrace.ReadOnlySpan) {
	t.Helper()
	if len(recorded) != 5 {
		t.Fatalf("the SDK recorded %d spans, want 5", len(recorded))
	}
	for _, ro := range recorded {
		want := expectedOTLPSpan(ro)
		got, err := c.GetSpan(context.Background(), want.TraceID, want.SpanID)
		if err != nil {
			t.Fatalf("span %q (%s/%s): %v", ro.Name(), want.TraceID, want.SpanID, err)
		}
		children := got.Children
		got.Children = nil
		for _, r := range got.Root.Children {
			if r.Exception != nil && ro.Name() == "POST /checkout" {
				checkGoStack(t, ro, r.Exception)
				for _, w := range want.Root.Children {
					if w.Exception != nil {
						w.Exception.Stack = r.Exception.Stack
					}
				}
			}
		}
		if d := trace.Diff(want, got); d != "" {
			t.Errorf("span %q: %s", ro.Name(), d)
		}
		var kids int
		for _, other := range recorded {
			if other.Parent().SpanID() == ro.SpanContext().SpanID() {
				kids++
			}
		}
		if len(children) != kids {
			t.Errorf("span %q: GET ?span= gives %d child spans, the SDK recorded %d", ro.Name(), len(children), kids)
		}
	}
}

// TestOTLPIngest sends a trace with each exporter and transport the daemon
// serves and reads every span back with all its fields.
func TestOTLPIngest(t *testing.T) {
	t.Parallel()
	httpAddr, grpcAddr := freePort(t), freePort(t)
	d := daemontest.New(t, fmt.Sprintf("listen = %q\notlp_grpc_listen = %q", httpAddr, grpcAddr))
	d.Start()
	ctx := context.Background()
	base := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var traces []trace.TraceID
	export := func(name string, exp sdktrace.SpanExporter, batch bool) {
		t.Run(name, func(t *testing.T) {
			tp, rec := newCheckoutProvider(exp, batch)
			b := base.Add(time.Duration(len(traces)) * time.Second)
			emitCheckoutSpans(ctx, tp, b)
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatalf("export: %v", err)
			}
			traces = append(traces, trace.TraceID(newTraceID(b)))
			compareStored(t, d.Client, rec.Ended())
		})
	}
	noRetry := otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})

	// OTLP/HTTP protobuf to the TCP listener, one request per span.
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+httpAddr+"/v1/traces"), noRetry)
	if err != nil {
		t.Fatal(err)
	}
	export("http-protobuf-tcp", exp, false)

	// OTLP/HTTP JSON, gzip-compressed, batched, over the unix socket.
	exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://ztsd/v1/traces"), noRetry,
		otlptracehttp.WithHTTPClient(socketHTTP(d.Socket)), otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	if err != nil {
		t.Fatal(err)
	}
	export("http-json-gzip-socket", exp, true)

	// OTLP/gRPC, gzip-compressed, batched, to the gRPC listener.
	gexp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithCompressor("gzip"), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	export("grpc-gzip-tcp", gexp, true)

	// ztsctl finds every span by the resource's service name.
	found := ctlSearch(t, d, "--attr", "service.name=checkout", "--spans", "--limit", "100")
	if len(found) != 5*len(traces) {
		t.Errorf("ztsctl search --attr service.name=checkout --spans: %d spans, want %d", len(found), 5*len(traces))
	}
	if got := ctlSearch(t, d, "--attr", "service.name=checkout"); len(got) != len(traces) {
		t.Errorf("ztsctl search --attr service.name=checkout: %d traces, want %d", len(got), len(traces))
	}
	if got := ctlSearch(t, d, "--attr", "service.name=checkout", "--errors", "--spans", "--limit", "100"); len(got) != len(traces) {
		t.Errorf("--errors: %d spans, want the %d roots", len(got), len(traces))
	}
	out := ctlGet(t, d, traces[0].String())
	for _, want := range []string{"POST /checkout", "  span ", "SELECT orders", "decode row", "!! *e2e.checkoutError: card declined: insufficient funds",
		"query.sent", "db.statement=SELECT * FROM orders WHERE id = ?", "ERROR (1 errors)"} {
		if !strings.Contains(out, want) {
			t.Errorf("ztsctl get: no %q in\n%s", want, out)
		}
	}

	// Trace JSON lines still work at the same path, on both listeners.
	line := &trace.Span{TraceID: trace.TraceID{0x0a, 0x50, 0x11}, SpanID: 7, StartNS: base.UnixNano(), DurationNS: 5e6, Calls: 1, Recs: 1,
		Root: &trace.Record{Method: "GET /json", DurationNS: 5e6, Calls: 1}}
	line.Attrs.Set("service.name", trace.String("checkout"))
	tcp := client.NewTCP(httpAddr)
	defer tcp.Close()
	if err := tcp.Put(ctx, line); err != nil {
		t.Fatalf("Trace JSON over TCP: %v", err)
	}
	line2 := *line
	line2.TraceID[15] = 2
	if err := d.Client.Put(ctx, &line2); err != nil {
		t.Fatalf("Trace JSON over the socket: %v", err)
	}
	for _, id := range []trace.TraceID{line.TraceID, line2.TraceID} {
		got, err := tcp.GetSpan(ctx, id, 7)
		if err != nil || got.Source != trace.SourceJSON || got.Root.Method != "GET /json" {
			t.Errorf("Trace JSON span %s: %v %+v", id, err, got)
		}
	}
	// A body that is not OTLP is rejected whole: 400, nothing stored.
	r := send(t, socketHTTP(d.Socket), "POST", "http://ztsd/v1/traces", map[string]string{"Content-Type": "application/x-protobuf"},
		[]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	if r.status != 400 {
		t.Errorf("garbage protobuf: %d %s", r.status, r.body)
	}
}

// TestOTLPGRPCUnixSocket serves OTLP/gRPC on a unix socket.
func TestOTLPGRPCUnixSocket(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	path := d.Socket + ".otlp"
	d.WriteConfig(fmt.Sprintf("otlp_grpc_listen = %q", "unix:"+path))
	d.Start()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithGRPCConn(conn),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp, rec := newCheckoutProvider(exp, true)
	emitCheckoutSpans(context.Background(), tp, time.Now().Truncate(time.Millisecond))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	compareStored(t, d.Client, rec.Ended())
}

// cpuSeconds is the user+system CPU time of process pid so far.
func cpuSeconds(t testing.TB, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the line, in clock ticks (USER_HZ, 100 on Linux).
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return (utime + stime) / 100
}

// dirSize is the bytes of the data files (traces.zts) and of all regular
// files under dir.
func dirSize(t testing.TB, dir string) (dataFiles, all int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type().IsRegular() {
			fi, err := e.Info()
			if err != nil {
				return err
			}
			all += fi.Size()
			if e.Name() == "traces.zts" {
				dataFiles += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dataFiles, all
}

// TestOTLPTelemetrygenLoad runs the collector project's load generator
// against the daemon's OTLP/gRPC listener (when ZTSD_TELEMETRYGEN names the
// binary) and checks that every span sent is stored; it logs spans/s, the
// daemon's CPU time and the bytes on disk per span.
func TestOTLPTelemetrygenLoad(t *testing.T) {
	bin := os.Getenv("ZTSD_TELEMETRYGEN")
	if bin == "" {
		t.Skip("set ZTSD_TELEMETRYGEN to a telemetrygen binary (go install github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen@latest)")
	}
	const workers, traces, children = 2, 500, 4
	grpcAddr := freePort(t)
	d := daemontest.New(t, fmt.Sprintf("otlp_grpc_listen = %q", grpcAddr))
	d.Start()
	pid := d.Cmd.Process.Pid
	cpu0 := cpuSeconds(t, pid)
	t0 := time.Now()
	cmd := exec.Command(bin, "traces", "--otlp-endpoint", grpcAddr, "--otlp-insecure", "--batch=false",
		"--workers", strconv.Itoa(workers), "--traces", strconv.Itoa(traces), "--child-spans", strconv.Itoa(children), "--rate", "0")
	out, err := cmd.CombinedOutput()
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("telemetrygen: %v\n%s", err, out)
	}
	cpu := cpuSeconds(t, pid) - cpu0
	sent := workers * traces * (1 + children)
	stored := searchAll(t, d.Client, client.Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("telemetrygen")}},
		Spans: true, Limit: 10000})
	if len(stored) != sent {
		t.Fatalf("telemetrygen sent %d spans (%d workers × %d traces × %d spans); the daemon stores %d\n%s",
			sent, workers, traces, 1+children, len(stored), out)
	}
	// Sizes after a clean stop, when the indexes are flushed too.
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.Stderr())
	}
	dataFiles, onDisk := dirSize(t, d.DataDir)
	t.Logf("telemetrygen: %d spans in %v = %.0f spans/s (race detector %v); daemon CPU %.2f s (%.0f µs/span); "+
		"traces.zts %d B = %.0f B/span; data dir %d B = %.0f B/span (with indexes)",
		sent, took.Round(time.Millisecond), float64(sent)/took.Seconds(), daemontest.RaceEnabled, cpu, cpu/float64(sent)*1e6,
		dataFiles, float64(dataFiles)/float64(sent), onDisk, float64(onDisk)/float64(sent))
}

// BenchmarkOTLPGRPCExport measures one OTLP/gRPC export of the five-span
// checkout trace into a real daemon, acknowledged once durable.
func BenchmarkOTLPGRPCExport(b *testing.B) {
	grpcAddr := freePort(b)
	d := daemontest.New(b, fmt.Sprintf("otlp_grpc_listen = %q", grpcAddr))
	d.Start()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	emitCheckoutSpans(ctx, tp, time.Now())
	spans := rec.Ended()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		b.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	b.ResetTimer()
	for range b.N {
		if err := exp.ExportSpans(ctx, spans); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(spans))/b.Elapsed().Seconds(), "spans/s")
}
