// Package kv owns how ztsd runs Pebble for a store's two indexes (meta/ and
// text/): how they are opened (Open, the one place for both) and with which
// options, the lifecycle both share (DB: operations hold it open, Close
// flushes, the format record, flush/compact/checkpoint and compaction
// state), the block cache (one per database, or one shared by many:
// NewSharedCache), the key comparer, a quiet logger, point lookups that use
// every level's bloom filter (or all but the last level's, for keys that
// are usually present), and batches applied in key order.
//
// Invariants: the indexes run without Pebble's WAL, because each records,
// in the same batch as its entries, the data-file offset it is complete up
// to and is rebuilt from the data file past that offset after a crash; so
// Close must flush, and commits never sync.
package kv

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"
)

// FormatMajorVersion is the Pebble format major version the index is created
// with: FormatVirtualSSTables, the newest (pebble.FormatNewest) of Pebble
// v1.1.5, named explicitly so that a Pebble upgrade never silently ratchets
// the on-disk format.
const FormatMajorVersion = pebble.FormatVirtualSSTables

// DefaultCacheBytes is the block cache size indexes use by default.
const DefaultCacheBytes = 32 << 20

// Memtables: Pebble reserves their memory from the block cache, so the cache
// is created larger by memTableBytes × maxMemTables (NewCache).
//
// Pebble grows a database's memtable size by doubling from 256 KiB up to
// MemTableSize and never shrinks it; it also keeps the last flushed
// memtable to recycle, reserved as well. So an index that took many
// writes keeps up to two full-size memtables reserved from the cache for
// as long as it stays open, writes or not. A store's indexes are
// therefore reopened once it is sealed (DB.Reopen; storedir's
// releaseMemTables), which leaves each with a fresh open's one 256 KiB
// memtable. Before that (up to 98e557c), every store sealed while the
// daemon ran kept its reservations until a restart: with 64 MiB memtables
// the sealed stores of a 10M-span bulk load (three, at the default 1 GiB
// max_store_size) reserved ~384 MiB of the 512 MiB cache, the bloom
// filters no longer stayed cached, and at rest attribute search p50 went
// from 1.8 to 20.7 ms, get CPU from 475 to 567 µs, and the bulk load from
// 65k to 36k spans/s (make bench-large); with 16 MiB, 32-64 MiB per
// rotation, all of the default cache after about eight.
//
// Memtables are 32 MiB: larger ones cost less CPU per span written, since
// an index's keys are spread over its whole key space (see
// l0CompactionThreshold), so each flushed table overlaps all of the base
// level and each L0 → base compaction rewrites it; twice the memtable is
// half the flushes and half those compactions. Storing 1.2M spans of the
// bench workload took 28.5–29.7 µs of daemon CPU per span with 16 MiB
// memtables and 24.2–26.2 with 64 MiB (~530 against ~310 MB of index
// tables written); 10M spans, with sealed stores' memtables released,
// 28.6–30.3 against 24.1–25.0 (two builds each, alternated, the machine
// shared). They stayed at 16 MiB until the stores stopped resting with
// more in L0 (snappy tables of 4 KiB blocks over the whole key space,
// which every posting-list seek merges): at 10M the two sealed stores'
// metadata indexes kept 9 and 0 MB there with 16 MiB memtables, 34 and
// 57 MB with 64, and read at rest, the means of the search p50s were
// slower with 64 (attribute 1.86 against 2.27 ms, duration 2.51 against
// 2.89), search CPU 3.70 against 3.97 ms, get CPU 331 against 367 µs. A
// sealed store's reopen (DB.Reopen, OpenOptions.Settled) now compacts
// whatever its indexes left in L0 into the base level, so a sealed store
// rests without L0 tables whatever the memtable size. 32, not 64: the
// writing store's memtables reserve 128 MiB of cache and memory (two per
// index), not 256. Against 16 MiB (ztsctl bench, batched CBOR, old and
// new alternated, the machine shared): 1.2M spans flushed 10 tables per
// index instead of 20 and wrote 234 instead of 398 MB of zstd tables into
// L6, 21.0/22.0 -> 17.8/17.5 µs of daemon CPU per span; 2.4M spans into
// 128 MiB stores (three seals) 18.0/18.5/17.7 -> 17.4/16.8/17.1; 10M
// spans (one run each) 23.8 -> 23.1. At 300k spans the ingest phase
// measured 17.5/17.9/17.8 -> 15.6/15.5/15.8, but about a third of that is
// the index's one L0 → L6 compaction coming after the phase instead of
// in it (the whole run's CPU, compactions and close included, fell 4%),
// and reads right after such an ingest meet it.
const (
	memTableBytes = 32 << 20
	maxMemTables  = 2
)

