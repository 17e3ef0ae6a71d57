package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestParseSearchAttrAndTimeForms: the API takes attr=k:v and attr=k=v
// alike (split at the first ':' or '='), and since/until as RFC 3339, a
// UTC date, nanoseconds, or a duration ago with days.
func TestParseSearchAttrAndTimeForms(t *testing.T) {
	before := time.Now()
	q, err := ParseSearch(url.Values{
		"attr":  {"service.name:checkout", "http.url=http://x:80/a=b", "source.format=wtf"},
		"since": {"7d"},
		"until": {"2013-05-07"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.Attr{{Key: "service.name", Value: trace.String("checkout")},
		{Key: "http.url", Value: trace.String("http://x:80/a=b")}, {Key: "source.format", Value: trace.String("wtf")}}
	if !slices.EqualFunc(q.Attrs, want, func(a, b trace.Attr) bool { return a.Key == b.Key && a.Value.Text() == b.Value.Text() }) {
		t.Errorf("attrs %v, want %v", q.Attrs, want)
	}
	sevenDays := int64(7 * 24 * time.Hour)
	if lo, hi := before.UnixNano()-sevenDays, time.Now().UnixNano()-sevenDays; q.SinceNS < lo || q.SinceNS > hi {
		t.Errorf("since=7d gave %d, want in [%d, %d]", q.SinceNS, lo, hi)
	}
	if w := time.Date(2013, 5, 7, 0, 0, 0, 0, time.UTC).UnixNano(); q.UntilNS != w {
		t.Errorf("until=2013-05-07 gave %d, want %d", q.UntilNS, w)
	}
	for in, w := range map[string]int64{
		"2013-05-07T10:11:12Z":      time.Date(2013, 5, 7, 10, 11, 12, 0, time.UTC).UnixNano(),
		"2013-05-07T10:11:12+02:00": time.Date(2013, 5, 7, 8, 11, 12, 0, time.UTC).UnixNano(),
		"2013-05-07 10:11":          time.Date(2013, 5, 7, 10, 11, 0, 0, time.UTC).UnixNano(),
		"1367885827385000000":       1367885827385000000,
	} {
		if got, err := ParseWhenNS(in, before); err != nil || got != w {
			t.Errorf("ParseWhenNS(%q) = %d, %v; want %d", in, got, err, w)
		}
	}
	if got, err := ParseWhenNS("1d12h", before); err != nil || got != before.UnixNano()-int64(36*time.Hour) {
		t.Errorf("ParseWhenNS(1d12h) = %d, %v", got, err)
	}
	if got, err := ParseWhenNS("100000d", before); err != nil || got != 0 {
		t.Errorf("ParseWhenNS(100000d) = %d, %v; want 0 (before the epoch)", got, err)
	}
	for _, bad := range []url.Values{{"attr": {"novalue"}}, {"attr": {":v"}}, {"since": {"7x"}}, {"since": {"2013-13-45"}}, {"until": {"-5m"}}} {
		if _, err := ParseSearch(bad); err == nil {
			t.Errorf("ParseSearch(%v) accepted", bad)
		} else if st, _ := StatusOf(err); st != http.StatusBadRequest {
			t.Errorf("ParseSearch(%v): status %d", bad, st)
		}
	}
}

// TestListings: GET /v1/attributes lists the span attribute keys, GET
// /v1/services the service.name values and then the Zorka components and
// source files without one, each with the filter that finds it.
func TestListings(t *testing.T) {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	span := func(id byte, attrs ...string) *trace.Span {
		sp := &trace.Span{TraceID: trace.TraceID{id}, SpanID: trace.SpanID(id), StartNS: 1_700_000_000_000_000_000 + int64(id),
			DurationNS: 10, Source: "json", Root: &trace.Record{Method: "m", DurationNS: 10}}
		for i := 0; i+1 < len(attrs); i += 2 {
			sp.Attrs = append(sp.Attrs, trace.Attr{Key: attrs[i], Value: trace.String(attrs[i+1])})
			if attrs[i] == "source.format" {
				sp.Source = attrs[i+1] // as importers set both
			}
		}
		return sp
	}
	if err := db.Append(context.Background(), []*trace.Span{
		span(1, "http.method", "GET", "service.name", "checkout"),
		span(2, "service.name", "payment"),
		span(3, "source.file", "blk.wtf-trace", "source.format", "wtf"),
		span(4, "service.name", "checkout", "source.file", "otel.json"),
		span(5, "component", "http", "source.format", "zorka"),
	}); err != nil {
		t.Fatal(err)
	}
	h := New(db, Options{Access: Access{Disabled: true}}).Handler()
	get := func(path string, v any) {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.NewDecoder(bytes.NewReader(rec.Body.Bytes())).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var keys AttributeKeysResponse
	get("/v1/attributes", &keys)
	if w := []string{"component", "http.method", "service.name", "source.file", "source.format"}; !slices.Equal(keys.Keys, w) {
		t.Errorf("keys %v, want %v", keys.Keys, w)
	}
	get("/v1/attributes?limit=2", &keys)
	if len(keys.Keys) != 2 {
		t.Errorf("limit=2: %v", keys.Keys)
	}
	var svcs ServicesResponse
	get("/v1/services", &svcs)
	want := []Service{{Name: "checkout", Attrs: map[string]string{"service.name": "checkout"}},
		{Name: "payment", Attrs: map[string]string{"service.name": "payment"}},
		{Name: "wtf blk.wtf-trace", Attrs: map[string]string{"source.file": "blk.wtf-trace"}},
		{Name: "zorka http", Attrs: map[string]string{"component": "http", "source.format": "zorka"}}}
	if !reflect.DeepEqual(svcs.Services, want) {
		t.Errorf("services %+v,\nwant %+v", svcs.Services, want)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/services?limit=0", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("limit=0: %d", rec.Code)
	}
}
