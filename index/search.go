package index

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// Query selects entries. Zero fields do not filter.
type Query struct {
	SinceNS, UntilNS int64 // StartNS in [SinceNS, UntilNS); 0 = unbounded
	MinDurationNS    int64
	MaxDurationNS    int64 // DurationNS ≤ MaxDurationNS; 0 = unbounded
	ErrorsOnly       bool
	Attrs            []KV     // every one must be among the entry's Attrs
	TextAny          []uint64 // at least one must be in the entry's text set: its Texts plus its attribute values; empty = no text filter
	TextFilterAll    bool     // the caller's text filter matched no string: no hits
	After            *Cursor  // resume strictly after this position
	// Accept, when set, decides what the index cannot: it is asked about
	// each entry that passes every other condition, once per span and
	// start (about the entry Search would return: the lowest matching
	// chunk), in search order; false leaves the span out as if it did not
	// match, an error ends the Search or FirstHit with that error. Search
	// and Matcher call it on their caller's goroutine.
	Accept func(SpanRef) (bool, error)
}

// Cursor is a position in search order (StartNS desc, TraceID desc,
// SpanID desc).
type Cursor struct {
	StartNS int64
	TraceID [16]byte
	SpanID  uint64
}

// Hit is one search result.
type Hit struct{ SpanRef }

// Cursor returns the position of h, to resume a search after it.
func (h Hit) Cursor() Cursor {
	return Cursor{StartNS: h.StartNS, TraceID: h.TraceID, SpanID: h.SpanID}
}

// maxPrefetchKeys bounds how many posting keys a search reads up front to
// learn which blocks a conjunct occurs in; a conjunct with more, or with
// keys in more than one block in denseBlockFraction of the index's (at
// least minDenseKeys), is "dense" and is looked up block by block instead:
// a common attribute (a service of a dozen, in every block) would
// otherwise cost reading a posting key per block of the store (1,200 at 5M
// spans, a quarter of a search's CPU) when the search needs one or two
// blocks.
const (
	maxPrefetchKeys    = 4096
	denseBlockFraction = 16
	minDenseKeys       = 32
)

// maxCachedTraces bounds the decoded traces one search keeps.
const maxCachedTraces = 1024

// Search calls fn with every entry matching q, newest first (StartNS desc,
// TraceID desc, SpanID desc), one hit per (StartNS, TraceID, SpanID) — the
// lowest matching chunk — until fn returns false, the entries run out or ctx
// is done (then ctx's error is returned).
func (ix *Index) Search(ctx context.Context, q Query, fn func(Hit) bool) error {
	return ix.SearchTraces(ctx, q, func(h Hit, _ HitTrace) bool { return fn(h) })
}

// HitTrace is what a search read of a hit's trace: every entry of the
// trace in the index, as of the search's snapshot.
type HitTrace struct{ recs []traceRec }

// Spans returns the trace's entries as TraceSpans does (the latest entry
// of each span and chunk number, by start time), without reading the
// index again.
func (t HitTrace) Spans() []SpanRef {
	return refsOf(sortTraceRecords(currentRecords(slices.Clone(t.recs))))
}

// SearchTraces is Search that also passes, with each hit, the entries of
// its trace the search read to find the hit (see HitTrace): a caller that
// needs them does not look the trace up again.
func (ix *Index) SearchTraces(ctx context.Context, q Query, fn func(Hit, HitTrace) bool) error {
	if q.TextFilterAll || q.UntilNS == math.MinInt64 {
		return nil
	}
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	s := &searcher{ix: ix, v: ix.view(), q: q, traces: make(map[[16]byte][]traceRec)}
	reader, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		return fmt.Errorf("index %s: search: %w", ix.dir, err)
	}
	defer reader.Close()
	s.reader = reader
	if err := s.run(ctx, fn); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		return fmt.Errorf("index %s: search: %w", ix.dir, err)
	}
	return nil
}

// conjunct is one AND-ed condition: an entry must be in the union of its
// sources' posting lists.
type conjunct struct {
	sources [][]byte // posting key prefixes ('a' key value, or 'w' text)
	attr    *KV      // the attribute, for an attribute conjunct
	texts   []uint64 // the text ids, for the text conjunct
	// blocks maps each block the conjunct occurs in to the sources present
	// there; nil when the conjunct is dense.
	blocks map[uint64][]int
	all    []int // every source index, for dense conjuncts
}

