package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/trace"
)

func strVal(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func intVal(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func dblVal(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func boolVal(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func bytesVal(b []byte) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: b}}
}
func arrVal(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func kvlistVal(kvs ...*commonpb.KeyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: kvs}}}
}

// nested wraps an int in n arrays: its scalar sits n levels below the
// value itself.
func nested(n int) *commonpb.AnyValue {
	v := intVal(1)
	for range n {
		v = arrVal(v)
	}
	return v
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

const (
	sampleTraceA = "5b8efff798038103d269b633813fc60c"
	sampleTraceB = "0af7651916cd43dd8448eb211c80319c"
	sampleStart  = 1_712_000_000_000_000_000
)

const javaStack = `java.lang.IllegalStateException: order 17 cannot be paid
	at com.shop.checkout.PaymentService.charge(PaymentService.java:88)
	at com.shop.checkout.CheckoutController.post(CheckoutController.java:41)
	at java.base/java.lang.Thread.run(Thread.java:1583)
	Suppressed: java.io.IOException: close failed
		at com.shop.db.Pool.close(Pool.java:12)
		... 3 more
Caused by: java.net.SocketTimeoutException: Read timed out
	at java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:278)
	at com.shop.gateway.Client.call(Client.java:230)
	... 2 more
Caused by: java.io.EOFException
	at com.shop.gateway.Frame.read(Native Method)
	... 4 more
`

const pythonStack = `Traceback (most recent call last):
  File "/app/gateway.py", line 30, in call
    return sock.recv(4096)
TimeoutError: timed out

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/app/server.py", line 12, in handle
    pay(order)
  File "/app/pay.py", line 7, in pay
    raise PaymentError("declined") from e
pay.PaymentError: declined
`

// sampleRequest holds what the SDK test cannot send: two resources, three
// scopes, an unspecified span kind, bytes, nested arrays and kvlists,
// empty values, repeated keys, non-finite doubles, an event without time, a
// Java and a Python exception, a link with trace state and dropped
// attributes, dropped counts and a key collision between span and resource.
func sampleRequest() *collectortrace.ExportTraceServiceRequest {
	span := func(trace, id, parent, name string, kind tracepb.Span_SpanKind, startOff, dur uint64) *tracepb.Span {
		s := &tracepb.Span{
			TraceId: mustHex(trace), SpanId: mustHex(id), Name: name, Kind: kind,
			StartTimeUnixNano: sampleStart + startOff, EndTimeUnixNano: sampleStart + startOff + dur,
		}
		if parent != "" {
			s.ParentSpanId = mustHex(parent)
		}
		return s
	}
	root := span(sampleTraceA, "1111111111111111", "", "GET /orders/{id}", tracepb.Span_SPAN_KIND_SERVER, 0, 9_000_000)
	root.TraceState = "rojo=00f067aa0ba902b7"
	root.Attributes = []*commonpb.KeyValue{
		kv("http.route", strVal("/orders/{id}")),
		kv("service.name", strVal("span-says-otherwise")), // the resource wins
		kv("order.id", intVal(17)),
		kv("order.id", intVal(18)), // repeated: the last wins
		kv("ratio", dblVal(0.25)),
		kv("nan", dblVal(math.NaN())),
		kv("inf", dblVal(math.Inf(1))),
		kv("ok", boolVal(false)),
		kv("blob", bytesVal([]byte("\x00\xffhello"))),
		kv("empty", &commonpb.AnyValue{}),
		kv("nil.value", nil),
		kv("nested", arrVal(arrVal(intVal(1), strVal("two")), kvlistVal(kv("z", boolVal(true)), kv("a", dblVal(-1.5))))),
		kv("map", kvlistVal(kv("k2", strVal("v2")), kv("k1", arrVal()), kv("k1", strVal("v1")))),
	}
	root.DroppedAttributesCount, root.DroppedEventsCount, root.DroppedLinksCount = 2, 3, 4
	root.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream timeout"}
	root.Links = []*tracepb.Span_Link{{
		TraceId: mustHex(sampleTraceB), SpanId: mustHex("2222222222222222"), TraceState: "congo=t61rcWkgMzE",
		Attributes: []*commonpb.KeyValue{kv("link.kind", strVal("follows"))}, DroppedAttributesCount: 1,
	}}
	root.Events = []*tracepb.Span_Event{
		{TimeUnixNano: sampleStart + 1000, Name: "cache.miss", Attributes: []*commonpb.KeyValue{kv("key", strVal("order:17"))}},
		{Name: "untimed"},
		{TimeUnixNano: sampleStart + 8_000_000, Name: "exception", DroppedAttributesCount: 1, Attributes: []*commonpb.KeyValue{
			kv("exception.type", strVal("java.lang.IllegalStateException")),
			kv("exception.message", strVal("order 17 cannot be paid")),
			kv("exception.stacktrace", strVal(javaStack)),
			kv("exception.escaped", boolVal(true)),
		}},
	}
	child := span(sampleTraceA, "3333333333333333", "1111111111111111", "pay", tracepb.Span_SPAN_KIND_UNSPECIFIED, 1_000_000, 5_000_000)
	child.Events = []*tracepb.Span_Event{{TimeUnixNano: sampleStart + 2_000_000, Name: "exception", Attributes: []*commonpb.KeyValue{
		kv("exception.type", strVal("pay.PaymentError")),
		kv("exception.message", strVal("declined")),
		kv("exception.stacktrace", strVal(pythonStack)),
	}}}
	unparsable := span(sampleTraceA, "4444444444444444", "1111111111111111", "render", tracepb.Span_SPAN_KIND_INTERNAL, 6_000_000, 0)
	unparsable.Events = []*tracepb.Span_Event{{TimeUnixNano: sampleStart + 6_000_000, Name: "exception", Attributes: []*commonpb.KeyValue{
		kv("exception.type", strVal("RenderError")),
		kv("exception.stacktrace", strVal("no frames here, just prose")),
	}}}
	other := span(sampleTraceB, "5555555555555555", "", "consume", tracepb.Span_SPAN_KIND_CONSUMER, 0, 100)
	other.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
				kv("service.name", strVal("orders")), kv("host.name", strVal("web-1")),
				kv("k8s.pod.labels", kvlistVal(kv("app", strVal("orders")))),
			}, DroppedAttributesCount: 5},
			SchemaUrl: "https://opentelemetry.io/schemas/1.21.0",
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: &commonpb.InstrumentationScope{Name: "net/http", Version: "0.50.0", DroppedAttributesCount: 1},
					Spans: []*tracepb.Span{root, child}},
				{Scope: &commonpb.InstrumentationScope{Name: "templates"}, Spans: []*tracepb.Span{unparsable}},
			},
		},
		{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", strVal("mailer"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{other}}},
		},
	}}
}

