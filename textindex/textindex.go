package textindex

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// Errors callers branch on.
var (
	ErrNotFound      = errors.New("text id not found")
	ErrClosed        = errors.New("text index closed")
	ErrBatchConflict = errors.New("text index batch conflicts with a batch committed after it was created")
	ErrCorrupt       = errors.New("corrupt text index")
	ErrReadOnly      = errors.New("text index opened read-only")
	ErrNoIndex       = errors.New("no text index")
)

// Key layout constants (see the package documentation).
const (
	prefixString = 's'
	prefixID     = 'i'
	prefixGram   = 'g'
	prefixLong   = 'l'
	prefixMeta   = 'm'

	stringInline = 0x00 // 's' 0x00 string
	stringHashed = 0x01 // 's' 0x01 sha256(string)

	formatVersion = 1

	// blockShift: posting lists cover 1<<blockShift consecutive ids.
	blockShift = 14
	blockSize  = 1 << blockShift

	// maxInlineKeyBytes is the longest string stored verbatim in its 's'
	// key; longer strings are keyed by their SHA-256.
	maxInlineKeyBytes = 512
	// maxTrigramBytes is the longest lower-cased string whose trigrams are
	// indexed; longer strings are listed in 'l' and verified directly.
	maxTrigramBytes = 4096
	// MaxStringBytes is the longest string Intern accepts.
	MaxStringBytes = 16 << 20
)

var (
	keyFormat = []byte("mformat")
	keyState  = []byte("mstate")
)

