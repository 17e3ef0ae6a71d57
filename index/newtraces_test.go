package index

import (
	"math/rand/v2"
	"testing"

	"github.com/ztsd/ztsd/internal/membloom"
)

// TestTraceFilterNoFalseNegatives: every id added is reported, across the
// growth of the filter chain, and ids never added are mostly not (the
// false-positive rate stays near the design's 1%).
func TestTraceFilterNoFalseNegatives(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var f traceFilter
	var ids [][16]byte
	for i := 0; i < 5*membloom.FirstCapacity; i++ {
		var id [16]byte
		for j := range id {
			id[j] = byte(rng.UintN(256))
		}
		if i%3 == 0 {
			id = [16]byte{15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)} // ids of few bits set
		}
		f.add(id)
		ids = append(ids, id)
	}
	if f.Filters() < 2 {
		t.Fatalf("%d filters after %d ids: the chain did not grow", f.Filters(), len(ids))
	}
	for _, id := range ids {
		if !f.mayContain(id) {
			t.Fatalf("id %x added but not reported", id)
		}
	}
	fp := 0
	const probes = 100_000
	for i := 0; i < probes; i++ {
		id := [16]byte{0: 0xff, 8: byte(i), 9: byte(i >> 8), 10: byte(i >> 16)}
		if f.mayContain(id) {
			fp++
		}
	}
	if fp > probes*3/100 {
		t.Fatalf("%d false positives in %d (over 3%%)", fp, probes)
	}
}

// TestTraceCountWithFilter: an index created empty counts distinct traces
// through its filter of known ids, one reopened (no filter: it looks every
// id up) through Pebble; both count exactly, with traces that continue
// across batches, come back after the recent set forgot them, and more
// traces than the first filter holds.
func TestTraceCountWithFilter(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{BlockShift: 6, TraceCacheEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	if ix.known == nil {
		t.Fatal("a new index has no filter of known trace ids")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[[16]byte]bool{}
	var ids [][16]byte
	add := func(ix *Index, n int) {
		t.Helper()
		b := ix.NewBatch()
		for i := 0; i < n; i++ {
			var id [16]byte
			if len(ids) > 0 && rng.IntN(3) == 0 {
				id = ids[rng.IntN(len(ids))] // an old trace continues
			} else {
				id = [16]byte{0: byte(len(ids)), 1: byte(len(ids) >> 8), 2: byte(len(ids) >> 16), 9: 1}
				ids = append(ids, id)
			}
			seen[id] = true
			b.AddSpan(SpanEntry{TraceID: id, SpanID: uint64(i + 1), StartNS: int64(len(seen)), Loc: Location{ChunkOffset: 16}})
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := ix.Stats().Traces; got != uint64(len(seen)) {
			t.Fatalf("%d traces counted, want %d", got, len(seen))
		}
	}
	for len(ids) < membloom.FirstCapacity+1000 {
		add(ix, 1+rng.IntN(500))
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(dir, Options{BlockShift: 6, TraceCacheEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.known != nil {
		t.Fatal("a reopened index has a filter that misses the ids committed before")
	}
	for i := 0; i < 20; i++ {
		add(ix, 1+rng.IntN(200))
	}
}
