package membloom

import (
	"math/rand/v2"
	"testing"
)

// TestFilterGrowsAndKeepsKeys adds enough keys for a chain of several
// filters: every key added is present, the chain grew, and keys never
// added pass at about the designed rate (every filter of the chain may
// pass a key: under 0.5% per filter on average).
func TestFilterGrowsAndKeepsKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var f Filter
	if f.MayContain(r.Uint64(), r.Uint64()|1) {
		t.Fatal("an empty filter says a key may be in it")
	}
	keys := make([][2]uint64, 10*FirstCapacity)
	for i := range keys {
		keys[i] = [2]uint64{r.Uint64(), r.Uint64() | 1}
		f.Add(keys[i][0], keys[i][1])
	}
	if f.Filters() < 3 {
		t.Fatalf("%d filters after %d keys: the chain did not grow", f.Filters(), len(keys))
	}
	for _, k := range keys {
		if !f.MayContain(k[0], k[1]) {
			t.Fatalf("key %x was added but the filter says it was not", k)
		}
	}
	fp, n := 0, 200_000
	for range n {
		if f.MayContain(r.Uint64(), r.Uint64()|1) {
			fp++
		}
	}
	if limit := n * f.Filters() / 200; fp > limit {
		t.Errorf("%d of %d keys never added pass a chain of %d filters (want at most %d)", fp, n, f.Filters(), limit)
	}
	t.Logf("%d filters, %d of %d absent keys pass", f.Filters(), fp, n)
}
