package storedir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// scopeTestDB is a store of 12 chunks of 500 spans of the bench workload,
// each stored as several zstd frames (chunks of at most 1 MiB), reopened
// with a chunk cache of cacheViews views; and every trace's Trace JSON as
// an unscoped GetTrace reads it (whose spans never share buffers with a
// later read).
func scopeTestDB(t *testing.T, cacheViews int) (*DB, []trace.TraceID, map[trace.TraceID][]byte) {
	t.Helper()
	dir := t.TempDir()
	reqs, spans, _ := benchRequests(11, 6000, 500)
	o := testOptions()
	o.ChunkTargetSize = 1 << 20
	o.MaxStoreSize = 64 << 20
	db := openTestDB(t, dir, o)
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, frames := chunkFrames(t, filepath.Join(dir, StoreName(0), dataFile))
	if len(frames) < 12 || frames[0] < 3 {
		t.Fatalf("chunks of %v frames, want 12 or more chunks of several frames", frames)
	}
	o.ChunkCacheViews = cacheViews
	db = openTestDB(t, dir, o)
	t.Cleanup(func() { db.Close() })
	want := map[trace.TraceID][]byte{}
	var ids []trace.TraceID
	for _, sp := range spans {
		if _, ok := want[sp.TraceID]; ok {
			continue
		}
		roots, err := db.GetTrace(context.Background(), sp.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		want[sp.TraceID] = traceJSON(t, roots)
		ids = append(ids, sp.TraceID)
	}
	return db, ids, want
}

func traceJSON(t testing.TB, roots []*trace.Span) []byte {
	var b []byte
	for _, sp := range roots {
		var err error
		if b, err = trace.AppendSpanJSON(b, sp); err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
	}
	return b
}

// TestReadTraceBuffersNotShared: concurrent ReadTraces of random traces,
// through a chunk cache of one view (so that views leave it, and their
// payload buffers go back to the pool, all the time), each see exactly
// their trace's spans inside fn: no buffer is reused while a read's spans
// point into it, so no answer holds another chunk's bytes.
func TestReadTraceBuffersNotShared(t *testing.T) {
	db, ids, want := scopeTestDB(t, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 3))
			for range 150 {
				id := ids[r.IntN(len(ids))]
				var got []byte
				err := db.ReadTrace(context.Background(), id, func(roots []*trace.Span, warns []Warning) error {
					if len(warns) != 0 {
						return fmt.Errorf("warnings %v", warns)
					}
					runtime.Gosched() // let the other readers decode into the pool's buffers meanwhile
					got = traceJSON(t, roots)
					return nil
				})
				if err == nil && !bytes.Equal(got, want[id]) {
					err = fmt.Errorf("trace %s: answer differs from GetTrace's:\n%s\nwant\n%s", id, got, want[id])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestUnscopedSpansOutliveReuse: the spans of an unscoped read (GetTrace)
// stay whole however many scoped reads reuse buffers afterwards, also when
// the view they were read from was made by a scoped read (the unscoped read
// pins it: its buffers are then never given back).
func TestUnscopedSpansOutliveReuse(t *testing.T) {
	db, ids, want := scopeTestDB(t, 4)
	ctx := context.Background()
	kept := map[trace.TraceID][]*trace.Span{}
	for i, id := range ids[:60] {
		if i%2 == 0 {
			// A scoped read first: its view is made unpinned and cached,
			// and the GetTrace below finds it in the cache.
			if err := db.ReadTrace(ctx, id, func([]*trace.Span, []Warning) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		roots, err := db.GetTrace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		kept[id] = roots
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 600 {
		id := ids[r.IntN(len(ids))]
		if err := db.ReadTrace(ctx, id, func(roots []*trace.Span, _ []Warning) error {
			if got := traceJSON(t, roots); !bytes.Equal(got, want[id]) {
				return fmt.Errorf("trace %s differs", id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, roots := range kept {
		if got := traceJSON(t, roots); !bytes.Equal(got, want[id]) {
			t.Fatalf("trace %s kept from GetTrace changed after later reads:\n%s\nwant\n%s", id, got, want[id])
		}
	}
}

// TestReadTraceReleasesViews: once a scoped read is over and the chunk
// cache has let go of the views it read, their frames are released (a
// Fill fails with chunk.ErrReleased), while views still cached, or pinned
// by an unscoped read, keep theirs; ReadTrace allocates much less than
// GetTrace when every chunk leaves the cache (its payload buffers come
// from the pool); and a read that fails calls no fn and holds no view.
func TestReadTraceReleasesViews(t *testing.T) {
	db, ids, _ := scopeTestDB(t, 1)
	ctx := context.Background()
	var views []*trace.ChunkView
	viewOf := func(id trace.TraceID) *trace.ChunkView {
		refs, err := db.stores[0].meta.TraceSpans(id)
		if err != nil || len(refs) == 0 {
			t.Fatalf("trace %s: %v, %d refs", id, err, len(refs))
		}
		cv, ok := db.cache.get(db.stores[0].key(), refs[0].Loc.ChunkOffset)
		if !ok {
			return nil
		}
		cv.drop()
		return cv.view
	}
	released := func(v *trace.ChunkView) bool {
		_, err := v.Span(0)
		return errors.Is(err, chunk.ErrReleased)
	}
	// Traces in different chunks: each read evicts the view before.
	var apart []trace.TraceID
	last := int64(-1)
	for _, id := range ids {
		refs, _ := db.stores[0].meta.TraceSpans(id)
		if off := refs[0].Loc.ChunkOffset; off != last && len(refs) == 1 {
			apart, last = append(apart, id), off
		}
	}
	for _, id := range apart[:3] {
		if err := db.ReadTrace(ctx, id, func(roots []*trace.Span, _ []Warning) error {
			if released(viewOf(id)) {
				t.Fatalf("trace %s: view released during the read", id)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		views = append(views, viewOf(id))
	}
	if released(views[2]) || !released(views[0]) || !released(views[1]) {
		t.Fatalf("released: %v %v %v; want the two views evicted released, the cached one not",
			released(views[0]), released(views[1]), released(views[2]))
	}
	// An unscoped read pins the cached view: evicted, it keeps its buffers.
	if _, err := db.GetTrace(ctx, apart[2]); err != nil {
		t.Fatal(err)
	}
	if err := db.ReadTrace(ctx, apart[3], func([]*trace.Span, []Warning) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if released(views[2]) {
		t.Fatal("a view pinned by GetTrace was released")
	}
	called := false
	err := db.ReadTrace(ctx, trace.TraceID{1, 2, 3}, func([]*trace.Span, []Warning) error { called = true; return nil })
	if !errors.Is(err, ErrNotFound) || called {
		t.Fatalf("unknown trace: %v, fn called %v; want ErrNotFound without a call", err, called)
	}

	allocated := func(read func(trace.TraceID)) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 20 {
			for _, id := range apart {
				read(id)
			}
		}
		runtime.ReadMemStats(&m1)
		return (m1.TotalAlloc - m0.TotalAlloc) / 20
	}
	get := func(id trace.TraceID) {
		if _, err := db.GetTrace(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	scoped := func(id trace.TraceID) {
		if err := db.ReadTrace(ctx, id, func([]*trace.Span, []Warning) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	allocated(scoped) // fills the pool
	g, s := allocated(get), allocated(scoped)
	t.Logf("%d reads in different chunks: GetTrace allocated %d B a read, ReadTrace %d", len(apart), g/uint64(len(apart)), s/uint64(len(apart)))
	// Without -race it is a sixth; the race detector's sync.Pool drops a
	// quarter of what is put back, and it allocates for itself.
	if s*4 > g*3 {
		t.Fatalf("ReadTrace allocated %d B a read, GetTrace %d: want less than three quarters", s, g)
	}
}