type searcher struct {
	ix      *Index
	v       *view
	reader  *kv.PointReader // every read of the search, from one snapshot
	q       Query
	conj    []*conjunct
	heap    candHeap
	col     column
	offs    []uint32
	tmp     []uint32
	key     []byte
	group   seqGroup
	gnum    uint64
	gvalid  bool
	traces  map[[16]byte][]traceRec // decoded traces, sorted by seq
	textSet map[uint64]struct{}     // TextAny, for the open block's rows
	minCls  uint8
	maxCls  uint8 // entries of a higher duration class are longer than MaxDurationNS
}

type cand struct {
	start int64
	seq   uint64
}

type candHeap []cand

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].start > h[j].start }
func (h candHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)        { *h = append(*h, x.(cand)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

func (s *searcher) run(ctx context.Context, fn func(Hit, HitTrace) bool) error {
	if err := s.plan(ctx); err != nil {
		return err
	}
	for _, c := range s.conj {
		if c.blocks != nil && len(c.blocks) == 0 && s.v.tail.n == 0 {
			return nil // a condition that occurs nowhere
		}
	}
	s.minCls = durClass(s.q.MinDurationNS)
	s.maxCls = durClass(s.q.MaxDurationNS)
	it := &blockIter{v: s.v}
	blk, sum, ok := s.nextEligible(it)
	for ok {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.scanBlock(blk, sum); err != nil {
			return err
		}
		blk, sum, ok = s.nextEligible(it)
		bound := int64(math.MinInt64)
		if ok {
			bound = s.clamp(sum.maxStart)
		}
		more, err := s.emit(ctx, bound, fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// clamp lowers a block's max start to what a candidate of the query can
// have.
func (s *searcher) clamp(t int64) int64 {
	if s.q.UntilNS != 0 && t > s.q.UntilNS-1 {
		t = s.q.UntilNS - 1
	}
	if s.q.After != nil && t > s.q.After.StartNS {
		t = s.q.After.StartNS
	}
	return t
}

// nextEligible returns the next block, in search order, that may hold a
// match.
func (s *searcher) nextEligible(it *blockIter) (uint64, blockSummary, bool) {
	for {
		blk, sum, ok := it.next()
		if !ok {
			return 0, sum, false
		}
		if s.q.SinceNS != 0 && sum.maxStart < s.q.SinceNS {
			return 0, sum, false // every later block starts even earlier
		}
		if s.q.UntilNS != 0 && sum.minStart >= s.q.UntilNS {
			continue
		}
		if s.q.After != nil && sum.minStart > s.q.After.StartNS {
			continue
		}
		skip := false
		for _, c := range s.conj {
			// The open block has rows instead of posting lists.
			if c.blocks != nil && sum.n == s.v.blockSize {
				if _, ok := c.blocks[blk]; !ok {
					skip = true
					break
				}
			}
		}
		if !skip {
			return blk, sum, true
		}
	}
}

// plan builds the conjuncts and learns, for the sparse ones, which blocks
// they occur in.
func (s *searcher) plan(ctx context.Context) error {
	for _, kv := range s.q.Attrs {
		s.conj = append(s.conj, &conjunct{sources: [][]byte{attrPrefix(nil, kv.Key, kv.Value)}, attr: &kv})
	}
	if len(s.q.TextAny) == 0 && len(s.conj) == 0 {
		return nil
	}
	iter := s.reader.Iter
	if len(s.q.TextAny) > 0 {
		// A text matches the entries that list it in Texts ('w') and those
		// that have it as an attribute value ('a', for every key it was
		// seen under: 'v').
		ids := slices.Clone(s.q.TextAny)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		c := &conjunct{texts: ids}
		var vp []byte
		for _, t := range ids {
			c.sources = append(c.sources, textPrefix(nil, t))
			vp = appendOrdered(append(vp[:0], prefixValue), t)
			for valid := iter.SeekGE(vp); valid && bytes.HasPrefix(iter.Key(), vp); valid = iter.Next() {
				k, n, ok := readOrdered(iter.Key()[len(vp):])
				if !ok || len(vp)+n != len(iter.Key()) {
					return corruptf("value key %x: malformed", iter.Key())
				}
				c.sources = append(c.sources, attrPrefix(nil, k, t))
			}
			if err := iter.Error(); err != nil {
				return err
			}
		}
		s.conj = append(s.conj, c)
	}
	nblocks := s.v.numBlocks()
	prefetch := min(s.ix.prefetchKeys, max(minDenseKeys, int(nblocks/denseBlockFraction)))
	for _, c := range s.conj {
		c.all = make([]int, len(c.sources))
		for i := range c.all {
			c.all[i] = i
		}
		blocks := make(map[uint64][]int)
		keys := 0
		dense := false
	sources:
		for i, p := range c.sources {
			for valid := iter.SeekGE(p); valid && bytes.HasPrefix(iter.Key(), p); valid = iter.Next() {
				k := iter.Key()
				blk, n, ok := readOrdered(k[len(p):])
				if !ok || len(p)+n != len(k) {
					return corruptf("posting key %x: malformed", k)
				}
				if blk >= nblocks {
					break // committed after this search's view
				}
				blocks[blk] = append(blocks[blk], i)
				if keys++; keys > prefetch {
					dense = true
					break sources
				}
			}
			if err := iter.Error(); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !dense {
			c.blocks = blocks
		}
	}
	// Cheapest first: sparse conjuncts by block count, then dense ones.
	sort.SliceStable(s.conj, func(i, j int) bool {
		a, b := s.conj[i], s.conj[j]
		if (a.blocks == nil) != (b.blocks == nil) {
			return a.blocks != nil
		}
		return len(a.blocks) < len(b.blocks)
	})
	return nil
}

// scanBlock pushes the block's candidates that pass every filter the
// posting lists (or, for the open block, its rows) and the time column can
// decide.
func (s *searcher) scanBlock(blk uint64, sum blockSummary) error {
	cands, all, err := s.candidates(blk, sum)
	if err != nil {
		return err
	}
	if !all && len(cands) == 0 {
		return nil
	}
	col, err := s.column(blk, sum)
	if err != nil {
		return err
	}
	base := blk << s.ix.blockShift
	check := func(off uint32) {
		if off >= sum.n {
			return // committed after this search's view
		}
		start, flags := col.start[off], col.flags[off]
		if s.q.SinceNS != 0 && start < s.q.SinceNS {
			return
		}
		if s.q.UntilNS != 0 && start >= s.q.UntilNS {
			return
		}
		if s.q.After != nil && start > s.q.After.StartNS {
			return
		}
		if s.q.ErrorsOnly && flags&colError == 0 {
			return
		}
		if s.q.MinDurationNS > 0 && flags&^colError < s.minCls {
			return
		}
		if s.q.MaxDurationNS > 0 && flags&^colError > s.maxCls {
			return
		}
		heap.Push(&s.heap, cand{start: start, seq: base + uint64(off)})
	}
	if all {
		for off := uint32(0); off < sum.n; off++ {
			check(off)
		}
	} else {
		for _, off := range cands {
			check(off)
		}
	}
	return nil
}

// candidates returns the offsets in block blk (summary sum) of the entries
// that satisfy the attribute and text conditions, ascending, in a slice the
// caller owns; all is true when the query has no such condition (every
// entry satisfies it). Entries committed after the search's view may be
// among them: callers bound offsets by sum.n.
func (s *searcher) candidates(blk uint64, sum blockSummary) (cands []uint32, all bool, err error) {
	if len(s.conj) == 0 {
		return nil, true, nil
	}
	if sum.n < s.v.blockSize {
		if cands, ok := s.openBlockMemory(blk, sum); ok {
			return cands, false, nil
		}
		cands, ok, err := s.openBlockCandidates(blk, sum)
		if err != nil || ok {
			return cands, false, err
		}
		// Without rows the block was sealed after this search began: its
		// posting lists are written.
	}
	for _, c := range s.conj {
		srcs := c.all
		if c.blocks != nil {
			srcs = c.blocks[blk]
		}
		s.tmp = s.tmp[:0]
		for _, i := range srcs {
			s.key = appendOrdered(append(s.key[:0], c.sources[i]...), blk)
			v, ok, err := s.reader.Get(s.key)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				continue
			}
			offs, err := postings.Decode(v, s.v.blockSize, s.offs)
			if err != nil {
				return nil, false, fmt.Errorf("posting list %x: %w", s.key, err)
			}
			s.offs = offs
			if len(s.tmp) == 0 {
				s.tmp = append(s.tmp, offs...)
			} else {
				s.tmp = postings.Union(s.tmp, offs)
			}
		}
		if cands == nil {
			cands = append(cands, s.tmp...)
		} else {
			cands = postings.Intersect(cands, s.tmp)
		}
		if len(cands) == 0 {
			return nil, false, nil
		}
	}
	return cands, false, nil
}

// openBlockMemory evaluates the attribute and text conditions on the open
// block in memory, through the search lists it extends to the rows it holds
// (see openBlock); ok is false when the open block in memory is another
// one (this one was sealed after the search began).
func (s *searcher) openBlockMemory(blk uint64, sum blockSummary) ([]uint32, bool) {
	s.ix.mu.RLock()
	o := s.ix.open
	var rows []row
	if o != nil {
		rows = o.rows
	}
	s.ix.mu.RUnlock()
	if o == nil || o.blk != blk {
		return nil, false
	}
	var cands []uint32
	o.searchLists(rows, func(attrs *postingLists[KV], texts *postingLists[uint64]) {
		for i, c := range s.conj {
			var set []uint32
			if c.attr != nil {
				set = attrs.get(*c.attr)
			} else {
				for _, t := range c.texts {
					set = postings.Union(set, texts.get(t))
				}
			}
			// Entries beyond the search's view are newer than the search.
			n, _ := slices.BinarySearch(set, sum.n)
			if i == 0 {
				cands = append([]uint32{}, set[:n]...)
			} else {
				cands = postings.Intersect(cands, set[:n])
			}
			if len(cands) == 0 {
				break
			}
		}
	})
	return cands, true
}

// openBlockCandidates evaluates the attribute and text conditions on the
// rows of the open block; ok is false when the block has no rows any more.
func (s *searcher) openBlockCandidates(blk uint64, sum blockSummary) ([]uint32, bool, error) {
	s.key = numKey(s.key[:0], prefixRows, blk)
	v, ok, err := s.reader.Get(s.key)
	if err != nil || !ok {
		return nil, false, err
	}
	if s.textSet == nil && len(s.q.TextAny) > 0 {
		s.textSet = make(map[uint64]struct{}, len(s.q.TextAny))
		for _, t := range s.q.TextAny {
			s.textSet[t] = struct{}{}
		}
	}
	cands := []uint32{}
	err = decodeRows(v, blk, s.v.blockSize, sum.n, func(off uint32, r row) {
		for _, want := range s.q.Attrs {
			if !slices.Contains(r.attrs, want) {
				return
			}
		}
		if s.textSet != nil {
			found := false
			for _, t := range r.texts {
				if _, found = s.textSet[t]; found {
					break
				}
			}
			for _, kv := range r.attrs {
				if found {
					break
				}
				_, found = s.textSet[kv.Value]
			}
			if !found {
				return
			}
		}
		cands = append(cands, off)
	})
	if err != nil {
		return nil, false, err
	}
	slices.Sort(cands) // operands are in offset order; be robust anyway
	return slices.Compact(cands), true, nil
}

// column returns the decoded time column of a block, through the index's
// column cache when the block is sealed.
func (s *searcher) column(blk uint64, sum blockSummary) (*column, error) {
	sealed := sum.n == s.v.blockSize
	if sealed {
		if col := s.ix.columns.get(blk); col != nil {
			return col, nil
		}
	}
	s.key = numKey(s.key[:0], prefixColumn, blk)
	v, ok, err := s.reader.Get(s.key)
	if err != nil {
		return nil, fmt.Errorf("time column of block %d: %w", blk, err)
	}
	if !ok {
		return nil, corruptf("time column of block %d missing", blk)
	}
	col := &s.col
	if sealed {
		col = &column{}
	}
	if err := decodeColumn(v, blk, s.v.blockSize, sum.n, col); err != nil {
		return nil, err
	}
	if sealed {
		s.ix.columns.put(blk, col)
	}
	return col, nil
}

// emit delivers, in order, every candidate newer than bound (no unvisited
// block can hold one as new). It returns false when fn asked to stop.
func (s *searcher) emit(ctx context.Context, bound int64, fn func(Hit, HitTrace) bool) (bool, error) {
	type groupRec struct {
		traceRec
		trace []traceRec // every record of its trace
	}
	var group []groupRec
	for len(s.heap) > 0 && s.heap[0].start > bound {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		start := s.heap[0].start
		group = group[:0]
		for len(s.heap) > 0 && s.heap[0].start == start {
			c := heap.Pop(&s.heap).(cand)
			r, recs, err := s.resolve(c.seq)
			if err != nil {
				return false, err
			}
			if r.ref.StartNS != start {
				return false, corruptf("entry %d: time column says start %d, trace record %d", c.seq, start, r.ref.StartNS)
			}
			if r.ref.DurationNS < s.q.MinDurationNS || s.q.MaxDurationNS > 0 && r.ref.DurationNS > s.q.MaxDurationNS {
				continue
			}
			if a := s.q.After; a != nil && start == a.StartNS && !keyLess(r.ref.TraceID, r.ref.SpanID, a.TraceID, a.SpanID) {
				continue
			}
			group = append(group, groupRec{r, recs})
		}
		slices.SortFunc(group, func(a, b groupRec) int { return searchOrder(a.traceRec, b.traceRec) })
		for i, r := range group {
			if i > 0 && group[i-1].ref.TraceID == r.ref.TraceID && group[i-1].ref.SpanID == r.ref.SpanID {
				continue
			}
			if s.q.Accept != nil {
				ok, err := s.q.Accept(r.ref)
				if err != nil {
					return false, err
				}
				if !ok {
					continue
				}
			}
			if !fn(Hit{SpanRef: r.ref}, HitTrace{r.trace}) {
				return false, nil
			}
		}
	}
	return true, nil
}

// keyLess reports whether (t1, s1) sorts before (t2, s2) ascending, i.e.
// comes after it in search order.
func keyLess(t1 [16]byte, s1 uint64, t2 [16]byte, s2 uint64) bool {
	if c := bytes.Compare(t1[:], t2[:]); c != 0 {
		return c < 0
	}
	return s1 < s2
}

// resolve returns the trace record of entry seq and every record of its
// trace (sorted by seq; shared, not to be changed).
func (s *searcher) resolve(seq uint64) (traceRec, []traceRec, error) {
	g := seq >> seqGroupShift
	if !s.gvalid || s.gnum != g {
		s.key = numKey(s.key[:0], prefixSeqs, g)
		v, ok, err := s.reader.Get(s.key)
		if err != nil {
			return traceRec{}, nil, fmt.Errorf("trace of entry %d: %w", seq, err)
		}
		if !ok {
			return traceRec{}, nil, corruptf("sequence group %d missing", g)
		}
		if err := decodeSeqGroup(v, g, &s.group); err != nil {
			return traceRec{}, nil, err
		}
		s.gnum, s.gvalid = g, true
	}
	off := seq & (1<<seqGroupShift - 1)
	if s.group.present&(1<<off) == 0 {
		return traceRec{}, nil, corruptf("sequence group %d has no trace for entry %d", g, seq)
	}
	id := s.group.ids[off]
	recs, ok := s.traces[id]
	if !ok {
		if len(s.traces) >= maxCachedTraces {
			clear(s.traces)
		}
		s.key = traceKey(s.key[:0], id)
		v, ok, err := s.reader.Get(s.key)
		if err != nil {
			return traceRec{}, nil, fmt.Errorf("trace %x of entry %d: %w", id, seq, err)
		}
		if !ok {
			return traceRec{}, nil, corruptf("trace %x of entry %d missing", id, seq)
		}
		recs, err = decodeTraceValue(v, id, nil)
		if err != nil {
			return traceRec{}, nil, err
		}
		slices.SortFunc(recs, func(a, b traceRec) int { return uint64Cmp(a.seq, b.seq) })
		s.traces[id] = recs
	}
	i, found := slices.BinarySearchFunc(recs, seq, func(r traceRec, seq uint64) int { return uint64Cmp(r.seq, seq) })
	if !found {
		return traceRec{}, nil, corruptf("trace %x has no record of entry %d", id, seq)
	}
	return recs[i], recs, nil
}

// searchOrder orders trace records as Search emits them: newest start
// first, then trace id and span id descending; for one span, the lowest
// chunk number first and, of equal ones, the latest entry.
func searchOrder(a, b traceRec) int {
	if c := int64Cmp(b.ref.StartNS, a.ref.StartNS); c != 0 {
		return c
	}
	if c := bytes.Compare(b.ref.TraceID[:], a.ref.TraceID[:]); c != 0 {
		return c
	}
	if c := uint64Cmp(b.ref.SpanID, a.ref.SpanID); c != 0 {
		return c
	}
	if c := int64Cmp(int64(a.ref.ChunkNum), int64(b.ref.ChunkNum)); c != 0 {
		return c
	}
	return uint64Cmp(b.seq, a.seq)
}
