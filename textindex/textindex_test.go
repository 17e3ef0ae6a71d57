package textindex

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble"
)

func openTest(t testing.TB, dir string) *Index {
	t.Helper()
	ix, err := Open(dir, Options{CacheBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// corpus returns deterministic strings: identifiers, mixed case, unicode
// (including case mappings that change byte length), long strings that
// are keyed by hash (> 512 bytes) and long ones without trigrams (> 4096).
func corpus(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 3))
	words := []string{"Order", "service", "HTTP", "GET", "timeout", "Exception", "java.lang.NullPointerException",
		"Ärger", "straße", "İstanbul", "ΣΊΣΥΦΟΣ", "日本語", "🙂ok", "kafka", "user", "42", "a", "ab", "x-Y-z", "\xff\xfe"}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var b strings.Builder
		for w := 1 + rng.IntN(4); w > 0; w-- {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&b, "%d", rng.IntN(1000))
			}
			b.WriteByte(" ./_"[rng.IntN(4)])
		}
		s := b.String()
		switch {
		case i%97 == 5:
			s = strings.Repeat(s, 600/len(s)+1) // hashed key
		case i%211 == 7:
			s = strings.Repeat(s, 5000/len(s)+1) + "NEEDLE-in-a-long-string"
		}
		out = append(out, s)
	}
	return out
}

func bruteSearch(strs []string, pattern string) []uint64 {
	p := strings.ToLower(pattern)
	var ids []uint64
	for i, s := range strs {
		if strings.Contains(strings.ToLower(s), p) {
			ids = append(ids, uint64(i+1))
		}
	}
	return ids
}

