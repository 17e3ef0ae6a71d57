package kv

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
)

func openTest(t *testing.T, compact func(byte, []byte, int) ([]byte, bool)) *pebble.DB {
	t.Helper()
	cache := NewCache(1 << 20)
	defer cache.Unref()
	db, err := pebble.Open(t.TempDir(), Options(cache, NewMerger("test.concat", compact), nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestBatchPointReaderAndMerger(t *testing.T) {
	db := openTest(t, nil)
	var b Batch
	b.Merge([]byte("k2"), []byte("a"))
	b.Set([]byte("k1"), []byte("one"))
	b.Merge([]byte("k2"), []byte("b"))
	b.Set([]byte("k3"), []byte("x"))
	b.Delete([]byte("k3"))
	if b.Len() != 5 {
		t.Fatalf("Len %d", b.Len())
	}
	if err := b.Commit(db); err != nil {
		t.Fatal(err)
	}
	// The same Batch again after Reset: only the new write is applied.
	b.Reset(KeepSmall)
	if b.Len() != 0 {
		t.Fatalf("Len after Reset %d", b.Len())
	}
	b.Merge([]byte("k2"), []byte("c"))
	if err := b.Commit(db); err != nil {
		t.Fatal(err)
	}
	// Merge operands come back oldest first, also once flushed and
	// compacted (which feeds the merger older operands).
	for round := 0; round < 2; round++ {
		// Both readers: through every level's filters, and without the
		// last level's (NewPresentKeyReader); after the compaction the
		// keys are in the last level.
		for _, newReader := range []func(*pebble.DB) (*PointReader, error){NewPointReader, NewPresentKeyReader} {
			r, err := newReader(db)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				key, want string
				ok        bool
			}{{"k1", "one", true}, {"k2", "abc", true}, {"k3", "", false}, {"k0", "", false}} {
				v, ok, err := r.Get([]byte(tc.key))
				if err != nil || ok != tc.ok || !bytes.Equal(v, []byte(tc.want)) {
					t.Fatalf("round %d Get(%s) = %q %v %v", round, tc.key, v, ok, err)
				}
			}
			r.Close()
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.Compact([]byte("k"), []byte("l"), true); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMergerCompacts(t *testing.T) {
	db := openTest(t, func(prefix byte, all []byte, n int) ([]byte, bool) {
		return []byte{prefix, byte(n), byte(len(all))}, true
	})
	for _, v := range []string{"xx", "yyy"} {
		var b Batch
		b.Merge([]byte("p"), []byte(v))
		if err := b.Commit(db); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := NewPointReader(db)
	defer r.Close()
	v, ok, err := r.Get([]byte("p"))
	if err != nil || !ok || !bytes.Equal(v, []byte{'p', 2, 5}) {
		t.Fatalf("compacted value %v %v %v", v, ok, err)
	}
}

// TestOpenReadOnlyMissing: a read-only open of a missing or empty
// directory is ErrNoDB and creates nothing; a writable open creates it.
func TestOpenReadOnlyMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	if _, err := Open(dir, OpenOptions{ReadOnly: true, Merger: testMerger()}); !errors.Is(err, ErrNoDB) {
		t.Fatalf("read-only open of a missing dir: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a read-only open created %s", dir)
	}
	db, err := Open(dir, OpenOptions{Merger: testMerger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, OpenOptions{ReadOnly: true, Merger: testMerger()})
	if err != nil {
		t.Fatalf("read-only open of an index: %v", err)
	}
	db.Close()
}

func testMerger() *pebble.Merger {
	return NewMerger("test.concat", func(_ byte, all []byte, _ int) ([]byte, bool) { return all, true })
}

// TestBulkLoadDefersCompaction: a database opened for a bulk load keeps
// every flushed table in L0 (no automatic compaction, no write stall)
// until the writer compacts it, and its keys read back the same; a normal
// one compacts L0 on its own past L0CompactionThreshold.
func TestBulkLoadDefersCompaction(t *testing.T) {
	fill := func(db *pebble.DB) {
		for f := 0; f < 8; f++ {
			flushSpanningTable(t, db, f)
		}
	}
	bulk, err := Open(t.TempDir(), OpenOptions{Merger: NewMerger("test.concat", nil), BulkLoad: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bulk.Close()
	fill(bulk)
	if n := bulk.Metrics().Levels[0].NumFiles; n != 8 {
		t.Fatalf("bulk load: %d tables in L0 after 8 flushes, want 8 (nothing compacted)", n)
	}
	if err := bulk.Compact([]byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if n := bulk.Metrics().Levels[0].NumFiles; n != 0 {
		t.Fatalf("bulk load: %d tables in L0 after Compact", n)
	}
	if c := CompactionOf(bulk); c != (Compaction{}) {
		t.Fatalf("bulk load after Compact: compaction state %+v, want none", c)
	}
	// Tables flushed over a compacted level are work still to do:
	// CompactionOf reports it as debt (Pebble's estimate: the L0 bytes and
	// the level below they merge into), none of it running.
	fill(bulk)
	if c := CompactionOf(bulk); c.DebtBytes == 0 || c.Running != 0 {
		t.Fatalf("bulk load, flushed over a compacted level: compaction state %+v, want debt > 0 and nothing running", c)
	}
	if err := bulk.Compact([]byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if c := CompactionOf(bulk); c != (Compaction{}) {
		t.Fatalf("bulk load after the second Compact: compaction state %+v, want none", c)
	}
	v, closer, err := bulk.Get([]byte{199, 7})
	if err != nil || len(v) != 100 {
		t.Fatalf("get after compaction: %d bytes, %v", len(v), err)
	}
	closer.Close()

	normal, err := Open(t.TempDir(), OpenOptions{Merger: NewMerger("test.concat", nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer normal.Close()
	fill(normal)
	deadline := time.Now().Add(10 * time.Second)
	for normal.Metrics().Levels[0].NumFiles >= 8 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := normal.Metrics().Levels[0].NumFiles; n >= 8 {
		t.Fatalf("normal open: %d tables still in L0: automatic compaction did not run", n)
	}
}

// flushSpanningTable commits 200 keys {i, f} of 100-byte values, which
// span the whole key space like an index's keys, and flushes them as one
// table that overlaps every other such table.
func flushSpanningTable(t *testing.T, db *pebble.DB, f int) {
	t.Helper()
	val := bytes.Repeat([]byte("v"), 100)
	var b Batch
	for i := 0; i < 200; i++ {
		b.Set([]byte{byte(i), byte(f)}, val)
	}
	if err := b.Commit(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestL0CompactionThreshold: a normal index leaves fewer than
// l0CompactionThreshold/2 flushed tables that overlap each other in L0
// uncompacted, and compacts them once the next flush reaches half the
// threshold.
func TestL0CompactionThreshold(t *testing.T) {
	db, err := Open(t.TempDir(), OpenOptions{Merger: NewMerger("test.concat", nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	flush := func(f int) { flushSpanningTable(t, db, f) }
	const waiting = l0CompactionThreshold/2 - 1
	for f := 0; f < waiting; f++ {
		flush(f)
	}
	time.Sleep(100 * time.Millisecond) // a compaction would be scheduled by now
	m := db.Metrics()
	if m.Compact.Count != 0 || m.Levels[0].NumFiles != waiting {
		t.Fatalf("after %d flushes: %d compactions, %d tables in L0; want none and %d", waiting, m.Compact.Count, m.Levels[0].NumFiles, waiting)
	}
	flush(waiting)
	deadline := time.Now().Add(10 * time.Second)
	for db.Metrics().Levels[0].NumFiles > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if m := db.Metrics(); m.Levels[0].NumFiles != 0 || m.Compact.Count == 0 {
		t.Fatalf("after %d flushes: %d compactions, %d tables still in L0", waiting+1, m.Compact.Count, m.Levels[0].NumFiles)
	}
	v, closer, err := db.Get([]byte{199, 3})
	if err != nil || len(v) != 100 {
		t.Fatalf("get after compaction: %d bytes, %v", len(v), err)
	}
	closer.Close()
}

// TestLevelCompression: only the last level is zstd; an index whose
// tables were all written zstd (the options before this split) opens and
// reads with the current options, and keeps reading once new snappy and
// zstd tables are mixed with its old ones.
func TestLevelCompression(t *testing.T) {
	opts := Options(nil, testMerger(), nil)
	for i, l := range opts.Levels {
		want := pebble.SnappyCompression
		if i == len(opts.Levels)-1 {
			want = pebble.ZstdCompression
		}
		if l.Compression != want {
			t.Fatalf("L%d: compression %v, want %v", i, l.Compression, want)
		}
	}

	dir := t.TempDir()
	cache := NewCache(1 << 20)
	old := Options(cache, testMerger(), nil)
	for i := range old.Levels {
		old.Levels[i].Compression = pebble.ZstdCompression
	}
	db, err := pebble.Open(dir, old)
	cache.Unref()
	if err != nil {
		t.Fatal(err)
	}
	key := func(gen, i int) []byte { return []byte{byte(i), byte(i >> 8), byte(gen)} }
	val := func(gen, i int) []byte { return bytes.Repeat([]byte{byte(gen), byte(i)}, 20) }
	write := func(db *pebble.DB, gen int) {
		var b Batch
		for i := 0; i < 2000; i++ {
			b.Set(key(gen, i), val(gen, i))
		}
		if err := b.Commit(db); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	write(db, 0)
	if err := db.Compact([]byte{0}, []byte{0xff, 0xff, 0xff}, true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check := func(db *pebble.DB, gens int) {
		t.Helper()
		for gen := 0; gen < gens; gen++ {
			for i := 0; i < 2000; i += 97 {
				v, closer, err := db.Get(key(gen, i))
				if err != nil || !bytes.Equal(v, val(gen, i)) {
					t.Fatalf("generation %d key %d: %v", gen, i, err)
				}
				closer.Close()
			}
		}
	}
	db, err = Open(dir, OpenOptions{Merger: testMerger()})
	if err != nil {
		t.Fatalf("open an index written all zstd: %v", err)
	}
	check(db, 1)
	write(db, 1) // a snappy L0 table over the zstd L6
	check(db, 2)
	if err := db.Compact([]byte{0}, []byte{0xff, 0xff, 0xff}, true); err != nil {
		t.Fatal(err)
	}
	check(db, 2)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchOrderManyOps checks that Commit keeps the order of writes to one
// key among many writes whose keys share their first 8 bytes (the sort
// compares those first) or are shorter than 8 bytes: large enough a batch
// that the sort is not an insertion sort.
func TestBatchOrderManyOps(t *testing.T) {
	db := openTest(t, nil)
	var b Batch
	keys := []string{"long-key-shared-head/1", "long-key-shared-head/0", "long-key", "lon", "long-key-shared-head/10"}
	want := map[string]string{}
	for i := 0; i < 500; i++ {
		k := keys[(i*7)%len(keys)]
		v := string(rune('a' + i%26))
		b.Merge([]byte(k), []byte(v))
		want[k] += v
	}
	b.Set([]byte("zz"), []byte("first"))
	b.Delete([]byte("zz"))
	b.Set([]byte("zz"), []byte("last"))
	want["zz"] = "last"
	if err := b.Commit(db); err != nil {
		t.Fatal(err)
	}
	r, err := NewPointReader(db)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k, w := range want {
		v, ok, err := r.Get([]byte(k))
		if err != nil || !ok || string(v) != w {
			t.Fatalf("Get(%s) = %q %v %v, want %q", k, v, ok, err, w)
		}
	}
}

// TestBatchSortOrder checks Commit's order against a stable sort by key:
// keys of every length (shorter than a head, equal heads, shared
// prefixes, zero bytes), repeated keys whose writes must keep their order.
// One Batch serves every round, Reset in between (keeping its arrays, or,
// every third round, none), as an index's writer uses it.
func TestBatchSortOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	var b Batch
	for round := 0; round < 50; round++ {
		if round%3 == 2 {
			b.Reset(0)
		} else {
			b.Reset(KeepSmall)
		}
		type w struct {
			key string
			n   int
		}
		var want []w
		n := 1 + rng.IntN(400)
		for i := 0; i < n; i++ {
			var key []byte
			if i > 0 && rng.IntN(5) == 0 {
				key = []byte(want[rng.IntN(len(want))].key) // a repeat
			} else {
				prefix := []byte("commonpfx")[:rng.IntN(10)]
				key = append([]byte(nil), prefix...)
				for l := rng.IntN(12); l > 0; l-- {
					key = append(key, alphabet[rng.IntN(len(alphabet))])
				}
			}
			b.Merge(key, []byte{byte(i), byte(i >> 8)})
			want = append(want, w{string(key), i})
		}
		slices.SortStableFunc(want, func(x, y w) int { return strings.Compare(x.key, y.key) })
		for i, it := range b.sorted() {
			op := b.ops[it.op]
			if got := string(b.key(op)); got != want[i].key || it.op != want[i].n {
				t.Fatalf("round %d, write %d: key %q (added %d), want %q (added %d)", round, i, got, it.op, want[i].key, want[i].n)
			}
		}
	}
}

// tableFormats returns, level by level, the compression of each table
// of db.
func tableFormats(t *testing.T, db *pebble.DB) [][]string {
	t.Helper()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, len(levels))
	for i, l := range levels {
		for _, info := range l {
			out[i] = append(out[i], info.Properties.CompressionName)
		}
	}
	return out
}

// TestCompactAllRewritesLoneTable: a bulk load's flushed tables are
// uncompressed, and CompactAll leaves every index, also one that is a
// single flushed table (which Pebble would move down as it is), as zstd
// tables in the last level, its keys (merged values included) reading
// back the same. An empty index compacts to nothing.
func TestCompactAllRewritesLoneTable(t *testing.T) {
	errs := Errors{Closed: errors.New("closed"), NoIndex: errors.New("no index"), Corrupt: errors.New("corrupt")}
	for _, tc := range []struct {
		name       string
		bulk       bool
		keys, gens int
		l0Format   string
	}{
		{"bulk one table", true, 2000, 1, "NoCompression"},
		{"bulk one key", true, 1, 1, "NoCompression"},
		{"bulk three tables", true, 2000, 3, "NoCompression"},
		{"normal one table", false, 2000, 1, "Snappy"},
		{"empty", true, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := OpenDB("test index", t.TempDir(), OpenOptions{Merger: NewMerger("test.concat", nil), BulkLoad: tc.bulk}, errs)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(nil)
			want := map[string]string{}
			for gen := 0; gen < tc.gens; gen++ {
				var b Batch
				for i := 0; i < tc.keys; i++ {
					k := []byte{byte(i * 37), byte(i), 'k'}
					v := bytes.Repeat([]byte{byte(gen), byte(i)}, 10)
					b.Merge(k, v)
					want[string(k)] += string(v)
				}
				if err := b.Commit(d.DB); err != nil {
					t.Fatal(err)
				}
				if err := d.DB.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if f := tableFormats(t, d.DB); len(f[0]) != tc.gens || (tc.gens > 0 && f[0][0] != tc.l0Format) {
				t.Fatalf("before CompactAll: L0 tables %v, want %d %s", f[0], tc.gens, tc.l0Format)
			}
			if err := d.CompactAll(); err != nil {
				t.Fatal(err)
			}
			f := tableFormats(t, d.DB)
			for i, l := range f[:len(f)-1] {
				if len(l) != 0 {
					t.Fatalf("after CompactAll: L%d holds %v", i, l)
				}
			}
			if last := f[len(f)-1]; (len(last) == 0) != (len(want) == 0) || slices.ContainsFunc(last, func(c string) bool { return c != "ZSTD" }) {
				t.Fatalf("after CompactAll: last level %v, want zstd tables", last)
			}
			got := map[string]string{}
			it, err := d.DB.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			for it.First(); it.Valid(); it.Next() {
				got[string(it.Key())] = string(it.Value())
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("after CompactAll: %d keys, want %d (or values differ)", len(got), len(want))
			}
		})
	}
}