// l0CompactionThreshold sets how many flushed tables wait in L0 before
// Pebble compacts them into the base level: half of it (Pebble scores L0
// as 2 × its sublevels ÷ the threshold, and a flushed table of an index is
// a sublevel of its own). An index's keys (trace ids, strings, trigrams,
// attribute postings) are spread over its whole key space, so every flushed
// table overlaps all of the base level and each L0 → base compaction
// rewrites the whole base level: the number of those compactions is what a
// growing index's write amplification is made of. Eight (compact at 4
// tables) instead of Pebble's usual four (at 2) halves it: storing 1.2M
// spans of the bench workload (12.4M records, ~135 MB of indexes at rest)
// wrote 771 MB of tables with 4 and 487 MB with 8 (12: 398 MB), for 0.2–0.3
// B per record more at rest (the snappy L0 tables left, at most 3). A point
// lookup checks each L0 table's bloom filter, and a range read merges one
// more source per table, so the count stays small.
const l0CompactionThreshold = 8

// NewCache returns a block cache holding blockBytes of blocks besides the
// memtables' reservation. The caller unrefs it after pebble.Open.
func NewCache(blockBytes int64) *pebble.Cache {
	return pebble.NewCache(blockBytes + memTableBytes*maxMemTables)
}

// NewSharedCache returns one block cache for the indexes of many stores
// (OpenOptions.Cache): blockBytes of blocks besides the memtables'
// reservation of one store taking writes (its two indexes; a sealed store
// keeps one small memtable per index once its indexes are reopened, see
// DB.Reopen). Sharing keeps the
// blocks every lookup needs (bloom filters, index blocks) cached whichever
// store's index reads them, where a cache per index would split the same
// bytes into small caches that each hold only part of its index's filters.
// The caller unrefs it once every index opened with it is closed (Pebble
// keeps its own reference while a database is open).
func NewSharedCache(blockBytes int64) *pebble.Cache {
	return pebble.NewCache(blockBytes + 2*memTableBytes*maxMemTables)
}

// quietLogger discards Pebble's informational logging (it would otherwise go
// to stdout) and passes it to logf when one is configured.
type quietLogger struct {
	logf func(format string, args ...any)
}

func (l quietLogger) Infof(format string, args ...any) {
	if l.logf != nil {
		l.logf(format, args...)
	}
}

// Fatalf is called by Pebble on unrecoverable internal errors; Pebble expects
// it not to return.
func (l quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// newComparer returns Pebble's bytewise comparer with Split defined as "the
// whole key is the prefix": keys have no MVCC suffix. Bloom filters are
// built on whole keys either way; Split lets PointReader use SeekPrefixGE.
// The name stays the standard one because the order is the standard one.
func newComparer() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Split = func(key []byte) int { return len(key) }
	return &c
}

