package otlp

import (
	"errors"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/trace"
)

// fuzzOptions keep hostile inputs cheap while still exercising the limits.
func fuzzOptions() Options {
	return Options{
		MaxBodySize:        1 << 20,
		MaxSpansPerRequest: 1000,
		Limits:             trace.Limits{MaxStringLen: 4096, MaxRecords: 64},
	}
}

// checkDecodeResult asserts what Decode promises for any input: an error
// is one of the sentinels and comes alone; otherwise every span is valid
// and accounted for, and the spans plus the rejected ones are all the
// spans of the request.
func checkDecodeResult(t *testing.T, enc bodyEncoding, body []byte, spans []*trace.Span, rejected int64, msg string, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("error without a sentinel: %v", err)
		}
		if spans != nil || rejected != 0 || msg != "" {
			t.Fatalf("error %v came with %d spans, %d rejected, %q", err, len(spans), rejected, msg)
		}
		return
	}
	var req *collectortrace.ExportTraceServiceRequest
	if enc == encodingProtobuf {
		req = new(collectortrace.ExportTraceServiceRequest)
		if perr := proto.Unmarshal(body, req); perr != nil {
			t.Fatalf("Decode accepted what protobuf rejects: %v", perr)
		}
	} else {
		var jerr error
		if req, _, jerr = unmarshalJSON(body); jerr != nil {
			t.Fatalf("Decode accepted what the JSON reader rejects: %v", jerr)
		}
	}
	total := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			total += len(ss.GetSpans())
		}
	}
	if int64(len(spans))+rejected != int64(total) {
		t.Fatalf("%d spans + %d rejected != %d in the request", len(spans), rejected, total)
	}
	if (rejected > 0) != (msg != "") {
		t.Fatalf("%d rejected with message %q", rejected, msg)
	}
	for i, s := range spans {
		if err := s.Validate(); err != nil {
			t.Fatalf("span %d: %v", i, err)
		}
		if s.Source != trace.SourceOTLP || s.SpanID == 0 || s.Recs != s.Root.CountRecords() {
			t.Fatalf("span %d: source %q id %s recs %d of %d", i, s.Source, s.SpanID, s.Recs, s.Root.CountRecords())
		}
		if _, err := s.MarshalJSON(); err != nil {
			t.Fatalf("span %d cannot be read back as Trace JSON: %v", i, err)
		}
	}
}

func FuzzDecodeProtobuf(f *testing.F) {
	seedProto(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		spans, rejected, msg, err := Decode(body, ContentTypeProtobuf, fuzzOptions())
		checkDecodeResult(t, encodingProtobuf, body, spans, rejected, msg, err)
	})
}

func seedProto(f *testing.F) {
	for _, req := range []*collectortrace.ExportTraceServiceRequest{sampleRequest(), rejectingRequest(), {}} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/3])
	}
	f.Add([]byte{0x0f})
	f.Add([]byte{0x0a, 0x05, 'a', 'b'})
	f.Add([]byte{0x0a, 0x00, 0x80})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, req := range []*collectortrace.ExportTraceServiceRequest{sampleRequest(), rejectingRequest(), nonFiniteRequest()} {
		f.Add(toOTLPJSON(f, req, false))
		f.Add(toOTLPJSON(f, req, true))
		f.Add(toOTLPJSONNames(f, req, true, true))
	}
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"resource_spans":[{"scope_spans":[{"spans":[{"trace_id":"0102","span_\\u0069d":"01"}]}]}]}`, `{"x_y":1}`, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"0102030405060708"}]}]}]}`,
		`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":"x","value":{"doubleValue":"NaN"}}]}}]}}}]}}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SPAN_KIND_SERVER","status":{"code":2},"startTimeUnixNano":1e3,"endTimeUnixNano":"2000"}]}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"spans":[{"events":[{"name":"exception","attributes":[{"key":"exception.stacktrace","value":{"stringValue":"goroutine 1 [running]:\nmain.f()\n\t/a.go:1 +0x1\n"}}]}]}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spans, rejected, msg, err := Decode(body, ContentTypeJSON, fuzzOptions())
		checkDecodeResult(t, encodingJSON, body, spans, rejected, msg, err)
	})
}

func FuzzParseStackTrace(f *testing.F) {
	f.Add(javaStack)
	f.Add(pythonStack)
	f.Add("goroutine 1 [running]:\nmain.(*T).f[...](0x1)\n\t/a.go:1 +0x1\ncreated by main.main in goroutine 1\n\t/a.go:2 +0x2\n")
	f.Add("E: x\n\tat (\n\tat a.b(:)\nCaused by: \n")
	f.Fuzz(func(t *testing.T, text string) {
		const maxCauses = 8
		st, ok := parseStackTrace(text, maxCauses)
		if !ok {
			if st.Frames != nil || st.Cause != nil {
				t.Fatalf("not ok but returned %+v", st)
			}
			return
		}
		depth := 0
		for c := st.Cause; c != nil; c = c.Cause {
			depth++
		}
		if depth > maxCauses {
			t.Fatalf("cause chain of %d beyond %d", depth, maxCauses)
		}
		frames := len(st.Frames)
		for c := st.Cause; c != nil; c = c.Cause {
			frames += len(c.Stack)
		}
		if frames == 0 {
			t.Fatal("ok without frames")
		}
	})
}
