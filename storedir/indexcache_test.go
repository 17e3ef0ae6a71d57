package storedir

import (
	"context"
	"testing"
)

// TestSharedIndexCache: the indexes of every store read through the DB's
// one block cache of IndexCacheBytes (besides the memtables of the store
// taking writes), sized by the option.
func TestSharedIndexCache(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.IndexCacheBytes = 24 << 20
	o.MaxStoreSize = 64 << 10
	spans := genWorkload(81, 3000)
	db := openTestDB(t, dir, o)
	appendAll(t, db, spans, 100)
	if err := db.Close(); err != nil { // flushes the indexes to tables
		t.Fatal(err)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	if got, want := db.indexCache.MaxSize(), int64(24<<20+2*2*32<<20); got != want {
		t.Fatalf("index cache of %d bytes, want %d (index_cache_size + the writing store's memtables)", got, want)
	}
	stores := db.Stores()
	if len(stores) < 2 {
		t.Fatalf("%d stores, want several", len(stores))
	}
	// Gets of a trace in the first store and one in the last, and a
	// search over all stores, read their indexes through the one cache.
	for _, sp := range []int{0, len(spans) - 1} {
		if _, err := db.GetTrace(context.Background(), spans[sp].TraceID); err != nil {
			t.Fatal(err)
		}
	}
	blocks := db.indexCache.Metrics().Count
	if blocks == 0 {
		t.Fatal("gets loaded no block into the shared cache")
	}
	if res, err := db.Search(context.Background(), Query{Text: "a", Limit: 1000}); err != nil || len(res.Spans) == 0 {
		t.Fatalf("search: %v", err)
	}
	if n := db.indexCache.Metrics().Count; n <= blocks {
		t.Fatalf("a search over every store: the shared cache holds %d blocks, %d before", n, blocks)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, s := range db.stores {
		if s.indexCache != db.indexCache {
			t.Fatalf("store %s has its own index cache", s.name())
		}
	}
}
