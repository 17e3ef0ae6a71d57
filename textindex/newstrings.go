package textindex

import (
	"hash/maphash"
	mathbits "math/bits"

	"github.com/ztsd/ztsd/internal/membloom"
)

// stringFilter is a Bloom filter (membloom) of every string committed to
// an index that was empty when it was opened (a new store, a rebuild),
// kept by the writer: Commit adds each batch's new strings once the batch
// is committed, so a string the filter has not seen is certainly not in
// the index, and Intern gives it a new id without looking it up in Pebble.
// Only a string the filter may have seen (interned in an earlier batch
// and gone from the cache, or a false positive, at most about 1%) is
// looked up. It takes about 1.3 bytes per string.
type stringFilter struct {
	seed maphash.Seed
	membloom.Filter
}

func newStringFilter() *stringFilter { return &stringFilter{seed: maphash.MakeSeed()} }

// hashes derives the two hashes the probes combine (double hashing).
func (f *stringFilter) hashes(s string) (uint64, uint64) {
	h := maphash.String(f.seed, s)
	h2 := mathbits.RotateLeft64(h, 32)*0x9e3779b97f4a7c15 | 1
	return h, h2
}

// add records s.
func (f *stringFilter) add(s string) { f.Add(f.hashes(s)) }

// mayContain reports whether s may have been added; false is certain.
func (f *stringFilter) mayContain(s string) bool { return f.MayContain(f.hashes(s)) }