// Options returns the options both of a store's indexes are opened with:
// no WAL (see the package documentation), compressed blocks with bloom
// filters on every level, the given block cache and merge operator, and
// Pebble's log lines sent to logf (nil discards them).
func Options(cache *pebble.Cache, merger *pebble.Merger, logf func(string, ...any)) *pebble.Options {
	opts := &pebble.Options{
		Cache:                       cache,
		Comparer:                    newComparer(),
		DisableWAL:                  true,
		FormatMajorVersion:          FormatMajorVersion,
		Logger:                      quietLogger{logf: logf},
		Merger:                      merger,
		MemTableSize:                memTableBytes,
		L0CompactionThreshold:       l0CompactionThreshold,
		L0StopWritesThreshold:       24,
		MaxConcurrentCompactions:    func() int { return 1 },
		MemTableStopWritesThreshold: maxMemTables,
	}
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		l := &opts.Levels[i]
		// Only the last level, where an index's data comes to rest (about
		// 90% of it once the index outgrows the base level), uses zstd,
		// which is smaller. L0 holds freshly flushed data and L1–L5 data
		// that compactions soon rewrite into the level below: snappy is
		// several times cheaper to produce (Pebble's zstd also creates a
		// compression context per block, through cgo). Storing 2.4M spans
		// of the bench workload (24.8M records; L0, L5 and L6 in use) took
		// 45.0 -> 41.6 µs of CPU per span with zstd on L1–L5 -> snappy
		// (one run each, the machine shared), for 28.27 -> 29.33 B per
		// record at rest (L5 held as much as L6 when the ingest stopped).
		// An index that fits the base level (64 MB, like the OTLP bench
		// load's) compacts straight into L6 and is all zstd as before.
		// zstd blocks are 32 KiB: Pebble starts a zstd stream per block,
		// and at 4 KiB that setup and the little context each block gives
		// zstd cost compaction CPU and index bytes (the OTLP load's meta
		// index was ~0.87 of the data file's bytes with 4 KiB blocks, ~0.45
		// with 32 KiB). A lookup that misses the cache decompresses one
		// such block, small next to the data chunk a get decodes.
		l.BlockSize = 32 << 10
		l.Compression = pebble.SnappyCompression
		switch i {
		case 0:
			l.BlockSize = 4 << 10
		case len(opts.Levels) - 1:
			l.Compression = pebble.ZstdCompression
		}
		l.FilterPolicy = bloom.FilterPolicy(10)
		l.FilterType = pebble.TableFilter
		l.TargetFileSize = 8 << 20
		if i > 0 {
			l.TargetFileSize = opts.Levels[i-1].TargetFileSize * 2
		}
	}
	return opts
}

// PointReader does point lookups through one iterator that consults the
// bloom filters of every level. (DB.Get skips the filters of the last level,
// so a lookup of a missing key there reads and decompresses a data block.)
// It reads a consistent snapshot: the state when it was created.
// A PointReader is not safe for concurrent use; its iterator (Iter) may
// also be used for scans.
type PointReader struct {
	Iter *pebble.Iterator
}

// NewPointReader returns a PointReader over db's current state.
func NewPointReader(db *pebble.DB) (*PointReader, error) {
	iter, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return nil, err
	}
	return &PointReader{Iter: iter}, nil
}

// NewPresentKeyReader returns a PointReader over db's current state for
// keys that are usually present, such as the trace key of a get-by-id of
// a trace the store's trace filter lets through: it skips the last level's
// bloom filters, as DB.Get does. A present key's filter check passes and
// its data block is read anyway, and the last level's filter blocks are
// the largest (a few MB per table, read whole into the block cache on a
// miss), so consulting them would only cost.
func NewPresentKeyReader(db *pebble.DB) (*PointReader, error) {
	iter, err := db.NewIter(&pebble.IterOptions{})
	if err != nil {
		return nil, err
	}
	return &PointReader{Iter: iter}, nil
}

