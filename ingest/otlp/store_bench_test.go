package otlp

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// issue19Request is request number n of the issue 19 load: 10 traces of
// 10 spans, 6 attributes each (realisticRequest), with trace and span ids
// unique to n so that every request stores new spans.
func issue19Request(base *collectortrace.ExportTraceServiceRequest, n uint64) *collectortrace.ExportTraceServiceRequest {
	req := proto.Clone(base).(*collectortrace.ExportTraceServiceRequest)
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				binary.BigEndian.PutUint64(s.TraceId, binary.BigEndian.Uint64(s.TraceId)+n<<20)
				binary.BigEndian.PutUint64(s.SpanId, binary.BigEndian.Uint64(s.SpanId)+n<<20)
				if len(s.ParentSpanId) == 8 {
					binary.BigEndian.PutUint64(s.ParentSpanId, binary.BigEndian.Uint64(s.ParentSpanId)+n<<20)
				}
				s.StartTimeUnixNano += n * 1_000_000
				s.EndTimeUnixNano += n * 1_000_000
			}
		}
	}
	return req
}

// BenchmarkGRPCStore is the issue 19 load in one process: 4 concurrent
// senders, each Export one request of 10 traces × 10 spans with 6
// attributes per span, against the real gRPC service on loopback over a
// real store (sync=batch: acknowledged after the group fsync). Requests
// are built before the timer starts; spans/cpu-s counts the whole process
// (the gRPC clients too).
func BenchmarkGRPCStore(b *testing.B) {
	db := openStore(b)
	addr := startGRPC(b, "tcp", db, Options{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	cl := collectortrace.NewTraceServiceClient(conn)
	benchmarkStore(b, func(ctx context.Context, req *collectortrace.ExportTraceServiceRequest, _ []byte) error {
		_, err := cl.Export(ctx, req)
		return err
	})
}

// BenchmarkHTTPStore is the same load over OTLP/HTTP (binary protobuf).
func BenchmarkHTTPStore(b *testing.B) {
	db := openStore(b)
	srv := httptest.NewServer(NewHTTPHandler(db, Options{}))
	defer srv.Close()
	hc := srv.Client()
	benchmarkStore(b, func(ctx context.Context, _ *collectortrace.ExportTraceServiceRequest, body []byte) error {
		return postProtobuf(ctx, hc, srv.URL+"/v1/traces", body)
	})
}

func benchmarkStore(b *testing.B, send func(context.Context, *collectortrace.ExportTraceServiceRequest, []byte) error) {
	const senders, spansPerReq = 4, 100
	base := realisticRequest(10, 10)
	reqs := make([]*collectortrace.ExportTraceServiceRequest, b.N+1)
	bodies := make([][]byte, b.N+1)
	for i := range reqs {
		reqs[i] = issue19Request(base, uint64(i+1))
		bodies[i], _ = proto.Marshal(reqs[i])
	}
	ctx := context.Background()
	if err := send(ctx, reqs[b.N], bodies[b.N]); err != nil { // connect, open the store
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := send(ctx, reqs[i], bodies[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	reportSpanRate(b, cpu0, spansPerReq)
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N*spansPerReq), "cpu-µs/span")
}

// postProtobuf POSTs an OTLP/HTTP protobuf body and fails on a non-200
// answer.
func postProtobuf(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ContentTypeProtobuf)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	return nil
}
