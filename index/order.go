package index

import (
	"encoding/binary"
	mathbits "math/bits"
	"slices"
)

// blockOrder lists the sealed blocks [0, upto) in search order: max start
// descending, then block number descending. It is immutable once built;
// blocks sealed later are merged in by each search until the writer
// rebuilds the order (every rebuildEvery sealed blocks).
type blockOrder struct {
	ids  []uint64
	upto int
}

const rebuildEvery = 64

// before reports whether block a (summary sa) is visited before block b.
func before(a uint64, sa blockSummary, b uint64, sb blockSummary) bool {
	if sa.maxStart != sb.maxStart {
		return sa.maxStart > sb.maxStart
	}
	return a > b
}

// buildOrder returns the order of every block in sealed, reusing prev.
func buildOrder(prev *blockOrder, sealed []blockSummary) *blockOrder {
	from := 0
	var old []uint64
	if prev != nil {
		from, old = prev.upto, prev.ids
	}
	add := make([]uint64, 0, len(sealed)-from)
	for b := from; b < len(sealed); b++ {
		add = append(add, uint64(b))
	}
	sortBlocks(add, func(b uint64) blockSummary { return sealed[b] })
	ids := make([]uint64, 0, len(old)+len(add))
	i, j := 0, 0
	for i < len(old) && j < len(add) {
		if before(old[i], sealed[old[i]], add[j], sealed[add[j]]) {
			ids = append(ids, old[i])
			i++
		} else {
			ids = append(ids, add[j])
			j++
		}
	}
	ids = append(ids, old[i:]...)
	ids = append(ids, add[j:]...)
	return &blockOrder{ids: ids, upto: len(sealed)}
}

func sortBlocks(ids []uint64, sum func(uint64) blockSummary) {
	slices.SortFunc(ids, func(a, b uint64) int {
		if before(a, sum(a), b, sum(b)) {
			return -1
		}
		if a == b {
			return 0
		}
		return 1
	})
}

// view is a reader's consistent snapshot of the committed blocks.
type view struct {
	sealed    []blockSummary
	tail      blockSummary // block len(sealed) when tail.n > 0
	order     *blockOrder
	blockSize uint32
	extra     []uint64 // blocks not in order, sorted
}

func (ix *Index) view() *view {
	ix.mu.RLock()
	v := &view{sealed: ix.sealed, tail: ix.tail, order: ix.order, blockSize: ix.blockSize}
	ix.mu.RUnlock()
	for b := v.order.upto; b < len(v.sealed); b++ {
		v.extra = append(v.extra, uint64(b))
	}
	if v.tail.n > 0 {
		v.extra = append(v.extra, uint64(len(v.sealed)))
	}
	sortBlocks(v.extra, v.summary)
	return v
}

func (v *view) summary(b uint64) blockSummary {
	if b < uint64(len(v.sealed)) {
		return v.sealed[b]
	}
	if b == uint64(len(v.sealed)) {
		return v.tail
	}
	return blockSummary{}
}

func (v *view) numBlocks() uint64 {
	n := uint64(len(v.sealed))
	if v.tail.n > 0 {
		n++
	}
	return n
}

// blockIter walks a view's blocks in search order.
type blockIter struct {
	v    *view
	i, j int
}

// next returns the next block in search order.
func (it *blockIter) next() (uint64, blockSummary, bool) {
	ids := it.v.order.ids
	if it.i < len(ids) && (it.j >= len(it.v.extra) ||
		before(ids[it.i], it.v.summary(ids[it.i]), it.v.extra[it.j], it.v.summary(it.v.extra[it.j]))) {
		b := ids[it.i]
		it.i++
		return b, it.v.summary(b), true
	}
	if it.j < len(it.v.extra) {
		b := it.v.extra[it.j]
		it.j++
		return b, it.v.summary(b), true
	}
	return 0, blockSummary{}, false
}

// recentSet remembers recently seen keys: the writer's memory of trace ids
// (to count distinct traces rarely needing a lookup) and of attribute pairs
// (to write each 'v' key rarely). Forgetting a key costs only that work
// again, never a wrong answer, so it is a cache: sets of recentWays keys
// (a key and its set chosen by hash; 64 bytes, one cache line, for the
// 16-byte keys it holds), least recently used first out of a full set.
// Before, two generations of maps: a lookup that missed (most attribute
// pairs are seen once) probed both, two cache misses and about 3% of a
// rebuild's CPU, and each new generation was a map allocated again.
//
// The zero key is never held (contains reports false for it): an empty
// slot is a zero key. The sets are allocated at the first add, so an index
// that only reads holds none.
type recentSet[K comparable] struct {
	sets  [][recentWays]K
	shift uint // 64 - log2(len(sets)): a hash's top bits pick the set
	nsets int
	hash  func(K) uint64
}

// recentWays is the number of keys in a set.
const recentWays = 4

// newRecentSet returns a set for about max keys (rounded up to a power of
// two, at least recentWays), hashed by hash.
func newRecentSet[K comparable](max int, hash func(K) uint64) *recentSet[K] {
	n := 1
	for n*recentWays < max {
		n *= 2
	}
	return &recentSet[K]{nsets: n, shift: uint(64 - mathbits.TrailingZeros(uint(n))), hash: hash}
}

// set returns k's set (nil before the first add).
func (c *recentSet[K]) set(k K) *[recentWays]K {
	if c.sets == nil {
		return nil
	}
	return &c.sets[(c.hash(k)*0x9e3779b97f4a7c15)>>c.shift]
}

// contains reports whether k was added recently, and makes it the most
// recent key of its set.
func (c *recentSet[K]) contains(k K) bool {
	var zero K
	s := c.set(k)
	if s == nil || k == zero {
		return false
	}
	for i := range s {
		if s[i] == k {
			copy(s[1:i+1], s[:i])
			s[0] = k
			return true
		}
	}
	return false
}

// add makes k the most recent key of its set, dropping the least recent
// one when it is full.
func (c *recentSet[K]) add(k K) {
	var zero K
	if k == zero {
		return
	}
	if c.sets == nil {
		c.sets = make([][recentWays]K, c.nsets)
	}
	s := c.set(k)
	i := 0
	for i < recentWays-1 && s[i] != k {
		i++
	}
	copy(s[1:i+1], s[:i])
	s[0] = k
}

// forget drops every key and the sets' memory (a later add allocates it
// again).
func (c *recentSet[K]) forget() { c.sets = nil }

// hashTraceID and hashKV are the hashes recentSet uses: trace ids are
// random, so their bytes are; attribute pairs are text ids, mixed.
func hashTraceID(id [16]byte) uint64 {
	return binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
}

func hashKV(kv KV) uint64 { return kv.Key*0xff51afd7ed558ccd ^ kv.Value }
