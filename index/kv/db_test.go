package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

var (
	errTestClosed  = errors.New("test index closed")
	errTestNoIndex = errors.New("no test index")
	errTestCorrupt = errors.New("corrupt test index")
)

func openTestDB(t *testing.T, dir string, readOnly bool) (*DB, error) {
	t.Helper()
	return OpenDB("test index "+dir, dir, OpenOptions{Merger: testMerger(), ReadOnly: readOnly},
		Errors{Closed: errTestClosed, NoIndex: errTestNoIndex, Corrupt: errTestCorrupt})
}

// TestDBLifecycle: the format record is written once and read back; Close
// flushes what was committed (there is no WAL) and waits for nothing left;
// operations and a second Close after it fail with the owner's closed
// error; a read-only open of nothing and a database that lost its format
// record fail with the owner's errors.
func TestDBLifecycle(t *testing.T) {
	dir := t.TempDir()
	if _, err := openTestDB(t, dir+"/missing", true); !errors.Is(err, errTestNoIndex) {
		t.Fatalf("read-only open of a missing index: %v, want %v", err, errTestNoIndex)
	}
	db, err := openTestDB(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := db.LoadFormat([]byte("F"), []byte{7}); err != nil || string(f) != "\x07" {
		t.Fatalf("new index: format %x, %v", f, err)
	}
	if f, err := db.LoadFormat([]byte("F"), []byte{8}); err != nil || string(f) != "\x07" {
		t.Fatalf("format record read back as %x, %v; want the one written first", f, err)
	}
	if err := db.Set([]byte("k"), []byte("v"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	var dropped bool
	if err := db.Close(func() { dropped = true }); err != nil || !dropped {
		t.Fatalf("close: %v, hook ran %t", err, dropped)
	}
	if err := db.Acquire(); !errors.Is(err, errTestClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	if err := db.FlushMemtable(); !errors.Is(err, errTestClosed) {
		t.Fatalf("flush after close: %v", err)
	}
	if c, n := db.Compaction(), db.DiskBytes(); c != (Compaction{}) || n != 0 {
		t.Fatalf("after close: compaction %+v, %d disk bytes; want zero", c, n)
	}
	if err := db.Close(nil); !errors.Is(err, errTestClosed) {
		t.Fatalf("second close: %v", err)
	}

	ro, err := openTestDB(t, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := ro.Value([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("key committed before Close, read after reopening: %q %t %v", v, ok, err)
	}
	if _, err := ro.LoadFormat([]byte("G"), []byte{1}); !errors.Is(err, errTestCorrupt) {
		t.Fatalf("non-empty index without its format record: %v, want %v", err, errTestCorrupt)
	}
	if err := ro.Close(nil); err != nil {
		t.Fatal(err)
	}

	empty := t.TempDir()
	w, err := openTestDB(t, empty, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	ro, err = openTestDB(t, empty, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(nil)
	if _, err := ro.LoadFormat([]byte("F"), []byte{1}); !errors.Is(err, errTestNoIndex) {
		t.Fatalf("read-only index without a format record: %v, want %v", err, errTestNoIndex)
	}
}

// TestSettle: Settle compacts a small index with tables in L0 into its
// last level and keeps every key; it leaves
// alone an index larger than maxBytes, one with too little disk room for a
// copy, one with less than minL0 bytes in L0, and one with nothing there.
func TestSettle(t *testing.T) {
	db, err := openTestDB(t, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(nil)
	for f := 0; f < 3; f++ {
		flushSpanningTable(t, db.DB, f) // 3 tables in L0, under the compaction threshold
	}
	levels := func() (l0, last int64) {
		m := db.Metrics()
		return m.Levels[0].NumFiles, m.Levels[len(m.Levels)-1].NumFiles
	}
	if l0, _ := levels(); l0 != 3 {
		t.Fatalf("%d tables in L0 before, want 3", l0)
	}
	for _, tc := range []struct {
		name                  string
		minL0, maxBytes, room uint64
	}{{"larger than maxBytes", 1, 1 << 10, 1 << 30}, {"no room for a copy", 1, 64 << 20, 1 << 10},
		{"less than minL0 in L0", 1 << 20, 64 << 20, 1 << 30}} {
		if done, err := db.Settle(tc.minL0, tc.maxBytes, tc.room); err != nil || done {
			t.Fatalf("%s: Settle = %v, %v; want nothing done", tc.name, done, err)
		}
		if l0, _ := levels(); l0 != 3 {
			t.Fatalf("%s: %d tables in L0, want the 3 left alone", tc.name, l0)
		}
	}
	if done, err := db.Settle(1, 64<<20, 1<<30); err != nil || !done {
		t.Fatalf("Settle = %v, %v; want the index compacted", done, err)
	}
	if l0, last := levels(); l0 != 0 || last == 0 {
		t.Fatalf("after Settle: %d tables in L0, %d in the last level; want 0 and some", l0, last)
	}
	for f := 0; f < 3; f++ {
		for i := 0; i < 200; i += 37 {
			if v, ok, err := db.Value([]byte{byte(i), byte(f)}); err != nil || !ok || len(v) != 100 {
				t.Fatalf("key %d/%d after Settle: %d bytes, %v, %v", i, f, len(v), ok, err)
			}
		}
	}
	if done, err := db.Settle(1, 64<<20, 1<<30); err != nil || done {
		t.Fatalf("second Settle = %v, %v; want nothing to do (L0 empty)", done, err)
	}
}

// TestReopenReleasesMemTables: a database whose memtables grew to full
// size while it took writes keeps them (Pebble never shrinks them) until
// Reopen, which gives them back to the block cache down to a fresh
// open's one small memtable; readers racing it (holding the database
// across calls and acquiring it again inside, as a search's callback
// does) get every key right and are never refused; writes after it
// land; a database in memory or read-only is left alone; and a closed
// one fails with the owner's closed error.
func TestReopenReleasesMemTables(t *testing.T) {
	dir := t.TempDir()
	db, err := openTestDB(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(nil)
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
	const keys = 1024 // 64 MiB: memtables grow 256 KiB, 512 KiB, ... up to memTableBytes
	for i := 0; i < keys; i++ {
		if err := db.Set([]byte(fmt.Sprintf("k%04d", i)), val(i), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if got := db.MemTableBytes(); got < memTableBytes {
		t.Fatalf("after 64 MiB of writes and a flush the memtables reserve %d bytes; want at least %d (full size, kept)", got, memTableBytes)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var reads atomic.Int64
	errs := make(chan error, 8)
	check := func(i int) error {
		v, ok, err := db.Value([]byte(fmt.Sprintf("k%04d", i)))
		if err != nil || !ok || !bytes.Equal(v, val(i)) {
			return fmt.Errorf("key %d: %d bytes, found %t, %v", i, len(v), ok, err)
		}
		return nil
	}
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; ctx.Err() == nil; i = (i + 7) % keys {
				if err := db.Acquire(); err != nil {
					errs <- fmt.Errorf("acquire while reopening: %w", err)
					return
				}
				r, err := NewPointReader(db.DB)
				if err == nil {
					var v []byte
					var ok bool
					v, ok, err = r.Get([]byte(fmt.Sprintf("k%04d", i)))
					if err == nil && (!ok || !bytes.Equal(v, val(i))) {
						err = fmt.Errorf("key %d through a reader: %d bytes, found %t", i, len(v), ok)
					}
					if g == 0 && err == nil {
						// Held across a second hold of the same database.
						time.Sleep(time.Millisecond)
						err = check((i + 1) % keys)
					}
					err = errors.Join(err, r.Close())
				}
				db.Release()
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
			}
		}()
	}
	for reads.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	var dropped bool
	reopened, err := db.Reopen(context.Background(), func() { dropped = true })
	if err != nil || !reopened || !dropped {
		t.Fatalf("Reopen = %t, %v (hook ran %t); want reopened", reopened, err, dropped)
	}
	before := reads.Load()
	for reads.Load() < before+50 && len(errs) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := db.MemTableBytes(); got > 256<<10 {
		t.Fatalf("after Reopen the memtables reserve %d bytes; want a fresh open's 256 KiB at most", got)
	}
	for i := 0; i < keys; i += 31 {
		if err := check(i); err != nil {
			t.Fatalf("after Reopen: %v", err)
		}
	}
	if err := db.Set([]byte("after"), []byte("x"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := db.Value([]byte("after")); err != nil || !ok || string(v) != "x" {
		t.Fatalf("a write after Reopen reads back %q %t %v", v, ok, err)
	}

	mem, err := OpenDB("in memory", t.TempDir(), OpenOptions{Merger: testMerger(), InMemory: true}, Errors{Closed: errTestClosed})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Set([]byte("m"), []byte("1"), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if reopened, err := mem.Reopen(context.Background(), nil); reopened || err != nil {
		t.Fatalf("Reopen of a database in memory = %t, %v; want left alone", reopened, err)
	}
	if v, ok, err := mem.Value([]byte("m")); err != nil || !ok || string(v) != "1" {
		t.Fatalf("in memory after Reopen: %q %t %v; want its key kept", v, ok, err)
	}
	mem.Close(nil)

	if err := db.Close(nil); err != nil {
		t.Fatal(err)
	}
	ro, err := openTestDB(t, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(nil)
	if reopened, err := ro.Reopen(context.Background(), nil); reopened || err != nil {
		t.Fatalf("Reopen of a read-only database = %t, %v; want left alone", reopened, err)
	}
	if v, ok, err := ro.Value([]byte("k0003")); err != nil || !ok || !bytes.Equal(v, val(3)) {
		t.Fatalf("read-only after Reopen: key 3: %d bytes, %t, %v", len(v), ok, err)
	}
	if reopened, err := db.Reopen(context.Background(), nil); reopened || !errors.Is(err, errTestClosed) {
		t.Fatalf("Reopen after Close = %t, %v; want %v", reopened, err, errTestClosed)
	}
}

// TestReopenRacesLifecycleMethods runs DB's own lifecycle methods (each
// holds the database itself) while Reopen swaps the database again and
// again: none may touch the database Reopen closed. FlushMemtable once
// passed the method value d.DB.Flush to held, which read d.DB before the
// hold: a flush racing a sealed store's reopen (a tiering upload's
// CopySealed) then flushed the closed database and panicked with "pebble:
// closed" (and -race named the read).
func TestReopenRacesLifecycleMethods(t *testing.T) {
	db, err := openTestDB(t, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := []struct {
		name string
		run  func(i int) error
	}{
		{"set+flush", func(i int) error {
			if err := db.Acquire(); err != nil {
				return err
			}
			err := db.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"), pebble.NoSync)
			db.Release()
			return errors.Join(err, db.FlushMemtable())
		}},
		{"compact", func(int) error { return db.CompactAll() }},
		{"metrics", func(int) error {
			_, _, _, _ = db.L0Tables(), db.DiskBytes(), db.Compaction(), db.MemTableBytes()
			return nil
		}},
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	errs := make(chan error, len(ops))
	for _, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if err := op.run(i); err != nil {
					errs <- fmt.Errorf("%s while reopening: %w", op.name, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	for n := 0; n < 5; n++ {
		before := done.Load()
		if reopened, err := db.Reopen(ctx, nil); err != nil || !reopened {
			t.Fatalf("Reopen %d = %t, %v", n, reopened, err)
		}
		for done.Load() < before+10 && len(errs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReopenSettlesL0: the tables a writing index leaves in L0 (fewer than
// the compaction threshold's) stay there until Reopen, which opens the
// index Settled and compacts them into the base level in the background;
// every key reads back the same after it, also a key written and flushed
// between two reopens.
func TestReopenSettlesL0(t *testing.T) {
	db, err := openTestDB(t, t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(nil)
	const left = l0CompactionThreshold/2 - 1
	for f := 0; f < left; f++ {
		flushSpanningTable(t, db.DB, f)
	}
	time.Sleep(100 * time.Millisecond) // a compaction would be scheduled by now
	if n := db.L0Tables(); n != left {
		t.Fatalf("writing index: %d tables in L0 after %d flushes, want them all (below the threshold)", n, left)
	}
	waitL0 := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for db.L0Tables() > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := db.L0Tables(); n != 0 {
			t.Fatalf("%s: %d tables still in L0", what, n)
		}
	}
	if ok, err := db.Reopen(context.Background(), nil); err != nil || !ok {
		t.Fatalf("reopen: %t, %v", ok, err)
	}
	waitL0("after Reopen")
	check := func(what string) {
		t.Helper()
		for f := 0; f < left+1; f++ {
			for _, i := range []int{0, 99, 199} {
				v, ok, err := db.Value([]byte{byte(i), byte(f)})
				if f == left {
					// The key written after the first reopen.
					if i != 0 {
						continue
					}
				}
				if err != nil || !ok || len(v) != 100 {
					t.Fatalf("%s: key {%d, %d}: %d bytes, found %t, %v", what, i, f, len(v), ok, err)
				}
			}
		}
	}
	// A write after the reopen (a catch-up's) is flushed into L0, and the
	// next Reopen compacts it away too.
	if err := db.Set([]byte{0, left}, bytes.Repeat([]byte("v"), 100), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.Reopen(context.Background(), nil); err != nil || !ok {
		t.Fatalf("second reopen: %t, %v", ok, err)
	}
	waitL0("after the second Reopen")
	check("after two reopens")
}
