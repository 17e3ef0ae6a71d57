package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestSearchTraceFields: a trace-mode /v1/search row carries its trace's
// span count, duration and root span (whichever span matched), span mode
// carries none; operation= matches a span's root record method exactly
// (not a string elsewhere in the span, not another case); max_duration=
// bounds the duration inclusively, and bad values are a 400.
func TestSearchTraceFields(t *testing.T) {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const t0 = 1_700_000_000_000_000_000
	span := func(tid byte, sid, parent trace.SpanID, start, dur int64, method string, attrs ...string) *trace.Span {
		sp := &trace.Span{TraceID: trace.TraceID{tid}, SpanID: sid, ParentID: parent, StartNS: t0 + start, DurationNS: dur,
			Source: "json", Type: "http", Root: &trace.Record{Method: method, DurationNS: dur}}
		for i := 0; i+1 < len(attrs); i += 2 {
			sp.Attrs.Set(attrs[i], trace.String(attrs[i+1]))
		}
		sp.FillSummary()
		return sp
	}
	if err := db.Append(context.Background(), []*trace.Span{
		span(1, 1, 0, 0, 1000, "GET /checkout", "service.name", "web"),
		span(1, 2, 1, 100, 300, "Dao.query", "service.name", "db"),
		span(1, 3, 1, 500, 200, "Cache.get", "service.name", "cache", "note", "Dao.query"),
		span(2, 7, 0, 2000, 50, "Dao.query", "service.name", "db"),
	}); err != nil {
		t.Fatal(err)
	}
	h := New(db, Options{Access: Access{Disabled: true}}).Handler()
	type row struct {
		TraceID    string `json:"trace_id"`
		SpanID     string `json:"span_id"`
		DurationNS int64  `json:"duration_ns"`
	}
	type traceRow struct {
		TraceID    string `json:"trace_id"`
		Spans      int    `json:"spans"`
		StartNS    int64  `json:"start_ns"`
		DurationNS int64  `json:"duration_ns"`
		Root       *struct {
			SpanID string `json:"span_id"`
			Root   struct {
				Method string `json:"method"`
			} `json:"root"`
		} `json:"root"`
	}
	var traces []traceRow
	search := func(query string, wantStatus int) []row {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/search?"+query, nil))
		if rec.Code != wantStatus {
			t.Fatalf("search %s: %d %s, want %d", query, rec.Code, rec.Body, wantStatus)
		}
		var body struct {
			Results []row
			Traces  []traceRow
		}
		if wantStatus == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("search %s: %v", query, err)
			}
			// Each result stays a span as GET /v1/traces writes it.
			var raw struct{ Results []json.RawMessage }
			json.Unmarshal(rec.Body.Bytes(), &raw)
			for _, r := range raw.Results {
				if err := new(trace.Span).UnmarshalJSON(r); err != nil {
					t.Fatalf("search %s: result %s: %v", query, r, err)
				}
			}
		}
		traces = body.Traces
		return body.Results
	}
	spans := func(rows []row) (out []string) {
		for _, r := range rows {
			out = append(out, r.SpanID)
		}
		return out
	}

	// Trace 1 matches through its Dao.query child; the row names the root.
	rows := search("attr=service.name:db", http.StatusOK)
	if len(rows) != 2 {
		t.Fatalf("attr=service.name:db: %d rows, want 2", len(rows))
	}
	if len(traces) != 2 {
		t.Fatalf("attr=service.name:db: %d trace entries for 2 results", len(traces))
	}
	one := traces[1]
	if rows[1].SpanID != "0000000000000002" || one.TraceID != rows[1].TraceID || one.Spans != 3 || one.StartNS != t0 || one.DurationNS != 1000 ||
		one.Root == nil || one.Root.SpanID != "0000000000000001" || one.Root.Root.Method != "GET /checkout" {
		t.Fatalf("trace 1 (row %+v): %+v, want 3 spans from t0 over 1000 ns, root span 1 GET /checkout", rows[1], one)
	}
	if two := traces[0]; two.Spans != 1 || two.Root == nil || two.Root.Root.Method != "Dao.query" {
		t.Fatalf("trace 2: %+v, want 1 span, its own root", two)
	}
	search("attr=service.name:db&spans=true", http.StatusOK)
	if traces != nil {
		t.Fatalf("span mode: trace entries %+v", traces)
	}

	// operation= is the root method, exactly: span 3 holds "Dao.query"
	// as an attribute value, so text= finds it and operation= does not.
	if got, want := spans(search("operation=Dao.query&spans=true", http.StatusOK)), []string{"0000000000000007", "0000000000000002"}; !slices.Equal(got, want) {
		t.Errorf("operation=Dao.query: spans %v, want %v", got, want)
	}
	if got := search("text=Dao.query&spans=true", http.StatusOK); len(got) != 3 {
		t.Errorf("text=Dao.query: %d spans, want 3", len(got))
	}
	for _, q := range []string{"operation=dao.query", "operation=Dao", "operation=http", "operation=Dao.query&attr=service.name:cache"} {
		if got := search(q, http.StatusOK); len(got) != 0 {
			t.Errorf("%s: %v, want nothing", q, spans(got))
		}
	}
	if got, want := spans(search("operation=Cache.get&text=dao", http.StatusOK)), []string{"0000000000000003"}; !slices.Equal(got, want) {
		t.Errorf("operation=Cache.get&text=dao: %v, want %v", got, want)
	}

	// max_duration= is inclusive and combines with min_duration=.
	if got, want := spans(search("max_duration=300&spans=true", http.StatusOK)), []string{"0000000000000007", "0000000000000003", "0000000000000002"}; !slices.Equal(got, want) {
		t.Errorf("max_duration=300: %v, want %v", got, want)
	}
	if got, want := spans(search("min_duration=100&max_duration=299&spans=true", http.StatusOK)), []string{"0000000000000003"}; !slices.Equal(got, want) {
		t.Errorf("min_duration=100&max_duration=299: %v, want %v", got, want)
	}
	if got, want := spans(search("max_duration=1us", http.StatusOK)), []string{"0000000000000007", "0000000000000003"}; !slices.Equal(got, want) {
		t.Errorf("trace mode, max_duration=1us: %v, want %v (each trace by its newest span that short)", got, want)
	}
	for _, q := range []string{"max_duration=0", "max_duration=-5ms", "max_duration=5xs", "min_duration=2ms&max_duration=1ms", "operation=", "operation=a&operation=b"} {
		search(q, http.StatusBadRequest)
	}
}

