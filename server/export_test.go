package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/storedir"
)

// TestGetTraceFormats: GET /v1/traces/{id}?format=chrome|svg renders the
// stored trace with the export package as a download; a bad format is a
// 400 naming it; an unknown trace stays a 404 in every format.
func TestGetTraceFormats(t *testing.T) {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h := New(db, Options{Access: Access{Disabled: true}}).Handler()
	const id = "0af7651916cd43dd8448eb211c80319c"
	body := `{"trace_id":"` + id + `","span_id":"b7ad6b7169203331","parent_id":"","type":"http","start_ns":1700000000000000000,` +
		`"duration_ns":5000000,"calls":2,"errors":0,"recs":2,"error":false,"source":"json","attrs":{"service.name":"checkout"},` +
		`"root":{"method":"GET /buy","start_ns":0,"duration_ns":5000000,"calls":1,"errors":0,` +
		`"children":[{"method":"Dao.query<select>","start_ns":1000,"duration_ns":3000000,"calls":1,"errors":0}]}}` + "\n"
	req := httptest.NewRequest(http.MethodPost, "/v1/traces", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-ndjson")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("put: %d %s", rec.Code, rec.Body)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}

	rec = get("/v1/traces/" + id + "?format=chrome")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("chrome: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if cd := rec.Header().Get("Content-Disposition"); cd != `attachment; filename="`+id+`.chrome.json"` {
		t.Errorf("chrome Content-Disposition %q", cd)
	}
	var doc struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("chrome body is not JSON: %v\n%s", err, rec.Body)
	}
	found := map[string]float64{}
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "X" {
			found[ev.Name] = ev.Dur
		}
	}
	if found["GET /buy"] != 5000 || found["Dao.query<select>"] != 3000 {
		t.Errorf("chrome X events %v, want GET /buy 5000 µs and Dao.query<select> 3000 µs", found)
	}

	rec = get("/v1/traces/" + id + "?format=svg")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("svg: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	svg := rec.Body.Bytes()
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("Dao.query&lt;select&gt;")) {
		t.Errorf("svg lacks the escaped record name:\n%.600s", svg)
	}

	rec = get("/v1/traces/" + id + "?format=pdf")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `format=\"pdf\"`) {
		t.Errorf("format=pdf: %d %s", rec.Code, rec.Body)
	}
	for _, f := range []string{"", "?format=chrome", "?format=svg"} {
		if rec := get("/v1/traces/1234567890abcdef1234567890abcdef" + f); rec.Code != http.StatusNotFound {
			t.Errorf("unknown trace%s: %d %s", f, rec.Code, rec.Body)
		}
	}
	// Trace JSON stays the default.
	if rec := get("/v1/traces/" + id + "?format=json"); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Body.String(), `{"trace_id":"`+id) {
		t.Errorf("format=json: %d %.200s", rec.Code, rec.Body)
	}
}
