package storedir

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/faultfs"
	"github.com/ztsd/ztsd/trace"
)

// dataBytes is the total size of every store's data file.
func dataBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	for _, st := range storeDirs(t, dir) {
		fi, err := os.Stat(filepath.Join(st, dataFile))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func spanCount(db *DB) int64 {
	var n int64
	for _, in := range db.Stores() {
		n += in.Spans
	}
	return n
}

// waitFilters waits until every store's trace filter is ready.
func waitFilters(t testing.TB, db *DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		stores, release := db.snapshot()
		missing := 0
		for _, s := range stores {
			if f := s.filter.Load(); f == nil || !f.ready.Load() {
				missing++
			}
		}
		release()
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stores have no ready trace filter after 30 s", missing)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTraceFilter: no false negatives; few false positives.
func TestTraceFilter(t *testing.T) {
	const n = 50_000
	f := newTraceFilter(n)
	f.ready.Store(true)
	var id trace.TraceID
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(id[8:], uint64(i)) // low-entropy ids, as Zorka's
		f.add(id)
	}
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(id[8:], uint64(i))
		if !f.mayContain(id) {
			t.Fatalf("trace %d added but ruled out", i)
		}
	}
	fp := 0
	for i := n; i < 2*n; i++ {
		binary.BigEndian.PutUint64(id[8:], uint64(i))
		if f.mayContain(id) {
			fp++
		}
	}
	if rate := float64(fp) / n; rate > 0.02 {
		t.Fatalf("false positive rate %.3f, want < 0.02", rate)
	} else {
		t.Logf("false positive rate %.4f at %d bits per trace", rate, filterBitsPerTrace)
	}
}

// TestIdenticalSpansStoredOnce: appending the same spans again (a retried
// request, a re-import) stores nothing: the data files, the span counts
// and the search results stay as they were, and the call still succeeds.
func TestIdenticalSpansStoredOnce(t *testing.T) {
	dir := t.TempDir()
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	ctx := context.Background()
	spans := genWorkload(41, 300)
	appendAll(t, db, spans[:150], 50)
	if err := db.Rotate(); err != nil { // the first half in a sealed store, checked through its trace filter
		t.Fatal(err)
	}
	waitFilters(t, db)
	appendAll(t, db, spans[150:], 50)
	size, count := dataBytes(t, dir), spanCount(db)
	q := Query{Spans: true, Limit: 1000}
	want := searchAll(t, db, q)
	for round := 0; round < 2; round++ {
		appendAll(t, db, genWorkload(41, 300), 50) // fresh, equal values
		// And inside one request: the same span twice.
		if err := db.Append(ctx, []*trace.Span{genWorkload(41, 1)[0], genWorkload(41, 1)[0]}); err != nil {
			t.Fatal(err)
		}
	}
	if got := dataBytes(t, dir); got != size {
		t.Fatalf("data files grew from %d to %d bytes on identical appends", size, got)
	}
	if got := spanCount(db); got != count {
		t.Fatalf("span count went from %d to %d on identical appends", count, got)
	}
	if got := searchAll(t, db, q); len(got) != len(want) {
		t.Fatalf("search lists %d spans after identical appends, %d before", len(got), len(want))
	}
}

// TestNewerVersionSupersedes: a span stored three times with different
// content, in the same store and across stores, is listed once by search
// (the newest version, in span and trace mode, over pages), and GET
// returns the newest; both still hold after a restart and after the
// indexes are rebuilt from the data files.
func TestNewerVersionSupersedes(t *testing.T) {
	dir := t.TempDir()
	db := openTestDB(t, dir, testOptions())
	ctx := context.Background()
	base := genWorkload(42, 200)
	appendAll(t, db, base, 20)
	target := base[17]
	version := func(v int64) *trace.Span {
		sp := genWorkload(42, 200)[17]
		sp.DurationNS = target.DurationNS + v // a different version of the same slot
		sp.Attrs = append(sp.Attrs, trace.Attr{Key: "version", Value: trace.Int(v)})
		return sp
	}
	if err := db.Append(ctx, []*trace.Span{version(1)}); err != nil { // same store
		t.Fatal(err)
	}
	if err := db.Rotate(); err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, []*trace.Span{version(2)}); err != nil { // a newer store
		t.Fatal(err)
	}
	if len(db.Stores()) < 2 {
		t.Fatalf("want two stores, have %d", len(db.Stores()))
	}
	newest := version(2)
	check := func(t *testing.T, db *DB) {
		t.Helper()
		waitFilters(t, db) // after a restart, filled by scanning the indexes
		for _, mode := range []bool{true, false} {
			for _, limit := range []int{1000, 7} {
				got := searchAll(t, db, Query{Spans: mode, Limit: limit})
				n, traceRows := 0, 0
				for _, sp := range got {
					if sp.TraceID == target.TraceID {
						traceRows++
					}
					if sp.TraceID == target.TraceID && sp.SpanID == target.SpanID {
						n++
						if sp.DurationNS != newest.DurationNS {
							t.Errorf("spans=%v limit %d: search lists version with duration %d, want the newest (%d)", mode, limit, sp.DurationNS, newest.DurationNS)
						}
					}
				}
				if mode && n != 1 {
					t.Errorf("span mode limit %d: search lists the span %d times, want once", limit, n)
				}
				if !mode && traceRows != 1 {
					t.Errorf("trace mode limit %d: search lists the trace %d times, want once", limit, traceRows)
				}
				if mode && len(got) != len(base) {
					t.Errorf("span mode limit %d: %d results, want %d", limit, len(got), len(base))
				}
			}
		}
		sp, err := db.GetSpan(ctx, target.TraceID, target.SpanID)
		if err != nil {
			t.Fatal(err)
		}
		if sp.DurationNS != newest.DurationNS {
			t.Errorf("GET returns duration %d, want the newest version's %d", sp.DurationNS, newest.DurationNS)
		}
		// The newest version again is identical: nothing new.
		before := spanCount(db)
		if err := db.Append(ctx, []*trace.Span{version(2)}); err != nil {
			t.Fatal(err)
		}
		if spanCount(db) != before {
			t.Errorf("re-appending the newest version stored it again")
		}
	}
	t.Run("live", func(t *testing.T) { check(t, db) })
	db.Close()
	t.Run("restart", func(t *testing.T) {
		db := openTestDB(t, dir, testOptions())
		defer db.Close()
		check(t, db)
	})
	t.Run("indexes rebuilt", func(t *testing.T) {
		for _, st := range storeDirs(t, dir) {
			for _, d := range []string{metaDir, textDir} {
				if err := os.RemoveAll(filepath.Join(st, d)); err != nil {
					t.Fatal(err)
				}
			}
		}
		db := openTestDB(t, dir, testOptions())
		defer db.Close()
		check(t, db)
	})
}

