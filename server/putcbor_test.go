package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/ingest/dial9"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestPutCBORStoredAsSent: a batched CBOR write of real spans (the dial9
// small demo capture of ../shared/testdata, imported) is stored with its
// body as the chunk payload (storedir.DB.AppendPayload), and its spans read
// back as sent; a body that is not one chunk's worth (a small one) is encoded
// again, and damaged bodies are refused with 400 naming the offset,
// storing nothing.
func TestPutCBORStoredAsSent(t *testing.T) {
	var spans []*trace.Span
	path := filepath.Join("..", "..", "shared", "testdata", "dial9", "demo-2026-03-18-small.bin")
	if _, err := dial9.Import(context.Background(), path, ingest.Options{}, func(sp *trace.Span) error {
		spans = append(spans, sp)
		return nil
	}); err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	if len(spans) < 100 {
		t.Fatalf("%d spans imported", len(spans))
	}
	spans, rest := spans[:len(spans)-3], spans[len(spans)-3:] // rest: a small request
	body, err := trace.EncodeChunk(nil, spans)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) <= 64<<10 || len(body) > 1<<20 {
		t.Fatalf("%d spans encode to %d bytes: want one chunk's worth, more than a groupable request", len(spans), len(body))
	}
	small, err := trace.EncodeChunk(nil, rest)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(db, Options{Access: Access{Disabled: true}}).Handler()
	put := func(body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/cbor")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, bad := range []struct {
		body []byte
		want string
	}{
		{body[:len(body)-1], "CBOR body: "},
		{append(bytes.Clone(body), 0), "1 bytes after the span list"},
		{append([]byte{0x84}, body[1:]...), "payload: initial byte 0x84"},
	} {
		rec := put(bad.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), bad.want) || !strings.Contains(rec.Body.String(), "offset") {
			t.Fatalf("damaged body: %d %s, want 400 naming %q and the offset", rec.Code, rec.Body.String(), bad.want)
		}
	}
	if rec := put(body); rec.Code != http.StatusOK {
		t.Fatalf("put: %d %s", rec.Code, rec.Body.String())
	}
	if rec := put(small); rec.Code != http.StatusOK {
		t.Fatalf("put of 3 spans: %d %s", rec.Code, rec.Body.String())
	}
	for i, want := range append(spans, rest...) {
		if i%50 != 0 && i < len(spans) {
			continue // the payload is compared whole below
		}
		got, err := db.GetSpan(context.Background(), want.TraceID, want.SpanID)
		if err != nil {
			t.Fatalf("span %s/%s: %v", want.TraceID, want.SpanID, err)
		}
		w, g := *want, *got
		w.Children, g.Children = nil, nil
		if d := trace.Diff(&w, &g); d != "" {
			t.Fatalf("span %s/%s: %s", want.TraceID, want.SpanID, d)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := chunk.Open(filepath.Join(dir, storedir.StoreName(0), "traces.zts"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var payloads [][]byte
	for off := int64(chunk.HeaderSize); off < f.Size(); {
		p, next, err := f.ReadChunk(off)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, bytes.Clone(p))
		off = next
	}
	if len(payloads) != 2 || !bytes.Equal(payloads[0], body) {
		t.Fatalf("%d chunks; the first is the body: %v", len(payloads), len(payloads) > 0 && bytes.Equal(payloads[0], body))
	}
	if again, _ := trace.EncodeChunk(nil, rest); !bytes.Equal(payloads[1], again) {
		t.Fatal("the small request's chunk is not its spans encoded")
	}
	if _, err := os.Stat(filepath.Join(dir, storedir.StoreName(1))); err == nil {
		t.Fatal("a second store was made")
	}
}

// TestPutInvalidSpan: a span that fails Span.Validate (a negative
// duration, a zero trace id) fails the whole request with 400 bad_request
// naming its 1-based position in the body and what is wrong, in Trace JSON
// and CBOR alike, and nothing of the request is stored.
func TestPutInvalidSpan(t *testing.T) {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(db, Options{Access: Access{Disabled: true}}).Handler()
	good := &trace.Span{TraceID: trace.TraceID{15: 1}, SpanID: 1, StartNS: 1_700_000_000_000_000_000, DurationNS: 10}
	negative := &trace.Span{TraceID: trace.TraceID{15: 2}, SpanID: 2, StartNS: 1_700_000_000_000_000_000, DurationNS: -5}
	zero := &trace.Span{SpanID: 3, StartNS: 1_700_000_000_000_000_000}
	for _, c := range []struct {
		bad  *trace.Span
		want string
	}{{negative, "negative duration -5"}, {zero, "trace id is zero"}} {
		spans := []*trace.Span{good, c.bad}
		var lines bytes.Buffer
		for _, sp := range spans {
			b, err := sp.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			lines.Write(append(b, '\n'))
		}
		cb, err := trace.EncodeChunk(nil, spans)
		if err != nil {
			t.Fatal(err)
		}
		for ct, body := range map[string][]byte{"application/x-ndjson": lines.Bytes(), "application/cbor": cb} {
			req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			msg := rec.Body.String()
			if rec.Code != http.StatusBadRequest || !strings.Contains(msg, `"bad_request"`) ||
				!strings.Contains(msg, "span 2: ") || !strings.Contains(msg, c.want) {
				t.Fatalf("%s with a span of %s: %d %s", ct, c.want, rec.Code, msg)
			}
		}
	}
	if _, err := db.GetSpan(context.Background(), good.TraceID, good.SpanID); !errors.Is(err, storedir.ErrNotFound) {
		t.Fatalf("the valid span of a refused request: %v, want not found", err)
	}
}
