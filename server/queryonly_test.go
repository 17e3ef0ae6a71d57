package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest/otlp"
	"github.com/ztsd/ztsd/ingest/zorka"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestQueryOnlyRefusesWrites: a query node answers every write path 403
// query_only before reading the body, stores nothing, still serves reads,
// and /healthz says it is a query node and how many remote stores it
// serves.
func TestQueryOnlyRefusesWrites(t *testing.T) {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	remote := 7
	var srv *Server
	h := otlp.NewHTTPHandler(db, otlp.Options{Status: StatusOf, Ingest: func() trace.IngestLimits { return srv.Limits().Ingest }})
	srv = New(db, Options{Access: Access{Disabled: true}, OTLP: h, Zorka: zorka.NewSessions(zorka.Options{}),
		QueryOnly: true, RemoteStores: func() int { return remote }})
	line := []byte(`{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7","start_ns":1764000000000000000,"duration_ns":5}`)
	for _, tc := range []struct{ path, ctype string }{
		{"/v1/traces", "application/x-ndjson"},
		{"/v1/traces", "application/x-protobuf"},
		{"/agent/submit/agd", "application/zorka+cbor+v1"},
		{"/agent/submit/trc", "application/zorka+cbor+v1"},
	} {
		req := httptest.NewRequest(http.MethodPost, tc.path, bytes.NewReader(append(line, '\n')))
		req.Header.Set("Content-Type", tc.ctype)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		var e struct{ Error, Code string }
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusForbidden || e.Code != "query_only" || !strings.Contains(e.Error, "writes go to an ingesting node") {
			t.Fatalf("POST %s (%s) on a query node: %d %s", tc.path, tc.ctype, rec.Code, rec.Body.String())
		}
	}
	checkNothingStored(t, db)
	if st, code := StatusOf(fmt.Errorf("append: %w", storedir.ErrQueryOnly)); st != http.StatusForbidden || code != "query_only" {
		t.Fatalf("StatusOf(ErrQueryOnly) = %d %s", st, code)
	}

	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != `{"status":"ok","query_only":true,"remote_stores":7}` {
		t.Fatalf("healthz: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/search?limit=5", nil))
	if rec.Code != 200 {
		t.Fatalf("search on a query node: %d %s", rec.Code, rec.Body.String())
	}
}
