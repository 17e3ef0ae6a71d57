package storedir

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// BenchmarkSearchDataDir runs the searches of `ztsctl bench` (trace mode,
// limit 100, the API's trace heads) in process against the data directory
// named by $ZTSD_SEARCH_BENCH_DIR — a large store built by `ztsctl bench`
// (default workload), such as its 10M-span one. It is skipped without the
// variable. The directory is opened read-write (Pebble may compact it): use
// a copy. Each kind draws its queries from a fixed seed, so runs of two
// builds ask the same questions; cpu-ns/op is the process CPU per search
// (Pebble's background compactions, if any, included); p50-ms and p99-ms
// are the searches' wall times.
func BenchmarkSearchDataDir(b *testing.B) {
	dir := os.Getenv("ZTSD_SEARCH_BENCH_DIR")
	if dir == "" {
		b.Skip("ZTSD_SEARCH_BENCH_DIR not set")
	}
	db, err := Open(context.Background(), dir, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	// Opening builds each store's trace filter in the background: wait for
	// it, so that its CPU is not counted as the searches'.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		stores, release := db.snapshot()
		ready := true
		for _, s := range stores {
			if f := s.filter.Load(); f != nil && !f.ready.Load() {
				ready = false
			}
		}
		release()
		if ready {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("trace filters not built after 2 minutes")
		}
	}
	first, last := int64(0), int64(0)
	for _, s := range db.Stores() {
		if first == 0 || s.FirstNS < first {
			first = s.FirstNS
		}
		last = max(last, s.LastNS)
	}
	services := []string{"frontend", "cart", "checkout", "payment", "inventory", "email",
		"shipping", "auth", "pricing", "audit", "search", "recommend"}
	kinds := []struct {
		name string
		q    func(r *rand.Rand) Query
	}{
		{"attribute", func(r *rand.Rand) Query {
			return Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String(services[r.IntN(len(services))])}}}
		}},
		// The workload's user ids: "u" and 1,000,000 + [0, 1,000,000).
		{"text", func(r *rand.Rand) Query { return Query{Text: "u" + strconv.Itoa(1_000_000+r.IntN(1_000_000))} }},
		{"duration", func(*rand.Rand) Query { return Query{MinDurationNS: int64(50 * time.Millisecond)} }},
		{"errors", func(*rand.Rand) Query { return Query{ErrorsOnly: true} }},
		{"time_range", func(r *rand.Rand) Query {
			since := first + r.Int64N(max(last-first, 1))
			return Query{SinceNS: since, UntilNS: since + int64(time.Second)}
		}},
	}
	ctx := context.Background()
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(19, 1))
			results := 0
			var lat []time.Duration
			cpu0 := processCPU()
			for b.Loop() {
				q := k.q(r)
				q.Limit, q.TraceHeads = 100, true
				t0 := time.Now()
				res, err := db.Search(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				results += len(res.Spans)
			}
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(results)/float64(b.N), "results")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
