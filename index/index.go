package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/index/kv"
)

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("index closed")

// ErrReadOnly is returned by Commit on an index opened with OpenReadOnly.
var ErrReadOnly = errors.New("index opened read-only")

// ErrNoIndex is returned by OpenReadOnly when dir holds no index.
var ErrNoIndex = errors.New("no index")

// ErrBatchConflict is returned by Commit when another batch was committed
// after this one was created: the index has a single writer.
var ErrBatchConflict = errors.New("index batch conflicts with a batch committed after it was created")

// Location is where a span chunk is in the data file.
type Location struct {
	ChunkOffset int64  // offset of the chunk in the data file
	Index       uint32 // the span's index inside the chunk
}

// KV is an attribute as text-index ids.
type KV struct{ Key, Value uint64 }

// SpanEntry is what the writer indexes for one chunk of one span.
type SpanEntry struct {
	TraceID    [16]byte
	SpanID     uint64
	ParentID   uint64 // 0 for a root span
	ChunkNum   uint32
	StartNS    int64
	DurationNS int64
	Error      bool // span error flag OR errors > 0
	Loc        Location
	Attrs      []KV     // text ids of the span's attributes
	Texts      []uint64 // distinct text ids of every string of the span
}

// SpanRef is one stored entry: enough to fetch the span chunk from the data
// file and to order and filter it.
type SpanRef struct {
	TraceID    [16]byte
	SpanID     uint64
	ParentID   uint64
	ChunkNum   uint32
	Loc        Location
	StartNS    int64
	DurationNS int64
	Error      bool
}

// Options configure Open.
type Options struct {
	// CacheBytes bounds Pebble's block cache; 0 means 32 MiB. (Memtables
	// take up to another 32 MiB.)
	CacheBytes int64
	// Cache, when set, is a block cache shared with other indexes
	// (kv.NewSharedCache); CacheBytes is then ignored.
	Cache *pebble.Cache
	// BlockShift sets 1<<BlockShift entries per block when the index is
	// created (MinBlockShift..MaxBlockShift, 0 means DefaultBlockShift). An
	// existing index keeps the value it was created with.
	BlockShift int
	// TraceCacheEntries bounds the writer's memory of recently seen trace
	// ids (used to count distinct traces without a lookup); 0 means 65536.
	TraceCacheEntries int
	// ColumnCacheBlocks bounds how many decoded time columns of sealed
	// blocks searches keep (about 9 bytes per entry each); 0 means 256.
	ColumnCacheBlocks int
	// Logf receives Pebble's informational log lines; nil discards them.
	Logf func(format string, args ...any)
	// InMemory builds a new index in memory only (dir names it, nothing
	// is written there): what a read-only start on a full disk uses for a
	// store whose index on disk lags its data file.
	InMemory bool
	// BulkLoad builds a new index in one go (see kv.OpenOptions.BulkLoad):
	// the writer calls Compact when it is done.
	BulkLoad bool
	// Settled opens an index that takes few writes more, a sealed
	// store's (see kv.OpenOptions.Settled): what it holds in L0 is
	// compacted into the level below, and no level is compacted for its
	// size.
	Settled bool
}

// Index is an open metadata index. Its methods are safe for concurrent use
// by one writer (through Batch) and many readers.
type Index struct {
	db         *kv.DB
	dir        string
	blockShift uint
	blockSize  uint32
	columns    *columnCache
	// prefetchKeys is maxPrefetchKeys (tests lower it to force the dense
	// search path).
	prefetchKeys int

	writeMu sync.Mutex // serializes Commit; guards recent, pairs, builder and wb
	recent  *recentSet[[16]byte]
	pairs   *recentSet[KV]
	builder blockPostings // builds a sealed block's posting lists
	wb      kv.Batch      // each Commit's writes, its arrays kept for the next
	keep    int           // how much of wb's arrays to keep (kv.Batch.Reset)
	// known holds every trace id of an index that was empty when opened
	// (nil otherwise, or read-only): see traceFilter.
	known *traceFilter

	mu        sync.RWMutex // guards the fields below: the committed view
	spans     uint64
	traces    uint64
	watermark int64
	sealed    []blockSummary // full blocks 0..len-1; append-only
	tail      blockSummary   // block len(sealed) while it fills (n == 0: empty)
	order     *blockOrder    // sealed blocks [0, order.upto) by max start desc

	// open indexes the open block in memory (see openBlock).
	open *openBlock
}

