package storedir_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/faultfs"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// faultOptions are small chunks and stores, group commit, and fsys.
func faultOptions(fsys *faultfs.FS) storedir.Options {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncBatch
	o.MaxStoreSize = 256 << 10
	o.ChunkTargetSize = 8 << 10
	if fsys != nil {
		o.FS = fsys
	}
	return o
}

func openDB(t testing.TB, dir string, o storedir.Options) *storedir.DB {
	t.Helper()
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return db
}

type key struct {
	t trace.TraceID
	s trace.SpanID
}

// ledger remembers what was sent and what was acknowledged.
type ledger struct {
	sent  map[key]*trace.Span
	acked []*trace.Span
}

func newLedger() *ledger { return &ledger{sent: map[key]*trace.Span{}} }

// append sends spans and records them; it returns the request's error.
func (l *ledger) append(db *storedir.DB, spans []*trace.Span) error {
	for _, sp := range spans {
		l.sent[key{sp.TraceID, sp.SpanID}] = sp
	}
	err := db.Append(context.Background(), spans)
	if err == nil {
		l.acked = append(l.acked, spans...)
	}
	return err
}

// check reopens dir without faults and checks that every acknowledged span
// is readable exactly as sent, that every stored span was sent, and that
// verify finds nothing wrong.
func (l *ledger) check(t *testing.T, dir string) {
	t.Helper()
	db := openDB(t, dir, faultOptions(nil))
	for _, want := range l.acked {
		got, err := db.GetSpan(context.Background(), want.TraceID, want.SpanID)
		if err != nil {
			t.Fatalf("acknowledged span %s/%s: %v", want.TraceID, want.SpanID, err)
		}
		w, g := *want, *got
		w.Children, g.Children = nil, nil
		if !g.Equal(&w) {
			t.Fatalf("acknowledged span %s/%s differs: %s", want.TraceID, want.SpanID, trace.Diff(&w, &g))
		}
	}
	stored := allStored(t, db)
	for k := range stored {
		if l.sent[k] == nil {
			t.Fatalf("stored span %s/%s was never sent", k.t, k.s)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := recovery.VerifyDataDir(context.Background(), dir, recovery.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		var b strings.Builder
		rep.WriteText(&b)
		t.Fatalf("verify:\n%s", b.String())
	}
	t.Logf("%d spans acknowledged, %d sent, %d stored", len(l.acked), len(l.sent), len(stored))
}

// allStored lists every stored span through search.
func allStored(t *testing.T, db *storedir.DB) map[key]bool {
	t.Helper()
	out := map[key]bool{}
	q := storedir.Query{Spans: true, Limit: storedir.MaxSearchLimit}
	for {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range res.Spans {
			out[key{sp.TraceID, sp.SpanID}] = true
		}
		if res.Cursor == "" {
			return out
		}
		q.Cursor = res.Cursor
	}
}

// TestWriteFaultsSurfaced injects EIO, ENOSPC and torn writes into the data
// file's writes and an EIO into its fsync: the request fails with the
// error, later requests succeed, every acknowledged span survives a
// restart, and the store verifies clean.
func TestWriteFaultsSurfaced(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []faultfs.Rule
		want  error  // errors.Is the request's error
		msg   string // in the request's error
	}{
		{"EIO on write", []faultfs.Rule{{Op: faultfs.OpWrite, PathContains: "traces.zts", Times: 1, Err: syscall.EIO}}, syscall.EIO, "append"},
		{"ENOSPC on write", []faultfs.Rule{{Op: faultfs.OpWrite, PathContains: "traces.zts", Times: 1, Err: syscall.ENOSPC}}, syscall.ENOSPC, "append"},
		{"short write", []faultfs.Rule{{Op: faultfs.OpWrite, PathContains: "traces.zts", Times: 1, ShortWrite: true}}, syscall.EIO, "append"},
		{"short write and failed truncate", []faultfs.Rule{
			{Op: faultfs.OpWrite, PathContains: "traces.zts", Times: 1, ShortWrite: true},
			{Op: faultfs.OpTruncate, PathContains: "traces.zts", Times: 1}}, syscall.EIO, "truncate"},
		{"EIO on fsync", []faultfs.Rule{{Op: faultfs.OpSync, PathContains: "traces.zts", Times: 1, Err: syscall.EIO}}, syscall.EIO, "fsync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fsys := faultfs.New(nil)
			db := openDB(t, dir, faultOptions(fsys))
			l := newLedger()
			spans := workload.Spans(uint64(len(tc.name)), 1200)
			for i := 0; i < 400; i += 20 {
				if err := l.append(db, spans[i:i+20]); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.rules {
				fsys.Inject(r)
			}
			err := l.append(db, spans[400:420])
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("request during the fault: want %v (%q), got %v", tc.want, tc.msg, err)
			}
			if fsys.Injected() == 0 {
				t.Fatal("no fault was injected")
			}
			for i := 420; i < len(spans); i += 20 {
				if err := l.append(db, spans[i:i+20]); err != nil {
					t.Fatalf("request after the fault: %v", err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			l.check(t, dir)
		})
	}
}

// TestReadFaultsSurfaced: an EIO reading the data file fails the read
// (never "not found", never wrong data); reads work again once the fault
// is gone.
func TestReadFaultsSurfaced(t *testing.T) {
	dir := t.TempDir()
	spans := workload.Spans(3, 500)
	db := openDB(t, dir, faultOptions(nil))
	l := newLedger()
	if err := l.append(db, spans); err != nil {
		t.Fatal(err)
	}
	db.Close()
	fsys := faultfs.New(nil)
	db = openDB(t, dir, faultOptions(fsys))
	defer db.Close()
	remove := fsys.Inject(faultfs.Rule{Op: faultfs.OpRead, PathContains: "traces.zts", Err: syscall.EIO})
	_, err := db.GetSpan(context.Background(), spans[7].TraceID, spans[7].SpanID)
	if !errors.Is(err, syscall.EIO) || errors.Is(err, storedir.ErrNotFound) {
		t.Fatalf("get during a read fault: %v", err)
	}
	if _, err := db.Search(context.Background(), storedir.Query{Spans: true, Limit: 10}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("search during a read fault: %v", err)
	}
	remove()
	if _, err := db.GetSpan(context.Background(), spans[7].TraceID, spans[7].SpanID); err != nil {
		t.Fatalf("get after the fault: %v", err)
	}
}

// TestDiskFullInjected fills a simulated disk: writes fail with ENOSPC
// (and keep failing, without hanging), reads keep working, nothing stored
// is damaged, and writes succeed again once space is freed.
func TestDiskFullInjected(t *testing.T) {
	dir := t.TempDir()
	fsys := faultfs.New(nil)
	o := faultOptions(fsys)
	o.Chunk.Compression = chunk.LZ4 // the space limit is sized for LZ4 chunks
	db := openDB(t, dir, o)
	l := newLedger()
	spans := workload.Spans(4, 6000)
	fsys.LimitSpace(300 << 10) // more than one store: rotation under pressure too
	next, full := 0, 0
	for ; next < 4000; next += 20 {
		err := l.append(db, spans[next:next+20])
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("request %d on a full disk: %v", next/20, err)
		}
		full++
		if full == 1 {
			// Reads keep working on a full disk.
			for _, sp := range l.acked[:min(50, len(l.acked))] {
				if _, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID); err != nil {
					t.Fatalf("read on a full disk: %v", err)
				}
			}
		}
		if full == 5 {
			break
		}
	}
	if full < 5 || len(l.acked) == 0 {
		t.Fatalf("%d requests failed, %d spans acknowledged", full, len(l.acked))
	}
	t.Logf("disk full after %d acknowledged spans", len(l.acked))
	fsys.AddSpace(64 << 20)
	for next += 20; next < len(spans); next += 20 {
		if err := l.append(db, spans[next:next+20]); err != nil {
			t.Fatalf("request after space was freed: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l.check(t, dir)
}