// BenchmarkCheckVersions measures Append's duplicate check alone on
// 500-span requests of new spans (the ingest case) against a DB of 4
// stores holding 20,000 spans: the cost every write pays for idempotency
// (cpu-ns/span: process CPU, so other load on the machine does not count).
func BenchmarkCheckVersions(b *testing.B) {
	reqs, spans, _ := benchRequests(7, 20_000, 500)
	o := benchOptions(SyncNone)
	db := openBenchDB(b, o)
	ctx := context.Background()
	for i, r := range reqs {
		if err := db.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
		if (i+1)%(len(reqs)/4) == 0 {
			if err := db.Rotate(); err != nil {
				b.Fatal(err)
			}
		}
	}
	waitFilters(b, db)
	b.Logf("%d stores, %d spans", len(db.Stores()), len(spans))
	fresh := make([][]*trace.Span, len(reqs)) // new trace ids; checking stores nothing, so they stay new
	for i := range reqs {
		fresh[i] = benchRequest(reqs, len(reqs)+i)
	}
	n := 0
	cpu0 := processCPU()
	for i := 0; b.Loop(); i++ {
		req := fresh[i%len(fresh)]
		vc, err := db.checkVersions(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		db.pending.remove(vc.keys)
		n += len(req)
	}
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(n), "cpu-ns/span")
}

// TestRotationRetriedAfterFailedCreate: a new store that could not be
// created (ENOSPC creating its data file) leaves no directory behind, so
// the next rotation creates it and writes succeed again (the fault soak
// found every later write failing with "mkdir ...: file exists").
func TestRotationRetriedAfterFailedCreate(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.New(nil)
	o := testOptions()
	o.FS = fsys
	db := openTestDB(t, dir, o)
	defer db.Close()
	appendAll(t, db, genWorkload(43, 50), 50)
	remove := fsys.Inject(faultfs.Rule{Op: faultfs.OpOpen, PathContains: StoreName(1) + "/" + dataFile, Times: 1, Err: syscall.ENOSPC})
	if err := db.Rotate(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("rotation on a full disk: %v, want ENOSPC", err)
	}
	remove()
	if _, err := os.Stat(filepath.Join(dir, StoreName(1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store that failed to be created is still there: %v", err)
	}
	if err := db.Rotate(); err != nil {
		t.Fatalf("rotation once space is back: %v", err)
	}
	if err := db.Append(context.Background(), genWorkload(44, 10)); err != nil {
		t.Fatalf("write after the rotation: %v", err)
	}
	if n := len(db.Stores()); n != 2 {
		t.Fatalf("%d stores, want 2", n)
	}
}

// TestRequestLastCopyWins: a request holding two versions of a slot, the
// last identical to the stored one ([B, A] with A stored), leaves A
// current: the request's last copy wins, as it would written alone. Before,
// A was dropped as identical and B, the earlier copy, became current.
func TestRequestLastCopyWins(t *testing.T) {
	db := openTestDB(t, t.TempDir(), testOptions())
	defer db.Close()
	ctx := context.Background()
	a := genWorkload(43, 1)[0]
	if err := db.Append(ctx, []*trace.Span{a}); err != nil {
		t.Fatal(err)
	}
	b := genWorkload(43, 1)[0]
	b.DurationNS++
	b.Attrs = append(b.Attrs, trace.Attr{Key: "version", Value: trace.Int(2)})
	if err := db.Append(ctx, []*trace.Span{b, genWorkload(43, 1)[0]}); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetSpan(ctx, a.TraceID, a.SpanID)
	if err != nil {
		t.Fatal(err)
	}
	if d := trace.Diff(a, got); d != "" {
		t.Fatalf("GET after [B, A]: want A (the request's last copy): %s", d)
	}
	rows := searchAll(t, db, Query{Spans: true, Limit: 100})
	if len(rows) != 1 || rows[0].DurationNS != a.DurationNS {
		t.Fatalf("search after [B, A]: %d rows, want A once: %+v", len(rows), rows)
	}
}
