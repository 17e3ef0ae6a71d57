package index

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// manyAttrsEntry is one span with n distinct attributes whose values are
// also texts (as storedir's interner produces them), plus the keys.
func manyAttrsEntry(n int, seq int) SpanEntry {
	e := SpanEntry{TraceID: [16]byte{1, byte(seq)}, SpanID: uint64(seq + 1), StartNS: 1_700_000_000_000_000_000 + int64(seq),
		DurationNS: 1000, Loc: Location{ChunkOffset: 16, Index: uint32(seq)}}
	for i := 0; i < n; i++ {
		k, v := uint64(2*i+1), uint64(2*i+2)
		e.Attrs = append(e.Attrs, KV{k, v})
		e.Texts = append(e.Texts, k, v)
	}
	return e
}

// TestIndexOpensAnyRowItWrote: an index accepts a span with more attributes
// than any request limit allows (a store written under a looser limit), in
// the open block and sealed, and reopens with it searchable. It failed with
// "corrupt index: rows of block 0: 70001 attributes" on reopen.
func TestIndexOpensAnyRowItWrote(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nattrs int
		spans  int // spans committed, the first one wide; 16 or more seal block 0 (block shift MinBlockShift)
	}{
		{"open block, 70001 attributes", 70001, 1},
		{"sealed block, 70001 attributes", 70001, 17},
		{"open block, 1000000 attributes (soak)", 1000000, 1},
	} {
		if strings.HasSuffix(tc.name, "(soak)") && os.Getenv("ZTSD_SOAK") == "" {
			continue // make soak runs it
		}
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ix, err := Open(dir, Options{BlockShift: MinBlockShift})
			if err != nil {
				t.Fatal(err)
			}
			b := ix.NewBatch()
			for i := 0; i < tc.spans; i++ {
				n := 1 // the first span is the wide one
				if i == 0 {
					n = tc.nattrs
				}
				b.AddSpan(manyAttrsEntry(n, i))
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			ix, err = Open(dir, Options{BlockShift: MinBlockShift})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer ix.Close()
			last := uint64(2*tc.nattrs - 1)
			hits := 0
			err = ix.Search(context.Background(), Query{Attrs: []KV{{last, last + 1}}}, func(Hit) bool { hits++; return true })
			if err != nil {
				t.Fatal(err)
			}
			if hits != 1 {
				t.Fatalf("search for the wide span's last attribute: %d hits, want 1", hits)
			}
		})
	}
}

// BenchmarkManyAttrs measures indexing one span with n attributes (their
// values also texts): the cost must grow linearly with n.
func BenchmarkManyAttrs(b *testing.B) {
	for _, n := range []int{1000, 10000, 70000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ix := openBench(b)
			defer ix.Close()
			e := manyAttrsEntry(n, 0)
			b.ResetTimer()
			cpu0 := processCPU(b)
			for i := 0; i < b.N; i++ {
				e.TraceID[2], e.TraceID[3] = byte(i), byte(i>>8)
				batch := ix.NewBatch()
				batch.AddSpan(e)
				if err := batch.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/attr")
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/attr")
		})
	}
}
