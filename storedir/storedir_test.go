package storedir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

func testOptions() Options {
	o := DefaultOptions()
	o.Sync = SyncNone
	o.MaxStoreSize = 256 << 10
	o.ChunkTargetSize = 32 << 10
	return o
}

func openTestDB(t testing.TB, dir string, o Options) *DB {
	t.Helper()
	db, err := Open(context.Background(), dir, o)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

func appendAll(t testing.TB, db *DB, spans []*trace.Span, batch int) {
	t.Helper()
	for i := 0; i < len(spans); i += batch {
		if err := db.Append(context.Background(), spans[i:min(i+batch, len(spans))]); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

func toQuery(f workload.Filter, limit int) Query {
	return Query{SinceNS: f.SinceNS, UntilNS: f.UntilNS, MinDurationNS: f.MinDurationNS, ErrorsOnly: f.ErrorsOnly,
		Attrs: f.Attrs, Text: f.Text, Spans: true, Limit: limit}
}

func genWorkload(seed uint64, n int) []*trace.Span { return workload.Spans(seed, n) }

// searchAll follows cursors to the end.
func searchAll(t testing.TB, db *DB, q Query) []*trace.Span {
	t.Helper()
	var out []*trace.Span
	for page := 0; ; page++ {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatalf("search %+v: %v", q, err)
		}
		out = append(out, res.Spans...)
		if res.Cursor == "" {
			return out
		}
		if page > 100000 {
			t.Fatal("cursor loop")
		}
		q.Cursor = res.Cursor
	}
}

func searchQueries(spans []*trace.Span) []Query {
	var qs []Query
	for i, f := range workload.Filters(spans) {
		qs = append(qs, toQuery(f, []int{1000, 500, 300, 250, 700, 100, 100, 50, 10, 10}[i%10]))
	}
	return qs
}

func checkSearches(t *testing.T, db *DB, spans []*trace.Span) {
	t.Helper()
	for i, q := range searchQueries(spans) {
		want := workload.Expected(spans, workload.Filter{SinceNS: q.SinceNS, UntilNS: q.UntilNS,
			MinDurationNS: q.MinDurationNS, ErrorsOnly: q.ErrorsOnly, Attrs: q.Attrs, Text: q.Text})
		got := searchAll(t, db, q)
		if len(got) != len(want) {
			t.Fatalf("query %d %+v: got %d results, brute force %d", i, q, len(got), len(want))
		}
		for j := range want {
			if got[j].TraceID != want[j].TraceID || got[j].SpanID != want[j].SpanID {
				t.Fatalf("query %d result %d: got %s/%s want %s/%s", i, j, got[j].TraceID, got[j].SpanID, want[j].TraceID, want[j].SpanID)
			}
			if !got[j].Attrs.Equal(want[j].Attrs) || got[j].DurationNS != want[j].DurationNS {
				t.Fatalf("query %d result %d: summary differs from the stored span", i, j)
			}
		}
		// Trace mode: every matching trace exactly once (one big page).
		tq := q
		tq.Spans, tq.Limit = false, MaxSearchLimit
		res, err := db.Search(context.Background(), tq)
		if err != nil {
			t.Fatal(err)
		}
		wantTraces := map[trace.TraceID]bool{}
		for _, sp := range want {
			wantTraces[sp.TraceID] = true
		}
		gotTraces := map[trace.TraceID]bool{}
		for _, sp := range res.Spans {
			if gotTraces[sp.TraceID] {
				t.Fatalf("query %d trace mode: trace %s twice", i, sp.TraceID)
			}
			gotTraces[sp.TraceID] = true
		}
		if len(wantTraces) <= MaxSearchLimit && len(gotTraces) != len(wantTraces) {
			t.Fatalf("query %d trace mode: %d traces, brute force %d", i, len(gotTraces), len(wantTraces))
		}
		// Trace mode, paged: each trace exactly once over the walk of
		// pages, at the position of its newest matching span.
		tq.Limit = q.Limit
		if d := diffTracePages(tracePages(t, db, tq), expectedTracePages(spans, workload.Filter{SinceNS: q.SinceNS,
			UntilNS: q.UntilNS, MinDurationNS: q.MinDurationNS, ErrorsOnly: q.ErrorsOnly, Attrs: q.Attrs, Text: q.Text})); d != "" {
			t.Fatalf("query %d trace mode, pages of %d: %s", i, tq.Limit, d)
		}
	}
}

func checkGets(t *testing.T, db *DB, spans []*trace.Span, every int) {
	t.Helper()
	for i := 0; i < len(spans); i += every {
		want := spans[i]
		got, err := db.GetSpan(context.Background(), want.TraceID, want.SpanID)
		if err != nil {
			t.Fatalf("span %d %s/%s: %v", i, want.TraceID, want.SpanID, err)
		}
		w := *want
		g := *got
		g.Children, w.Children = nil, nil
		if !g.Equal(&w) {
			t.Fatalf("span %d differs: %s", i, trace.Diff(&w, &g))
		}
	}
}

func TestWriteReadSearch100k(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	dir := t.TempDir()
	spans := genWorkload(1, n)
	db := openTestDB(t, dir, testOptions())
	appendAll(t, db, spans, 200)
	if got := len(db.Stores()); got < 3 {
		t.Fatalf("want several rotated stores, got %d", got)
	}
	checkGets(t, db, spans, 1)
	checkSearches(t, db, spans)
	// Whole traces assemble: every span of a trace comes back, in one tree.
	tr, err := db.GetTrace(context.Background(), spans[0].TraceID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 1 || tr[0].SpanID != spans[0].SpanID {
		t.Fatalf("trace of %s: want one root %s, got %d roots", spans[0].TraceID, spans[0].SpanID, len(tr))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range storeDirs(t, dir) {
		p, err := os.ReadFile(filepath.Join(st, propsFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", filepath.Base(st), strings.ReplaceAll(string(p), "\n", " "))
	}
}

func storeDirs(t testing.TB, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no stores in %s: %v", dir, err)
	}
	return m
}

func TestIndexesRebuiltFromDataFile(t *testing.T) {
	dir := t.TempDir()
	spans := genWorkload(2, 20_000)
	db := openTestDB(t, dir, testOptions())
	appendAll(t, db, spans, 100)
	before := map[int][]*trace.Span{}
	for i, q := range searchQueries(spans) {
		before[i] = searchAll(t, db, q)
	}
	db.Close()
	for _, which := range [][]string{{metaDir}, {textDir}, {metaDir, textDir}} {
		t.Run(strings.Join(which, "+"), func(t *testing.T) {
			for _, st := range storeDirs(t, dir) {
				for _, d := range which {
					if err := os.RemoveAll(filepath.Join(st, d)); err != nil {
						t.Fatal(err)
					}
				}
			}
			db := openTestDB(t, dir, testOptions())
			defer db.Close()
			for i, q := range searchQueries(spans) {
				got := searchAll(t, db, q)
				if len(got) != len(before[i]) {
					t.Fatalf("query %d: %d results after rebuild, %d before", i, len(got), len(before[i]))
				}
				for j := range got {
					if !got[j].Equal(before[i][j]) {
						t.Fatalf("query %d result %d differs after rebuild: %s", i, j, trace.Diff(before[i][j], got[j]))
					}
				}
			}
			checkGets(t, db, spans, 7)
		})
	}
}

// TestTornTailEveryOffset truncates the data file at every byte offset
// inside its last chunk: opening keeps every earlier chunk and moves the
// torn bytes to traces.zts.broken.
func TestTornTailEveryOffset(t *testing.T) {
	src := t.TempDir()
	o := testOptions()
	o.ChunkTargetSize = 4 << 10
	db := openTestDB(t, src, o)
	spans := genWorkload(3, 51)
	appendAll(t, db, spans[:50], 10)
	s := db.current
	lastOff := s.data.Size()
	appendAll(t, db, spans[50:], 1) // the last chunk: one span
	end := s.data.Size()
	db.Close()
	data, err := os.ReadFile(filepath.Join(src, StoreName(0), dataFile))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != end {
		t.Fatalf("data file %d bytes, expected %d", len(data), end)
	}
	t.Logf("last chunk: %d bytes at offset %d", end-lastOff, lastOff)
	// Each cut is independent; opening is dominated by fsync waits, so
	// several run at once.
	cuts := make(chan int64)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cut := range cuts {
				if err := checkCut(t, src, o, spans, data, lastOff, cut); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		defer close(cuts)
		for cut := lastOff + 1; cut < end; cut++ {
			select {
			case cuts <- cut:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// checkCut opens a copy of src truncated at cut and checks the repair.
func checkCut(t *testing.T, src string, o Options, spans []*trace.Span, data []byte, lastOff, cut int64) error {
	dir, err := os.MkdirTemp(t.TempDir(), "cut")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	copyStore(t, filepath.Join(src, StoreName(0)), filepath.Join(dir, StoreName(0)))
	path := filepath.Join(dir, StoreName(0), dataFile)
	if err := os.Truncate(path, cut); err != nil {
		return err
	}
	// The indexes were written past the cut: rebuild from the data.
	os.RemoveAll(filepath.Join(dir, StoreName(0), metaDir))
	db, err := Open(context.Background(), dir, o)
	if err != nil {
		return fmt.Errorf("cut at %d: open: %v", cut, err)
	}
	for _, sp := range spans[:50] {
		if _, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID); err != nil {
			db.Close()
			return fmt.Errorf("cut at %d: earlier span lost: %v", cut, err)
		}
	}
	for _, sp := range spans[50:] {
		if _, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID); !errors.Is(err, ErrNotFound) {
			db.Close()
			return fmt.Errorf("cut at %d: span of the torn chunk: want not found, got %v", cut, err)
		}
	}
	if got := db.current.data.Size(); got != lastOff {
		db.Close()
		return fmt.Errorf("cut at %d: data file is %d bytes after open, want %d", cut, got, lastOff)
	}
	db.Close()
	broken, err := os.ReadFile(filepath.Join(dir, StoreName(0), brokenFile))
	if err != nil {
		return fmt.Errorf("cut at %d: %v", cut, err)
	}
	if !bytes.Equal(broken, data[lastOff:cut]) {
		return fmt.Errorf("cut at %d: .broken holds %d bytes, want the %d torn ones", cut, len(broken), cut-lastOff)
	}
	if (cut-lastOff)%16 != 1 {
		return nil
	}
	// Writes continue after the cut.
	db, err = Open(context.Background(), dir, o)
	if err != nil {
		return fmt.Errorf("cut at %d: reopen: %v", cut, err)
	}
	defer db.Close()
	if err := db.Append(context.Background(), spans[50:51]); err != nil {
		return fmt.Errorf("cut at %d: append after repair: %v", cut, err)
	}
	if _, err := db.GetSpan(context.Background(), spans[50].TraceID, spans[50].SpanID); err != nil {
		return fmt.Errorf("cut at %d: write after repair: %v", cut, err)
	}
	return nil
}

func copyStore(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenerRefused(t *testing.T) {
	dir := t.TempDir()
	db := openTestDB(t, dir, testOptions())
	defer db.Close()
	_, err := Open(context.Background(), dir, testOptions())
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: want ErrLocked, got %v", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("error should name the holder's pid: %v", err)
	}
}

func TestRotationSealsAndRetentionDeletes(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.MaxStoreSize = 64 << 10
	db := openTestDB(t, dir, o)
	spans := genWorkload(4, 5000)
	appendAll(t, db, spans, 100)
	infos := db.Stores()
	if len(infos) < 4 {
		t.Fatalf("want ≥ 4 stores, got %d", len(infos))
	}
	for i, in := range infos {
		want := "sealed"
		if i == len(infos)-1 {
			want = "open"
		}
		if in.State != want {
			t.Fatalf("store %s: state %s, want %s", in.ID, in.State, want)
		}
	}
	// Sealed stores carry a verified master checksum.
	f, err := chunk.Open(filepath.Join(dir, infos[0].ID, dataFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.VerifyMaster(); err != nil {
		t.Fatalf("master checksum of a sealed store: %v", err)
	}
	f.Close()
	if err := db.SetRetention(Retention{MaxStores: 2}); err != nil {
		t.Fatal(err)
	}
	after := db.Stores()
	if len(after) != 2 || after[1].ID != infos[len(infos)-1].ID {
		t.Fatalf("retention kept %v", after)
	}
	if _, err := os.Stat(filepath.Join(dir, infos[0].ID)); !os.IsNotExist(err) {
		t.Fatalf("deleted store directory still there: %v", err)
	}
	// A crash mid-deletion leaves .deleting-*: removed at the next open.
	db.Close()
	left := filepath.Join(dir, ".deleting-0000ff")
	os.MkdirAll(filepath.Join(left, "meta"), 0o750)
	db = openTestDB(t, dir, o)
	defer db.Close()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatal("leftover .deleting directory not removed at open")
	}
}
