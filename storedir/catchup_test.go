package storedir

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// lagIndexes writes spans into one open store of a new data directory,
// closes it and deletes both indexes (what a kill -9 leaves when Pebble
// had flushed nothing: the indexes have no WAL). It returns the directory.
func lagIndexes(t *testing.T, o Options, spans []*trace.Span) string {
	t.Helper()
	dir := t.TempDir()
	db := openTestDB(t, dir, o)
	appendAll(t, db, spans, 100)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sd := filepath.Join(dir, StoreName(0))
	for _, d := range []string{metaDir, textDir} {
		if err := os.RemoveAll(filepath.Join(sd, d)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func hasCatchUpWarning(ws []Warning) bool {
	for _, w := range ws {
		if w.Store == StoreName(0) && strings.Contains(w.Error, "catching up") {
			return true
		}
	}
	return false
}

// TestRestartServesWhileCatchingUp: a store whose indexes lag its data
// file opens at once and serves what its indexes hold; reads name it in
// their warnings while the rest is re-indexed in the background; writes
// meanwhile go to a new store and are found at once (read-your-writes);
// once caught up, every span is found exactly once, the old store is
// sealed, and the work is on disk (the next open re-indexes nothing).
func TestRestartServesWhileCatchingUp(t *testing.T) {
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	old := genWorkload(91, 3000)
	dir := lagIndexes(t, o, old)

	// Hold the background re-indexing after its first chunk until the
	// test has looked at the store while it catches up.
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	o.syncCatchUp = -1
	o.catchUpBatch = 100
	o.replayed = func(int64) {
		select {
		case held <- struct{}{}:
			<-release
		default:
		}
	}
	db := openTestDB(t, dir, o)
	defer db.Close()
	<-held
	cu := db.CatchingUp()
	if len(cu) != 1 || cu[0].ID != StoreName(0) || cu[0].IndexLag <= 0 || !strings.Contains(cu[0].Reason, "catching up") {
		t.Fatalf("CatchingUp = %+v, want store 000000 with its lag", cu)
	}
	res, err := db.Search(context.Background(), Query{Spans: true, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCatchUpWarning(res.Warnings) {
		t.Fatalf("search while catching up: warnings %+v, want store 000000 catching up", res.Warnings)
	}
	if n := len(searchAll(t, db, Query{Spans: true, Limit: 1000})); n >= len(old) {
		t.Fatalf("search while catching up found %d of %d spans: the index was not held after its first chunk", n, len(old))
	}
	// A span not indexed yet: no error, no span, a warning.
	last := old[len(old)-1]
	if spans, ws, err := db.GetTraceWithWarnings(context.Background(), last.TraceID); err != nil || !hasCatchUpWarning(ws) {
		t.Fatalf("get of a trace past the watermark: %d spans, warnings %+v, err %v", len(spans), ws, err)
	}

	// Writes during the catch-up: found at once, in a new store.
	fresh := genWorkload(92, 500)
	appendAll(t, db, fresh, 50)
	checkGets(t, db, fresh, 7)
	for _, sp := range fresh[:20] {
		res, err := db.Search(context.Background(), Query{Spans: true, Limit: 100, SinceNS: sp.StartNS, UntilNS: sp.StartNS + 1})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range res.Spans {
			found = found || g.TraceID == sp.TraceID && g.SpanID == sp.SpanID
		}
		if !found {
			t.Fatalf("span %s/%s written during the catch-up not found by search", sp.TraceID, sp.SpanID)
		}
	}
	// A retry of a span the lagging part holds is stored again: it must
	// still be listed once.
	appendAll(t, db, old[len(old)-5:], 5)

	close(release)
	if err := db.waitCatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkGets(t, db, old, 13)
	checkGets(t, db, fresh, 13)
	all := searchAll(t, db, Query{Spans: true, Limit: 500})
	type slot struct {
		tr trace.TraceID
		sp trace.SpanID
	}
	seen := map[slot]int{}
	for _, sp := range all {
		seen[slot{sp.TraceID, sp.SpanID}]++
	}
	for _, sp := range append(append([]*trace.Span{}, old...), fresh...) {
		if n := seen[slot{sp.TraceID, sp.SpanID}]; n != 1 {
			t.Fatalf("span %s/%s listed %d times after the catch-up, want once", sp.TraceID, sp.SpanID, n)
		}
	}
	if res, err := db.Search(context.Background(), Query{Spans: true, Limit: 10}); err != nil || len(res.Warnings) > 0 {
		t.Fatalf("search after the catch-up: warnings %+v, err %v", res.Warnings, err)
	}
	st := db.Stores()
	if len(st) != 2 || st[0].State != stateSealed || st[1].State != stateOpen || st[0].IndexLag != 0 {
		t.Fatalf("stores after the catch-up: %+v, want 000000 sealed and fully indexed, 000001 open", st)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The work persisted: the next open has nothing to re-index.
	o.replayed = func(int64) { t.Error("the open after a finished catch-up re-indexed a chunk") }
	db = openTestDB(t, dir, o)
	if cu := db.CatchingUp(); len(cu) != 0 {
		t.Fatalf("CatchingUp after a clean restart = %+v", cu)
	}
	checkGets(t, db, old, 101)
}

// TestCatchUpWithoutWritesKeepsTheStoreOpen: when nothing is written
// during the catch-up, the store caught up takes the writes again (no new
// store), and a torn tail is cut in the background as on a synchronous
// open.
func TestCatchUpWithoutWritesKeepsTheStoreOpen(t *testing.T) {
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	old := genWorkload(93, 1500)
	dir := lagIndexes(t, o, old)
	data := filepath.Join(dir, StoreName(0), dataFile)
	f, err := os.OpenFile(data, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A torn chunk: a valid magic and a size past the end.
	if _, err := f.Write([]byte("ZCH0\x00\x00\x10\x00\x00\x00\x20\x00\x00\x00\x00\x00garbage")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	o.syncCatchUp = -1
	db := openTestDB(t, dir, o)
	defer db.Close()
	if err := db.waitCatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(data + ".broken"); err != nil || !strings.HasSuffix(string(b), "garbage") {
		t.Fatalf("torn tail not kept in .broken: %q %v", b, err)
	}
	checkGets(t, db, old, 11)
	fresh := genWorkload(94, 100)
	appendAll(t, db, fresh, 10)
	checkGets(t, db, fresh, 3)
	if st := db.Stores(); len(st) != 1 || st[0].State != stateOpen {
		t.Fatalf("stores: %+v, want only 000000, open", st)
	}
}

// TestCloseDuringCatchUp: closing the DB stops the background re-indexing
// promptly, and the next open carries on from its last checkpoint.
func TestCloseDuringCatchUp(t *testing.T) {
	o := testOptions()
	o.MaxStoreSize = 64 << 20
	o.replayCheckpoint = 16 << 10
	old := genWorkload(95, 3000)
	dir := lagIndexes(t, o, old)
	o.syncCatchUp = -1
	o.catchUpBatch = 100
	stop := make(chan struct{})
	reached := make(chan struct{})
	var once bool
	o.replayed = func(next int64) {
		if next > 64<<10 && !once {
			once = true
			close(reached)
			<-stop
		}
	}
	db := openTestDB(t, dir, o)
	<-reached
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not stop the background re-indexing")
	}
	logs := &replayLog{}
	o.Logger = slog.New(logs)
	o.replayed = nil
	db = openTestDB(t, dir, o)
	defer db.Close()
	if err := db.waitCatchUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	if logs.from < 48<<10 {
		t.Fatalf("the catch-up after a close started at %d, before the checkpoints the first one made", logs.from)
	}
	checkGets(t, db, old, 7)
}

// BenchmarkCatchUp re-indexes, on open, a store of about 8 MiB of data
// file written by requests of 100 spans (SetBytes: the data file) whose
// indexes were lost; it reports the CPU time per MB (every goroutine).
func BenchmarkCatchUp(b *testing.B) {
	dir := b.TempDir()
	o := DefaultOptions()
	o.Sync = SyncNone
	o.MaxStoreSize = 1 << 30
	db := openTestDB(b, dir, o)
	data := filepath.Join(dir, StoreName(0), dataFile)
	for seed := uint64(1); ; seed++ {
		appendAll(b, db, genWorkload(seed, 10_000), 100)
		if fi, err := os.Stat(data); err == nil && fi.Size() >= 8<<20 {
			break
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	sd := filepath.Join(dir, StoreName(0))
	fi, err := os.Stat(filepath.Join(sd, dataFile))
	if err != nil {
		b.Fatal(err)
	}
	o.syncCatchUp = 1 << 40 // measured in Open
	// batch=1 indexes chunk by chunk (one commit per chunk), as catchUp
	// did before it batched.
	for _, batch := range []int{1, catchUpBatchSpans} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			o.catchUpBatch = batch
			b.SetBytes(fi.Size())
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for _, d := range []string{metaDir, textDir} {
					os.RemoveAll(filepath.Join(sd, d))
				}
				c0 := processCPU()
				b.StartTimer()
				db := openTestDB(b, dir, o)
				b.StopTimer()
				cpu += processCPU() - c0
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(cpu.Seconds()*1e3/float64(b.N)/(float64(fi.Size())/1e6), "cpu-ms/MB")
		})
	}
}