// toOTLPJSON writes req as OTLP JSON: protobuf's JSON mapping with hex ids.
// numbers selects the other legal spellings: enums as integers and 64-bit
// integers as JSON numbers instead of names and strings.
func toOTLPJSON(t testing.TB, req *collectortrace.ExportTraceServiceRequest, numbers bool) []byte {
	return toOTLPJSONNames(t, req, numbers, false)
}

// toOTLPJSONNames is toOTLPJSON with the field names of the .proto files
// ("resource_spans") when protoNames is set.
func toOTLPJSONNames(t testing.TB, req *collectortrace.ExportTraceServiceRequest, numbers, protoNames bool) []byte {
	t.Helper()
	b, err := protojson.MarshalOptions{UseEnumNumbers: numbers, UseProtoNames: protoNames}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id":
					raw, err := base64.StdEncoding.DecodeString(e.(string))
					if err != nil {
						t.Fatal(err)
					}
					x[k] = hex.EncodeToString(raw)
					continue
				case "startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue",
					"start_time_unix_nano", "end_time_unix_nano", "time_unix_nano", "int_value":
					if numbers {
						x[k] = json.Number(e.(string))
						continue
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// nonFiniteRequest is the sample with NaN and ±Inf double attributes on
// the resource, a span, an event and inside an array and a kvlist.
func nonFiniteRequest() *collectortrace.ExportTraceServiceRequest {
	req := sampleRequest()
	rs := req.ResourceSpans[0]
	rs.Resource.Attributes = append(rs.Resource.Attributes, kv("res.nan", dblVal(math.NaN())))
	sp := rs.ScopeSpans[0].Spans[0]
	sp.Attributes = append(sp.Attributes, kv("ratio", dblVal(math.Inf(1))), kv("floor", dblVal(math.Inf(-1))),
		kv("nan.text", strVal("NaN")), kv("list", arrVal(dblVal(math.NaN()), strVal("Infinity"))),
		kv("map", kvlistVal(kv("x", dblVal(math.Inf(-1))))))
	if len(sp.Events) > 0 {
		sp.Events[0].Attributes = append(sp.Events[0].Attributes, kv("ev.nan", dblVal(math.NaN())))
	}
	return req
}

// TestJSONAndProtobufDecodeIdentically decodes the same requests as binary
// protobuf and as OTLP JSON in every spelling (names or numbers for enums
// and 64-bit integers; lowerCamelCase or .proto field names); the spans
// must be identical.
func TestJSONAndProtobufDecodeIdentically(t *testing.T) {
	for name, req := range map[string]*collectortrace.ExportTraceServiceRequest{
		"sample":    sampleRequest(),
		"rejecting": rejectingRequest(),
		"nonfinite": nonFiniteRequest(),
	} {
		t.Run(name, func(t *testing.T) {
			pb, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			want, wantRej, wantMsg, err := Decode(pb, ContentTypeProtobuf, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatal("no spans decoded")
			}
			for i := range 4 {
				numbers, protoNames := i&1 != 0, i&2 != 0
				body := toOTLPJSONNames(t, req, numbers, protoNames)
				if protoNames && !bytes.Contains(body, []byte(`"resource_spans"`)) {
					t.Fatalf("protojson did not write proto names: %.80s", body)
				}
				got, rej, msg, err := Decode(body, "application/json; charset=utf-8", Options{})
				if err != nil {
					t.Fatalf("numbers=%v protoNames=%v: %v\n%s", numbers, protoNames, err, body)
				}
				if rej != wantRej || msg != wantMsg {
					t.Errorf("numbers=%v: rejected %d %q, protobuf %d %q", numbers, rej, msg, wantRej, wantMsg)
				}
				if len(got) != len(want) {
					t.Fatalf("numbers=%v: %d spans, protobuf %d", numbers, len(got), len(want))
				}
				for i := range want {
					if d := trace.Diff(want[i], got[i]); d != "" {
						t.Errorf("numbers=%v protoNames=%v: span %d: %s", numbers, protoNames, i, d)
					}
				}
			}
		})
	}
}

// rejectingRequest has one span of each kind the mapping rejects between
// valid ones.
func rejectingRequest() *collectortrace.ExportTraceServiceRequest {
	req := sampleRequest()
	ss := req.ResourceSpans[0].ScopeSpans[1]
	bad := proto.Clone(ss.Spans[0]).(*tracepb.Span)
	bad.SpanId = make([]byte, 8)
	late := proto.Clone(ss.Spans[0]).(*tracepb.Span)
	late.SpanId = mustHex("6666666666666666")
	late.EndTimeUnixNano = late.StartTimeUnixNano - 1
	ss.Spans = append(ss.Spans, bad, late)
	return req
}

// TestSampleMapping checks the mapping rules on the hand-built request.
func TestSampleMapping(t *testing.T) {
	pb, err := proto.Marshal(sampleRequest())
	if err != nil {
		t.Fatal(err)
	}
	spans, rejected, msg, err := Decode(pb, ContentTypeProtobuf, Options{})
	if err != nil || rejected != 0 || msg != "" {
		t.Fatalf("err %v, rejected %d %q", err, rejected, msg)
	}
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	root, child, render, other := spans[0], spans[1], spans[2], spans[3]

	tidA, _ := trace.ParseTraceID(sampleTraceA)
	want := &trace.Span{
		TraceID: tidA, SpanID: 0x1111111111111111, Type: "server", StartNS: sampleStart, DurationNS: 9_000_000,
		Calls: 1, Errors: 1, Recs: 4, Error: true, Source: trace.SourceOTLP,
	}
	var a trace.Attrs
	a.Set("http.route", trace.String("/orders/{id}"))
	a.Set("service.name", trace.String("orders"))
	a.Set("host.name", trace.String("web-1"))
	a.Set("k8s.pod.labels", trace.MapValue(trace.Attrs{{Key: "app", Value: trace.String("orders")}}))
	a.Set("order.id", trace.Int(18))
	a.Set("ratio", trace.Float(0.25))
	a.Set("nan", trace.Float(math.NaN()))
	a.Set("inf", trace.Float(math.Inf(1)))
	a.Set("ok", trace.Bool(false))
	a.Set("blob", trace.String(base64.StdEncoding.EncodeToString([]byte("\x00\xffhello"))))
	a.Set("empty", trace.Null())
	a.Set("nil.value", trace.Null())
	a.Set("nested", trace.List(trace.List(trace.Int(1), trace.String("two")),
		trace.MapValue(trace.Attrs{{Key: "a", Value: trace.Float(-1.5)}, {Key: "z", Value: trace.Bool(true)}})))
	a.Set("map", trace.MapValue(trace.Attrs{{Key: "k1", Value: trace.String("v1")}, {Key: "k2", Value: trace.String("v2")}}))
	a.Set("otel.resource.schema_url", trace.String("https://opentelemetry.io/schemas/1.21.0"))
	a.Set("otel.resource.dropped_attributes_count", trace.Int(5))
	a.Set("otel.scope.name", trace.String("net/http"))
	a.Set("otel.scope.version", trace.String("0.50.0"))
	a.Set("otel.scope.dropped_attributes_count", trace.Int(1))
	a.Set("otel.span.kind", trace.String("server"))
	a.Set("otel.status.code", trace.String("error"))
	a.Set("otel.status.message", trace.String("upstream timeout"))
	a.Set("otel.trace_state", trace.String("rojo=00f067aa0ba902b7"))
	a.Set("otel.links", trace.List(trace.MapValue(trace.Attrs{
		{Key: "trace_id", Value: trace.String(sampleTraceB)},
		{Key: "span_id", Value: trace.String("2222222222222222")},
		{Key: "trace_state", Value: trace.String("congo=t61rcWkgMzE")},
		{Key: "attributes", Value: trace.MapValue(trace.Attrs{{Key: "link.kind", Value: trace.String("follows")}})},
		{Key: "dropped_attributes_count", Value: trace.Int(1)},
	})))
	a.Set("otel.dropped_attributes_count", trace.Int(2))
	a.Set("otel.dropped_events_count", trace.Int(3))
	a.Set("otel.dropped_links_count", trace.Int(4))
	a.Set("source.format", trace.String("otlp"))
	want.Attrs = a
	want.Root = &trace.Record{Method: "GET /orders/{id}", DurationNS: 9_000_000, Calls: 1, Errors: 1, Children: []*trace.Record{
		{Method: "cache.miss", StartNS: 1000, Attrs: trace.Attrs{{Key: "key", Value: trace.String("order:17")}}},
		{Method: "untimed"},
		{Method: "exception", StartNS: 8_000_000, Errors: 1,
			Attrs: trace.Attrs{{Key: "exception.escaped", Value: trace.Bool(true)}, {Key: "otel.dropped_attributes_count", Value: trace.Int(1)}},
			Exception: &trace.Exception{
				Class: "java.lang.IllegalStateException", Message: "order 17 cannot be paid",
				Stack: []trace.StackFrame{
					{Class: "com.shop.checkout.PaymentService", Method: "charge", File: "PaymentService.java", Line: 88},
					{Class: "com.shop.checkout.CheckoutController", Method: "post", File: "CheckoutController.java", Line: 41},
					{Class: "java.lang.Thread", Method: "run", File: "Thread.java", Line: 1583},
				},
				Cause: &trace.Exception{Class: "java.net.SocketTimeoutException", Message: "Read timed out",
					Stack: []trace.StackFrame{
						{Class: "sun.nio.ch.NioSocketImpl", Method: "timedRead", File: "NioSocketImpl.java", Line: 278},
						{Class: "com.shop.gateway.Client", Method: "call", File: "Client.java", Line: 230},
					},
					Cause: &trace.Exception{Class: "java.io.EOFException",
						Stack: []trace.StackFrame{{Class: "com.shop.gateway.Frame", Method: "read"}}},
				},
			}},
	}}
	if d := trace.Diff(want, root); d != "" {
		t.Errorf("root span: %s", d)
	}

	if child.Type != "" || child.ParentID != 0x1111111111111111 {
		t.Errorf("child: type %q parent %s", child.Type, child.ParentID)
	}
	if _, ok := child.Attrs.Get("otel.span.kind"); ok {
		t.Error("unspecified kind written as otel.span.kind")
	}
	wantPy := &trace.Exception{Class: "pay.PaymentError", Message: "declined",
		Stack: []trace.StackFrame{
			{Method: "pay", File: "/app/pay.py", Line: 7},
			{Method: "handle", File: "/app/server.py", Line: 12},
		},
		Cause: &trace.Exception{Class: "TimeoutError", Message: "timed out",
			Stack: []trace.StackFrame{{Method: "call", File: "/app/gateway.py", Line: 30}}},
	}
	if exc := child.Root.Children[0].Exception; !exc.Equal(wantPy) {
		t.Errorf("python exception: %+v", exc)
	}
	if child.Errors != 1 || child.Error {
		t.Errorf("child errors %d error %v: an exception counts, the status decides Error", child.Errors, child.Error)
	}

	rec := render.Root.Children[0]
	if v, _ := rec.Attrs.Get("exception.stacktrace"); v.Str != "no frames here, just prose" || rec.Exception.Class != "RenderError" || len(rec.Exception.Stack) != 0 {
		t.Errorf("unparsable stack: attrs %v exception %+v", rec.Attrs, rec.Exception)
	}
	if v, _ := render.Attrs.Get("otel.scope.name"); v.Str != "templates" {
		t.Errorf("second scope: %v", v)
	}
	if _, ok := render.Attrs.Get("otel.scope.version"); ok {
		t.Error("empty scope version written")
	}

	if v, _ := other.Attrs.Get("service.name"); v.Str != "mailer" {
		t.Errorf("second resource service.name %v", v)
	}
	if _, ok := other.Attrs.Get("otel.scope.name"); ok {
		t.Error("absent scope written")
	}
	if v, _ := other.Attrs.Get("otel.status.code"); v.Str != "ok" || other.Error {
		t.Errorf("ok status: %v error %v", v, other.Error)
	}
}

// TestRejectedSpans puts each kind of unstorable span between two valid
// ones: it alone is rejected, with its reason in the message.
func TestRejectedSpans(t *testing.T) {
	valid := func(id string) *tracepb.Span {
		return &tracepb.Span{TraceId: mustHex(sampleTraceA), SpanId: mustHex(id), Name: "ok",
			StartTimeUnixNano: sampleStart, EndTimeUnixNano: sampleStart + 10}
	}
	opt := Options{Limits: trace.Limits{MaxStringLen: 1000, MaxRecords: 4}}
	for _, tc := range []struct {
		name   string
		modify func(s *tracepb.Span)
		reason string
	}{
		{"zero trace id", func(s *tracepb.Span) { s.TraceId = make([]byte, 16) }, "trace id is all zeroes"},
		{"short trace id", func(s *tracepb.Span) { s.TraceId = s.TraceId[:15] }, "trace id has 15 bytes"},
		{"missing trace id", func(s *tracepb.Span) { s.TraceId = nil }, "trace id has 0 bytes"},
		{"zero span id", func(s *tracepb.Span) { s.SpanId = make([]byte, 8) }, "span id is all zeroes"},
		{"missing span id", func(s *tracepb.Span) { s.SpanId = nil }, "span id has 0 bytes"},
		{"long span id", func(s *tracepb.Span) { s.SpanId = make([]byte, 9) }, "span id has 9 bytes"},
		{"short parent", func(s *tracepb.Span) { s.ParentSpanId = []byte{1, 2, 3, 4, 5, 6, 7} }, "parent span id has 7 bytes"},
		{"end before start", func(s *tracepb.Span) { s.EndTimeUnixNano = s.StartTimeUnixNano - 1 }, "before start time"},
		{"start beyond int64", func(s *tracepb.Span) { s.StartTimeUnixNano = math.MaxInt64 + 1; s.EndTimeUnixNano = math.MaxUint64 }, "beyond the year 2262"},
		{"event time beyond int64", func(s *tracepb.Span) {
			s.Events = []*tracepb.Span_Event{{Name: "e", TimeUnixNano: math.MaxUint64}}
		}, "event 0 (\"e\"): time"},
		{"value too deep", func(s *tracepb.Span) { s.Attributes = []*commonpb.KeyValue{kv("deep", nested(trace.MaxValueDepth))} }, "nested deeper than 32"},
		{"string index", func(s *tracepb.Span) {
			s.Attributes = []*commonpb.KeyValue{kv("x", &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValueStrindex{StringValueStrindex: 3}})}
		}, "string_value_strindex"},
		{"key index", func(s *tracepb.Span) { s.Attributes = []*commonpb.KeyValue{{KeyStrindex: 2, Value: intVal(1)}} }, "key_strindex"},
		{"long string", func(s *tracepb.Span) { s.Attributes = []*commonpb.KeyValue{kv("s", strVal(strings.Repeat("x", 1001)))} }, "string value of 1001 bytes, limit 1000"},
		{"long bytes", func(s *tracepb.Span) { s.Attributes = []*commonpb.KeyValue{kv("b", bytesVal(make([]byte, 751)))} }, "encodes to 1004 base64"},
		{"long name", func(s *tracepb.Span) { s.Name = strings.Repeat("n", 1001) }, "span name of 1001 bytes"},
		{"too many events", func(s *tracepb.Span) {
			s.Events = make([]*tracepb.Span_Event, 4)
			for i := range s.Events {
				s.Events[i] = &tracepb.Span_Event{Name: "e"}
			}
		}, "4 events, limit 4 records"},
		{"deep link attribute", func(s *tracepb.Span) {
			s.Links = []*tracepb.Span_Link{{Attributes: []*commonpb.KeyValue{kv("l", nested(trace.MaxValueDepth-3))}}}
		}, "link 0: attribute \"l\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := valid("2222222222222222")
			tc.modify(bad)
			req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
				ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{valid("1111111111111111"), bad, valid("3333333333333333")}}},
			}}}
			pb, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			spans, rejected, msg, err := Decode(pb, ContentTypeProtobuf, opt)
			if err != nil {
				t.Fatal(err)
			}
			if rejected != 1 || len(spans) != 2 || spans[0].SpanID != 0x1111111111111111 || spans[1].SpanID != 0x3333333333333333 {
				t.Fatalf("rejected %d, kept %d", rejected, len(spans))
			}
			if !strings.Contains(msg, "1 of 3 spans rejected: resourceSpans[0].scopeSpans[0].spans[1]") || !strings.Contains(msg, tc.reason) {
				t.Errorf("message %q does not name the span and %q", msg, tc.reason)
			}
		})
	}
}