// Open opens the index in dir, creating it when missing.
func Open(dir string, opt Options) (*Index, error) {
	return open(dir, opt, false)
}

// OpenReadOnly opens an existing index without writing anything to dir
// (Pebble's read-only mode), for verification and recovery. Batches cannot
// be committed and Flush fails. A missing or empty directory yields an
// error wrapping ErrNoIndex.
func OpenReadOnly(dir string, opt Options) (*Index, error) {
	return open(dir, opt, true)
}

func open(dir string, opt Options, readOnly bool) (*Index, error) {
	if opt.BlockShift == 0 {
		opt.BlockShift = DefaultBlockShift
	}
	if opt.BlockShift < MinBlockShift || opt.BlockShift > MaxBlockShift {
		return nil, fmt.Errorf("index %s: block shift %d outside [%d, %d]", dir, opt.BlockShift, MinBlockShift, MaxBlockShift)
	}
	if opt.ColumnCacheBlocks <= 0 {
		opt.ColumnCacheBlocks = 256
	}
	if opt.TraceCacheEntries <= 0 {
		opt.TraceCacheEntries = 1 << 16
	}
	db, err := kv.OpenDB("index "+dir, dir, kv.OpenOptions{CacheBytes: opt.CacheBytes, Cache: opt.Cache, Merger: newMerger(), Logf: opt.Logf, ReadOnly: readOnly, InMemory: opt.InMemory, BulkLoad: opt.BulkLoad && !readOnly, Settled: opt.Settled && !readOnly},
		kv.Errors{Closed: ErrClosed, NoIndex: ErrNoIndex, Corrupt: ErrCorrupt})
	if err != nil {
		return nil, err
	}
	ix := &Index{
		db: db, dir: dir,
		prefetchKeys: maxPrefetchKeys,
		keep:         kv.KeepSmall,
		columns:      newColumnCache(opt.ColumnCacheBlocks),
		recent:       newRecentSet(opt.TraceCacheEntries, hashTraceID),
		pairs:        newRecentSet(opt.TraceCacheEntries, hashKV),
		order:        &blockOrder{},
	}
	if opt.BulkLoad {
		ix.keep = kv.KeepLarge
	}
	if err := ix.load(uint(opt.BlockShift)); err != nil {
		_ = db.DB.Close()
		return nil, fmt.Errorf("index %s: %w", dir, err)
	}
	return ix, nil
}

