package otlp

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/ztsd/ztsd/trace"
)

// recordingAppender keeps what it is given; err, when set, fails appends.
type recordingAppender struct {
	mu    sync.Mutex
	calls int
	spans []*trace.Span
	err   error
	// block, when set, holds Append until it is closed.
	block chan struct{}
	// entered receives a value when Append starts (if set).
	entered chan struct{}
}

func (a *recordingAppender) Append(ctx context.Context, spans []*trace.Span) error {
	if a.entered != nil {
		a.entered <- struct{}{}
	}
	if a.block != nil {
		select {
		case <-a.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.err != nil {
		return a.err
	}
	for _, s := range spans {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	a.spans = append(a.spans, spans...)
	return nil
}

func (a *recordingAppender) stored() []*trace.Span {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.spans)
}

func (a *recordingAppender) appendCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// checkoutError is the error the test spans record; its type name is what
// exception.type carries.
type checkoutError struct{ reason string }

func (e *checkoutError) Error() string { return "card declined: " + e.reason }

// testEpoch is the start of the test traces.
var testEpoch = time.Unix(1_700_000_000, 123_456_789)

// emitTestSpans records a trace of nested spans under a remote parent
// carrying a trace state: a server root with every attribute type, a link
// and a recorded error with its Go stack trace; a client child with an
// event; an internal grandchild; a producer with more attributes than the
// limit (dropped count); and a consumer with an OK status.
func emitTestSpans(ctx context.Context, tp oteltrace.TracerProvider) oteltrace.TraceID {
	tracer := tp.Tracer("checkout/instrumentation",
		oteltrace.WithInstrumentationVersion("1.2.3"),
		oteltrace.WithSchemaURL("https://opentelemetry.io/schemas/1.26.0"),
		oteltrace.WithInstrumentationAttributes(attribute.String("scope.team", "payments")))
	ts, err := oteltrace.ParseTraceState("vendor=abc,other=1")
	if err != nil {
		panic(err)
	}
	traceID := oteltrace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	remote := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: traceID, SpanID: oteltrace.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: oteltrace.FlagsSampled, TraceState: ts, Remote: true,
	})
	ctx = oteltrace.ContextWithRemoteSpanContext(ctx, remote)
	linked := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  oteltrace.SpanID{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1},
	})
	at := func(d time.Duration) time.Time { return testEpoch.Add(d) }

	ctx, root := tracer.Start(ctx, "POST /checkout",
		oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithTimestamp(at(0)),
		oteltrace.WithAttributes(everyAttributeType()...),
		oteltrace.WithLinks(oteltrace.Link{SpanContext: linked, Attributes: []attribute.KeyValue{
			attribute.String("link.reason", "retry-of"), attribute.Int64("link.attempt", 2)}}))

	cctx, child := tracer.Start(ctx, "SELECT orders", oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithTimestamp(at(time.Millisecond)))
	child.AddEvent("query.sent", oteltrace.WithTimestamp(at(1500*time.Microsecond)),
		oteltrace.WithAttributes(attribute.String("db.statement", "SELECT * FROM orders WHERE id = ?"), attribute.Int("db.rows", 3)))
	_, grand := tracer.Start(cctx, "decode row", oteltrace.WithTimestamp(at(2*time.Millisecond)))
	grand.End(oteltrace.WithTimestamp(at(2500 * time.Microsecond)))
	child.End(oteltrace.WithTimestamp(at(4 * time.Millisecond)))

	_, producer := tracer.Start(ctx, "publish order", oteltrace.WithSpanKind(oteltrace.SpanKindProducer), oteltrace.WithTimestamp(at(5*time.Millisecond)))
	for i := range testAttributeLimit + 3 {
		producer.SetAttributes(attribute.Int("msg.field."+string(rune('a'+i)), i))
	}
	producer.End(oteltrace.WithTimestamp(at(6 * time.Millisecond)))

	_, consumer := tracer.Start(ctx, "consume ack", oteltrace.WithSpanKind(oteltrace.SpanKindConsumer), oteltrace.WithTimestamp(at(7*time.Millisecond)))
	consumer.SetStatus(otelcodes.Ok, "")
	consumer.End(oteltrace.WithTimestamp(at(8 * time.Millisecond)))

	root.RecordError(&checkoutError{reason: "insufficient funds"}, oteltrace.WithStackTrace(true),
		oteltrace.WithTimestamp(at(9*time.Millisecond)), oteltrace.WithAttributes(attribute.Bool("exception.escaped", true)))
	root.SetStatus(otelcodes.Error, "payment failed")
	root.End(oteltrace.WithTimestamp(at(10 * time.Millisecond)))
	return traceID
}

