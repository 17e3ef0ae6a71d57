package index

import "testing"

// TestRecentSet: keys added are found until their set (recentWays keys)
// has taken recentWays more recent ones; a lookup makes a key the most
// recent; the zero key is never held; nothing is allocated before the
// first add; and with many sets, a key touched every few thousand new
// keys (a common attribute pair among unique ones) stays.
func TestRecentSet(t *testing.T) {
	one := newRecentSet(recentWays, hashKV) // a single set
	if one.contains(KV{1, 1}) || one.sets != nil {
		t.Fatal("empty set: found a key, or allocated")
	}
	for i := uint64(1); i <= recentWays; i++ {
		one.add(KV{i, i})
	}
	for i := uint64(1); i <= recentWays; i++ {
		if !one.contains(KV{i, i}) {
			t.Fatalf("key %d of %d lost", i, recentWays)
		}
	}
	// Recency now 4 3 2 1 (most recent first); touch 1, add 5: 2 goes.
	one.contains(KV{1, 1})
	one.add(KV{5, 5})
	for i, want := range []bool{false, true, false, true, true, true} {
		if got := one.contains(KV{uint64(i), uint64(i)}); got != want {
			t.Fatalf("after touching 1 and adding 5: contains(%d) = %v, want %v", i, got, want)
		}
	}
	one.add(KV{5, 5}) // present: not added twice
	n := 0
	for _, k := range one.sets[0] {
		if k == (KV{5, 5}) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a key added twice is held %d times", n)
	}
	one.add(KV{})
	if one.contains(KV{}) {
		t.Fatal("the zero key is held")
	}
	one.forget()
	if one.sets != nil || one.contains(KV{5, 5}) {
		t.Fatal("forget kept the sets or a key")
	}
	one.add(KV{5, 5})
	if !one.contains(KV{5, 5}) {
		t.Fatal("a key added after forget is not held")
	}

	ids := newRecentSet(1<<12, hashTraceID)
	common := [16]byte{0xc0, 0x11}
	ids.add(common)
	for i := 0; i < 100_000; i++ {
		ids.add([16]byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, byte(i * 7)})
		if i%1000 == 0 && !ids.contains(common) {
			t.Fatalf("a key looked up every 1,000 new keys was forgotten after %d", i)
		}
	}
	recent := 0
	for i := 100_000 - 1024; i < 100_000; i++ {
		if ids.contains([16]byte{byte(i), byte(i >> 8), byte(i >> 16), 1, 2, byte(i * 7)}) {
			recent++
		}
	}
	if recent < 900 {
		t.Fatalf("of the last 1,024 keys added to a set of 4,096, %d are held", recent)
	}
}