// internAll interns strs (with repeats) in batches and returns the distinct
// strings in id order.
func internAll(t testing.TB, ix *Index, strs []string, batch int) []string {
	t.Helper()
	var dict []string
	seen := map[string]uint64{}
	for i := 0; i < len(strs); i += batch {
		b := ix.NewBatch()
		for _, s := range strs[i:min(len(strs), i+batch)] {
			id := b.Intern(s)
			if want, ok := seen[s]; ok {
				if id != want {
					t.Fatalf("Intern(%q) = %d, earlier %d", s, id, want)
				}
				continue
			}
			if id != uint64(len(dict)+1) {
				t.Fatalf("Intern(%q) = %d, want next id %d", s, id, len(dict)+1)
			}
			seen[s] = id
			dict = append(dict, s)
			if again := b.Intern(s); again != id {
				t.Fatalf("second Intern in batch = %d, want %d", again, id)
			}
		}
		b.SetWatermark(int64(i + batch))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return dict
}

func TestInternDeterministicAndPersistent(t *testing.T) {
	strs := corpus(1, 3000)
	strs = append(strs, strs[:500]...) // repeats across batches
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := openTest(t, dirA), openTest(t, dirB)
	dictA := internAll(t, a, strs, 100)
	dictB := internAll(t, b, strs, 777)
	if !slices.Equal(dictA, dictB) {
		t.Fatal("same intern sequence, different dictionaries")
	}
	if a.Count() != uint64(len(dictA)) {
		t.Fatalf("Count = %d, want %d", a.Count(), len(dictA))
	}
	b.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a = openTest(t, dirA)
	defer a.Close()
	if a.Count() != uint64(len(dictA)) {
		t.Fatalf("Count after reopen = %d", a.Count())
	}
	if wm, _ := a.Watermark(); wm != int64((len(strs)+99)/100*100) {
		t.Fatalf("watermark after reopen %d", wm)
	}
	for i, s := range dictA {
		id, ok, err := a.Lookup(s)
		if err != nil || !ok || id != uint64(i+1) {
			t.Fatalf("Lookup(%.40q) = %d %v %v, want %d", s, id, ok, err, i+1)
		}
		got, err := a.String(uint64(i + 1))
		if err != nil || got != s {
			t.Fatalf("String(%d) = %.40q %v", i+1, got, err)
		}
	}
	// A fresh batch after reopen continues the ids and finds old strings.
	batch := a.NewBatch()
	if id := batch.Intern(dictA[10]); id != 11 {
		t.Fatalf("old string after reopen got %d", id)
	}
	if id := batch.Intern("brand new string"); id != uint64(len(dictA)+1) {
		t.Fatalf("new string after reopen got %d", id)
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.String(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("String(0): %v", err)
	}
	if _, err := a.String(uint64(len(dictA) + 2)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("String(beyond): %v", err)
	}
	if _, ok, err := a.Lookup("never interned"); ok || err != nil {
		t.Fatalf("Lookup(unknown) = %v %v", ok, err)
	}
}

func TestUncommittedBatchLeavesNoTrace(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	b := ix.NewBatch()
	b.Intern("one")
	b.Intern("two")
	// never committed
	b2 := ix.NewBatch()
	if id := b2.Intern("two"); id != 1 {
		t.Fatalf("abandoned batch's ids leaked: got %d", id)
	}
	if err := b2.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); !errors.Is(err, ErrBatchConflict) {
		t.Fatalf("stale batch commit: %v", err)
	}
	if err := b2.Commit(); !errors.Is(err, ErrBatchConflict) {
		t.Fatalf("second commit: %v", err)
	}
	if id := b2.Intern("late"); id != 0 {
		t.Fatalf("Intern after commit = %d", id)
	}
	if ix.Count() != 1 {
		t.Fatalf("count %d", ix.Count())
	}
}

func TestSearchMatchesBruteForce(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	dict := internAll(t, ix, corpus(2, 4000), 500)
	rng := rand.New(rand.NewPCG(5, 6))
	patterns := []string{"", "a", "A", "ab", "42", "ORDER", "order", "der", "xception", "NullPointer",
		"ärger", "ÄRGER", "STRASSE", "straße", "STRAßE", "i̇stanbul", "İSTANBUL", "σίσυφος", "ΣΊΣ", "日本", "本語",
		"🙂", "🙂o", "needle-in", "NEEDLE-IN-A-LONG", "\xff", "x-y-z", "zzzz-not-there", "e.", ". "}
	for i := 0; i < 200; i++ {
		s := dict[rng.IntN(len(dict))]
		a := rng.IntN(len(s))
		b := min(len(s), a+1+rng.IntN(12))
		patterns = append(patterns, s[a:b])
	}
	nonEmpty := 0
	for _, p := range patterns {
		want := bruteSearch(dict, p)
		got, truncated, err := ix.Search(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if truncated || !slices.Equal(got, want) {
			t.Fatalf("Search(%q): %d ids (truncated %v), want %d\n got %v\nwant %v", p, len(got), truncated, len(want), head(got), head(want))
		}
		if len(want) > 0 {
			nonEmpty++
		}
		for _, limit := range []int{1, 5} {
			got, truncated, err := ix.Search(context.Background(), p, limit)
			if err != nil {
				t.Fatal(err)
			}
			n := min(limit, len(want))
			if !slices.Equal(got, want[:n]) || truncated != (len(want) > limit) {
				t.Fatalf("Search(%q, %d) = %v %v, want %v %v", p, limit, got, truncated, want[:n], len(want) > limit)
			}
		}
	}
	if nonEmpty < 150 {
		t.Fatalf("only %d patterns match anything", nonEmpty)
	}
	// After flush and compaction (postings merged on disk) nothing changes.
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(); err != nil {
		t.Fatal(err)
	}
	for _, p := range patterns[:60] {
		got, _, err := ix.Search(context.Background(), p, 0)
		if err != nil || !slices.Equal(got, bruteSearch(dict, p)) {
			t.Fatalf("after compaction Search(%q) = %v, %v", p, head(got), err)
		}
	}
}

func head(ids []uint64) []uint64 { return ids[:min(len(ids), 10)] }

func TestSearchCancelled(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	internAll(t, ix, corpus(3, 3000), 1000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, p := range []string{"a", "order"} {
		if _, _, err := ix.Search(ctx, p, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("Search(%q) on cancelled context: %v", p, err)
		}
	}
}

func TestConcurrentReadersDuringWrites(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	strs := corpus(4, 3000)
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 4)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				count := ix.Count()
				ids, _, err := ix.Search(context.Background(), "service", 50)
				if err != nil {
					errc <- err
					return
				}
				for _, id := range ids {
					s, err := ix.String(id)
					if err != nil || !strings.Contains(strings.ToLower(s), "service") {
						errc <- fmt.Errorf("hit %d = %q, %v", id, s, err)
						return
					}
				}
				if count > 0 {
					if _, err := ix.String(count); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
	}
	internAll(t, ix, strs, 50)
	close(done)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

func TestCorruptValuesAreReported(t *testing.T) {
	dir := t.TempDir()
	ix := openTest(t, dir)
	internAll(t, ix, []string{"alpha", "beta", "gamma"}, 10)
	// A damaged id value and a damaged posting list.
	if err := ix.db.Set(stringKey(nil, "beta"), []byte{0x80}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := ix.db.Set([]byte{prefixGram, 'a', 'l', 'p', 1, 0}, []byte{0x07, 1}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	ix.ids = newLRUMap[string, uint64](16) // forget cached ids
	if _, _, err := ix.Lookup("beta"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lookup of a damaged id: %v", err)
	}
	b := ix.NewBatch()
	if id := b.Intern("beta"); id != 0 {
		t.Fatalf("Intern of a damaged id = %d", id)
	}
	if err := b.Commit(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Commit after a damaged lookup: %v", err)
	}
	if _, _, err := ix.Search(context.Background(), "alpha", 0); err == nil {
		t.Fatal("Search over a damaged posting list succeeded")
	}
	if err := ix.db.Set(keyFormat, []byte{9}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a bad format record: %v", err)
	}
}

func TestOrderedEncoding(t *testing.T) {
	vals := []uint64{0, 1, 255, 256, 65535, 65536, 1 << 40, ^uint64(0)}
	var prev []byte
	for _, v := range vals {
		enc := appendOrdered(nil, v)
		got, n, ok := readOrdered(enc)
		if !ok || n != len(enc) || got != v {
			t.Fatalf("%d: decoded %d %d %v", v, got, n, ok)
		}
		if prev != nil && string(prev) >= string(enc) {
			t.Fatalf("encoding of %d does not sort after its predecessor", v)
		}
		prev = enc
	}
	for _, bad := range [][]byte{{}, {9}, {2, 1}, {1, 0}} {
		if _, _, ok := readOrdered(bad); ok {
			t.Fatalf("readOrdered(%x) accepted", bad)
		}
	}
}

func TestReadOnlyAndIntegrity(t *testing.T) {
	if _, err := OpenReadOnly(t.TempDir(), Options{}); !errors.Is(err, ErrNoIndex) {
		t.Fatalf("empty dir: %v", err)
	}
	dir := t.TempDir()
	ix := openTest(t, dir)
	dict := internAll(t, ix, corpus(7, 500), 100)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.Count() != uint64(len(dict)) {
		t.Fatalf("read-only count %d", ro.Count())
	}
	if n, err := ro.CheckIntegrity(); err != nil || n < int64(2*len(dict)) {
		t.Fatalf("CheckIntegrity: %d keys, %v", n, err)
	}
	got, _, err := ro.Search(context.Background(), "order", 0)
	if err != nil || !slices.Equal(got, bruteSearch(dict, "order")) {
		t.Fatalf("read-only search: %v", err)
	}
	b := ro.NewBatch()
	b.Intern("new")
	if err := b.Commit(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("commit on read-only index: %v", err)
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(appendState(nil, 5, 1000, 5))
	f.Add(appendState(nil, 0, -1, 0))
	f.Add(appendState(nil, 70000, 1<<30, 65535)) // postings of the open block not written
	f.Add([]byte{0x80})
	f.Add([]byte{0x05, 0x02, 0x05}) // posted = count, written: not minimal
	f.Fuzz(func(t *testing.T, v []byte) {
		count, wm, posted, err := decodeState(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if posted > count {
			t.Fatalf("state %x: posted %d > count %d", v, posted, count)
		}
		if string(appendState(nil, count, wm, posted)) != string(v) {
			t.Fatalf("state %x decodes to %d/%d/%d, which encodes differently", v, count, wm, posted)
		}
	})
}

// TestSearchAcrossBlocks compares Search with the brute-force definition
// over a dictionary of several posting blocks, where a pattern's trigrams
// occur in different blocks, together only in some (the join moves the
// lead cursor past blocks another trigram is missing from), and long
// strings sit in blocks without trigram matches.
func TestSearchAcrossBlocks(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 4*blockSize + 300
	strs := make([]string, 0, n)
	for i := 0; len(strs) < n; i++ {
		blk := len(strs) >> blockShift
		s := fmt.Sprintf("u%07d select %d", 1_000_000+rng.IntN(1_000_000), rng.IntN(10_000_000))
		switch {
		case i%5003 == 17 && blk%2 == 0:
			s += " quokka-head" // "quo…" only in even blocks
		case i%4999 == 29 && blk >= 2:
			s += " tail-okka" // "okk…" in blocks 2 and later
		case i%7001 == 3 && blk == 3:
			s = strings.Repeat("Long ", 1000) + "QUOKKA" // a long string, verified directly
		case i == 3*blockSize+9:
			s += " quokka-rare" // every trigram, in one block only
		// "xqjwvk": its first trigram leads (the smallest list), "wvk"
		// follows and is missing from blocks 1 and 3, where the lead's
		// "xqjwv" strings are: from block 1 the lead must move to block
		// 2, not past it.
		case i == 100 || i == 2*blockSize+100 || i == 3*blockSize+120:
			s += " xqjwvk"
		case i == blockSize+100 || i == 3*blockSize+100:
			s += " xqjwv-"
		case i > 200 && i <= 250:
			s += " wvk"
		}
		strs = append(strs, s)
	}
	dict := internAll(t, ix, strs, 997)
	patterns := []string{"xqjwvk", "quokka", "QUOKKA-", "okka", "uokk", "quokka-rare", "okka-head", "tail-okka",
		"u1234", "u15", "select 12", "1234567", "ong lo", "zzz"}
	for range 16 {
		s := dict[rng.IntN(len(dict))]
		a := rng.IntN(len(s) - 8)
		patterns = append(patterns, s[a:a+3+rng.IntN(6)])
	}
	check := func(when string) {
		t.Helper()
		checkSearchBruteForce(t, ix, dict, patterns, 7, when)
	}
	check("merged operands")
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}

// TestPostingsOfTheOpenBlock: the trigram postings of a block of ids are
// written when its last id is committed; until then searches verify its
// strings from memory, a reopened index reads them back from the stored
// strings (the writer stopped before the block was complete), and Flush
// writes what a block has so far (a later string of the block adds a
// second operand to its lists). Every search matches the brute-force
// definition throughout.
func TestPostingsOfTheOpenBlock(t *testing.T) {
	dir := t.TempDir()
	ix := openTest(t, dir)
	rng := rand.New(rand.NewPCG(3, 4))
	var strs []string
	gen := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("Key-%d %s/%d #%d", rng.IntN(100_000), []string{"GET", "select", "Quokka", "naïve"}[rng.IntN(4)], rng.IntN(1_000_000), len(strs)+i)
			if (len(strs)+i)%blockSize == 100 {
				out[i] = strings.Repeat("Long ", 1000) + out[i] // no trigrams: the 'l' list
			}
		}
		strs = append(strs, out...)
		return out
	}
	var dict []string
	intern := func(strs []string) {
		for i := 0; i < len(strs); i += 997 {
			b := ix.NewBatch()
			for _, s := range strs[i:min(len(strs), i+997)] {
				if id := b.Intern(s); id != uint64(len(dict))+1 {
					t.Fatalf("Intern(%q) = %d, want %d", s, id, len(dict)+1)
				}
				dict = append(dict, s)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	patterns := []string{"quokka", "key-12", "NAÏVE/1", "select/99", "et/", "zz", "ong long"}
	check := func(when string, wantPosted uint64) {
		t.Helper()
		ix.mu.RLock()
		posted, count, unposted := ix.posted, ix.count, ix.unposted.len()
		ix.mu.RUnlock()
		if posted != wantPosted || count != uint64(len(dict)) || uint64(unposted) != count-posted {
			t.Fatalf("%s: posted %d of %d with %d strings in memory, want posted %d of %d", when, posted, count, unposted, wantPosted, len(dict))
		}
		checkSearchBruteForce(t, ix, dict, append(patterns, dict[len(dict)-1][2:9], dict[rng.IntN(len(dict))][1:6]), 5, when)
	}
	intern(gen(blockSize + 500))
	check("block 0 complete", blockSize-1)
	// The writer stops: what is committed reaches the disk (as a store's
	// checkpoint would flush it), the open block's postings do not.
	if err := ix.db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = openTest(t, dir)
	check("reopened", blockSize-1)
	intern(gen(blockSize))
	check("block 1 complete", 2*blockSize-1)
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed", uint64(len(dict)))
	intern(gen(300)) // the rest of the block flushed in part
	check("after a flush", uint64(len(dict)-300))
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Compact(); err != nil {
		t.Fatal(err)
	}
	check("compacted", uint64(len(dict)))
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix = openTest(t, dir)
	defer ix.Close()
	check("reopened flushed", uint64(len(dict)))
}

// TestStateClaimingTooManyUnposted: a state record whose posted id lies a
// block or more below its count (no writer leaves one: each commit writes
// the postings of every block it completes) is reported as damaged at
// open, instead of reading that many strings into memory; one a block
// minus one below opens, with those strings found by search.
func TestStateClaimingTooManyUnposted(t *testing.T) {
	for _, tc := range []struct {
		name     string
		unposted uint64
		wantErr  bool
	}{{"block-1", blockSize - 1, false}, {"block", blockSize, true}, {"all", blockSize + 100, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ix := openTest(t, dir)
			n := int(blockSize + 100)
			strs := make([]string, n)
			for i := range strs {
				strs[i] = fmt.Sprintf("state-%06d", i)
			}
			internAll(t, ix, strs, 1000)
			if err := ix.Flush(); err != nil {
				t.Fatal(err)
			}
			count, watermark := ix.count, ix.watermark
			if err := ix.db.Set(keyState, appendState(nil, count, watermark, count-tc.unposted), pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			if err := ix.db.Close(nil); err != nil {
				t.Fatal(err)
			}
			ix2, err := Open(dir, Options{})
			if tc.wantErr {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "without postings") {
					t.Fatalf("open with %d strings claimed unposted: %v, want ErrCorrupt naming them", tc.unposted, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ix2.Close()
			if got := ix2.unposted.len(); uint64(got) != tc.unposted {
				t.Fatalf("%d strings read back unposted, want %d", got, tc.unposted)
			}
			want := strs[n-1]
			ids, _, err := ix2.Search(context.Background(), want, 10)
			if err != nil || len(ids) != 1 || ids[0] != count {
				t.Fatalf("search %q = %v, %v; want [%d]", want, ids, err, count)
			}
		})
	}
}

// checkSearchBruteForce compares ix.Search of each pattern, without a
// limit and with limit, against a scan of dict (the index's strings, id
// i+1 at dict[i]): the same ids in order, truncated exactly when the limit
// cut them.
func checkSearchBruteForce(t *testing.T, ix *Index, dict, patterns []string, limit int, when string) {
	t.Helper()
	for _, p := range patterns {
		var want []uint64
		for i, s := range dict {
			if strings.Contains(strings.ToLower(s), strings.ToLower(p)) {
				want = append(want, uint64(i+1))
			}
		}
		for _, limit := range []int{0, limit} {
			got, truncated, err := ix.Search(context.Background(), p, limit)
			if err != nil {
				t.Fatal(err)
			}
			n := len(want)
			if limit > 0 {
				n = min(limit, n)
			}
			if !slices.Equal(got, want[:n]) || truncated != (n < len(want)) {
				t.Fatalf("%s: Search(%q, %d) = %v (truncated %v), want %v of %d", when, p, limit, head(got), truncated, head(want[:n]), len(want))
			}
		}
	}
}

// TestAppendLower: appendLower appends exactly strings.ToLower's bytes,
// ASCII or not (case mappings that change the byte length, invalid UTF-8
// after ASCII upper case), after what dst holds.
func TestAppendLower(t *testing.T) {
	strs := append(corpus(7, 2000), "", "ABC", "already lower", "MiXeD-Case_123", "aBc\xffDEF", "İSTANBUL", "STRASSE ß", "ǅ", "A\u0130")
	for _, s := range strs {
		got := appendLower([]byte("prefix|"), s)
		if want := "prefix|" + strings.ToLower(s); string(got) != want {
			t.Fatalf("appendLower(%.40q) = %.60q, want %.60q", s, got, want)
		}
	}
}

// TestBatchReusesCommittedMap: a committed batch's new-string map, emptied,
// is the next batch's; the next batch sees none of the strings it held as
// its own new strings (they are committed: found with their ids), and an
// abandoned batch's map is not reused.
func TestBatchReusesCommittedMap(t *testing.T) {
	ix := openTest(t, t.TempDir())
	defer ix.Close()
	b1 := ix.NewBatch()
	b1.Intern("alpha")
	b1.Intern("beta")
	m1 := b1.pending
	if err := b1.Commit(); err != nil {
		t.Fatal(err)
	}
	b2 := ix.NewBatch()
	if len(b2.pending) != 0 || reflect.ValueOf(b2.pending).UnsafePointer() != reflect.ValueOf(m1).UnsafePointer() {
		t.Fatalf("second batch's map: %d entries, reused %v", len(b2.pending), reflect.ValueOf(b2.pending).UnsafePointer() == reflect.ValueOf(m1).UnsafePointer())
	}
	if id := b2.Intern("beta"); id != 2 {
		t.Fatalf("committed string got %d, want 2", id)
	}
	if id := b2.Intern("gamma"); id != 3 {
		t.Fatalf("new string got %d, want 3", id)
	}
	if b2.Len() != 1 {
		t.Fatalf("second batch holds %d new strings, want 1", b2.Len())
	}
	m2 := b2.pending
	// Abandoned: its map (holding gamma) must not come back.
	b3 := ix.NewBatch()
	if reflect.ValueOf(b3.pending).UnsafePointer() == reflect.ValueOf(m2).UnsafePointer() {
		t.Fatal("an uncommitted batch's map was handed out again")
	}
	if id := b3.Intern("gamma"); id != 3 {
		t.Fatalf("gamma in a later batch got %d, want 3", id)
	}
	if err := b3.Commit(); err != nil {
		t.Fatal(err)
	}
	if ix.Count() != 3 {
		t.Fatalf("count %d, want 3", ix.Count())
	}
}
