package storedir

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/trace"
)

// threadCPU is the CPU time of the calling OS thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPU(b *testing.B) time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// otlpShapedSpans returns n spans shaped like the issue 19 OTLP load after
// mapping: 10-span traces, a span name, 6 span attributes (one of them a
// user id of 1,000 values, one an integer) and 7 resource attributes, no
// records.
func otlpShapedSpans(n int) []*trace.Span {
	names := []string{"GET /api/orders", "SELECT orders", "redis GET", "POST /payments"}
	resource := trace.Attrs{
		{Key: "host.name", Value: trace.String("web-17")}, {Key: "process.pid", Value: trace.Int(4242)},
		{Key: "service.name", Value: trace.String("orders")}, {Key: "service.version", Value: trace.String("1.4.2")},
		{Key: "telemetry.sdk.language", Value: trace.String("go")}, {Key: "telemetry.sdk.name", Value: trace.String("opentelemetry")},
		{Key: "telemetry.sdk.version", Value: trace.String("1.47.0")},
	}
	out := make([]*trace.Span, n)
	for i := range out {
		attrs := append(trace.Attrs{
			{Key: "db.system", Value: trace.String("postgresql")},
			{Key: "http.request.method", Value: trace.String("GET")},
			{Key: "http.response.status_code", Value: trace.Int(200)},
			{Key: "http.route", Value: trace.String("/api/orders/{id}")},
			{Key: "server.address", Value: trace.String("orders.internal")},
			{Key: "user.id", Value: trace.String(fmt.Sprint("u-", i%1000))},
		}, resource...)
		out[i] = &trace.Span{TraceID: [16]byte{byte(i / 10), byte(i / 2560)}, SpanID: trace.SpanID(i + 1),
			Type: names[i%4], StartNS: 1_712_000_000_000_000_000 + int64(i)*1000, DurationNS: 25_000, Attrs: attrs}
	}
	return out
}

// BenchmarkIndexChunks indexes groups of spans as a store's indexer does
// (its ChunkIndexer, one chunk of 100 spans per group) into a fresh store's
// indexes. committer-cpu-µs/span is the CPU of the calling goroutine's
// thread only (locked to it): what the single committer spends on indexing,
// without the text index commit (another goroutine), Pebble's flushes and
// compactions or other work on the machine; cpu-µs/span is the process's.
// otlp: the issue 19 OTLP shape; records: the bench workload (method-call
// records, about 10 per span, as batched Trace JSON/CBOR carries).
func BenchmarkIndexChunks(b *testing.B) {
	const perChunk, pool = 100, 20_000
	g := bench.NewGenerator(bench.Workload{Seed: 5})
	var recs []*trace.Span
	for len(recs) < pool {
		recs = append(recs, g.Trace()...)
	}
	for _, tc := range []struct {
		name  string
		spans []*trace.Span
	}{{"otlp", otlpShapedSpans(pool)}, {"records", recs[:pool]}} {
		b.Run(tc.name, func(b *testing.B) {
			ix := openTestIndexes(b)
			var x ChunkIndexer
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var thread time.Duration
			proc0 := processCPU()
			b.ResetTimer()
			off := int64(16)
			for i := 0; i < b.N; i++ {
				// Every pass over the pool indexes new traces.
				start := (i * perChunk) % len(tc.spans)
				spans := tc.spans[start : start+perChunk]
				for _, sp := range spans {
					sp.TraceID[15], sp.TraceID[14] = byte(i*perChunk/len(tc.spans)), byte(i*perChunk/len(tc.spans)>>8)
				}
				t0 := threadCPU(b)
				if err := x.IndexChunks(ix.meta, ix.text, []ChunkSpans{{Off: off, Next: off + 1000, Spans: spans}}, true, true); err != nil {
					b.Fatal(err)
				}
				thread += threadCPU(b) - t0
				off += 1000
			}
			b.StopTimer()
			n := float64(b.N * perChunk)
			b.ReportMetric(float64(thread.Nanoseconds())/1e3/n, "committer-cpu-µs/span")
			b.ReportMetric(float64((processCPU()-proc0).Nanoseconds())/1e3/n, "cpu-µs/span")
		})
	}
}

// BenchmarkIndexChunksGathered indexes the group commits of 2 unbatched
// writers (chunks of 2 spans of the bench workload) as the indexer does
// after gathering spans=N of them: one IndexChunks call per gathering.
// cpu-µs/span is the process's CPU (the text index commit runs in a
// goroutine of its own).
func BenchmarkIndexChunksGathered(b *testing.B) {
	const perChunk, pool = 2, 20_000
	g := bench.NewGenerator(bench.Workload{Seed: 5})
	var spans []*trace.Span
	for len(spans) < pool {
		spans = append(spans, g.Trace()...)
	}
	spans = spans[:pool]
	for _, gather := range []int{32, 64, 128, 256} {
		b.Run(fmt.Sprintf("spans=%d", gather), func(b *testing.B) {
			ix := openTestIndexes(b)
			var x ChunkIndexer
			proc0 := processCPU()
			b.ResetTimer()
			off, next := int64(16), 0
			for i := 0; i < b.N; i++ {
				chunks := make([]ChunkSpans, 0, gather/perChunk)
				for range gather / perChunk {
					if next+perChunk > len(spans) {
						// Every pass over the pool indexes new traces.
						for _, sp := range spans {
							sp.TraceID[15]++
						}
						next = 0
					}
					chunks = append(chunks, ChunkSpans{Off: off, Next: off + 1000, Spans: spans[next : next+perChunk]})
					off += 1000
					next += perChunk
				}
				if err := x.IndexChunks(ix.meta, ix.text, chunks, true, true); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((processCPU()-proc0).Nanoseconds())/1e3/float64(b.N*gather), "cpu-µs/span")
		})
	}
}
