package textindex

import (
	"hash/maphash"
	mathbits "math/bits"
)

// stringFilter is a Bloom filter of every string committed to an index
// that was empty when it was opened (a new store, a rebuild), kept by the
// writer: Commit adds each batch's new strings once the batch is
// committed, so a string the filter has not seen is certainly not in the
// index, and Intern gives it a new id without looking it up in Pebble.
// Only a string the filter may have seen (interned in an earlier batch
// and gone from the cache, or a false positive, at most about 1%) is
// looked up.
//
// It grows as a chain of filters, each twice the capacity of the last
// (about 10 bits and 7 probes per string each), so its memory follows the
// number of strings: about 1.3 bytes per string.
type stringFilter struct {
	seed    maphash.Seed
	filters []stringBloom
}

type stringBloom struct {
	bits     []uint64
	mask     uint64 // number of bits - 1 (a power of two)
	n, limit int
}

const (
	firstFilterStrings = 1 << 14
	bloomProbes        = 7
)

func newStringFilter() *stringFilter { return &stringFilter{seed: maphash.MakeSeed()} }

func newStringBloom(capacity int) stringBloom {
	nbits := uint64(1) << mathbits.Len64(uint64(capacity*10-1)) // ≥ 10 bits per string
	return stringBloom{bits: make([]uint64, nbits/64), mask: nbits - 1, limit: capacity}
}

// hashes derives the two hashes the probes combine (double hashing).
func (f *stringFilter) hashes(s string) (uint64, uint64) {
	h := maphash.String(f.seed, s)
	h2 := mathbits.RotateLeft64(h, 32)*0x9e3779b97f4a7c15 | 1
	return h, h2
}

func (b *stringBloom) add(h1, h2 uint64) {
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & b.mask
		b.bits[bit/64] |= 1 << (bit % 64)
	}
	b.n++
}

func (b *stringBloom) mayContain(h1, h2 uint64) bool {
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & b.mask
		if b.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// add records s.
func (f *stringFilter) add(s string) {
	h1, h2 := f.hashes(s)
	if n := len(f.filters); n == 0 || f.filters[n-1].n >= f.filters[n-1].limit {
		capacity := firstFilterStrings
		if n > 0 {
			capacity = 2 * f.filters[n-1].limit
		}
		f.filters = append(f.filters, newStringBloom(capacity))
	}
	f.filters[len(f.filters)-1].add(h1, h2)
}

// mayContain reports whether s may have been added; false is certain.
func (f *stringFilter) mayContain(s string) bool {
	h1, h2 := f.hashes(s)
	for i := range f.filters {
		if f.filters[i].mayContain(h1, h2) {
			return true
		}
	}
	return false
}
