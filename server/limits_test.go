package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/ingest/otlp"
	"github.com/ztsd/ztsd/ingest/zorka"
	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

func limitsServer(t *testing.T, lim Limits) (*Server, *storedir.DB) {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var srv *Server
	h := otlp.NewHTTPHandler(db, otlp.Options{Status: StatusOf, Ingest: func() trace.IngestLimits { return srv.Limits().Ingest }})
	srv = New(db, Options{Limits: lim, Access: Access{Disabled: true}, OTLP: h,
		Zorka: zorka.NewSessions(zorka.Options{})})
	return srv, db
}

func wideSpan(nattrs int, valueSize int) *trace.Span {
	sp := &trace.Span{TraceID: trace.TraceID{0xab, 1}, SpanID: 7, StartNS: 1_700_000_000_000_000_000, DurationNS: 1000,
		Root: &trace.Record{Method: "wide", DurationNS: 1000}}
	for i := 0; i < nattrs; i++ {
		sp.Attrs = append(sp.Attrs, trace.Attr{Key: fmt.Sprintf("k%07d", i), Value: trace.String(strings.Repeat("v", valueSize))})
	}
	return sp
}

func otlpRequest(nattrs, valueSize int) *collectortrace.ExportTraceServiceRequest {
	ps := &tracepb.Span{TraceId: bytes.Repeat([]byte{0xab}, 16), SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Name: "wide",
		StartTimeUnixNano: 1_700_000_000_000_000_000, EndTimeUnixNano: 1_700_000_000_000_001_000}
	for i := 0; i < nattrs; i++ {
		ps.Attributes = append(ps.Attributes, &commonpb.KeyValue{Key: fmt.Sprintf("k%07d", i),
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: strings.Repeat("v", valueSize)}}})
	}
	return &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{ps}}}}}}
}

// TestIngestLimitsEveryPath: a span beyond max_attrs or max_string_size is
// refused by every write path of the socket API (Trace JSON lines, CBOR,
// OTLP protobuf and JSON, the Zorka agent protocol) with 400 or 413 and a
// message naming the limit, and nothing is stored. Before, a 70,000-attribute
// span was accepted and left a store the daemon could not reopen.
func TestIngestLimitsEveryPath(t *testing.T) {
	lim := DefaultLimits()
	srv, db := limitsServer(t, lim)
	h := srv.Handler()

	jsonLines := func(sp *trace.Span) []byte {
		b, err := sp.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	cbor := func(sp *trace.Span) []byte {
		b, err := trace.EncodeChunk(nil, []*trace.Span{sp})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	otlpProto := func(n, size int) []byte {
		b, err := proto.Marshal(otlpRequest(n, size))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	otlpJSON := func(n, size int) []byte {
		b, err := protojson.Marshal(otlpRequest(n, size))
		if err != nil {
			t.Fatal(err)
		}
		// OTLP JSON spells ids in hex, not protojson's base64.
		b = bytes.Replace(b, []byte(`"q6urq6urq6urq6urq6urqw=="`), []byte(`"abababababababababababababababab"`), 1)
		return bytes.Replace(b, []byte(`"AQIDBAUGBwg="`), []byte(`"0102030405060708"`), 1)
	}
	const big = 2 << 20 // over max_string_size (1 MiB)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
		status      int
		want        string
	}{
		{"json lines, 70000 attributes", "application/x-ndjson", jsonLines(wideSpan(70000, 1)), 400, "span 1: 70000 attributes exceeds max_attrs (1024)"},
		{"cbor, 70000 attributes", "application/cbor", cbor(wideSpan(70000, 1)), 400, "span 1: 70000 attributes exceeds max_attrs (1024)"},
		{"otlp protobuf, 70000 attributes", "application/x-protobuf", otlpProto(70000, 1), 400, "70001 attributes exceeds max_attrs (1024)"},
		{"otlp json, 70000 attributes", "application/json", otlpJSON(70000, 1), 400, "70001 attributes exceeds max_attrs (1024)"},
		{"json lines, 2 MiB value", "application/x-ndjson", jsonLines(wideSpan(1, big)), 413, `span 1: 2097152 bytes in attribute \"k0000000\" value exceeds max_string_size (1048576)`},
		{"cbor, 2 MiB value", "application/cbor", cbor(wideSpan(1, big)), 413, "exceeds max_string_size (1048576)"},
		{"otlp protobuf, 2 MiB value", "application/x-protobuf", otlpProto(1, big), 413, "exceeds max_string_size (1048576)"},
		{"otlp json, 2 MiB value", "application/json", otlpJSON(1, big), 413, "exceeds max_string_size (1048576)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("status %d %s, want %d with %q", rec.Code, truncate(rec.Body.String()), tc.status, tc.want)
			}
		})
	}
	checkNothingStored(t, db)

	// A limit lowered by SetLimits (SIGHUP) applies to the next request,
	// on the OTLP handler too.
	low := lim
	low.Ingest.MaxAttrs = 3
	srv.SetLimits(low)
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(otlpProto(3, 1)))
	req.Header.Set("Content-Type", "application/x-protobuf")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "exceeds max_attrs (3)") {
		t.Fatalf("after SetLimits: status %d %s", rec.Code, truncate(rec.Body.String()))
	}
}