// TestSearchResponseBytesAsEncoder: the search answer is written without
// encoding/json, byte for byte as json.Encoder writes SearchResponse
// (HTML characters escaped in strings, a trailing newline, omitted empty
// fields), over results holding what escaping touches.
func TestSearchResponseBytesAsEncoder(t *testing.T) {
	sp := &trace.Span{TraceID: trace.TraceID{1, 2}, SpanID: 7, Type: "http <a&b>", StartNS: 5, DurationNS: 9}
	sp.Attrs.Set("q", trace.String("x < y && z > \"w\" \u2028 é \\ \x01"))
	sp.Attrs.Set("n", trace.Int(-3))
	plain := &trace.Span{TraceID: trace.TraceID{3}, SpanID: 1, Type: "db", StartNS: 1}
	raw := func(s *trace.Span) json.RawMessage {
		b, err := trace.MarshalSummaryJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []SearchResponse{
		{Results: []json.RawMessage{}},
		{Results: []json.RawMessage{raw(plain)}},
		{Results: []json.RawMessage{raw(sp), raw(plain)}, Cursor: "c1.AAAA_-x",
			Warnings: []storedir.Warning{{Store: "000001", Offset: 42, Error: "chunk <bad> & \"worse\""}},
			Traces: []SearchTrace{{TraceID: sp.TraceID.String(), Spans: 3, StartNS: 5, DurationNS: 11, Root: raw(sp)},
				{TraceID: plain.TraceID.String(), Spans: 1, StartNS: -1}}},
		{Results: []json.RawMessage{raw(plain)}, Cursor: "odd \"cursor\" \x7f é"},
	}
	for i, out := range cases {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(out); err != nil {
			t.Fatal(err)
		}
		got, err := appendSearchResponse([]byte("prefix"), &out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "prefix"+want.String() {
			t.Errorf("case %d:\n got %s\nwant %s", i, got[len("prefix"):], want.Bytes())
		}
	}
}

// BenchmarkSearchResponse writes a trace-mode answer of 100 results with
// their trace heads: "encoder" as json.Encoder writes SearchResponse,
// "append" as handleSearch does (the same bytes).
func BenchmarkSearchResponse(b *testing.B) {
	out := SearchResponse{Cursor: "c1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	for i := range 100 {
		sp := &trace.Span{TraceID: trace.TraceID{byte(i), 9}, SpanID: trace.SpanID(i + 1), Type: "http", StartNS: 1_700_000_000_000_000_000 + int64(i), DurationNS: 12345}
		for _, kv := range [][2]string{{"service.name", "checkout"}, {"http.route", "/api/orders/{id}"}, {"user.id", "u1234567"}, {"host.name", "checkout-3"}, {"http.method", "GET"}} {
			sp.Attrs.Set(kv[0], trace.String(kv[1]))
		}
		sp.Attrs.Set("http.status_code", trace.Int(200))
		raw, err := trace.MarshalSummaryJSON(sp)
		if err != nil {
			b.Fatal(err)
		}
		out.Results = append(out.Results, raw)
		out.Traces = append(out.Traces, SearchTrace{TraceID: sp.TraceID.String(), Spans: 4, StartNS: sp.StartNS, DurationNS: 99999, Root: raw})
	}
	b.Run("encoder", func(b *testing.B) {
		for b.Loop() {
			if err := json.NewEncoder(io.Discard).Encode(out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendSearchResponse(buf[:0], &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
