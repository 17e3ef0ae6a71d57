package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// FuzzParseSearch: any query string is parsed into a search or rejected
// with a 400, never a panic or an out-of-range limit.
func FuzzParseSearch(f *testing.F) {
	for _, q := range []string{
		"attr=service.name:payment&attr=http.status_code:500&min_duration=40ms&limit=100",
		"text=DEADLOCK&errors=true&since=2026-11-01T00:00:00Z&until=1762000000000000000",
		"spans=true&cursor=c1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"limit=-1", "limit=99999999999999999999", "min_duration=1e400h", "attr=nocolon", "bogus=1",
		"since=9999-99-99", "%zz", "attr=%00:%ff",
		"attr=service.name=checkout&attr=http.url:http://x:80/?a=b", "since=7d&until=1d12h", "since=2013-05-07&until=2013-05-07 10:11",
		"since=99999999999999d", "since=1.5d", "until=2026-11-20T09:14:03.127+01:00", "attr==v", "attr=k=",
		"operation=GET%20/checkout&min_duration=1ms&max_duration=2s", "max_duration=0", "operation=&max_duration=1",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseSearch(v)
		if err != nil {
			if st, _ := StatusOf(err); st != http.StatusBadRequest {
				t.Fatalf("ParseSearch(%q): status %d for %v", raw, st, err)
			}
			return
		}
		if q.Limit < 0 || q.Limit > storedir.MaxSearchLimit {
			t.Fatalf("ParseSearch(%q): limit %d accepted", raw, q.Limit)
		}
	})
}

// FuzzPutRequest sends arbitrary bodies to POST /v1/traces of a server on
// a real store, as Trace JSON lines or CBOR: each is stored (200) or
// refused as bad input (400, 413, 415) — never a 5xx, never a panic.
func FuzzPutRequest(f *testing.F) {
	spans := workload.Spans(77, 3)
	var lines bytes.Buffer
	for _, sp := range spans {
		b, err := sp.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		lines.Write(b)
		lines.WriteByte('\n')
	}
	cb, err := trace.EncodeChunk(nil, spans)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(byte(0), lines.Bytes())
	f.Add(byte(1), cb)
	// A body of one chunk's worth, which the daemon stores as sent
	// (storedir.DB.AppendPayload).
	big, err := trace.EncodeChunk(nil, workload.Spans(78, 400))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(byte(1), big)
	f.Add(byte(0), []byte(`{"trace_id":"00","span_id":"zz"}`+"\n"))
	f.Add(byte(0), bytes.Repeat([]byte("{"), 10000))
	f.Add(byte(1), cb[:len(cb)/2])
	f.Add(byte(2), []byte("x"))

	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), f.TempDir(), o)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	lim := DefaultLimits()
	lim.MaxBodySize = 1 << 20
	lim.MaxTracesPerRequest = 1000
	srv := New(db, Options{Limits: lim, Access: Access{Disabled: true}})
	h := srv.Handler()
	ctypes := []string{"application/x-ndjson", "application/cbor", "text/plain"}
	f.Fuzz(func(t *testing.T, ct byte, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", ctypes[int(ct)%len(ctypes)])
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("status %d for a %d-byte %s body: %s", rec.Code, len(body), ctypes[int(ct)%len(ctypes)], rec.Body.String())
		}
		if rec.Code != http.StatusOK && !bytes.Contains(rec.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("status %d without a JSON error: %s", rec.Code, rec.Body.String())
		}
	})
}