// load reads (or, for a new index, writes) the format record, the counters
// and the block summaries.
func (ix *Index) load(createShift uint) error {
	format, err := ix.db.LoadFormat(keyFormat, []byte{formatVersion, byte(createShift)})
	if err != nil {
		return err
	}
	if len(format) != 2 || format[0] != formatVersion {
		return corruptf("format record %x: want version %d", format, formatVersion)
	}
	if format[1] < MinBlockShift || format[1] > MaxBlockShift {
		return corruptf("format record: block shift %d out of range", format[1])
	}
	ix.blockShift = uint(format[1])
	ix.blockSize = 1 << ix.blockShift

	stateVal, _, err := ix.get(keyState)
	if err != nil {
		return err
	}
	st := state{}
	if stateVal != nil {
		if st, err = decodeState(stateVal, ix.blockSize); err != nil {
			return err
		}
	}
	ix.spans, ix.traces, ix.watermark, ix.tail = st.spans, st.traces, st.watermark, st.tail

	// Sealed blocks: a summary each, every one full.
	nsealed := ix.spans >> ix.blockShift
	lower := []byte{prefixBlock}
	iter, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	defer iter.Close()
	var sealed []blockSummary
	for iter.First(); iter.Valid(); iter.Next() {
		k := iter.Key()
		blk, n, ok := readOrdered(k[1:])
		if !ok || 1+n != len(k) {
			return corruptf("block summary key %x: malformed", k)
		}
		if blk != uint64(len(sealed)) {
			return corruptf("block summary %d missing (found %d)", len(sealed), blk)
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		s, err := decodeSummary(v, blk, ix.blockSize)
		if err != nil {
			return err
		}
		if s.n != ix.blockSize {
			return corruptf("sealed block %d summary holds %d spans, want %d", blk, s.n, ix.blockSize)
		}
		sealed = append(sealed, s)
	}
	if err := iter.Error(); err != nil {
		return err
	}
	if uint64(len(sealed)) != nsealed {
		return corruptf("%d block summaries for %d spans (want %d)", len(sealed), ix.spans, nsealed)
	}
	ix.sealed = sealed
	ix.order = buildOrder(nil, sealed)
	if ix.spans == 0 && !ix.db.ReadOnly() {
		// Every trace id the index will hold goes through Commit.
		ix.known = &traceFilter{}
	}

	// The open block: its rows, back in memory.
	ix.open = newOpenBlock(nsealed, ix.tail.n)
	if ix.tail.n > 0 {
		v, ok, err := ix.get(numKey(nil, prefixRows, nsealed))
		if err != nil {
			return err
		}
		if !ok {
			return corruptf("rows of open block %d missing", nsealed)
		}
		var seen uint32
		err = decodeRows(v, nsealed, ix.blockSize, ix.tail.n, func(off uint32, r row) {
			if off == seen {
				ix.open.rows = ix.open.appendRows([]row{r})
				seen++
			}
		})
		if err != nil {
			return err
		}
		if seen != ix.tail.n {
			return corruptf("rows of open block %d: %d of %d entries in order", nsealed, seen, ix.tail.n)
		}
	}
	return nil
}

func (ix *Index) get(key []byte) ([]byte, bool, error) { return ix.db.Value(key) }

// acquire holds the index open for one operation.
func (ix *Index) acquire() error { return ix.db.Acquire() }

func (ix *Index) release() { ix.db.Release() }

// Watermark returns the data-file offset up to which the index is complete
// (0 for a new index).
func (ix *Index) Watermark() (int64, error) {
	if err := ix.acquire(); err != nil {
		return 0, err
	}
	defer ix.release()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.watermark, nil
}

// Stats are counts kept by the index.
type Stats struct {
	Spans  uint64 // entries added (AddSpan calls committed)
	Traces uint64 // distinct trace ids
	Blocks uint64 // blocks of 1<<BlockShift entries, the last possibly partial
}

// Stats returns the index's counts as of the last commit.
func (ix *Index) Stats() Stats {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	st := Stats{Spans: ix.spans, Traces: ix.traces, Blocks: uint64(len(ix.sealed))}
	if ix.tail.n > 0 {
		st.Blocks++
	}
	return st
}

// Compaction returns the index's compaction debt and running flushes and
// compactions (zero once closed).
func (ix *Index) Compaction() kv.Compaction { return ix.db.Compaction() }

// DiskBytes returns the bytes the index occupies on disk (sstables and
// manifests).
func (ix *Index) DiskBytes() uint64 { return ix.db.DiskBytes() }

// Flush writes the memtable to sstables so that everything committed so far
// survives a crash.
func (ix *Index) Flush() error { return ix.db.FlushMemtable() }

// Compact compacts the whole index into as few levels as possible
// (tests, benchmarks and `verify` use it to measure the settled size).
func (ix *Index) Compact() error { return ix.db.CompactAll() }

// L0Tables returns how many flushed tables wait in the index's L0.
func (ix *Index) L0Tables() int64 { return ix.db.L0Tables() }

// Settle compacts a small index with tables in L0 whole into its last
// level (kv.DB.Settle); a store does it at close.
func (ix *Index) Settle(minL0, maxBytes, room uint64) (bool, error) {
	return ix.db.Settle(minL0, maxBytes, room)
}

// ReleaseMemTables gives back the block cache an index that has stopped
// taking writes keeps for its memtables: it flushes the index and reopens
// it in place, between operations (kv.DB.Reopen); operations before and
// after it see the same entries and none fails for it. It reports whether
// it reopened (an index in memory or read-only is left as it is). A store
// calls it once sealed. It waits, until ctx ends, for a moment when no
// operation holds the index.
func (ix *Index) ReleaseMemTables(ctx context.Context) (bool, error) {
	// The writer's batch arrays and recent keys go too: a sealed store
	// writes no more.
	ix.writeMu.Lock()
	ix.wb = kv.Batch{}
	ix.recent.forget()
	ix.pairs.forget()
	ix.writeMu.Unlock()
	return ix.db.Reopen(ctx, nil)
}

// MemTableBytes returns the bytes of block cache the index's memtables
// reserve (0 once closed).
func (ix *Index) MemTableBytes() uint64 { return ix.db.MemTableBytes() }

// Checkpoint writes a consistent copy of the index as of now into dir
// (which must not exist); see kv.DB.CheckpointTo.
func (ix *Index) Checkpoint(dir string) error { return ix.db.CheckpointTo(dir) }

// Close flushes (the index has no WAL) and closes the index. Close waits for
// running operations; it must not be called from a Search callback.
func (ix *Index) Close() error { return ix.db.Close(nil) }

// TraceSpans returns every entry of the trace, sorted by start, then chunk
// number, then span id. An entry added again for the same (span id, chunk
// number) replaces the earlier one. An unknown trace yields no entries and
// no error.
func (ix *Index) TraceSpans(traceID [16]byte) ([]SpanRef, error) {
	recs, err := ix.traceRecords(traceID)
	if err != nil {
		return nil, err
	}
	return refsOf(recs), nil
}

// Span returns the entries (one per chunk) of one span of a trace, sorted
// by chunk number.
func (ix *Index) Span(traceID [16]byte, spanID uint64) ([]SpanRef, error) {
	recs, err := ix.traceRecords(traceID)
	if err != nil {
		return nil, err
	}
	recs = slices.DeleteFunc(recs, func(r traceRec) bool { return r.ref.SpanID != spanID })
	refs := refsOf(recs)
	slices.SortStableFunc(refs, func(a, b SpanRef) int { return int64Cmp(int64(a.ChunkNum), int64(b.ChunkNum)) })
	return refs, nil
}

// traceRecords returns the deduplicated records of a trace.
func (ix *Index) traceRecords(traceID [16]byte) ([]traceRec, error) {
	if err := ix.acquire(); err != nil {
		return nil, err
	}
	defer ix.release()
	key := traceKey(nil, traceID)
	// A point lookup that skips the last level's bloom filters: callers
	// ask the stores whose trace filter may hold the trace (storedir), so
	// the key is almost always there, its filter check passes and its data
	// block is read anyway; the last level's filter blocks are the largest
	// (MBs per table), and loading one that left the block cache was most
	// of a get's index time at 10M spans. A store without the trace (the
	// trace filter's false positives, ~1%) costs a last-level data block.
	r, err := kv.NewPresentKeyReader(ix.db.DB)
	if err != nil {
		return nil, fmt.Errorf("index %s: trace %x: %w", ix.dir, traceID, err)
	}
	defer r.Close()
	v, ok, err := r.Get(key)
	if err != nil {
		return nil, fmt.Errorf("index %s: trace %x: %w", ix.dir, traceID, err)
	}
	if !ok {
		return nil, nil
	}
	recs, err := decodeTraceValue(v, traceID, nil)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", ix.dir, err)
	}
	return sortTraceRecords(currentRecords(recs)), nil
}

