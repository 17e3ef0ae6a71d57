package kv

import (
	"errors"
	"testing"

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
