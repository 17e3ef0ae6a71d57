package index

import "slices"

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

// recentSet remembers recently seen keys in two generations of at most
// max/2 entries each: the writer's memory of trace ids (to count distinct
// traces rarely needing a lookup) and of attribute pairs (to write each 'v'
// key rarely).
type recentSet[K comparable] struct {
	cur, prev map[K]struct{}
	max       int
}

func newRecentSet[K comparable](max int) *recentSet[K] {
	return &recentSet[K]{cur: make(map[K]struct{}), max: max}
}

func (c *recentSet[K]) contains(k K) bool {
	if _, ok := c.cur[k]; ok {
		return true
	}
	if _, ok := c.prev[k]; ok {
		c.add(k)
		return true
	}
	return false
}

func (c *recentSet[K]) add(k K) {
	if len(c.cur) >= c.max/2+1 {
		c.prev, c.cur = c.cur, make(map[K]struct{}, len(c.cur))
	}
	c.cur[k] = struct{}{}
}
