package queryapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ztsd/ztsd/internal/querytest"
	"github.com/ztsd/ztsd/jaegerapi"
	"github.com/ztsd/ztsd/queryapi"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tempoapi"
	"github.com/ztsd/ztsd/trace"
)

// benchDB holds 5,000 traces of 4 spans over 8 services, 1 in 10 with
// status 500 and error.
func benchDB(b *testing.B) *storedir.DB {
	var spans []*trace.Span
	for i := 0; i < 5000; i++ {
		id := trace.TraceID{1, byte(i >> 8), byte(i)}
		status := "200"
		if i%10 == 0 {
			status = "500"
		}
		for j := 0; j < 4; j++ {
			sp := &trace.Span{TraceID: id, SpanID: trace.SpanID(i*8 + j + 1), StartNS: int64(1e18) + int64(i)*1e6 + int64(j)*1000,
				DurationNS: int64(1000 * (i%97 + j)), Source: trace.SourceOTLP, Type: "server", Error: status == "500" && j == 0,
				Attrs: trace.Attrs{{Key: "http.method", Value: trace.String("GET")}, {Key: "http.status_code", Value: trace.String(status)},
					{Key: "service.name", Value: trace.String(fmt.Sprintf("svc-%d", (i+j)%8))}},
				Root: &trace.Record{Method: fmt.Sprintf("op-%d", j), DurationNS: int64(1000 * (i%97 + j))}}
			if j > 0 {
				sp.ParentID = trace.SpanID(i*8 + 1)
			}
			spans = append(spans, sp)
		}
	}
	return querytest.OpenDB(b, spans)
}

func handler(db *storedir.DB) http.Handler {
	tempo := tempoapi.New(db, nil)
	routes := append(jaegerapi.New(db, nil, tempo.TraceV1Handler()).Routes(), tempo.Routes()...)
	return server.New(db, server.Options{Access: server.Access{Disabled: true}, Routes: routes}).Handler()
}

func serve(b *testing.B, h http.Handler, path string) {
	req := httptest.NewRequest("GET", path, nil)
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// BenchmarkSearch compares, for one filter (service svc-3, status 500,
// limit 20), /v1/search with the Tempo search and the index part of the
// Jaeger search (FindTraces), and the whole Jaeger search (which also
// reads the 20 traces it returns).
func BenchmarkSearch(b *testing.B) {
	db := benchDB(b)
	h := handler(db)
	b.Run("v1-search", func(b *testing.B) {
		serve(b, h, "/v1/search?attr=service.name:svc-3&attr=http.status_code:500&limit=20")
	})
	b.Run("tempo-search", func(b *testing.B) {
		serve(b, h, "/api/search?"+url.Values{"q": {`{ resource.service.name = "svc-3" && span.http.status_code = 500 }`}, "limit": {"20"}, "spss": {"1"}}.Encode())
	})
	b.Run("jaeger-findtraces", func(b *testing.B) {
		s := queryapi.Search{Limit: 20, Any: []queryapi.Conjunct{{Service: "svc-3",
			Attrs: []trace.Attr{{Key: "http.status_code", Value: trace.String("500")}}}}}
		for b.Loop() {
			if _, _, err := queryapi.FindTraces(context.Background(), db, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jaeger-search-whole", func(b *testing.B) {
		serve(b, h, "/api/traces?service=svc-3&tags="+url.QueryEscape(`{"http.status_code":"500"}`)+"&limit=20")
	})
	b.Run("tempo-search-checked", func(b *testing.B) {
		serve(b, h, "/api/search?"+url.Values{"q": {`{ resource.service.name = "svc-3" && name =~ "op-[12]" }`}, "limit": {"20"}, "spss": {"1"}}.Encode())
	})
	b.Run("tempo-search-maxduration", func(b *testing.B) {
		serve(b, h, "/api/search?"+url.Values{"q": {`{ resource.service.name = "svc-3" && duration < 20us }`}, "limit": {"20"}, "spss": {"1"}}.Encode())
	})
}

// BenchmarkTraceByID10k writes a 10,000-span trace as Tempo protobuf and
// as Jaeger JSON.
func BenchmarkTraceByID10k(b *testing.B) {
	spans := make([]*trace.Span, 10000)
	for i := range spans {
		spans[i] = &trace.Span{TraceID: trace.TraceID{9}, SpanID: trace.SpanID(i + 1), StartNS: int64(1e18) + int64(i)*1000,
			DurationNS: 500, Source: trace.SourceOTLP, Type: "internal",
			Attrs: trace.Attrs{{Key: "i", Value: trace.Int(int64(i))}, {Key: "service.name", Value: trace.String("big")}},
			Root:  &trace.Record{Method: fmt.Sprintf("op-%d", i%7), DurationNS: 500}}
		if i > 0 {
			spans[i].ParentID = 1
		}
	}
	db := querytest.OpenDB(b, spans)
	h := handler(db)
	id := trace.TraceID{9}.String()
	b.Run("tempo-protobuf", func(b *testing.B) {
		req := httptest.NewRequest("GET", "/api/v2/traces/"+id, nil)
		req.Header.Set("Accept", "application/protobuf")
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatal(rec.Code)
			}
			b.SetBytes(int64(rec.Body.Len()))
		}
	})
	b.Run("jaeger-json", func(b *testing.B) {
		serve(b, h, "/api/traces/"+id)
	})
	b.Run("v1-get", func(b *testing.B) {
		serve(b, h, "/v1/traces/"+id)
	})
}