// TestRejectedResource rejects every span under a resource whose
// attributes cannot be stored, and none under the next resource.
func TestRejectedResource(t *testing.T) {
	req := sampleRequest()
	req.ResourceSpans[0].Resource.Attributes = append(req.ResourceSpans[0].Resource.Attributes, kv("big", strVal(strings.Repeat("r", 2000))))
	pb, _ := proto.Marshal(req)
	spans, rejected, msg, err := Decode(pb, ContentTypeProtobuf, Options{Limits: trace.Limits{MaxStringLen: 1999}})
	if err != nil {
		t.Fatal(err)
	}
	if rejected != 3 || len(spans) != 1 || spans[0].Root.Method != "consume" {
		t.Fatalf("rejected %d, kept %d", rejected, len(spans))
	}
	if !strings.Contains(msg, "3 of 4 spans rejected") || !strings.Contains(msg, "resource: attribute \"big\": string value of 2000 bytes") {
		t.Errorf("message %q", msg)
	}
}

// TestRejectionMessageBounded quotes at most five reasons.
func TestRejectionMessageBounded(t *testing.T) {
	ss := &tracepb.ScopeSpans{}
	for range 40 {
		ss.Spans = append(ss.Spans, &tracepb.Span{Name: "no ids"})
	}
	pb, _ := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}})
	spans, rejected, msg, err := Decode(pb, ContentTypeProtobuf, Options{})
	if err != nil || len(spans) != 0 || rejected != 40 {
		t.Fatalf("err %v spans %d rejected %d", err, len(spans), rejected)
	}
	if strings.Count(msg, "trace id has 0 bytes") != 5 || !strings.HasSuffix(msg, "; and 35 more") {
		t.Errorf("message %q", msg)
	}
}

