package storedir

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/trace"
)

// The storedir benchmarks use the realistic skewed workload of `ztsctl
// bench` (bench.Generator): traces of 1–12 nested spans, 6 attributes per
// span, 1–200 records per span (mean about 10), 1% errors. Run them with
// -count 6 (or more) and compare runs with benchstat.

// benchRequests generates n spans split into requests of batch spans.
func benchRequests(seed uint64, n, batch int) (reqs [][]*trace.Span, spans []*trace.Span, records int64) {
	g := bench.NewGenerator(bench.Workload{Seed: seed})
	for len(spans) < n {
		spans = append(spans, g.Trace()...)
	}
	for _, sp := range spans {
		records += sp.Recs
	}
	for i := 0; i < len(spans); i += batch {
		reqs = append(reqs, spans[i:min(i+batch, len(spans))])
	}
	return reqs, spans, records
}

// benchRequest returns request i of a benchmark that cycles through reqs:
// the first pass as generated, later passes as copies under other trace
// ids, so that every request stores new spans (identical spans appended
// again store nothing, see checkVersions). The copies are shallow.
func benchRequest(reqs [][]*trace.Span, i int) []*trace.Span {
	req := reqs[i%len(reqs)]
	cycle := uint64(i / len(reqs))
	if cycle == 0 {
		return req
	}
	out := make([]*trace.Span, len(req))
	for j, sp := range req {
		c := *sp
		for k := 0; k < 8; k++ {
			c.TraceID[8+k] ^= byte(cycle >> (8 * k))
		}
		out[j] = &c
	}
	return out
}

func benchOptions(sync SyncPolicy) Options {
	o := DefaultOptions()
	o.Sync = sync
	return o
}

// BenchmarkAppend measures DB.Append of 500-span requests: encoding,
// compression, the group commit and indexing. "serial" is one writer with
// sync=none (the CPU cost of a request); "batch" is 8 concurrent writers
// with sync=batch (group-committed fsyncs, what the daemon does).
func BenchmarkAppend(b *testing.B) {
	reqs, spans, records := benchRequests(1, 20_000, 500)
	perReqSpans := float64(len(spans)) / float64(len(reqs))
	perReqRecords := float64(records) / float64(len(reqs))
	report := func(b *testing.B, elapsed, cpu time.Duration) {
		s := elapsed.Seconds()
		b.ReportMetric(perReqSpans*float64(b.N)/s, "spans/s")
		b.ReportMetric(perReqRecords*float64(b.N)/s, "records/s")
		b.ReportMetric(float64(cpu.Microseconds())/(perReqSpans*float64(b.N)), "cpu-µs/span")
	}
	b.Run("serial", func(b *testing.B) {
		db := openBenchDB(b, benchOptions(SyncNone))
		ctx := context.Background()
		start, cpu0 := time.Now(), processCPU()
		for i := 0; b.Loop(); i++ {
			if err := db.Append(ctx, benchRequest(reqs, i)); err != nil {
				b.Fatal(err)
			}
		}
		report(b, time.Since(start), processCPU()-cpu0)
	})
	b.Run("batch", func(b *testing.B) {
		db := openBenchDB(b, benchOptions(SyncBatch))
		ctx := context.Background()
		b.SetParallelism(4) // 4 writers per GOMAXPROCS
		var next atomic.Int64
		start, cpu0 := time.Now(), processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := db.Append(ctx, benchRequest(reqs, int(next.Add(1)))); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, time.Since(start), processCPU()-cpu0)
	})
}

// processCPU is the CPU time (user + system, every thread) this process
// has used: on a machine shared with other work it measures the cost of an
// operation better than wall time does. It includes the GC and Pebble's
// background flushes and compactions, which the write path causes.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processSleeps is how many times this process's threads have blocked
// (voluntary context switches, every thread): each is a thread put to
// sleep and later woken (a futex, a netpoll or a blocking syscall), the
// cost of a hand-off between goroutines that finds no running thread.
func processSleeps() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw
}

// processUserCPU is the user-mode part of processCPU: without the kernel's
// work (the fsyncs, whose cost is the disk's and the file system's).
func processUserCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano())
}

func openBenchDB(b *testing.B, o Options) *DB {
	b.Helper()
	db, err := Open(context.Background(), b.TempDir(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// readFixture is a store holding the spans of benchRequests.
type readFixture struct {
	db     *DB
	spans  []*trace.Span
	traces []trace.TraceID
}

func newReadFixture(b *testing.B, n int) *readFixture {
	b.Helper()
	reqs, spans, _ := benchRequests(2, n, 500)
	db := openBenchDB(b, benchOptions(SyncNone))
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	f := &readFixture{db: db, spans: spans}
	seen := map[trace.TraceID]bool{}
	for _, sp := range spans {
		if !seen[sp.TraceID] {
			seen[sp.TraceID] = true
			f.traces = append(f.traces, sp.TraceID)
		}
	}
	return f
}

// BenchmarkGetTrace measures DB.GetTrace of random stored traces: "hot"
// with the chunk cache holding every chunk, "cold" with a one-entry cache
// so that almost every get reads, checks and decompresses its chunk (as
// with a store much larger than the cache).
func BenchmarkGetTrace(b *testing.B) {
	f := newReadFixture(b, 50_000)
	ctx := context.Background()
	run := func(b *testing.B) {
		r := rand.New(rand.NewPCG(3, 4))
		cpu0 := processCPU()
		for b.Loop() {
			if _, err := f.db.GetTrace(ctx, f.traces[r.IntN(len(f.traces))]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	b.Run("hot", run)
	b.Run("cold", func(b *testing.B) {
		saved := f.db.cache
		f.db.cache = newChunkCache(1)
		defer func() { f.db.cache = saved }()
		run(b)
	})
}

// BenchmarkSearch measures DB.Search (trace mode, limit 100, the API
// default) for each kind of query.
func BenchmarkSearch(b *testing.B) {
	f := newReadFixture(b, 50_000)
	ctx := context.Background()
	mid := f.spans[len(f.spans)/2]
	user, _ := mid.Attrs.Get("user.id")
	queries := []struct {
		name string
		q    Query
	}{
		{"attribute", Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("checkout")}}}},
		{"attributes2", Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("payment")},
			{Key: "http.status_code", Value: trace.String("500")}}}},
		{"text", Query{Text: user.Str}},
		{"duration", Query{MinDurationNS: int64(20 * time.Millisecond)}},
		{"errors", Query{ErrorsOnly: true}},
		{"timerange", Query{SinceNS: mid.StartNS, UntilNS: mid.StartNS + int64(time.Second)}},
	}
	for _, qq := range queries {
		b.Run(qq.name, func(b *testing.B) {
			q := qq.q
			q.Limit = 100
			res, err := f.db.Search(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Spans) == 0 {
				b.Fatalf("query %+v finds nothing", q)
			}
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := f.db.Search(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(res.Spans)), "results")
		})
	}
}