// sortTraceRecords sorts a trace's records by start time, chunk number and
// span id: the order of TraceSpans.
func sortTraceRecords(recs []traceRec) []traceRec {
	slices.SortFunc(recs, func(a, b traceRec) int {
		if c := int64Cmp(a.ref.StartNS, b.ref.StartNS); c != 0 {
			return c
		}
		if c := int64Cmp(int64(a.ref.ChunkNum), int64(b.ref.ChunkNum)); c != 0 {
			return c
		}
		return uint64Cmp(a.ref.SpanID, b.ref.SpanID)
	})
	return recs
}

// currentRecords keeps, of each (span id, chunk number), the latest entry
// (the highest seq); the result is sorted by span id and chunk number.
func currentRecords(recs []traceRec) []traceRec {
	slices.SortFunc(recs, func(a, b traceRec) int {
		if c := uint64Cmp(a.ref.SpanID, b.ref.SpanID); c != 0 {
			return c
		}
		if c := int64Cmp(int64(a.ref.ChunkNum), int64(b.ref.ChunkNum)); c != 0 {
			return c
		}
		return uint64Cmp(b.seq, a.seq)
	})
	return slices.CompactFunc(recs, func(a, b traceRec) bool {
		return a.ref.SpanID == b.ref.SpanID && a.ref.ChunkNum == b.ref.ChunkNum
	})
}

func refsOf(recs []traceRec) []SpanRef {
	if len(recs) == 0 {
		return nil
	}
	refs := make([]SpanRef, len(recs))
	for i := range recs {
		refs[i] = recs[i].ref
	}
	return refs
}