// TestJSONBadHexRejectsSpan rejects a span whose id is not hex, and keeps
// the others.
func TestJSONBadHexRejectsSpan(t *testing.T) {
	body := `{"resourceSpans":[{"scopeSpans":[{"spans":[
		{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"1111111111111111","name":"upper-case hex is fine","startTimeUnixNano":"5","endTimeUnixNano":6},
		{"traceId":"5b8efff798038103d269b633813fc60z","spanId":"2222222222222222","name":"bad"},
		{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"3333333333333333","parentSpanId":"xyz","name":"bad parent"},
		{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"4444444444444444","parentSpanId":"","kind":"SPAN_KIND_CLIENT","status":{"code":"STATUS_CODE_ERROR"}}
	]}]}]}`
	spans, rejected, msg, err := Decode([]byte(body), ContentTypeJSON, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rejected != 2 || len(spans) != 2 {
		t.Fatalf("rejected %d kept %d: %s", rejected, len(spans), msg)
	}
	if !strings.Contains(msg, `spans[1] (span id 2222222222222222): trace id: id "5b8efff798038103d269b633813fc60z" is not hex`) ||
		!strings.Contains(msg, `spans[2] (span id 3333333333333333): parent span id: id "xyz" is not hex`) {
		t.Errorf("message %q", msg)
	}
	if spans[0].StartNS != 5 || spans[0].DurationNS != 1 {
		t.Errorf("times %d %d", spans[0].StartNS, spans[0].DurationNS)
	}
	if s := spans[1]; s.Type != "client" || !s.Error || s.ParentID != 0 {
		t.Errorf("enum names: type %q error %v parent %s", s.Type, s.Error, s.ParentID)
	}
}

// TestDecodeRequestErrors: bodies that cannot be decoded fail whole with
// the sentinel the HTTP status depends on, naming the offset when there is
// one.
func TestDecodeRequestErrors(t *testing.T) {
	good, err := proto.Marshal(sampleRequest())
	if err != nil {
		t.Fatal(err)
	}
	// A span name with invalid UTF-8 (proto3 strings must be UTF-8).
	utf8Req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{
		Spans: []*tracepb.Span{{TraceId: mustHex(sampleTraceA), SpanId: mustHex("1111111111111111"), Name: "NAME"}}}}}}}
	badUTF8, _ := proto.Marshal(utf8Req)
	nameAt := bytes.Index(badUTF8, []byte("NAME"))
	copy(badUTF8[nameAt:], "\xff\xfe\xfd\xfc")

	tooMany := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{
		Spans: []*tracepb.Span{{}, {}, {}}}}}}}
	tooManyPB, _ := proto.Marshal(tooMany)

	for _, tc := range []struct {
		name, contentType string
		body              []byte
		opt               Options
		want              error
		msg               string
	}{
		{"truncated protobuf", ContentTypeProtobuf, good[:len(good)/2], Options{}, ErrMalformed, "protobuf at offset 0: resource_spans[0]: value of wire type 2: unexpected EOF"},
		{"bad wire type", ContentTypeProtobuf, []byte{0x0f}, Options{}, ErrMalformed, "protobuf at offset 0: field 1 (wire type 7)"},
		{"length overrun", ContentTypeProtobuf, []byte{0x0a, 0x05, 'a', 'b'}, Options{}, ErrMalformed, "protobuf at offset 0: resource_spans[0]: value of wire type 2: unexpected EOF"},
		{"bad tag", ContentTypeProtobuf, []byte{0x0a, 0x00, 0x80}, Options{}, ErrMalformed, "protobuf at offset 2: field tag"},
		{"invalid UTF-8", ContentTypeProtobuf, badUTF8, Options{}, ErrMalformed, "protobuf at offset " + strconv.Itoa(nameAt) + ": resource_spans[0].scope_spans[0].spans[0].name: string is not valid UTF-8"},
		{"JSON syntax", ContentTypeJSON, []byte(`{"resourceSpans":[}`), Options{}, ErrMalformed, "JSON at offset 19"},
		{"JSON empty", ContentTypeJSON, nil, Options{}, ErrMalformed, "unexpected end of JSON input"},
		{"JSON trailing data", ContentTypeJSON, []byte(`{} {}`), Options{}, ErrMalformed, "JSON at offset 4"},
		{"JSON wrong type", ContentTypeJSON, []byte(`{"resourceSpans":5}`), Options{}, ErrMalformed, "field resourceSpans"},
		{"JSON id not a string", ContentTypeJSON, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":12}]}]}]}`), Options{}, ErrMalformed, "id 12: want a hex string"},
		{"JSON unknown kind", ContentTypeJSON, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_BOSS"}]}]}]}`), Options{}, ErrMalformed, `resourceSpans[0].scopeSpans[0].spans[0]: kind "SPAN_KIND_BOSS": not a known name`},
		{"JSON two values", ContentTypeJSON, []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"stringValue":"a","intValue":"1"}}]}}]}`), Options{}, ErrMalformed, `resourceSpans[0].resource: attribute "k": value sets 2 of`},
		{"JSON bad int", ContentTypeJSON, []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"-1"}]}]}]}`), Options{}, ErrMalformed, `unsigned integer "-1"`},
		{"JSON bad base64", ContentTypeJSON, []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"bytesValue":"!!"}}]}}]}`), Options{}, ErrMalformed, `bytes "!!": not base64`},
		{"JSON bad double", ContentTypeJSON, []byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"doubleValue":"one"}}]}}]}`), Options{}, ErrMalformed, `double "one"`},
		{"wrong content type", "text/plain", good, Options{}, ErrUnsupportedMediaType, `content type "text/plain"`},
		{"ndjson is not OTLP", "application/x-ndjson", good, Options{}, ErrUnsupportedMediaType, "application/x-ndjson"},
		{"unparsable content type", "application/", good, Options{}, ErrUnsupportedMediaType, "content type"},
		{"no resourceSpans", ContentTypeJSON, []byte(`{"resourceSpan":[{"scopeSpans":[]}]}`), Options{}, ErrMalformed, `no "resourceSpans"`},
		{"not OTLP", ContentTypeJSON, []byte(`{"trace_id":"0102","spans":[]}`), Options{}, ErrMalformed, `no "resourceSpans"`},
		{"too many spans", ContentTypeProtobuf, tooManyPB, Options{MaxSpansPerRequest: 2}, ErrTooLarge, "3 spans, limit 2"},
		{"body too large", ContentTypeProtobuf, good, Options{MaxBodySize: 100}, ErrTooLarge, "limit 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans, rejected, _, err := Decode(tc.body, tc.contentType, tc.opt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not contain %q", err, tc.msg)
			}
			if spans != nil || rejected != 0 {
				t.Errorf("%d spans, %d rejected returned with the error", len(spans), rejected)
			}
		})
	}
}

