package storedir

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// freshMemTableBytes is what a freshly opened index's memtables reserve
// (Pebble's first memtable, 256 KiB).
const freshMemTableBytes = 256 << 10

// sealedMemTables returns, for each sealed store, what its two indexes'
// memtables reserve from the shared block cache.
func sealedMemTables(db *DB) map[string]uint64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := map[string]uint64{}
	for _, s := range db.stores {
		if s.Sealed() {
			out[s.name()] = s.meta.MemTableBytes() + s.text.MemTableBytes()
		}
	}
	return out
}

// sealedL0Tables returns, for each sealed store, the tables its two
// indexes hold in L0.
func sealedL0Tables(db *DB) map[string]int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	out := map[string]int64{}
	for _, s := range db.stores {
		if s.Sealed() {
			out[s.name()] = s.meta.L0Tables() + s.text.L0Tables()
		}
	}
	return out
}

// TestSealedStoresReleaseMemTables: a store sealed while the DB runs
// keeps the memtables its indexes grew to while it took writes (Pebble
// never shrinks them; they are reserved from the block cache all stores
// share) unless releaseMemTables reopens its indexes; then each index
// holds a fresh open's memtable, and the tables the seal's flush left in
// L0 are compacted into the base level. Gets and searches racing the reopens
// answer exactly what brute force does, and rotations during writes
// release the stores they seal by themselves.
func TestSealedStoresReleaseMemTables(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 256 << 10
	o.keepSealedMemTables = true
	spans := genWorkload(97, 24000)
	half := spans[:len(spans)/2]
	db := openTestDB(t, dir, o)
	appendAll(t, db, half, 200)
	kept := sealedMemTables(db)
	if len(kept) < 2 {
		t.Fatalf("%d sealed stores, want several", len(kept))
	}
	l0 := int64(0)
	for _, n := range sealedL0Tables(db) {
		l0 += n
	}
	if l0 == 0 {
		t.Fatalf("no sealed store has tables in L0 before the reopens; want the seals' flushes there")
	}
	for name, n := range kept {
		t.Logf("store %s sealed: memtables reserve %d bytes", name, n)
		if n <= 2*freshMemTableBytes {
			t.Fatalf("store %s sealed with its memtables kept reserves %d bytes; want more than a fresh open's %d (the writes grew them)", name, n, 2*freshMemTableBytes)
		}
	}

	// Readers racing the reopens: every get and search answers exactly
	// (nothing is appended meanwhile) and none fails.
	spansOf := map[trace.TraceID]int{}
	for _, sp := range half {
		spansOf[sp.TraceID]++
	}
	queries := searchQueries(half)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ctx.Err() == nil; i++ {
				var err error
				if g < 2 {
					sp := half[(i*7919)%len(half)]
					var roots []*trace.Span
					if roots, err = db.GetTrace(ctx, sp.TraceID); err == nil && countSpans(roots) != spansOf[sp.TraceID] {
						err = fmt.Errorf("trace %s: %d spans, want %d", sp.TraceID, countSpans(roots), spansOf[sp.TraceID])
					}
				} else {
					q := queries[i%len(queries)]
					want := expectedOf(half, q)
					var res *Result
					if res, err = db.Search(ctx, q); err == nil && len(res.Spans) != min(len(want), q.Limit) {
						err = fmt.Errorf("query %+v: %d results, want %d", q, len(res.Spans), min(len(want), q.Limit))
					}
				}
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for reads.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	db.mu.RLock()
	for _, s := range db.stores {
		if s.Sealed() {
			db.startRelease(s)
		}
	}
	db.mu.RUnlock()
	racing, t0 := reads.Load(), time.Now()
	waitReleased(t, db)
	from := reads.Load()
	t.Logf("%d reads while the sealed stores' indexes were reopened (%v)", from-racing, time.Since(t0).Round(time.Millisecond))
	for reads.Load() < from+20 && len(errs) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a read racing the reopens: %v", err)
	}
	checkSearches(t, db, half)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Rotations release what they seal: the second half, written by a DB
	// that releases, leaves no sealed store with grown memtables.
	o.keepSealedMemTables = false
	db = openTestDB(t, dir, o)
	defer db.Close()
	before := len(sealedMemTables(db))
	appendAll(t, db, spans[len(half):], 200)
	if n := len(sealedMemTables(db)); n < before+2 {
		t.Fatalf("%d sealed stores after writing the second half, %d before; want at least two more", n, before)
	}
	waitReleased(t, db)
	checkSearches(t, db, spans)
}

// countSpans counts the spans of the trees under roots.
func countSpans(roots []*trace.Span) int {
	n := 0
	for _, sp := range roots {
		n += 1 + countSpans(sp.Children)
	}
	return n
}

// expectedOf returns what brute force finds for q in spans.
func expectedOf(spans []*trace.Span, q Query) []*trace.Span {
	return workload.Expected(spans, workload.Filter{SinceNS: q.SinceNS, UntilNS: q.UntilNS,
		MinDurationNS: q.MinDurationNS, ErrorsOnly: q.ErrorsOnly, Attrs: q.Attrs, Text: q.Text})
}

// sealedStoresWithL0 returns the sealed stores whose indexes hold tables
// in L0, with how many.
func sealedStoresWithL0(db *DB) map[string]int64 {
	inL0 := map[string]int64{}
	for name, n := range sealedL0Tables(db) {
		if n > 0 {
			inL0[name] = n
		}
	}
	return inL0
}

// waitReleased waits until every sealed store's indexes reserve no more
// than a fresh open's memtables and hold no table in L0 (the release and
// the compaction after it run in the background).
func waitReleased(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		over := map[string]uint64{}
		for name, n := range sealedMemTables(db) {
			if n > 2*freshMemTableBytes {
				over[name] = n
			}
		}
		inL0 := sealedStoresWithL0(db)
		if len(over) == 0 && len(inL0) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sealed stores still reserve more than a fresh open's memtables (%v) or hold tables in L0 (%v)", over, inL0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSealedStoreOpensSettled: a store sealed with tables left in L0 (its
// indexes not reopened after the seal, as a binary before Settled left
// them) opens Settled at the next start: Pebble compacts those tables into
// the level below in the background, and every span still reads back.
func TestSealedStoreOpensSettled(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 256 << 10
	o.keepSealedMemTables = true
	spans := genWorkload(53, 12000)
	db := openTestDB(t, dir, o)
	appendAll(t, db, spans, 200)
	if sealed := sealedL0Tables(db); len(sealed) < 2 || len(sealedStoresWithL0(db)) == 0 {
		t.Fatalf("sealed stores' L0 tables %v, want several stores and tables left", sealed)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		inL0 := sealedStoresWithL0(db)
		if len(inL0) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sealed stores reopened still hold tables in L0: %v", inL0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkSearches(t, db, spans)
}
