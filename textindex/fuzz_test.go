package textindex

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// FuzzSearch compares Search with the brute-force definition for arbitrary
// patterns (any bytes, any case, any length) over a fixed dictionary.
func FuzzSearch(f *testing.F) {
	ix := openTest(f, f.TempDir())
	f.Cleanup(func() { ix.Close() })
	dict := internAll(f, ix, corpus(9, 400), 100)
	for _, p := range []string{"", "a", "ORD", "straSSe", "İs", "日本語", "\xff", "needle", "xception4"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, truncated, err := ix.Search(context.Background(), p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteSearch(dict, p); truncated || !slices.Equal(got, want) {
			t.Fatalf("Search(%q) = %v, want %v", p, head(got), head(want))
		}
	})
}

// FuzzDecodeID: the value of a string key decodes to an id in [1, count]
// or to ErrCorrupt.
func FuzzDecodeID(f *testing.F) {
	f.Add([]byte{1}, uint64(5))
	f.Add([]byte{0x80, 0x01}, uint64(0))
	f.Add([]byte{0}, uint64(1))
	f.Fuzz(func(t *testing.T, v []byte, count uint64) {
		id, err := decodeID(v, count)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if id == 0 || (count != 0 && id > count) {
			t.Fatalf("decodeID(%x, %d) = %d", v, count, id)
		}
	})
}