// TestDecodeEmptyRequests: an empty protobuf body and an empty JSON object
// are valid requests without spans.
func TestDecodeEmptyRequests(t *testing.T) {
	for _, tc := range []struct{ ct, body string }{
		{ContentTypeProtobuf, ""}, {ContentTypeJSON, "{}"}, {ContentTypeJSON, `{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}`},
		{ContentTypeJSON, `{"resourceSpans":null,"unknownField":{"x":[1,2]}}`},
	} {
		spans, rejected, msg, err := Decode([]byte(tc.body), tc.ct, Options{})
		if err != nil || len(spans) != 0 || rejected != 0 || msg != "" {
			t.Errorf("%s %q: spans %d rejected %d %q err %v", tc.ct, tc.body, len(spans), rejected, msg, err)
		}
	}
}

func TestIsOTLPContentType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/x-protobuf": true, "application/json": true, "application/json; charset=utf-8": true,
		"Application/JSON": true, "application/protobuf": true,
		"application/x-ndjson": false, "application/cbor": false, "": false, "text/plain": false,
	} {
		if got := IsOTLPContentType(ct); got != want {
			t.Errorf("%q: %v", ct, got)
		}
	}
}

// TestCamelCaseKeys: member names change, string values (attribute keys
// among them) never do.
func TestCamelCaseKeys(t *testing.T) {
	for in, want := range map[string]string{
		`{"resource_spans":[]}`:                                `{"resourceSpans":[]}`,
		`{"key":"http.status_code","value":{"int_value":"1"}}`: `{"key":"http.status_code","value":{"intValue":"1"}}`,
		`{ "parent_span_id" : "a_b", "x":"y_z" }`:              `{ "parentSpanId" : "a_b", "x":"y_z" }`,
		`{"a\"_b":1,"s":"q\"_r:"}`:                             `{"a\"B":1,"s":"q\"_r:"}`,
		`{"resourceSpans":[]}`:                                 `{"resourceSpans":[]}`,
		`{"dropped_attributes_count":0,"__x_":"_"}`:            `{"droppedAttributesCount":0,"X":"_"}`,
		`{"unterminated_`:                                      `{"unterminated_`,
	} {
		if got := string(camelCaseKeys([]byte(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}
