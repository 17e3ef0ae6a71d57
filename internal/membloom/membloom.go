// Package membloom is an in-memory Bloom filter that grows with what is
// added: a chain of filters, each twice the capacity of the last (about 10
// bits and 7 probes per key each), so its memory follows the number of keys
// (about 1.3 bytes per key) and its false-positive rate stays near 1% per
// filter of the chain.
//
// Callers hash their keys themselves into two 64-bit hashes (double
// hashing: probe i tests bit h1 + i·h2); h2 must be odd. A key added is
// always reported present; a key never added is reported present with the
// chain's false-positive probability. A Filter is not safe for concurrent
// use. The index writers keep one each (index: trace ids; textindex:
// strings) for an index opened empty, to skip lookups of keys that are new.
package membloom

import mathbits "math/bits"

// FirstCapacity is the capacity of the chain's first filter.
const FirstCapacity = 1 << 14

const probes = 7

// Filter is a growing Bloom filter of hash pairs; the zero value is empty
// and ready.
type Filter struct {
	chain []filter
}

type filter struct {
	bits     []uint64
	mask     uint64 // number of bits - 1 (a power of two)
	n, limit int
}

func newFilter(capacity int) filter {
	nbits := uint64(1) << mathbits.Len64(uint64(capacity*10-1)) // ≥ 10 bits per key
	return filter{bits: make([]uint64, nbits/64), mask: nbits - 1, limit: capacity}
}

// Add records the key hashed to (h1, h2).
func (f *Filter) Add(h1, h2 uint64) {
	if n := len(f.chain); n == 0 || f.chain[n-1].n >= f.chain[n-1].limit {
		capacity := FirstCapacity
		if n > 0 {
			capacity = 2 * f.chain[n-1].limit
		}
		f.chain = append(f.chain, newFilter(capacity))
	}
	b := &f.chain[len(f.chain)-1]
	for i := uint64(0); i < probes; i++ {
		bit := (h1 + i*h2) & b.mask
		b.bits[bit/64] |= 1 << (bit % 64)
	}
	b.n++
}

// MayContain reports whether the key hashed to (h1, h2) may have been
// added; false is certain.
func (f *Filter) MayContain(h1, h2 uint64) bool {
	for j := range f.chain {
		if f.chain[j].mayContain(h1, h2) {
			return true
		}
	}
	return false
}

func (b *filter) mayContain(h1, h2 uint64) bool {
	for i := uint64(0); i < probes; i++ {
		bit := (h1 + i*h2) & b.mask
		if b.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// Filters returns the number of filters in the chain (it grows by one each
// time the last one is full).
func (f *Filter) Filters() int { return len(f.chain) }