// Options configure Open.
type Options struct {
	// CacheBytes bounds Pebble's block cache; 0 means 32 MiB.
	CacheBytes int64
	// Cache, when set, is a block cache shared with other indexes
	// (kv.NewSharedCache); CacheBytes is then ignored.
	Cache *pebble.Cache
	// CacheEntries bounds the in-memory string → id and id → string caches
	// (each); 0 means 65536.
	CacheEntries int
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

// Index is an open text index. Its methods are safe for concurrent use by
// one writer (through Batch) and many readers.
type Index struct {
	db  *kv.DB
	dir string

	writeMu sync.Mutex // serializes Commit and guards writerReader, wb and posts
	// wb is each commit's writes and posts appendPostings' arrays, kept
	// for the next commit up to keep bytes each (kv.Batch.Reset).
	wb    kv.Batch
	posts postingsScratch
	keep  int
	// writerReader answers Intern's lookups of strings not in the cache; it
	// is reopened after each commit so that it sees everything committed.
	writerReader *kv.PointReader
	// committed holds every string committed since the index was opened
	// empty (nil otherwise); guarded by writeMu.
	committed *stringFilter
	// spare is the new-string map of the last committed batch, emptied,
	// for the next NewBatch (guarded by writeMu): a batch's map grows to
	// its batch's new strings, and growing a fresh one for every batch
	// (rehashing its strings at each doubling) was ~0.7% of the daemon's
	// CPU under batched ingest.
	spare map[string]uint64

	mu        sync.RWMutex // guards count, watermark, posted and unposted
	count     uint64
	watermark int64
	// posted is the largest id whose trigram postings (or long-string
	// list entry) are in Pebble; unposted holds the strings of ids
	// posted+1 … count, in id order (their postings are written when
	// their block of ids is complete, or by Flush). The writer replaces
	// it or appends to it; readers take it under mu and read only what
	// it held then.
	posted   uint64
	unposted unpostedStrings

	ids     *lruMap[string, uint64] // string → id
	strings *lruMap[uint64, string] // id → string
}

// Open opens the text index in dir, creating it when missing.
func Open(dir string, opt Options) (*Index, error) {
	return open(dir, opt, false)
}

// OpenReadOnly opens an existing text index without writing anything to
// dir (Pebble's read-only mode), for verification. Batches cannot be
// committed and Flush fails. A missing or empty directory, or one without
// a format record, yields an error wrapping ErrNoIndex.
func OpenReadOnly(dir string, opt Options) (*Index, error) {
	return open(dir, opt, true)
}

func open(dir string, opt Options, readOnly bool) (*Index, error) {
	if opt.CacheEntries <= 0 {
		opt.CacheEntries = 1 << 16
	}
	db, err := kv.OpenDB("text index "+dir, dir, kv.OpenOptions{CacheBytes: opt.CacheBytes, Cache: opt.Cache, Merger: newMerger(), Logf: opt.Logf, ReadOnly: readOnly, InMemory: opt.InMemory, BulkLoad: opt.BulkLoad && !readOnly, Settled: opt.Settled && !readOnly},
		kv.Errors{Closed: ErrClosed, NoIndex: ErrNoIndex, Corrupt: ErrCorrupt})
	if err != nil {
		return nil, err
	}
	ix := &Index{db: db, dir: dir, ids: newLRUMap[string, uint64](opt.CacheEntries),
		strings: newLRUMap[uint64, string](opt.CacheEntries), keep: kv.KeepSmall}
	if opt.BulkLoad {
		ix.keep = kv.KeepLarge
	}
	if err := ix.load(); err != nil {
		_ = db.DB.Close()
		return nil, fmt.Errorf("text index %s: %w", dir, err)
	}
	return ix, nil
}

func (ix *Index) load() error {
	format, err := ix.db.LoadFormat(keyFormat, []byte{formatVersion})
	if err != nil {
		return err
	}
	if !bytes.Equal(format, []byte{formatVersion}) {
		return fmt.Errorf("%w: format record %x, want version %d", ErrCorrupt, format, formatVersion)
	}
	v, ok, err := ix.get(keyState)
	if err != nil {
		return err
	}
	if ok {
		if ix.count, ix.watermark, ix.posted, err = decodeState(v); err != nil {
			return err
		}
	}
	if ix.posted > ix.count {
		return fmt.Errorf("%w: state record: postings written up to id %d of %d", ErrCorrupt, ix.posted, ix.count)
	}
	// Every commit writes the postings of each block of ids it completes,
	// so fewer than blockSize ids ever wait for theirs: a record that says
	// more is damaged, and loadUnposted must not read the whole index into
	// memory for it.
	if ix.count-ix.posted >= blockSize {
		return fmt.Errorf("%w: state record: %d strings without postings (ids %d to %d), more than a block of %d",
			ErrCorrupt, ix.count-ix.posted, ix.posted+1, ix.count, blockSize)
	}
	if ix.posted < ix.count {
		if err := ix.loadUnposted(); err != nil {
			return err
		}
	}
	if ix.count == 0 && !ix.db.ReadOnly() {
		// Every string the index will hold goes through Commit.
		ix.committed = newStringFilter()
	}
	return nil
}

func (ix *Index) get(key []byte) ([]byte, bool, error) { return ix.db.Value(key) }

// loadUnposted reads the strings of ids posted+1 … count, whose postings
// are not written yet (a writer stopped before their block was complete).
func (ix *Index) loadUnposted() error {
	iter, err := ix.db.NewIter(&pebble.IterOptions{LowerBound: idKey(nil, ix.posted+1), UpperBound: []byte{prefixID + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	want := ix.posted + 1
	for iter.First(); iter.Valid() && want <= ix.count; iter.Next() {
		id, n, ok := readOrdered(iter.Key()[1:])
		if !ok || 1+n != len(iter.Key()) {
			return fmt.Errorf("%w: id key %x malformed", ErrCorrupt, iter.Key())
		}
		if id != want {
			return fmt.Errorf("%w: string %d is missing (found %d)", ErrCorrupt, want, id)
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		ix.unposted = ix.unposted.append(string(v))
		want++
	}
	if err := iter.Error(); err != nil {
		return err
	}
	if want <= ix.count {
		return fmt.Errorf("%w: string %d is missing", ErrCorrupt, want)
	}
	return nil
}

// unpostedStrings holds strings lower-cased (strings.ToLower), each
// followed by 0xff, which no lower-cased string or pattern holds (they are
// valid UTF-8): one bytes.Index over lower finds a pattern in all of them.
// ends[i] is where string i's 0xff is.
type unpostedStrings struct {
	lower []byte
	ends  []int
}

// append returns u with s added; it may write into u's arrays past
// their length (never what u holds).
func (u unpostedStrings) append(s string) unpostedStrings {
	u.lower = appendLower(u.lower, s)
	u.lower = append(u.lower, 0xff)
	u.ends = append(u.ends, len(u.lower)-1)
	return u
}

// appendLower appends strings.ToLower(s) to dst: an ASCII string byte by
// byte, without the string ToLower allocates when s has upper case; any
// other through ToLower.
func appendLower(dst []byte, s string) []byte {
	start := len(dst)
	dst = slices.Grow(dst, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return append(dst[:start], strings.ToLower(s)...)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// len returns the number of strings.
func (u unpostedStrings) len() int { return len(u.ends) }

// str returns lower-cased string i.
func (u unpostedStrings) str(i int) []byte {
	start := 0
	if i > 0 {
		start = u.ends[i-1] + 1
	}
	return u.lower[start:u.ends[i]]
}

// from returns a copy of u without its first n strings.
func (u unpostedStrings) from(n int) unpostedStrings {
	if n == u.len() {
		return unpostedStrings{}
	}
	start := 0
	if n > 0 {
		start = u.ends[n-1] + 1
	}
	out := unpostedStrings{lower: append([]byte(nil), u.lower[start:]...), ends: make([]int, 0, u.len()-n)}
	for _, e := range u.ends[n:] {
		out.ends = append(out.ends, e-start)
	}
	return out
}

// The state record: uvarint count, varint watermark, then, only when the
// postings of the last ids are not written yet, uvarint posted (the
// largest id whose postings are).
func appendState(dst []byte, count uint64, watermark int64, posted uint64) []byte {
	dst = binary.AppendVarint(binary.AppendUvarint(dst, count), watermark)
	if posted != count {
		dst = binary.AppendUvarint(dst, posted)
	}
	return dst
}

func decodeState(v []byte) (count uint64, watermark int64, posted uint64, err error) {
	count, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, 0, 0, fmt.Errorf("%w: state record %x: bad count", ErrCorrupt, v)
	}
	watermark, m := binary.Varint(v[n:])
	if m <= 0 {
		return 0, 0, 0, fmt.Errorf("%w: state record %x: bad watermark", ErrCorrupt, v)
	}
	posted = count
	if n+m < len(v) {
		var k int
		posted, k = binary.Uvarint(v[n+m:])
		if k <= 0 || n+m+k != len(v) || posted >= count {
			return 0, 0, 0, fmt.Errorf("%w: state record %x: bad posted id", ErrCorrupt, v)
		}
	}
	if !bytes.Equal(appendState(nil, count, watermark, posted), v) {
		return 0, 0, 0, fmt.Errorf("%w: state record %x: non-minimal varint", ErrCorrupt, v)
	}
	return count, watermark, posted, nil
}

// acquire holds the index open for one operation.
func (ix *Index) acquire() error { return ix.db.Acquire() }

func (ix *Index) release() { ix.db.Release() }

// stringKey appends the 's' key of s.
func stringKey(dst []byte, s string) []byte {
	if len(s) <= maxInlineKeyBytes {
		return append(append(dst, prefixString, stringInline), s...)
	}
	sum := sha256.Sum256([]byte(s))
	return append(append(dst, prefixString, stringHashed), sum[:]...)
}

// idKey appends the 'i' key of id: the prefix and the id in the ordered
// variable-length form (a length byte, then the minimal big-endian bytes).
func idKey(dst []byte, id uint64) []byte {
	return appendOrdered(append(dst, prefixID), id)
}

func appendOrdered(dst []byte, v uint64) []byte {
	n := 0
	for x := v; x != 0; x >>= 8 {
		n++
	}
	dst = append(dst, byte(n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

func readOrdered(src []byte) (uint64, int, bool) {
	if len(src) == 0 || src[0] > 8 || len(src) < 1+int(src[0]) {
		return 0, 0, false
	}
	n := int(src[0])
	if n > 0 && src[1] == 0 {
		return 0, 0, false
	}
	var v uint64
	for _, b := range src[1 : 1+n] {
		v = v<<8 | uint64(b)
	}
	return v, 1 + n, true
}

// decodeID decodes the value of an 's' key.
func decodeID(v []byte, count uint64) (uint64, error) {
	id, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) {
		return 0, fmt.Errorf("%w: string id value %x malformed", ErrCorrupt, v)
	}
	if id == 0 {
		return 0, fmt.Errorf("%w: string id 0", ErrCorrupt)
	}
	if count != 0 && id > count {
		return 0, fmt.Errorf("%w: string id %d beyond count %d", ErrCorrupt, id, count)
	}
	return id, nil
}

// lookup finds s through r, verifying hashed keys against the stored
// string.
func (ix *Index) lookup(r *kv.PointReader, s string, count uint64) (uint64, bool, error) {
	v, ok, err := r.Get(stringKey(nil, s))
	if err != nil || !ok {
		return 0, false, err
	}
	id, err := decodeID(v, count)
	if err != nil {
		return 0, false, err
	}
	if len(s) > maxInlineKeyBytes {
		stored, ok, err := r.Get(idKey(nil, id))
		if err != nil {
			return 0, false, err
		}
		if !ok || string(stored) != s {
			return 0, false, fmt.Errorf("%w: hashed string key of id %d does not match its string", ErrCorrupt, id)
		}
	}
	return id, true, nil
}

// Lookup returns the id of s, if s was interned and committed.
func (ix *Index) Lookup(s string) (uint64, bool, error) {
	if id, ok := ix.ids.get(s); ok {
		return id, true, nil
	}
	if err := ix.acquire(); err != nil {
		return 0, false, err
	}
	defer ix.release()
	r, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		return 0, false, fmt.Errorf("text index %s: lookup: %w", ix.dir, err)
	}
	defer r.Close()
	id, ok, err := ix.lookup(r, s, ix.Count())
	if err != nil {
		return 0, false, fmt.Errorf("text index %s: lookup: %w", ix.dir, err)
	}
	if ok {
		ix.ids.put(s, id)
	}
	return id, ok, nil
}

// String returns the string of id; ErrNotFound for an id never committed.
func (ix *Index) String(id uint64) (string, error) {
	if s, ok := ix.strings.get(id); ok {
		return s, nil
	}
	if err := ix.acquire(); err != nil {
		return "", err
	}
	defer ix.release()
	v, ok, err := ix.get(idKey(nil, id))
	if err != nil {
		return "", fmt.Errorf("text index %s: string %d: %w", ix.dir, id, err)
	}
	if !ok {
		return "", fmt.Errorf("text index %s: string %d: %w", ix.dir, id, ErrNotFound)
	}
	s := string(v)
	ix.strings.put(id, s)
	return s, nil
}

// Count returns the number of committed strings (the largest id).
func (ix *Index) Count() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.count
}

// Watermark returns the data-file offset up to which the index is complete.
func (ix *Index) Watermark() (int64, error) {
	if err := ix.acquire(); err != nil {
		return 0, err
	}
	defer ix.release()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.watermark, nil
}

// Flush writes the postings of every string committed (see
// Index.unposted), then the memtable to sstables.
func (ix *Index) Flush() error {
	if err := ix.postAll(); err != nil {
		return err
	}
	ix.dropWriterReader()
	return ix.db.FlushMemtable()
}

// Compact writes the postings of every string committed, then compacts
// the whole index (to measure its settled size).
func (ix *Index) Compact() error {
	if err := ix.postAll(); err != nil {
		return err
	}
	ix.dropWriterReader()
	return ix.db.CompactAll()
}

// L0Tables returns how many flushed tables wait in the index's L0.
func (ix *Index) L0Tables() int64 { return ix.db.L0Tables() }

// Settle compacts a small index with tables in L0 whole into its last
// level (kv.DB.Settle); a store does it at close.
func (ix *Index) Settle(minL0, maxBytes, room uint64) (bool, error) {
	ix.dropWriterReader()
	return ix.db.Settle(minL0, maxBytes, room)
}

// Compaction returns the index's compaction debt and running flushes and
// compactions (zero once closed).
func (ix *Index) Compaction() kv.Compaction { return ix.db.Compaction() }

// DiskBytes returns the bytes the index occupies on disk.
func (ix *Index) DiskBytes() uint64 { return ix.db.DiskBytes() }

func (ix *Index) dropWriterReader() {
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	if ix.writerReader != nil {
		ix.writerReader.Close()
		ix.writerReader = nil
	}
}

// ReleaseMemTables gives back the block cache an index that has stopped
// taking writes keeps for its memtables: it flushes the index and reopens
// it in place, between operations (kv.DB.Reopen) (the writer's lookup iterator is closed first); operations before and
// after it see the same entries and none fails for it. It reports whether
// it reopened (an index in memory or read-only is left as it is). A store
// calls it once sealed. It waits, until ctx ends, for a moment when no
// operation holds the index.
func (ix *Index) ReleaseMemTables(ctx context.Context) (bool, error) {
	// The writer's arrays go too: a sealed store writes no more.
	ix.writeMu.Lock()
	ix.wb, ix.posts = kv.Batch{}, postingsScratch{}
	ix.writeMu.Unlock()
	return ix.db.Reopen(ctx, ix.dropWriterReader)
}

// MemTableBytes returns the bytes of block cache the index's memtables
// reserve (0 once closed).
func (ix *Index) MemTableBytes() uint64 { return ix.db.MemTableBytes() }

// Checkpoint writes a consistent copy of the index as of now into dir
// (which must not exist); see kv.DB.CheckpointTo.
func (ix *Index) Checkpoint(dir string) error { return ix.db.CheckpointTo(dir) }

// Close flushes (the index has no WAL) and closes the index. It waits for
// running operations, and closes the writer's lookup iterator first.
func (ix *Index) Close() error { return ix.db.Close(ix.dropWriterReader) }

// newMerger returns the text index's merge operator: 'g' and 'l' posting
// lists are unioned and re-encoded; it never fails, falling back to
// concatenation so that readers report corrupt operands.
func newMerger() *pebble.Merger {
	return kv.NewMerger("ztsd.textindex.v1", func(_ byte, all []byte, _ int) ([]byte, bool) {
		out, err := postings.Compact(nil, all, blockSize)
		return out, err == nil
	})
}
