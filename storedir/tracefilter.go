package storedir

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// traceFilter is a Bloom filter of the trace ids of a store: Append's
// duplicate check and search's superseded check skip a store's index
// lookup for a trace its filter rules out, so what a write pays for
// idempotency stays about one hash per store for a new trace (most are
// new), not one index read per store. About 10 bits per expected trace, 7
// probes (< 1% false positives at the expected count; a fuller filter only
// lets more lookups through, it never rules out a trace it holds).
//
// The committer adds every trace id it indexes (before the index commit);
// a background scan of the index adds those indexed before the filter
// existed, and only then is the filter ready: until then every lookup goes
// to the index. Bits are set and read atomically.
//
// The hashing is fixed (no per-process seed), so a filter can be written
// to a file and read back by another process (EncodeTraceFilter: the
// "tracefilter" object of an uploaded store, see remotefilter.go).
type traceFilter struct {
	bits  []uint64
	m     uint64 // number of bits
	ready atomic.Bool
}

const (
	filterBitsPerTrace = 10
	filterProbes       = 7
	// filterBytesPerTrace is the data-file bytes per trace a store that
	// still takes writes is sized for (a full store of small traces).
	filterBytesPerTrace = 256
)

func newTraceFilter(traces uint64) *traceFilter {
	words := (max(traces*filterBitsPerTrace, 64) + 63) / 64
	return &traceFilter{bits: make([]uint64, words), m: words * 64}
}

// hashes derives the two probe hashes of id (double hashing) from both
// halves of the id through the splitmix64 finalizer: ids that are not
// random (sequential, imported) still spread over the bits.
func (f *traceFilter) hashes(id trace.TraceID) (uint64, uint64) {
	lo := binary.BigEndian.Uint64(id[0:8])
	hi := binary.BigEndian.Uint64(id[8:16])
	h1 := mix64(lo ^ mix64(hi^0x9e3779b97f4a7c15))
	return h1, mix64(h1^0xc2b2ae3d27d4eb4f) | 1
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func (f *traceFilter) add(id trace.TraceID) {
	h1, h2 := f.hashes(id)
	for i := uint64(0); i < filterProbes; i++ {
		bit := (h1 + i*h2) % f.m
		atomic.OrUint64(&f.bits[bit/64], 1<<(bit%64))
	}
}

// mayContain is false only when the filter is ready and id was never added.
func (f *traceFilter) mayContain(id trace.TraceID) bool {
	if !f.ready.Load() {
		return true
	}
	h1, h2 := f.hashes(id)
	for i := uint64(0); i < filterProbes; i++ {
		bit := (h1 + i*h2) % f.m
		if atomic.LoadUint64(&f.bits[bit/64])&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// mayHoldTrace reports whether the store may hold entries of trace id.
func (s *Store) mayHoldTrace(id trace.TraceID) bool {
	f := s.filter.Load()
	return f == nil || f.mayContain(id)
}

// filterIndexed adds the trace ids of spans about to be indexed.
func (s *Store) filterIndexed(spans []*trace.Span) {
	if f := s.filter.Load(); f != nil {
		for _, sp := range spans {
			f.add(sp.TraceID)
		}
	}
}

// newStoreFilter sizes the filter of a store holding traces traces: that
// many for a sealed store, room for a full store for one taking writes.
func newStoreFilter(traces uint64, sealed bool, maxStoreSize int64) *traceFilter {
	if !sealed && maxStoreSize > 0 {
		traces = max(traces, uint64(maxStoreSize/filterBytesPerTrace))
	}
	return newTraceFilter(traces)
}

// fillFilter scans the store's index into its filter in the background
// (bg's goroutines end when the DB closes; closing the store cancels the
// scan first, see close) and then makes the filter ready.
func (s *Store) fillFilter(bg *background) {
	f := s.filter.Load()
	if f == nil || f.ready.Load() {
		return
	}
	ctx, cancel := context.WithCancel(bg.ctx)
	s.mu.Lock()
	s.filterCancel = cancel
	s.mu.Unlock()
	bg.wg.Add(1)
	go func() {
		defer bg.wg.Done()
		defer cancel()
		t0 := time.Now()
		s.refs.RLock() // the index stays open while we read it
		defer s.refs.RUnlock()
		if ctx.Err() != nil {
			return
		}
		n := 0
		if err := s.meta.TraceIDs(ctx, func(id [16]byte) { f.add(trace.TraceID(id)); n++ }); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("trace filter not built; duplicate checks read this store's index", "err", err)
			}
			return
		}
		f.ready.Store(true)
		s.log.Debug("trace filter built", "traces", n, "bytes", len(f.bits)*8, "took", time.Since(t0).Round(time.Millisecond))
	}()
}
