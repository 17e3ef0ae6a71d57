package index

import (
	"encoding/binary"
	mathbits "math/bits"
)

// traceFilter is an in-memory Bloom filter of every trace id the index
// holds, kept by the writer for an index that was empty when it was opened
// (a new store, a rebuild): Commit adds each batch's trace ids once the
// batch is committed, so a trace id the filter has not seen is certainly
// new, and counting distinct traces needs no lookup for it. Only a trace
// id the filter may have seen (a continuing trace, or a false positive, at
// most about 1%) is looked up in Pebble.
//
// It grows as a chain of filters, each twice the capacity of the last
// (about 10 bits and 7 probes per id each), so its memory follows the
// number of traces: about 1.3 bytes per trace.
type traceFilter struct {
	filters []bloom
}

type bloom struct {
	bits     []uint64
	mask     uint64 // number of bits - 1 (a power of two)
	n, limit int
}

const (
	firstFilterIDs = 1 << 14
	bloomProbes    = 7
)

func newBloom(capacity int) bloom {
	nbits := uint64(1) << mathbits.Len64(uint64(capacity*10-1)) // ≥ 10 bits per id
	return bloom{bits: make([]uint64, nbits/64), mask: nbits - 1, limit: capacity}
}

// hashes derives the two hashes the probes combine from a trace id (random
// bits already, except in tests: mixed anyway).
func traceHashes(id [16]byte) (uint64, uint64) {
	a, b := binary.LittleEndian.Uint64(id[:8]), binary.LittleEndian.Uint64(id[8:])
	h1 := mix64(a ^ mathbits.RotateLeft64(b, 31))
	h2 := mix64(b+0x9e3779b97f4a7c15) | 1
	return h1, h2
}

// mix64 is the SplitMix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (f *bloom) add(h1, h2 uint64) {
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & f.mask
		f.bits[bit/64] |= 1 << (bit % 64)
	}
	f.n++
}

func (f *bloom) mayContain(h1, h2 uint64) bool {
	for i := uint64(0); i < bloomProbes; i++ {
		bit := (h1 + i*h2) & f.mask
		if f.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// add records id.
func (t *traceFilter) add(id [16]byte) {
	h1, h2 := traceHashes(id)
	if len(t.filters) == 0 || t.filters[len(t.filters)-1].n >= t.filters[len(t.filters)-1].limit {
		capacity := firstFilterIDs
		if len(t.filters) > 0 {
			capacity = 2 * t.filters[len(t.filters)-1].limit
		}
		t.filters = append(t.filters, newBloom(capacity))
	}
	t.filters[len(t.filters)-1].add(h1, h2)
}

// mayContain reports whether id may have been added; false is certain.
func (t *traceFilter) mayContain(id [16]byte) bool {
	h1, h2 := traceHashes(id)
	for i := range t.filters {
		if t.filters[i].mayContain(h1, h2) {
			return true
		}
	}
	return false
}
