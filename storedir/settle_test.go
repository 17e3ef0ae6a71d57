package storedir

import (
	"context"
	"testing"
)

// TestCloseSettlesSmallIndexes: closing a store whose indexes are small
// and hold their entries in L0 (the final flush, and flushes not yet
// compacted) compacts them into the last level (Store.settleIndexes), and
// the store reads the same afterwards.
func TestCloseSettlesSmallIndexes(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 1 << 30 // one store
	o.ChunkTargetSize = 1 << 20
	o.settleMinL0 = 64 << 10 // the test's indexes are a few hundred KB
	spans := genWorkload(91, 20_000)
	db := openTestDB(t, dir, o)
	appendAll(t, db, spans, 500)
	s := db.stores[len(db.stores)-1]
	if err := s.flushIndexes(); err != nil {
		t.Fatal(err)
	}
	if s.meta.L0Tables() == 0 || s.text.L0Tables() == 0 {
		t.Fatalf("before close: %d meta and %d text tables in L0; want some in each", s.meta.L0Tables(), s.text.L0Tables())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	for _, s := range db.stores {
		if m, x := s.meta.L0Tables(), s.text.L0Tables(); m != 0 || x != 0 {
			t.Fatalf("store %s after close: %d meta and %d text tables in L0, want none", StoreName(s.id), m, x)
		}
	}
	for _, i := range []int{0, len(spans) / 2, len(spans) - 1} {
		got, err := db.GetTrace(context.Background(), spans[i].TraceID)
		if err != nil || len(got) == 0 {
			t.Fatalf("trace of span %d after the settle: %d spans, %v", i, len(got), err)
		}
	}
}
