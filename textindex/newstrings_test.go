package textindex

import (
	"fmt"
	"testing"
)

// TestCommittedFilterKeepsIDs interns strings over many batches into an
// index opened empty, with a cache too small to remember them, so that a
// string seen in an earlier batch is known only to the filter of committed
// strings and Pebble: every such string must get its first id back, and a
// reopened (non-empty) index, which keeps no filter, must agree.
func TestCommittedFilterKeepsIDs(t *testing.T) {
	dir := t.TempDir()
	ix, err := Open(dir, Options{CacheBytes: 8 << 20, CacheEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	if ix.committed == nil {
		t.Fatal("an index opened empty keeps no filter of committed strings")
	}
	strs := corpus(7, 3000)
	ids := map[string]uint64{}
	for batch := 0; batch < 12; batch++ {
		b := ix.NewBatch()
		// Each batch repeats strings of earlier batches and adds new ones.
		for i := batch * 200; i < batch*200+600 && i < len(strs); i++ {
			s := strs[i]
			id := b.Intern(s)
			if want, ok := ids[s]; ok && id != want {
				t.Fatalf("batch %d: Intern(%.40q) = %d, first interned as %d", batch, s, id, want)
			}
			ids[s] = id
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	fp := 0
	for i := 0; i < 10000; i++ {
		if ix.committed.mayContain(fmt.Sprintf("never interned %d", i)) {
			fp++
		}
	}
	if fp > 300 {
		t.Errorf("%d of 10000 strings never interned may be in the filter", fp)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix, err = Open(dir, Options{CacheBytes: 8 << 20, CacheEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if ix.committed != nil {
		t.Fatal("an index opened non-empty keeps a filter that does not know its strings")
	}
	b := ix.NewBatch()
	for s, want := range ids {
		if id := b.Intern(s); id != want {
			t.Fatalf("after reopening: Intern(%.40q) = %d, want %d", s, id, want)
		}
	}
	if b.Len() != 0 {
		t.Fatalf("after reopening, %d known strings got new ids", b.Len())
	}
}

// TestStringFilterChainFalsePositives fills a chain of several filters and
// checks that strings never added rarely pass it: every filter of the
// chain can let one through, so each must be tight.
func TestStringFilterChainFalsePositives(t *testing.T) {
	f := newStringFilter()
	const added = 1 << 19 // a chain of six filters
	for i := 0; i < added; i++ {
		f.add(fmt.Sprintf("added %d", i))
	}
	if f.Filters() < 5 {
		t.Fatalf("%d filters for %d strings", f.Filters(), added)
	}
	for i := 0; i < added; i += 97 {
		if s := fmt.Sprintf("added %d", i); !f.mayContain(s) {
			t.Fatalf("%q was added but the filter says it was not", s)
		}
	}
	fp := 0
	const probes = 100_000
	for i := 0; i < probes; i++ {
		if f.mayContain(fmt.Sprintf("absent %d", i)) {
			fp++
		}
	}
	if fp > probes/200 {
		t.Errorf("%d of %d strings never added pass a chain of %d filters (want under 0.5%%)", fp, probes, f.Filters())
	}
	t.Logf("%d filters, %d of %d absent strings pass", f.Filters(), fp, probes)
}