// AttrKeys returns up to limit (≤ 0: all) distinct attribute key ids
// stored in the index, ascending. It costs one seek per distinct key (the
// posting lists are skipped over) plus one read of the open block.
func (ix *Index) AttrKeys(limit int) ([]uint64, error) {
	if err := ix.acquire(); err != nil {
		return nil, err
	}
	defer ix.release()
	v := ix.view()
	r, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		return nil, fmt.Errorf("index %s: attribute keys: %w", ix.dir, err)
	}
	defer r.Close()
	// Keys in the open block, which has rows instead of posting lists.
	var open []uint64
	if v.tail.n > 0 {
		blk := uint64(len(v.sealed))
		if val, ok, err := r.Get(numKey(nil, prefixRows, blk)); err != nil {
			return nil, fmt.Errorf("index %s: attribute keys: %w", ix.dir, err)
		} else if ok {
			err := decodeRows(val, blk, v.blockSize, v.tail.n, func(_ uint32, rw row) {
				for _, a := range rw.attrs {
					open = append(open, a.Key)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("index %s: %w", ix.dir, err)
			}
			slices.Sort(open)
			open = slices.Compact(open)
		}
	}
	lower := []byte{prefixAttr}
	upper := prefixEnd(lower)
	iter := r.Iter
	var keys []uint64
	var seek []byte
	for valid := iter.SeekGE(lower); valid && bytes.Compare(iter.Key(), upper) < 0; {
		k := iter.Key()
		x, _, ok := readOrdered(k[1:])
		if !ok {
			return nil, fmt.Errorf("index %s: %w", ix.dir, corruptf("attribute key %x: malformed", k))
		}
		keys = append(keys, x)
		if x == ^uint64(0) || limit > 0 && len(keys) >= limit {
			break
		}
		seek = appendOrdered(append(seek[:0], prefixAttr), x+1)
		valid = iter.SeekGE(seek)
	}
	if err := iter.Error(); err != nil {
		return nil, fmt.Errorf("index %s: attribute keys: %w", ix.dir, err)
	}
	keys = append(keys, open...)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// AttrValues returns up to limit (≤ 0: all) distinct value ids stored for
// the attribute key keyID, ascending.
func (ix *Index) AttrValues(keyID uint64, limit int) ([]uint64, error) {
	if err := ix.acquire(); err != nil {
		return nil, err
	}
	defer ix.release()
	v := ix.view()
	r, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		return nil, fmt.Errorf("index %s: attribute values of %d: %w", ix.dir, keyID, err)
	}
	defer r.Close()
	// Values in the open block, which has rows instead of posting lists.
	var open []uint64
	if v.tail.n > 0 {
		blk := uint64(len(v.sealed))
		if val, ok, err := r.Get(numKey(nil, prefixRows, blk)); err != nil {
			return nil, fmt.Errorf("index %s: attribute values of %d: %w", ix.dir, keyID, err)
		} else if ok {
			err := decodeRows(val, blk, v.blockSize, v.tail.n, func(_ uint32, rw row) {
				for _, a := range rw.attrs {
					if a.Key == keyID {
						open = append(open, a.Value)
					}
				}
			})
			if err != nil {
				return nil, fmt.Errorf("index %s: %w", ix.dir, err)
			}
			slices.Sort(open)
			open = slices.Compact(open)
		}
	}
	// Values with posting lists: one seek per distinct value.
	lower := appendOrdered([]byte{prefixAttr}, keyID)
	upper := prefixEnd(lower)
	iter := r.Iter
	var out []uint64
	full := func() bool { return limit > 0 && len(out) >= limit }
	emit := func(x uint64) {
		for len(open) > 0 && open[0] < x && !full() {
			out = append(out, open[0])
			open = open[1:]
		}
		if len(open) > 0 && open[0] == x {
			open = open[1:]
		}
		if !full() {
			out = append(out, x)
		}
	}
	var seek []byte
	for valid := iter.SeekGE(lower); valid && bytes.Compare(iter.Key(), upper) < 0 && !full(); {
		k := iter.Key()
		x, _, ok := readOrdered(k[len(lower):])
		if !ok {
			return out, fmt.Errorf("index %s: %w", ix.dir, corruptf("attribute key %x: malformed", k))
		}
		emit(x)
		if x == ^uint64(0) {
			break
		}
		seek = attrPrefix(seek[:0], keyID, x+1)
		valid = iter.SeekGE(seek)
	}
	if err := iter.Error(); err != nil {
		return out, fmt.Errorf("index %s: attribute values of %d: %w", ix.dir, keyID, err)
	}
	for len(open) > 0 && !full() {
		out = append(out, open[0])
		open = open[1:]
	}
	return out, nil
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func uint64Cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
