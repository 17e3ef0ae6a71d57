package storedir

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// BenchmarkAppendSmallConcurrent measures the traffic of exporters that send
// one span per request (OTel SDKs with a simple span processor, Zorka
// agents, telemetrygen --batch=false): N writers each Append-ing 1-span
// requests with sync=batch. It reports spans/s, the process CPU per span,
// the data-file bytes per span, the chunks written and the fsyncs made per
// request, the user-mode CPU per span (without the kernel's fsync work)
// and the threads put to sleep per span (sleeps/span: the hand-offs between
// goroutines that had to wake a thread).
// "realistic" spans come from bench.Generator (about 10 records and several
// unique strings each); "telemetrygen" spans are what `telemetrygen traces
// --batch=false` sends: one record, a handful of attributes whose values
// repeat, so that the per-request costs show.
func BenchmarkAppendSmallConcurrent(b *testing.B) {
	realistic, _, _ := benchRequests(5, 20_000, 1)
	shapes := []struct {
		name string
		reqs [][]*trace.Span
	}{{"realistic", realistic}, {"telemetrygen", telemetrygenRequests(20_000)}}
	for _, shape := range shapes {
		for _, n := range []int{1, 2, 8, 32} {
			benchAppendSmall(b, shape.name, shape.reqs, n)
		}
	}
}

// telemetrygenRequests returns n 1-span requests shaped like the spans of
// OpenTelemetry's telemetrygen load generator.
func telemetrygenRequests(n int) [][]*trace.Span {
	r := rand.New(rand.NewPCG(7, 8))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	reqs := make([][]*trace.Span, n)
	for i := range reqs {
		var id trace.TraceID
		binary.BigEndian.PutUint64(id[:8], r.Uint64()|1)
		binary.BigEndian.PutUint64(id[8:], r.Uint64())
		sp := &trace.Span{TraceID: id, SpanID: trace.SpanID(r.Uint64() | 1), Type: "okey-dokey-0",
			StartNS: start + int64(i)*int64(time.Millisecond), DurationNS: 123_000, Source: "otlp", Recs: 1,
			Root: &trace.Record{Method: "okey-dokey-0", DurationNS: 123_000}}
		sp.Attrs.Set("service.name", trace.String("telemetrygen"))
		sp.Attrs.Set("span.kind", trace.String("client"))
		sp.Attrs.Set("net.peer.ip", trace.String("1.2.3.4"))
		sp.Attrs.Set("peer.service", trace.String("telemetrygen-server"))
		reqs[i] = []*trace.Span{sp}
	}
	return reqs
}

func benchAppendSmall(b *testing.B, shape string, reqs [][]*trace.Span, n int) {
	b.Run(fmt.Sprintf("%s/writers=%d", shape, n), func(b *testing.B) {
		o := benchOptions(SyncBatch)
		syncs := &syncCounter{}
		o.Observer = syncs
		db := openBenchDB(b, o)
		ctx := context.Background()
		size0, chunks0 := db.dataStats()
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start, cpu0, user0, sleeps0 := time.Now(), processCPU(), processUserCPU(), processSleeps()
		for w := 0; w < n; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					if err := db.Append(ctx, benchRequest(reqs, int(i))); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed, cpu, user, sleeps := time.Since(start), processCPU()-cpu0, processUserCPU()-user0, processSleeps()-sleeps0
		b.StopTimer()
		size1, chunks1 := db.dataStats()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "spans/s")
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/span")
		b.ReportMetric(float64(user.Microseconds())/float64(b.N), "user-µs/span")
		b.ReportMetric(float64(sleeps)/float64(b.N), "sleeps/span")
		b.ReportMetric(float64(size1-size0)/float64(b.N), "data-B/span")
		b.ReportMetric(float64(chunks1-chunks0)/float64(b.N), "chunks/req")
		_, nsync := syncs.get()
		b.ReportMetric(float64(nsync)/float64(b.N), "syncs/req")
	})
}

// dataStats sums the data-file sizes and chunk counts of every store,
// once every acknowledged write is indexed (the counters move then).
func (db *DB) dataStats() (bytes, chunks int64) {
	db.waitIndexed(context.Background())
	stores, release := db.snapshot()
	defer release()
	for _, s := range stores {
		bytes += s.data.Size()
		s.mu.Lock()
		chunks += s.chunks
		s.mu.Unlock()
	}
	return bytes, chunks
}