// everyAttributeType returns one attribute of each OpenTelemetry Go type.
func everyAttributeType() []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("http.request.method", "POST"),
		attribute.String("text.unicode", "zürich ✓ 東京"),
		attribute.Int64("http.response.status_code", 402),
		attribute.Int64("int.min", math.MinInt64),
		attribute.Float64("cart.total", 129.95),
		attribute.Float64("ratio.nan", math.NaN()),
		attribute.Float64("ratio.inf", math.Inf(-1)),
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
		{Key: "empty.value"}, // attribute.EMPTY
	}
}

// testAttributeLimit is the span attribute count limit of the test
// provider; the producer span exceeds it.
const testAttributeLimit = 20

// newTestProvider returns a provider exporting through exp (synchronously
// when sync is set, else batched) and recording every span for the
// expectation.
func newTestProvider(exp sdktrace.SpanExporter, sync bool) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.25.0",
		attribute.String("service.name", "checkout"),
		attribute.String("service.version", "2.4.1"),
		attribute.String("host.name", "build-7"),
		attribute.Int64("process.pid", 4242))
	limits := sdktrace.NewSpanLimits()
	limits.AttributeCountLimit = testAttributeLimit
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res), sdktrace.WithSpanProcessor(rec), sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	}
	if sync {
		opts = append(opts, sdktrace.WithSyncer(exp))
	} else {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	return sdktrace.NewTracerProvider(opts...), rec
}

