package index

import (
	"context"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time (user + system) of the whole process so far:
// with other work on the machine, CPU per span compares runs where wall
// time does not (Pebble's background flushes and compactions count too).
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workload generates the budget's reference workload (DESIGN.md): 10-span
// traces, 6 attributes per span, ~100,000 spans per second of trace time,
// 100 spans per data-file chunk.
type workload struct {
	rng   *rand.Rand
	now   int64
	n     int
	card6 uint64 // distinct values of the sixth attribute (0: attrCard[5])
}

func newWorkload(seed uint64) *workload {
	return &workload{rng: rand.New(rand.NewPCG(seed, 7)), now: 1_700_000_000_000_000_000}
}

// Attribute key ids 1..6 and value id ranges: service (20), kind (3),
// http.method (5), http.status_code (12), route (200), user id (20,000).
var attrCard = [6]uint64{20, 3, 5, 12, 200, 20000}

func (w *workload) trace() []SpanEntry {
	var tid [16]byte
	for i := 0; i < 16; i += 8 {
		v := w.rng.Uint64()
		for j := 0; j < 8; j++ {
			tid[i+j] = byte(v >> (8 * j))
		}
	}
	out := make([]SpanEntry, 10)
	ids := make([]uint64, 10)
	for i := range ids {
		ids[i] = w.rng.Uint64()
	}
	start := w.now
	w.now += 100_000 // 10 spans per 100 µs
	service := w.rng.Uint64N(attrCard[0])
	for i := range out {
		var parent uint64
		if i > 0 {
			parent = ids[w.rng.IntN(i)]
		}
		attrs := make([]KV, 6)
		texts := make([]uint64, 0, 13)
		for k := range attrs {
			card := attrCard[k]
			if k == 5 && w.card6 > 0 {
				card = w.card6
			}
			v := 1_000_000*uint64(k+1) + w.rng.Uint64N(card)
			if k == 0 {
				v = 1_000_000 + service
			}
			attrs[k] = KV{Key: uint64(k + 1), Value: v}
			texts = append(texts, uint64(k+1), v)
		}
		texts = append(texts, 9_000_000+attrs[4].Value%997) // operation name
		off := int64(w.n/100) * 2600
		out[i] = SpanEntry{
			TraceID: tid, SpanID: ids[i], ParentID: parent,
			StartNS:    start + int64(i)*int64(w.rng.IntN(2000)),
			DurationNS: int64(w.rng.ExpFloat64() * float64(5*time.Millisecond)),
			Error:      w.rng.IntN(50) == 0,
			Loc:        Location{ChunkOffset: 16 + off, Index: uint32(w.n % 100)},
			Attrs:      attrs, Texts: texts,
		}
		w.n++
	}
	return out
}

func openBench(b *testing.B) *Index {
	b.Helper()
	ix, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

func buildBenchIndex(b *testing.B, spans int, card uint64, batchSize int) (*Index, *workload) {
	b.Helper()
	ix := openBench(b)
	w := newWorkload(1)
	w.card6 = card
	for w.n < spans {
		batch := ix.NewBatch()
		for batch.Len() < batchSize {
			for _, e := range w.trace() {
				batch.AddSpan(e)
			}
		}
		if err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	return ix, w
}

func BenchmarkAddSpan(b *testing.B) {
	b.Run("highcard", func(b *testing.B) { benchAddSpan(b, 20000, 1000) })
	b.Run("lowcard", func(b *testing.B) { benchAddSpan(b, 50, 1000) })
	b.Run("lowcard-batch10", func(b *testing.B) { benchAddSpan(b, 50, 10) })
}

// benchAddSpan measures indexing throughput, the sixth attribute having
// card distinct values, committing every batch entries.
func benchAddSpan(b *testing.B, card uint64, batchSize int) {
	ix := openBench(b)
	defer ix.Close()
	w := newWorkload(1)
	w.card6 = card
	var pending []SpanEntry
	b.ResetTimer()
	cpu0 := processCPU(b)
	batch := ix.NewBatch()
	for i := 0; i < b.N; i++ {
		if len(pending) == 0 {
			pending = w.trace()
		}
		batch.AddSpan(pending[0])
		pending = pending[1:]
		if batch.Len() == batchSize {
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			batch = ix.NewBatch()
		}
	}
	if err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/span")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkBytesPerSpan reports the settled sstable bytes per span of the
// reference workload (after Flush and a full Compact).
func BenchmarkBytesPerSpan(b *testing.B) {
	b.Run("highcard", func(b *testing.B) { benchBytesPerSpan(b, 20000, 1000) })
	b.Run("lowcard", func(b *testing.B) { benchBytesPerSpan(b, 50, 1000) })
	b.Run("lowcard-batch10", func(b *testing.B) { benchBytesPerSpan(b, 50, 10) })
}

func benchBytesPerSpan(b *testing.B, card uint64, batchSize int) {
	const spans = 300_000
	for i := 0; i < b.N; i++ {
		ix, _ := buildBenchIndex(b, spans, card, batchSize)
		if err := ix.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := ix.Compact(); err != nil {
			b.Fatal(err)
		}
		size := ix.db.Metrics().Total().Size
		b.ReportMetric(float64(size)/spans, "bytes/span")
		ix.Close()
	}
}

// BenchmarkQueries measures lookups on one index of the reference
// workload (300,000 spans, flushed to sstables).
func BenchmarkQueries(b *testing.B) {
	ix, _ := buildBenchIndex(b, 300_000, 0, 1000)
	defer ix.Close()
	if err := ix.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Run("TraceSpans", func(b *testing.B) {
		var ids [][16]byte
		w := newWorkload(1)
		for len(ids) < 1000 {
			ids = append(ids, w.trace()[0].TraceID)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			refs, err := ix.TraceSpans(ids[i%len(ids)])
			lat = append(lat, time.Since(t0))
			if err != nil || len(refs) != 10 {
				b.Fatalf("%d refs, %v", len(refs), err)
			}
		}
		reportPercentiles(b, lat)
	})
	searches := []struct {
		name string
		q    Query
	}{
		{"SearchAttr", Query{Attrs: []KV{{1, 1_000_003}}}},
		{"SearchTwoAttrs", Query{Attrs: []KV{{1, 1_000_003}, {4, 4_000_007}}}},
		{"SearchRareAttr", Query{Attrs: []KV{{6, 6_000_123}}}},
		{"SearchAll", Query{}},
		{"SearchErrorsSlow", Query{ErrorsOnly: true, MinDurationNS: int64(10 * time.Millisecond)}},
		{"SearchText", Query{TextAny: []uint64{9_000_050, 9_000_117, 9_000_200}}},
		{"SearchTextAttrValue", Query{TextAny: []uint64{2_000_001}}},
		{"SearchTimeRange", Query{SinceNS: 1_700_000_000_000_000_000 + 1e9, UntilNS: 1_700_000_000_000_000_000 + 2e9}},
	}
	for _, sc := range searches {
		b.Run(sc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			defer func() { reportPercentiles(b, lat) }()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				n := 0
				err := ix.Search(context.Background(), sc.q, func(Hit) bool {
					n++
					return n < 100
				})
				lat = append(lat, time.Since(t0))
				if err != nil || n == 0 {
					b.Fatalf("%d hits, %v", n, err)
				}
			}
		})
	}
	b.StopTimer()
}

// reportPercentiles reports the p50 and p99 of per-operation latencies.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