// Get returns the value of key, valid until the reader's next use.
func (r *PointReader) Get(key []byte) ([]byte, bool, error) {
	if !r.Iter.SeekPrefixGE(key) || !bytes.Equal(r.Iter.Key(), key) {
		return nil, false, r.Iter.Error()
	}
	v, err := r.Iter.ValueAndErr()
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// Close releases the reader's iterator.
func (r *PointReader) Close() error { return r.Iter.Close() }

// Batch collects writes and applies them to Pebble in key order, which
// makes memtable insertion cheaper (Pebble's skiplist inserter reuses the
// previous insertion point).
//
// A Batch can be used again after Reset: a writer that commits batch after
// batch (an index's Commit) keeps one, so that its arrays are not
// allocated and grown again for every commit.
type Batch struct {
	arena []byte
	ops   []bufferedOp
	// items and tmp are sorted's arrays, kept for the next commit.
	items, tmp []sortItem
}

// Batch sizes a writer keeps through Reset (KeepSmall: at most 1 MiB of
// arena and 16,384 writes, about 2.5 MiB with the sort arrays; KeepLarge
// for a bulk load's large batches): a batch larger than usual does not pin
// its memory for as long as the writer lives.
const (
	KeepSmall = 1 << 20
	KeepLarge = 64 << 20
)

// Reset empties the batch for reuse, keeping its arrays while they hold at
// most keep bytes of keys and values and keep/64 writes (KeepSmall,
// KeepLarge; 0 keeps nothing).
func (b *Batch) Reset(keep int) {
	if cap(b.arena) > keep {
		b.arena = nil
	}
	if cap(b.ops) > keep/64 {
		b.ops, b.items, b.tmp = nil, nil, nil
	}
	b.arena, b.ops = b.arena[:0], b.ops[:0]
}

type bufferedOp struct {
	// head is the key's first 8 bytes, big-endian (zero-padded): most
	// comparisons of the sort in Commit end on it without touching the
	// arena.
	head                       uint64
	merge, del                 bool
	keyStart, valStart, valEnd int
}

// keyHead returns the first 8 bytes of key as a big-endian number, short
// keys padded with zeros: keyHead(a) < keyHead(b) implies a < b, and equal
// heads leave the order to the rest of the keys.
func keyHead(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var h uint64
	for i, c := range key {
		h |= uint64(c) << (56 - 8*i)
	}
	return h
}

func (b *Batch) add(merge bool, key, val []byte) {
	op := bufferedOp{head: keyHead(key), merge: merge, keyStart: len(b.arena)}
	b.arena = append(b.arena, key...)
	op.valStart = len(b.arena)
	b.arena = append(b.arena, val...)
	op.valEnd = len(b.arena)
	b.ops = append(b.ops, op)
}

// Grow makes room for ops more writes of about bytes bytes of keys and
// values in all.
func (b *Batch) Grow(ops, bytes int) {
	b.ops = slices.Grow(b.ops, ops)
	b.arena = slices.Grow(b.arena, bytes)
}

// Merge adds a merge operand (key and val are copied).
func (b *Batch) Merge(key, val []byte) { b.add(true, key, val) }

// Set adds a set (key and val are copied).
func (b *Batch) Set(key, val []byte) { b.add(false, key, val) }

// Delete adds a point deletion (key is copied).
func (b *Batch) Delete(key []byte) {
	b.add(false, key, nil)
	b.ops[len(b.ops)-1].del = true
}

// Len returns the number of writes added.
func (b *Batch) Len() int { return len(b.ops) }

func (b *Batch) key(op bufferedOp) []byte { return b.arena[op.keyStart:op.valStart] }

// Commit applies the writes atomically, without syncing. Writes to the same
// key keep their order.
func (b *Batch) Commit(db *pebble.DB) error {
	order := b.sorted()
	pb := db.NewBatchWithSize(len(b.arena) + 16*len(b.ops))
	defer pb.Close()
	for _, it := range order {
		op := b.ops[it.op]
		k, v := b.key(op), b.arena[op.valStart:op.valEnd]
		var err error
		switch {
		case op.merge:
			err = pb.Merge(k, v, nil)
		case op.del:
			err = pb.Delete(k, nil)
		default:
			err = pb.Set(k, v, nil)
		}
		if err != nil {
			return err
		}
	}
	return pb.Commit(pebble.NoSync)
}

// sortItem is one write in the sort of Commit: its key's head and its
// position in ops.
type sortItem struct {
	head uint64
	op   int
}

// sorted returns the writes in key order, writes to one key in the order
// they were added: an LSD radix sort on the keys' heads (skipping the
// bytes all heads share), then a sort of each run of equal heads by the
// whole keys and, for equal keys, the order added.
func (b *Batch) sorted() []sortItem {
	if cap(b.items) < len(b.ops) {
		b.items = make([]sortItem, len(b.ops), max(len(b.ops), 2*cap(b.items)))
	}
	items := b.items[:len(b.ops)]
	var and, or uint64 = math.MaxUint64, 0
	for i, op := range b.ops {
		items[i] = sortItem{head: op.head, op: i}
		and &= op.head
		or |= op.head
	}
	if len(items) > 1 {
		if cap(b.tmp) < len(items) {
			b.tmp = make([]sortItem, len(items), cap(b.items))
		}
		src, dst := items, b.tmp[:len(items)]
		for shift := uint(0); shift < 64; shift += 8 {
			if byte(and>>shift) == byte(or>>shift) {
				continue // every head has this byte
			}
			var counts [256]int
			for _, it := range src {
				counts[byte(it.head>>shift)]++
			}
			at := 0
			for d, c := range counts {
				counts[d] = at
				at += c
			}
			for _, it := range src {
				d := byte(it.head >> shift)
				dst[counts[d]] = it
				counts[d]++
			}
			src, dst = dst, src
		}
		items = src
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && items[j].head == items[i].head {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(items[i:j], func(x, y sortItem) int {
				if c := bytes.Compare(b.key(b.ops[x.op]), b.key(b.ops[y.op])); c != 0 {
					return c
				}
				return x.op - y.op
			})
		}
		i = j
	}
	return items
}

// NewMerger returns a merge operator named name whose result is the
// concatenation of the operands, oldest first, optionally rewritten by
// compact (given the key's first byte, the concatenation and the operand
// count; it returns false to keep the concatenation). Operands are copied
// into one buffer, so merging n operands costs O(total bytes) whichever
// direction Pebble feeds them in.
func NewMerger(name string, compact func(prefix byte, all []byte, operands int) ([]byte, bool)) *pebble.Merger {
	return &pebble.Merger{
		Name: name,
		Merge: func(key, value []byte) (pebble.ValueMerger, error) {
			m := &concatMerger{compact: compact}
			if len(key) > 0 {
				m.prefix = key[0]
			}
			m.add(&m.newer, value)
			return m, nil
		},
	}
}

type opSpan struct{ start, end int }

type concatMerger struct {
	prefix  byte
	compact func(byte, []byte, int) ([]byte, bool)
	buf     []byte
	newer   []opSpan // the first operand and newer ones, oldest first
	older   []opSpan // older operands, newest first
}

func (m *concatMerger) add(list *[]opSpan, v []byte) {
	start := len(m.buf)
	m.buf = append(m.buf, v...)
	*list = append(*list, opSpan{start, len(m.buf)})
}

// MergeNewer adds an operand newer than all so far.
func (m *concatMerger) MergeNewer(v []byte) error { m.add(&m.newer, v); return nil }

// MergeOlder adds an operand older than all so far.
func (m *concatMerger) MergeOlder(v []byte) error { m.add(&m.older, v); return nil }

// Finish returns the concatenation, oldest first, possibly compacted.
func (m *concatMerger) Finish(bool) ([]byte, io.Closer, error) {
	out := make([]byte, 0, len(m.buf))
	for i := len(m.older) - 1; i >= 0; i-- {
		out = append(out, m.buf[m.older[i].start:m.older[i].end]...)
	}
	for _, s := range m.newer {
		out = append(out, m.buf[s.start:s.end]...)
	}
	n := len(m.older) + len(m.newer)
	if n > 1 && m.compact != nil {
		if c, ok := m.compact(m.prefix, out, n); ok {
			return c, nil, nil
		}
	}
	return out, nil, nil
}

// ErrNoDB is returned by Open in read-only mode for a directory that is
// missing or empty: there is no index to open.
var ErrNoDB = errors.New("no index in the directory")

// OpenOptions say how Open opens the Pebble database of one index.
type OpenOptions struct {
	// CacheBytes is the block cache besides the memtables' reservation;
	// 0 means DefaultCacheBytes.
	CacheBytes int64
	// Cache, when set, is the block cache to use (NewSharedCache), shared
	// with other databases; CacheBytes is then ignored. InMemory and
	// BulkLoad databases always have their own.
	Cache *pebble.Cache
	// Merger is the index's merge operator.
	Merger *pebble.Merger
	// Logf receives Pebble's informational log lines; nil discards them.
	Logf func(format string, args ...any)
	// ReadOnly opens an existing database without writing anything to
	// dir (Pebble's read-only mode); otherwise dir is created if missing.
	ReadOnly bool
	// InMemory keeps the whole database in memory (a new, empty one; dir
	// only names it): a read-only start on a full disk indexes the stores
	// whose indexes on disk lag their data files this way.
	InMemory bool
	// Settled opens a database that no longer takes many writes (a sealed
	// store's index, opened at start or reopened by DB.Reopen after the
	// seal): any flushed tables left in L0 are compacted into the base
	// level in the background (an L0 compaction threshold of one table),
	// so that the index rests without L0 tables, which every point lookup
	// checks and every range read merges (up to three memtables' worth
	// while it took writes, see l0CompactionThreshold). That compaction
	// rewrites the base level once per seal, as each L0 → base compaction
	// of the writing store does, and nothing below it: no level is
	// compacted for its size (settledLBaseMaxBytes).
	Settled bool
	// BulkLoad opens a new database that one writer fills in one go and
	// then compacts once (`ztsctl recover`'s rebuild): bulkMemTableBytes
	// memtables and no automatic compactions, so each flushed table stays
	// in L0 until the writer's final Compact rewrites every key once,
	// instead of the rewrites level by level that automatic compactions
	// do while the database grows.
	BulkLoad bool
}

// settledLBaseMaxBytes is a Settled database's LBaseMaxBytes: larger
// than any index, so no level below L0 is ever over its target size.
const settledLBaseMaxBytes = 1 << 50

// bulkMemTableBytes is the memtable size of a BulkLoad database.
const bulkMemTableBytes = 64 << 20

// Open opens the Pebble database of one index in dir with Options: the one
// place both of a store's indexes (meta/ and text/) are opened.
func Open(dir string, o OpenOptions) (*pebble.DB, error) {
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.InMemory {
		cache := NewCache(o.CacheBytes)
		defer cache.Unref()
		po := Options(cache, o.Merger, o.Logf)
		po.FS = vfs.NewMem()
		db, err := pebble.Open(dir, po)
		if err != nil {
			return nil, fmt.Errorf("open in memory: %w", err)
		}
		return db, nil
	}
	if o.ReadOnly {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
			return nil, ErrNoDB
		}
		if err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if o.BulkLoad {
		cache := pebble.NewCache(o.CacheBytes + bulkMemTableBytes*maxMemTables)
		defer cache.Unref()
		po := Options(cache, o.Merger, o.Logf)
		po.MemTableSize = bulkMemTableBytes
		po.DisableAutomaticCompactions = true
		// Nothing compacts L0 until the writer's Compact: never stall on it.
		po.L0CompactionThreshold = 1 << 20
		po.L0StopWritesThreshold = 1 << 20
		// Its flushed tables live only until that Compact, which reads
		// each once and writes every key into the last level with that
		// level's options (DB.CompactAll makes sure it rewrites them):
		// they are written without compression, in 32 KiB blocks.
		// Rebuilding the indexes of a store of 1M bench-workload spans
		// (197 MB of data file) took 18.9 and 18.3 s of CPU with snappy
		// 4 KiB blocks there, 17.0 and 17.3 without (the machine shared).
		po.Levels[0].Compression = pebble.NoCompression
		po.Levels[0].BlockSize = 32 << 10
		db, err := pebble.Open(dir, po)
		if err != nil {
			return nil, fmt.Errorf("open for a bulk load: %w", err)
		}
		return db, nil
	}
	cache := o.Cache
	if cache == nil {
		cache = NewCache(o.CacheBytes)
		defer cache.Unref()
	}
	po := Options(cache, o.Merger, o.Logf)
	po.ReadOnly = o.ReadOnly
	if o.Settled {
		po.L0CompactionThreshold = 1
		// L0 goes into the first level below it that holds data, and no
		// level is compacted further for its size: Pebble's target for the
		// base level is LBaseMaxBytes, so the L0 tables merged into a base
		// level L5 of a large index would put it over its 64 MiB target
		// and rewrite all of L6 (zstd), ~100 s of compactions after each
		// seal of a 10M-span bulk load's 1 GiB stores, for an index that
		// takes no more writes.
		po.LBaseMaxBytes = settledLBaseMaxBytes
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return db, nil
}

// Compaction is how much background work a database still has to settle
// its levels: Pebble's estimate of the bytes compactions must rewrite, and
// the flushes and compactions running now. A store just written in bulk
// reads slower until both are zero (compactions take CPU and disk from
// reads); the daemon reports them so operators and benchmarks can tell.
type Compaction struct {
	DebtBytes uint64
	Running   int64
}

// CompactionOf returns db's compaction state.
func CompactionOf(db *pebble.DB) Compaction {
	m := db.Metrics()
	return Compaction{DebtBytes: m.Compact.EstimatedDebt, Running: m.Compact.NumInProgress + m.Flush.NumInProgress}
}

// Add returns the sum of two states (a store's two indexes).
func (c Compaction) Add(o Compaction) Compaction {
	return Compaction{DebtBytes: c.DebtBytes + o.DebtBytes, Running: c.Running + o.Running}
}
