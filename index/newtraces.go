package index

import (
	"encoding/binary"
	mathbits "math/bits"

	"github.com/ztsd/ztsd/internal/membloom"
)

// traceFilter is an in-memory Bloom filter (membloom) of every trace id
// the index holds, kept by the writer for an index that was empty when it
// was opened (a new store, a rebuild): Commit adds each batch's trace ids
// once the batch is committed, so a trace id the filter has not seen is
// certainly new, and counting distinct traces needs no lookup for it. Only
// a trace id the filter may have seen (a continuing trace, or a false
// positive, at most about 1%) is looked up in Pebble. It takes about 1.3
// bytes per trace.
type traceFilter struct {
	membloom.Filter
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

// add records id.
func (t *traceFilter) add(id [16]byte) { t.Add(traceHashes(id)) }

// mayContain reports whether id may have been added; false is certain.
func (t *traceFilter) mayContain(id [16]byte) bool { return t.MayContain(traceHashes(id)) }