// TestIngestLimitsZorkaAgent: trace data of the Zorka agent protocol is
// checked as well.
func TestIngestLimitsZorkaAgent(t *testing.T) {
	lim := DefaultLimits()
	lim.Ingest.MaxAttrs = 2
	srv, db := limitsServer(t, lim)
	h := srv.Handler()
	post := func(path, traceID, file string) *httptest.ResponseRecorder {
		body, err := os.ReadFile(filepath.Join("..", "..", "shared", "testdata", "zorka", file))
		if err != nil {
			t.Skip(err)
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ZorkaContentType)
		req.Header.Set("X-Zorka-Session-ID", "f903c4a69b4624af")
		req.Header.Set("X-Zorka-Session-Reset", fmt.Sprint(traceID == ""))
		if traceID != "" {
			req.Header.Set("X-Zorka-Trace-ID", traceID)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("/agent/submit/agd", "", "traces1-0-agd.cbor"); rec.Code != http.StatusAccepted {
		t.Fatalf("agent data: %d %s", rec.Code, rec.Body.String())
	}
	rec := post("/agent/submit/trc", "7f128efec83c68ec733c1116ad0c9105", "traces1-1-trc.cbor")
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "attributes exceeds max_attrs (2)") {
		t.Fatalf("trace data: status %d %s", rec.Code, rec.Body.String())
	}
	checkNothingStored(t, db)
}

func checkNothingStored(t *testing.T, db *storedir.DB) {
	t.Helper()
	for _, st := range db.Stores() {
		if st.Spans != 0 {
			t.Fatalf("store %s holds %d spans from refused requests", st.ID, st.Spans)
		}
	}
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestIngestLimitsOTLPGRPC: the OTLP/gRPC service refuses the same spans:
// INVALID_ARGUMENT for max_attrs, RESOURCE_EXHAUSTED for max_string_size.
func TestIngestLimitsOTLPGRPC(t *testing.T) {
	_, db := limitsServer(t, DefaultLimits())
	svc := otlp.NewGRPCService(db, otlp.Options{Status: StatusOf})
	for _, tc := range []struct {
		name string
		req  *collectortrace.ExportTraceServiceRequest
		code codes.Code
		want string
	}{
		{"70000 attributes", otlpRequest(70000, 1), codes.InvalidArgument, "70001 attributes exceeds max_attrs (1024)"},
		{"2 MiB value", otlpRequest(1, 2<<20), codes.ResourceExhausted, "2097152 bytes in attribute \"k0000000\" value exceeds max_string_size (1048576)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Export(context.Background(), tc.req)
			if st, _ := status.FromError(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want %v with %q", err, tc.code, tc.want)
			}
		})
	}
	checkNothingStored(t, db)
}

// TestOTLPGRPCMemoryBudget: an OTLP/gRPC request past the memory budget is
// refused RESOURCE_EXHAUSTED with RetryInfo naming memory_budget, stores
// nothing, and holds nothing of the budget afterwards.
func TestOTLPGRPCMemoryBudget(t *testing.T) {
	_, db := limitsServer(t, DefaultLimits())
	req := otlpRequest(100, 100)
	need := int64(proto.Size(req)) * BodyMemoryFactor
	budget := membudget.New(need - 1)
	svc := otlp.NewGRPCService(db, otlp.Options{Status: StatusOf, Budget: budget})
	_, err := svc.Export(context.Background(), req)
	st, _ := status.FromError(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "memory_budget") || len(st.Details()) == 0 {
		t.Fatalf("past the budget: %v (details %v)", err, st.Details())
	}
	checkNothingStored(t, db)
	budget.SetLimit(need)
	if _, err := svc.Export(context.Background(), req); err != nil {
		t.Fatalf("within the budget: %v", err)
	}
	if used, peak, _ := budget.Stats(); used != 0 || peak != need {
		t.Fatalf("budget used %d, peak %d after the request (want 0, %d)", used, peak, need)
	}
}
