// Package querytest holds what the query API tests share: the OTLP load
// they ingest (the same bytes the Jaeger compatibility test sends to a
// real jaeger-query) and a storedir.DB holding it plus real samples.
package querytest

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/ingest/atf"
	"github.com/ztsd/ztsd/ingest/dial9"
	"github.com/ztsd/ztsd/ingest/otlp"
	"github.com/ztsd/ztsd/ingest/wtf"
	"github.com/ztsd/ztsd/ingest/zorka"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Base is the start of the load's first trace.
var Base = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

// TraceID returns the load's i-th trace id.
func TraceID(i int) []byte {
	id := make([]byte, 16)
	binary.BigEndian.PutUint64(id[:8], 0x5a7d000000000000|uint64(i))
	binary.BigEndian.PutUint64(id[8:], 0x00c0ffee00000000|uint64(i))
	return id
}

// SpanID returns span j of trace i.
func SpanID(i, j int) []byte {
	id := make([]byte, 8)
	binary.BigEndian.PutUint64(id, uint64(i)<<16|uint64(j)+1)
	return id
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func i64(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

func f64(k string, v float64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v}}}
}

func boolean(k string, v bool) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v}}}
}

// Traces is how many traces Load holds.
const Traces = 4

// Load returns the OTLP request the query API tests ingest: Traces traces
// over two services (checkout: server span → client span → payments
// server span; payments also alone), with every attribute type, span
// kinds, an error status with a message, events (one an exception), a
// link and a trace state.
func Load() *collectortrace.ExportTraceServiceRequest {
	scope := &commonpb.InstrumentationScope{Name: "ztsd.querytest", Version: "1.0.0"}
	checkoutRes := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "checkout"),
		str("host.name", "web-1"), str("telemetry.sdk.language", "go")}}
	paymentsRes := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", "payments"),
		str("host.name", "pay-1")}}
	var checkout, payments []*tracepb.Span
	for i := 0; i < Traces; i++ {
		t0 := uint64(Base.Add(time.Duration(i) * time.Minute).UnixNano())
		tid := TraceID(i)
		status := 200
		if i%2 == 1 {
			status = 500
		}
		root := &tracepb.Span{TraceId: tid, SpanId: SpanID(i, 0), Name: "GET /checkout",
			Kind:              tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: t0, EndTimeUnixNano: t0 + uint64(12+i)*uint64(time.Millisecond),
			TraceState: "vendor=ztsd",
			Attributes: []*commonpb.KeyValue{str("http.method", "GET"), i64("http.status_code", int64(status)),
				f64("cart.total", 12.5+float64(i)), boolean("cart.express", i%2 == 0),
				{Key: "cart.items", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
					Values: []*commonpb.AnyValue{{Value: &commonpb.AnyValue_StringValue{StringValue: "book"}},
						{Value: &commonpb.AnyValue_IntValue{IntValue: 2}}}}}}}},
			Events: []*tracepb.Span_Event{{TimeUnixNano: t0 + 1000_000, Name: "cart loaded",
				Attributes: []*commonpb.KeyValue{i64("cart.size", 2)}}},
		}
		client := &tracepb.Span{TraceId: tid, SpanId: SpanID(i, 1), ParentSpanId: SpanID(i, 0), Name: "charge",
			Kind:              tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: t0 + 2000_000, EndTimeUnixNano: t0 + 9000_000,
			Attributes: []*commonpb.KeyValue{str("peer.service", "payments")}}
		pay := &tracepb.Span{TraceId: tid, SpanId: SpanID(i, 2), ParentSpanId: SpanID(i, 1), Name: "POST /charge",
			Kind:              tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: t0 + 3000_000, EndTimeUnixNano: t0 + 8500_000,
			Attributes: []*commonpb.KeyValue{str("http.method", "POST"), i64("http.status_code", int64(status))}}
		if status == 500 {
			root.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "payment failed"}
			pay.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR}
			pay.Events = []*tracepb.Span_Event{{TimeUnixNano: t0 + 8000_000, Name: "exception",
				Attributes: []*commonpb.KeyValue{str("exception.type", "CardDeclined"), str("exception.message", "card declined")}}}
		} else {
			pay.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
			pay.Links = []*tracepb.Span_Link{{TraceId: TraceID(i + 100), SpanId: SpanID(i+100, 0),
				Attributes: []*commonpb.KeyValue{str("link.reason", "retry")}}}
		}
		checkout = append(checkout, root, client)
		payments = append(payments, pay)
	}
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{Resource: checkoutRes, ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope, Spans: checkout}}},
		{Resource: paymentsRes, ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope, Spans: payments}}},
	}}
}

// LoadSpans maps Load through the OTLP importer.
func LoadSpans(t testing.TB) []*trace.Span {
	t.Helper()
	body, err := proto.Marshal(Load())
	if err != nil {
		t.Fatal(err)
	}
	spans, rejected, msg, err := otlp.Decode(body, "application/x-protobuf", otlp.Options{})
	if err != nil || rejected != 0 {
		t.Fatalf("decode the load: %v (rejected %d: %s)", err, rejected, msg)
	}
	return spans
}

// OpenDB opens a fresh store in a temp dir holding spans.
func OpenDB(t testing.TB, spans ...[]*trace.Span) *storedir.DB {
	t.Helper()
	opt := storedir.DefaultOptions()
	opt.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), filepath.Join(t.TempDir(), "data"), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, s := range spans {
		if len(s) == 0 {
			continue
		}
		if err := db.Append(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// Sample is the path of a file under ../shared/testdata, from a package
// directory one level below the repository root.
func Sample(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "shared", "testdata"}, parts...)...)
}

// SampleSpans imports real samples in-process: the Zorka traces1 capture,
// the WTF cff-js-node trace, the ATF clean session and the small dial9
// stream.
func SampleSpans(t testing.TB) []*trace.Span {
	t.Helper()
	ctx := context.Background()
	var spans []*trace.Span
	emit := func(sp *trace.Span) error { spans = append(spans, sp); return nil }
	if _, err := zorka.ImportBodies(ctx, []string{Sample("zorka", "traces1-0-agd.cbor"), Sample("zorka", "traces1-1-trc.cbor")},
		ingest.Options{}, emit); err != nil {
		t.Fatal(err)
	}
	if _, err := wtf.Import(ctx, Sample("wtf", "cff-js-node.wtf-trace"), ingest.Options{}, emit); err != nil {
		t.Fatal(err)
	}
	if _, err := atf.Import(ctx, Sample("atf", "clean"), ingest.Options{}, emit); err != nil {
		t.Fatal(err)
	}
	if _, err := dial9.Import(ctx, Sample("dial9", "demo-2026-03-18-small.bin"), ingest.Options{}, emit); err != nil {
		t.Fatal(err)
	}
	return spans
}