// expectedSpan is what the OTLP mapping must produce for an SDK span,
// written against the SDK's own view of the span (not the protobuf). The
// exception's stack frames come from parsing the recorded stack text;
// checkGoStack verifies them against the text independently.
func expectedSpan(ro sdktrace.ReadOnlySpan) *trace.Span {
	sc := ro.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	s := &trace.Span{
		TraceID:    trace.TraceID(tid),
		SpanID:     trace.SpanID(binary.BigEndian.Uint64(sid[:])),
		Type:       ro.SpanKind().String(),
		StartNS:    ro.StartTime().UnixNano(),
		DurationNS: ro.EndTime().Sub(ro.StartTime()).Nanoseconds(),
		Calls:      1,
		Source:     trace.SourceOTLP,
		Error:      ro.Status().Code == otelcodes.Error,
	}
	if p := ro.Parent().SpanID(); p.IsValid() {
		s.ParentID = trace.SpanID(binary.BigEndian.Uint64(p[:]))
	}
	var a trace.Attrs
	for _, kv := range ro.Attributes() {
		a.Set(string(kv.Key), expectValue(kv.Value))
	}
	for _, kv := range ro.Resource().Attributes() {
		a.Set(string(kv.Key), expectValue(kv.Value))
	}
	if u := ro.Resource().SchemaURL(); u != "" {
		a.Set("otel.resource.schema_url", trace.String(u))
	}
	scope := ro.InstrumentationScope()
	a.Set("otel.scope.name", trace.String(scope.Name))
	if scope.Version != "" {
		a.Set("otel.scope.version", trace.String(scope.Version))
	}
	if scope.SchemaURL != "" {
		a.Set("otel.scope.schema_url", trace.String(scope.SchemaURL))
	}
	if scope.Attributes.Len() > 0 {
		var sa trace.Attrs
		for _, kv := range scope.Attributes.ToSlice() {
			sa.Set(string(kv.Key), expectValue(kv.Value))
		}
		a.Set("otel.scope.attributes", trace.MapValue(sa))
	}
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
	if links := ro.Links(); len(links) > 0 {
		var list []trace.Value
		for _, l := range links {
			ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
			var m trace.Attrs
			m.Set("trace_id", trace.String(hex.EncodeToString(ltid[:])))
			m.Set("span_id", trace.String(hex.EncodeToString(lsid[:])))
			if ts := l.SpanContext.TraceState().String(); ts != "" {
				m.Set("trace_state", trace.String(ts))
			}
			if len(l.Attributes) > 0 {
				var la trace.Attrs
				for _, kv := range l.Attributes {
					la.Set(string(kv.Key), expectValue(kv.Value))
				}
				m.Set("attributes", trace.MapValue(la))
			}
			if l.DroppedAttributeCount > 0 {
				m.Set("dropped_attributes_count", trace.Int(int64(l.DroppedAttributeCount)))
			}
			list = append(list, trace.MapValue(m))
		}
		a.Set("otel.links", trace.List(list...))
	}
	for key, n := range map[string]int{
		"otel.dropped_attributes_count": ro.DroppedAttributes(),
		"otel.dropped_events_count":     ro.DroppedEvents(),
		"otel.dropped_links_count":      ro.DroppedLinks(),
	} {
		if n > 0 {
			a.Set(key, trace.Int(int64(n)))
		}
	}
	a.Set("source.format", trace.String("otlp"))
	s.Attrs = a

	root := &trace.Record{Method: ro.Name(), DurationNS: s.DurationNS, Calls: 1}
	for _, ev := range ro.Events() {
		rec := &trace.Record{Method: ev.Name, StartNS: ev.Time.Sub(ro.StartTime()).Nanoseconds()}
		var ea trace.Attrs
		var exc *trace.Exception
		if ev.Name == "exception" {
			exc = &trace.Exception{}
		}
		for _, kv := range ev.Attributes {
			switch {
			case exc != nil && kv.Key == "exception.type":
				exc.Class = kv.Value.AsString()
			case exc != nil && kv.Key == "exception.message":
				exc.Message = kv.Value.AsString()
			case exc != nil && kv.Key == "exception.stacktrace":
				st, ok := parseStackTrace(kv.Value.AsString(), trace.MaxDepth)
				if !ok {
					ea.Set(string(kv.Key), expectValue(kv.Value))
				}
				exc.Stack, exc.Cause = st.Frames, st.Cause
			default:
				ea.Set(string(kv.Key), expectValue(kv.Value))
			}
		}
		if ev.DroppedAttributeCount > 0 {
			ea.Set("otel.dropped_attributes_count", trace.Int(int64(ev.DroppedAttributeCount)))
		}
		rec.Attrs, rec.Exception = ea, exc
		if exc != nil {
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

// expectValue converts an SDK attribute value the way the package
// documentation says OTLP values are stored.
func expectValue(v attribute.Value) trace.Value {
	switch v.Type() {
	case attribute.BOOL:
		return trace.Bool(v.AsBool())
	case attribute.INT64:
		return trace.Int(v.AsInt64())
	case attribute.FLOAT64:
		return expectFloat(v.AsFloat64())
	case attribute.STRING:
		return trace.String(v.AsString())
	case attribute.BOOLSLICE:
		var l []trace.Value
		for _, b := range v.AsBoolSlice() {
			l = append(l, trace.Bool(b))
		}
		return trace.List(l...)
	case attribute.INT64SLICE:
		var l []trace.Value
		for _, n := range v.AsInt64Slice() {
			l = append(l, trace.Int(n))
		}
		return trace.List(l...)
	case attribute.FLOAT64SLICE:
		var l []trace.Value
		for _, f := range v.AsFloat64Slice() {
			l = append(l, expectFloat(f))
		}
		return trace.List(l...)
	case attribute.STRINGSLICE:
		var l []trace.Value
		for _, s := range v.AsStringSlice() {
			l = append(l, trace.String(s))
		}
		return trace.List(l...)
	case attribute.BYTESLICE:
		return trace.String(base64.StdEncoding.EncodeToString(v.AsByteSlice()))
	case attribute.SLICE:
		var l []trace.Value
		for _, e := range v.AsSlice() {
			l = append(l, expectValue(e))
		}
		return trace.List(l...)
	case attribute.MAP:
		var m trace.Attrs
		for _, kv := range v.AsMap() {
			m.Set(string(kv.Key), expectValue(kv.Value))
		}
		return trace.MapValue(m)
	}
	return trace.Null()
}

func expectFloat(f float64) trace.Value {
	return trace.Float(f) // NaN and ±Inf stay floats
}

// compareWithSDK checks that got holds exactly the spans the SDK recorded,
// every field equal.
func compareWithSDK(t *testing.T, recorded []sdktrace.ReadOnlySpan, got []*trace.Span) {
	t.Helper()
	if len(got) != len(recorded) {
		t.Fatalf("stored %d spans, the SDK recorded %d", len(got), len(recorded))
	}
	byID := make(map[trace.SpanID]*trace.Span, len(got))
	for _, s := range got {
		if _, dup := byID[s.SpanID]; dup {
			t.Fatalf("span %s stored twice", s.SpanID)
		}
		byID[s.SpanID] = s
	}
	for _, ro := range recorded {
		want := expectedSpan(ro)
		g := byID[want.SpanID]
		if g == nil {
			t.Fatalf("span %s (%s) not stored", want.SpanID, ro.Name())
		}
		if d := trace.Diff(want, g); d != "" {
			t.Errorf("span %q: %s", ro.Name(), d)
		}
		if ro.Name() == "POST /checkout" {
			checkGoStack(t, ro, g)
		}
	}
}

// checkGoStack verifies the root span's exception independently of the
// parser: one frame per file line of the recorded runtime.Stack text, in
// order, each with a .go file and a line, and this test's emitTestSpans
// among them.
func checkGoStack(t *testing.T, ro sdktrace.ReadOnlySpan, g *trace.Span) {
	t.Helper()
	var text string
	for _, ev := range ro.Events() {
		for _, kv := range ev.Attributes {
			if kv.Key == "exception.stacktrace" {
				text = kv.Value.AsString()
			}
		}
	}
	var exc *trace.Exception
	for _, c := range g.Root.Children {
		if c.Exception != nil {
			exc = c.Exception
		}
	}
	if exc == nil || text == "" {
		t.Fatalf("root span: exception %v, stack text %d bytes", exc, len(text))
	}
	if exc.Class != "*otlp.checkoutError" && exc.Class != "github.com/ztsd/ztsd/ingest/otlp.checkoutError" {
		t.Errorf("exception class %q", exc.Class)
	}
	if exc.Message != "card declined: insufficient funds" {
		t.Errorf("exception message %q", exc.Message)
	}
	fileLines := 0
	for _, l := range splitLines(text) {
		if len(l) > 0 && l[0] == '\t' && fileLineRE.MatchString(l) {
			fileLines++
		}
	}
	if len(exc.Stack) == 0 || len(exc.Stack) != fileLines {
		t.Fatalf("%d frames from %d file lines:\n%s", len(exc.Stack), fileLines, text)
	}
	found := false
	for i, f := range exc.Stack {
		if f.Line <= 0 || len(f.File) < 4 || f.File[len(f.File)-3:] != ".go" {
			t.Errorf("frame %d: %+v", i, f)
		}
		if f.Class == "github.com/ztsd/ztsd/ingest/otlp" && f.Method == "emitTestSpans" {
			found = true
		}
	}
	if !found {
		t.Errorf("no frame for emitTestSpans in %+v", exc.Stack)
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// fileLineRE matches a complete file line of a Go stack trace.
var fileLineRE = regexp.MustCompile(`^\t\S+\.go:\d+( \+0x[0-9a-f]+)?$`)

// errFailingAppend is returned by appenders told to fail.
var errFailingAppend = errors.New("append failed")
