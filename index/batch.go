package index

import (
	"errors"
	"fmt"
	"math"
	mathbits "math/bits"
	"slices"
	"sync"

	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// Batch collects entries and a watermark and writes them atomically on
// Commit. It is not safe for concurrent use. A Batch that is never
// committed leaves no trace.
type Batch struct {
	ix   *Index
	base uint64 // sequence number of the batch's first entry

	entries []traceRec
	cols    []colEntry
	rows    []row
	err     error
	// The rows' attributes and texts are carved out of these (distinct).
	attrArena []KV
	textArena []uint64

	hasWatermark bool
	watermark    int64
}

// postKey names a posting list of one block: an attribute ('a', key a,
// value b) or a text ('w', id a).
type postKey struct {
	prefix byte
	a, b   uint64
}

// openBlock is the open block in memory: the rows of its entries, in
// offset order, and the posting lists that searches build from those rows
// on demand.
//
// The writer only appends rows (Commit: a copy of each row, no posting
// work on the commit path); the block's posting lists are built once, when
// it is sealed, from its rows. A search that reaches the open block extends
// the search lists (attribute pairs, and texts including attribute values)
// to the rows it sees and evaluates its conditions on them, so the work of
// indexing the open block for searches is done by searches, once per row,
// and only when there are searches.
//
// Concurrency: rows is append-only and a row never changes once appended.
// The writer prepares a new rows slice without any lock (appending beyond
// the length readers see never touches what they read) and publishes it
// under Index.mu; readers copy the slice header under Index.mu's read lock
// and read the rows without it. searchN, searchAttrs and searchTexts are
// guarded by searchMu, which the writer never takes.
type openBlock struct {
	blk  uint64
	rows []row // rows[off] is the row of the block's entry at offset off

	// The rows' attributes and texts are carved out of these: a block
	// holds its rows in a few large arrays, not two allocations per row.
	attrArena []KV
	textArena []uint64

	searchMu    sync.Mutex
	searchN     uint32               // rows[:searchN] are in the lists below
	searchAttrs postingLists[KV]     // attribute pair → offsets
	searchTexts postingLists[uint64] // text (a text or an attribute value) → offsets
}

// newOpenBlock returns block blk, empty, with room for rows rows (the
// writer makes room for a whole block at once; an index opened for reads
// only for the rows it reads back).
func newOpenBlock(blk uint64, rows uint32) *openBlock {
	return &openBlock{blk: blk, rows: make([]row, 0, rows)}
}

// appendRows returns o.rows with copies of rows appended (carved out of
// o's arenas). The caller publishes the result as o.rows under Index.mu.
func (o *openBlock) appendRows(rows []row) []row {
	out := o.rows
	for _, r := range rows {
		out = append(out, row{
			attrs:         carve(&o.attrArena, r.attrs),
			texts:         carve(&o.textArena, r.texts),
			valuesInTexts: r.valuesInTexts,
		})
	}
	return out
}

// carve returns a copy of s carved out of *arena (a new arena, twice the
// last up to openArena elements, when it is full).
func carve[T any](arena *[]T, s []T) []T {
	if len(s) == 0 {
		return nil
	}
	if cap(*arena)-len(*arena) < len(s) {
		n := min(max(2*cap(*arena), firstArena), openArena)
		*arena = make([]T, 0, max(n, len(s)))
	}
	a := *arena
	out := append(a[len(a):len(a):len(a)+len(s)], s...)
	*arena = a[:len(a)+len(s)]
	return out
}

// openArena is the most elements an open block's arena grows by at once.
const openArena = 1 << 14

// searchLists extends the search lists to rows (a snapshot of o.rows, taken
// under Index.mu's read lock) and calls fn with them under searchMu. fn
// must not retain the lists; entries beyond the caller's view may be in
// them.
func (o *openBlock) searchLists(rows []row, fn func(attrs *postingLists[KV], texts *postingLists[uint64])) {
	o.searchMu.Lock()
	defer o.searchMu.Unlock()
	if o.searchAttrs.at == nil {
		o.searchAttrs, o.searchTexts = newPostingLists[KV](), newPostingLists[uint64]()
	}
	for off := o.searchN; off < uint32(len(rows)); off++ {
		r := rows[off]
		for _, kv := range r.attrs {
			o.searchAttrs.add(kv, off)
		}
		for _, t := range r.texts {
			o.searchTexts.addOnce(t, off)
		}
		if !r.valuesInTexts {
			for _, kv := range r.attrs {
				o.searchTexts.addOnce(kv.Value, off)
			}
		}
	}
	o.searchN = max(o.searchN, uint32(len(rows)))
	fn(&o.searchAttrs, &o.searchTexts)
}

// postingLists are posting lists by key, held in one slice and found
// through a map of their positions: extending a list costs one map lookup
// (a map of slices costs a lookup and an assignment). keys[i] is the key of
// lists[i].
type postingLists[K comparable] struct {
	at    map[K]int32
	keys  []K
	lists [][]uint32
}

func newPostingLists[K comparable]() postingLists[K] {
	return postingLists[K]{at: make(map[K]int32)}
}

// index returns the position of k's list, creating an empty one.
func (p *postingLists[K]) index(k K) int32 {
	if i, ok := p.at[k]; ok {
		return i
	}
	i := int32(len(p.lists))
	p.at[k] = i
	p.keys = append(p.keys, k)
	p.lists = append(p.lists, nil)
	return i
}

// add appends off to k's list.
func (p *postingLists[K]) add(k K, off uint32) {
	i := p.index(k)
	p.lists[i] = append(p.lists[i], off)
}

// addOnce appends off to k's list unless the list ends with it.
func (p *postingLists[K]) addOnce(k K, off uint32) {
	i := p.index(k)
	if l := p.lists[i]; len(l) == 0 || l[len(l)-1] != off {
		p.lists[i] = append(l, off)
	}
}

// get returns k's list (nil when there is none).
func (p *postingLists[K]) get(k K) []uint32 {
	if i, ok := p.at[k]; ok {
		return p.lists[i]
	}
	return nil
}

// blockPostings builds the posting lists of one block: those of attribute
// pairs and those of texts apart, so that each map's key is plain memory
// hashed in one go (a text's is one word). The writer keeps one
// (Index.builder, under writeMu) and reuses its memory from seal to seal.
//
// It works in two passes: add finds each posting's list (a map lookup, or
// none, see below) and records the list and the offset; finish counts the
// lists' lengths and places every offset in one array, so a block's lists
// cost no allocation each and no growing.
//
// Consecutive rows tend to repeat what they hold at the same positions
// (the resource and scope attributes of one request's spans, the keys of
// the same operation's attributes), so add remembers the previous row's
// attributes and texts with their lists: a repeat costs a comparison
// instead of a map lookup.
type blockPostings struct {
	attrs postingKeys[KV]
	words postingKeys[textKey]
	// attrSeq and wordSeq hold every posting in the order added: the
	// list's position in the high 32 bits, the offset in the low ones.
	attrSeq, wordSeq []uint64
	flat             []uint32 // every list's offsets, list after list

	prev, cur posCache
	values    valueSet
}

// postingKeys are the keys of a block's lists, found through an
// open-addressing table of their positions (linear probing, at most half
// full, kept from block to block); lists[i] is the list of keys[i] once
// finish has run. A Go map was ~60% of add's time in the daemon's profile
// (hashing, its control words and directory): a block's keys are small
// integers, found here with a multiply and usually one probe.
type postingKeys[K listKey] struct {
	slots []keySlot[K] // len a power of two (or 0)
	shift uint         // 64 - log2(len(slots))
	keys  []K
	lists [][]uint32
}

// listKey is a key of a block's lists: an attribute pair or a text id.
type listKey interface {
	comparable
	slotHash() uint64 // spread over all 64 bits; the table uses the top ones
}

// keySlot is one place of postingKeys' table: a key and its position + 1
// (0: empty).
type keySlot[K listKey] struct {
	k K
	i int32
}

func (kv KV) slotHash() uint64 {
	return (kv.Key*0x9e3779b97f4a7c15 ^ kv.Value) * 0xbf58476d1ce4e5b9
}

// textKey is a text id as a key of a block's lists.
type textKey uint64

func (t textKey) slotHash() uint64 { return uint64(t) * 0x9e3779b97f4a7c15 }

func (p *postingKeys[K]) index(k K) int32 {
	if 2*(len(p.keys)+1) > len(p.slots) {
		p.grow()
	}
	mask := uint64(len(p.slots) - 1)
	for j := k.slotHash() >> p.shift; ; j = (j + 1) & mask {
		s := &p.slots[j]
		if s.i == 0 {
			i := int32(len(p.keys))
			s.k, s.i = k, i+1
			p.keys = append(p.keys, k)
			return i
		}
		if s.k == k {
			return s.i - 1
		}
	}
}

// grow doubles the table (at least 256 places) and places the keys again.
func (p *postingKeys[K]) grow() {
	n := max(256, 2*len(p.slots))
	p.slots = make([]keySlot[K], n)
	p.shift = uint(64 - mathbits.TrailingZeros(uint(n)))
	mask := uint64(n - 1)
	for i, k := range p.keys {
		j := k.slotHash() >> p.shift
		for p.slots[j].i != 0 {
			j = (j + 1) & mask
		}
		p.slots[j] = keySlot[K]{k: k, i: int32(i) + 1}
	}
}

// maxKeptSlots bounds the table a builder keeps for the next block (6
// MiB of attribute pairs): a block of spans with unusually many distinct
// attributes does not pin its table for as long as the writer lives.
const maxKeptSlots = 1 << 18

func (p *postingKeys[K]) reset() {
	if len(p.slots) > maxKeptSlots {
		p.slots, p.shift = nil, 0
	}
	clear(p.slots)
	p.keys, p.lists = p.keys[:0], p.lists[:0]
}

// posCache is one row's attributes and texts with the positions of their
// lists (-1 for a text that was an attribute value of the row: no list).
type posCache struct {
	attrs     []KV
	attrLists []int32
	texts     []uint64
	textLists []int32
}

// reset starts a new block.
func (p *blockPostings) reset() {
	p.attrs.reset()
	p.words.reset()
	p.attrSeq, p.wordSeq = p.attrSeq[:0], p.wordSeq[:0]
	p.prev, p.cur = posCache{attrLists: p.prev.attrLists[:0], textLists: p.prev.textLists[:0]},
		posCache{attrLists: p.cur.attrLists[:0], textLists: p.cur.textLists[:0]}
}

// add adds the entry at offset off with row r: one posting per attribute,
// and one per text that is not also an attribute value of the entry (those
// are found through the attribute's list, see Query.TextAny). Offsets must
// come in ascending order. The row's slices must not change until finish
// (add keeps the last row to compare the next one with).
//
// Its cost is linear in the row's attributes and texts: a row with many
// attributes looks its texts up in a hash set of its attribute values.
func (p *blockPostings) add(off uint32, r row) {
	prev, cur := &p.prev, &p.cur
	cur.attrs, cur.attrLists = r.attrs, cur.attrLists[:0]
	for j, kv := range r.attrs {
		var li int32
		if j < len(prev.attrs) && prev.attrs[j] == kv {
			li = prev.attrLists[j]
		} else {
			li = p.attrs.index(kv)
		}
		p.attrSeq = append(p.attrSeq, uint64(li)<<32|uint64(off))
		cur.attrLists = append(cur.attrLists, li)
	}
	small := len(r.attrs) <= smallValueRow
	if !small {
		p.values.reset(r.attrs)
	}
	cur.texts, cur.textLists = r.texts, cur.textLists[:0]
	for j, t := range r.texts {
		var isValue bool
		if small {
			for _, kv := range r.attrs {
				if kv.Value == t {
					isValue = true
					break
				}
			}
		} else {
			isValue = p.values.has(t)
		}
		li := int32(-1)
		switch {
		case isValue:
		case j < len(prev.texts) && prev.texts[j] == t && prev.textLists[j] >= 0:
			li = prev.textLists[j]
		default:
			li = p.words.index(textKey(t))
		}
		if li >= 0 {
			p.wordSeq = append(p.wordSeq, uint64(li)<<32|uint64(off))
		}
		cur.textLists = append(cur.textLists, li)
	}
	p.prev, p.cur = p.cur, p.prev
}

// finish builds the lists from what add recorded. They stay valid until
// the next reset.
func (p *blockPostings) finish() {
	total := len(p.attrSeq) + len(p.wordSeq)
	if cap(p.flat) < total {
		p.flat = make([]uint32, total)
	}
	flat := p.flat[:total]
	flat = placeLists(flat, p.attrSeq, len(p.attrs.keys), &p.attrs.lists)
	placeLists(flat, p.wordSeq, len(p.words.keys), &p.words.lists)
}

// placeLists lays out the n lists of seq at the start of flat (a counting
// sort: offsets stay in the order added) and returns the rest of flat.
func placeLists(flat []uint32, seq []uint64, n int, lists *[][]uint32) []uint32 {
	ls := (*lists)[:0]
	ends := make([]uint32, n) // first the lengths, then each list's next free place
	for _, x := range seq {
		ends[x>>32]++
	}
	var at uint32
	for i, c := range ends {
		ls = append(ls, flat[at:at:at+c])
		at += c
		ends[i] = at - c
	}
	for _, x := range seq {
		li := x >> 32
		flat[ends[li]] = uint32(x)
		ends[li]++
	}
	for i := range ls {
		ls[i] = ls[i][:cap(ls[i])]
	}
	*lists = ls
	return flat[at:]
}

// all yields every list with its key, in the order the lists were created
// (after finish).
func (p *blockPostings) all(yield func(postKey, []uint32) bool) {
	for i, kv := range p.attrs.keys {
		if !yield(postKey{prefix: prefixAttr, a: kv.Key, b: kv.Value}, p.attrs.lists[i]) {
			return
		}
	}
	for i, t := range p.words.keys {
		if !yield(postKey{prefix: prefixText, a: uint64(t)}, p.words.lists[i]) {
			return
		}
	}
}

// valueSet is a set of attribute values (open addressing, cleared by
// generation), rebuilt for every large row.
type valueSet struct {
	slots []uint64
	gens  []uint32
	gen   uint32
	shift uint
}

func (s *valueSet) reset(attrs []KV) {
	n := 16
	for n < 2*len(attrs) {
		n *= 2
	}
	if len(s.slots) < n {
		s.slots, s.gens, s.gen = make([]uint64, n), make([]uint32, n), 0
		s.shift = uint(64 - mathbits.TrailingZeros(uint(n)))
	}
	s.gen++
	if s.gen == 0 { // wrapped: clear the marks of every earlier generation
		clear(s.gens)
		s.gen = 1
	}
	mask := uint64(len(s.slots) - 1)
	for _, kv := range attrs {
		for i := (kv.Value * 0x9e3779b97f4a7c15) >> s.shift; ; i = (i + 1) & mask {
			if s.gens[i] != s.gen {
				s.slots[i], s.gens[i] = kv.Value, s.gen
				break
			}
			if s.slots[i] == kv.Value {
				break
			}
		}
	}
}

func (s *valueSet) has(v uint64) bool {
	mask := uint64(len(s.slots) - 1)
	for i := (v * 0x9e3779b97f4a7c15) >> s.shift; ; i = (i + 1) & mask {
		if s.gens[i] != s.gen {
			return false
		}
		if s.slots[i] == v {
			return true
		}
	}
}

// batchArena is the most elements a Batch's arena grows by at once; the
// first arena holds firstArena, each next one twice the last, so a batch
// of one span (a group commit of one small request) does not allocate and
// zero a large arena it does not use.
const (
	firstArena = 64
	batchArena = 4096
)

// smallRow is the number of elements up to which distinct scans what it
// kept instead of building a set; smallValueRow the number of attributes
// up to which blockPostings.add scans them instead of hashing them.
const (
	smallRow      = 32
	smallValueRow = 8
)

// NewBatch starts a batch whose entries follow everything committed so far.
func (ix *Index) NewBatch() *Batch {
	ix.mu.RLock()
	base := ix.spans
	ix.mu.RUnlock()
	return &Batch{ix: ix, base: base}
}

// Grow makes room for n more entries, so that adding a known number of
// entries does not grow the batch's arrays step by step.
func (b *Batch) Grow(n int) {
	b.entries = slices.Grow(b.entries, n)
	b.cols = slices.Grow(b.cols, n)
	b.rows = slices.Grow(b.rows, n)
}

// Len returns the number of entries added.
func (b *Batch) Len() int { return len(b.entries) }

// AddSpan adds one entry (one chunk of one span). Its slices are not
// retained; repeated attributes and texts count once. An invalid entry
// (negative chunk offset) makes Commit fail.
func (b *Batch) AddSpan(e SpanEntry) {
	b.add(e, row{attrs: distinct(&b.attrArena, e.Attrs), texts: distinct(&b.textArena, e.Texts)})
}

// AddDistinctSpan is AddSpan for an entry whose Attrs and Texts hold no
// repeats and whose Texts list every attribute value (as storedir's
// interner makes them): the batch keeps the slices as they are, so the
// caller must not change them until Commit returns.
func (b *Batch) AddDistinctSpan(e SpanEntry) {
	b.add(e, row{attrs: e.Attrs, texts: e.Texts, valuesInTexts: true})
}

func (b *Batch) add(e SpanEntry, r row) {
	if b.err != nil {
		return
	}
	seq := b.base + uint64(len(b.entries))
	if e.Loc.ChunkOffset < 0 {
		b.err = fmt.Errorf("span %x/%016x: negative chunk offset %d", e.TraceID, e.SpanID, e.Loc.ChunkOffset)
		return
	}
	if seq == math.MaxUint64 {
		b.err = errors.New("sequence numbers exhausted")
		return
	}
	b.entries = append(b.entries, traceRec{seq: seq, ref: SpanRef{
		TraceID: e.TraceID, SpanID: e.SpanID, ParentID: e.ParentID, ChunkNum: e.ChunkNum,
		Loc: e.Loc, StartNS: e.StartNS, DurationNS: e.DurationNS, Error: e.Error,
	}})
	b.cols = append(b.cols, colEntry{start: e.StartNS, flags: colFlags(e.Error, e.DurationNS)})
	b.rows = append(b.rows, r)
}

// distinct returns a copy of s without repeated elements, in order, carved
// out of *arena (a new arena, twice the last up to batchArena elements,
// when it is full): a batch allocates its rows a few at a time.
func distinct[T comparable](arena *[]T, s []T) []T {
	if cap(*arena)-len(*arena) < len(s) {
		n := min(max(2*cap(*arena), firstArena), batchArena)
		*arena = make([]T, 0, max(n, len(s)))
	}
	a := *arena
	out := a[len(a) : len(a) : len(a)+len(s)]
	if len(s) > smallRow {
		seen := make(map[T]struct{}, len(s))
		for _, x := range s {
			if _, ok := seen[x]; !ok {
				seen[x] = struct{}{}
				out = append(out, x)
			}
		}
	} else {
		for _, x := range s {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	*arena = a[:len(a)+len(out)]
	return out
}

// SetWatermark records the data-file offset up to which the index is
// complete once this batch is committed.
func (b *Batch) SetWatermark(off int64) {
	b.hasWatermark = true
	b.watermark = off
}

// Commit writes the batch atomically (without syncing: the index is
// rebuildable from the data file, see the package documentation).
//
// Per batch it writes the trace records, trace-id runs, time column and
// rows of the open block, and the state record; when a block fills up it
// writes the block's posting lists and summary and deletes its rows.
func (b *Batch) Commit() error {
	ix := b.ix
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	if b.err != nil {
		return fmt.Errorf("index %s: commit: %w", ix.dir, b.err)
	}
	if ix.db.ReadOnly() {
		return fmt.Errorf("index %s: commit: %w", ix.dir, ErrReadOnly)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.mu.RLock()
	st := state{spans: ix.spans, traces: ix.traces, watermark: ix.watermark, tail: ix.tail}
	sealed := ix.sealed
	ix.mu.RUnlock()
	if st.spans != b.base {
		return fmt.Errorf("index %s: commit: %w", ix.dir, ErrBatchConflict)
	}
	wb := &ix.wb
	defer wb.Reset(ix.keep)
	var key, val []byte

	// Trace records, and the count of traces not seen before.
	byTrace := make(map[[16]byte][]traceRec)
	var order [][16]byte
	for _, r := range b.entries {
		id := r.ref.TraceID
		if _, ok := byTrace[id]; !ok {
			order = append(order, id)
		}
		byTrace[id] = append(byTrace[id], r)
	}
	newTraces := 0
	var probe *kv.PointReader
	defer func() {
		if probe != nil {
			probe.Close()
		}
	}()
	for _, id := range order {
		key = traceKey(key[:0], id)
		// A trace id is new unless the index holds it: certainly new when
		// the filter of every id committed has not seen it, certainly not
		// when it was seen recently, otherwise looked up.
		if ix.known != nil && !ix.known.mayContain(id) {
			newTraces++
		} else if !ix.recent.contains(id) {
			if probe == nil {
				var err error
				if probe, err = kv.NewPointReader(ix.db.DB); err != nil {
					return fmt.Errorf("index %s: commit: %w", ix.dir, err)
				}
			}
			_, found, err := probe.Get(key)
			if err != nil {
				return fmt.Errorf("index %s: commit: trace %x: %w", ix.dir, id, err)
			}
			if !found {
				newTraces++
			}
		}
		val = appendTraceOperand(val[:0], byTrace[id])
		wb.Merge(key, val)
	}

	// Trace ids by sequence number, per group of 64.
	var runs []traceRun
	for i := 0; i < len(b.entries); {
		seq := b.entries[i].seq
		group := seq >> seqGroupShift
		end := min(len(b.entries), i+int((group+1)<<seqGroupShift-seq))
		runs = runs[:0]
		for _, r := range b.entries[i:end] {
			if n := len(runs); n > 0 && runs[n-1].id == r.ref.TraceID {
				runs[n-1].n++
			} else {
				runs = append(runs, traceRun{id: r.ref.TraceID, n: 1})
			}
		}
		key, val = numKey(key[:0], prefixSeqs, group), appendSeqOperand(val[:0], uint32(seq&(1<<seqGroupShift-1)), runs)
		wb.Merge(key, val)
		i = end
	}

	// Per block: time column; rows while the block is open; posting lists,
	// summary and the rows' deletion when it fills up.
	newSealed, tail := sealed, st.tail
	var newPairs []KV
	var openRows []row // rows added to the open block that stays open
	mask := uint64(ix.blockSize - 1)
	for i := 0; i < len(b.entries); {
		seq := b.entries[i].seq
		blk, firstOff := seq>>ix.blockShift, uint32(seq&mask)
		end := min(len(b.entries), i+int(uint64(ix.blockSize)-uint64(firstOff)))
		key, val = numKey(key[:0], prefixColumn, blk), appendColumnOperand(val[:0], firstOff, b.cols[i:end])
		wb.Merge(key, val)
		s := tail
		if s.n == 0 {
			s = blockSummary{minStart: math.MaxInt64, maxStart: math.MinInt64}
		}
		for _, c := range b.cols[i:end] {
			s.minStart = min(s.minStart, c.start)
			s.maxStart = max(s.maxStart, c.start)
		}
		s.n += uint32(end - i)
		if s.n < ix.blockSize {
			key, val = numKey(key[:0], prefixRows, blk), appendRowsOperand(val[:0], firstOff, b.rows[i:end])
			wb.Merge(key, val)
			tail, openRows = s, b.rows[i:end]
			i = end
			continue
		}
		// The block is full: build its posting lists from its rows (those
		// committed before, kept by ix.open, and this batch's) and write
		// them once.
		posts := &ix.builder
		posts.reset()
		if firstOff > 0 {
			if o := ix.open; o == nil || o.blk != blk || len(o.rows) != int(firstOff) {
				return fmt.Errorf("index %s: commit: the open block in memory does not hold the %d rows of block %d", ix.dir, firstOff, blk)
			}
			for off, r := range ix.open.rows {
				posts.add(uint32(off), r)
			}
			key = numKey(key[:0], prefixRows, blk)
			wb.Delete(key)
		}
		for j, r := range b.rows[i:end] {
			posts.add(firstOff+uint32(j), r)
		}
		posts.finish()
		// A key (about 12 bytes) per list and per new pair's 'v' key, and
		// about 2 bytes per posting.
		nlists := len(posts.attrs.keys) + len(posts.words.keys)
		wb.Grow(nlists+len(posts.attrs.keys), 24*nlists+2*(len(posts.attrSeq)+len(posts.wordSeq)))
		for k, offs := range posts.all {
			key, val = postingKey(key[:0], k.prefix, k.a, k.b, blk), postings.Append(val[:0], offs)
			wb.Set(key, val)
			if k.prefix == prefixAttr && !ix.pairs.contains(KV{k.a, k.b}) {
				newPairs = append(newPairs, KV{k.a, k.b})
				key = valueKey(key[:0], k.b, k.a)
				wb.Set(key, nil)
			}
		}
		key, val = numKey(key[:0], prefixBlock, blk), appendSummary(val[:0], s)
		wb.Set(key, val)
		// Appending beyond the readers' length never touches what they see.
		newSealed = append(newSealed, s)
		tail = blockSummary{}
		i = end
	}

	// State record.
	newState := state{spans: st.spans + uint64(len(b.entries)), traces: st.traces + uint64(newTraces),
		watermark: st.watermark, tail: tail}
	if b.hasWatermark {
		newState.watermark = b.watermark
	}
	wb.Set(keyState, appendState(nil, newState))
	if err := wb.Commit(ix.db.DB); err != nil {
		return fmt.Errorf("index %s: commit: %w", ix.dir, err)
	}

	// Committed: update the writer's memory, then the readers' view.
	for _, id := range order {
		ix.recent.add(id)
		if ix.known != nil {
			ix.known.add(id)
		}
	}
	for _, kv := range newPairs {
		ix.pairs.add(kv)
	}
	order2 := ix.order
	if len(newSealed)-order2.upto >= rebuildEvery {
		order2 = buildOrder(order2, newSealed)
	}
	// The rows of the block that stays open are copied (the batch's rows
	// may be the caller's slices) before the readers' view changes.
	open := ix.open
	if len(newSealed) > len(sealed) {
		open = newOpenBlock(uint64(len(newSealed)), ix.blockSize)
	}
	var rows []row
	if openRows != nil {
		rows = open.appendRows(openRows)
	}
	ix.mu.Lock()
	ix.open = open
	if openRows != nil {
		open.rows = rows
	}
	ix.spans, ix.traces, ix.watermark = newState.spans, newState.traces, newState.watermark
	ix.sealed, ix.tail, ix.order = newSealed, tail, order2
	ix.mu.Unlock()

	// The batch is spent: a second Commit conflicts.
	b.entries, b.cols, b.rows = nil, nil, nil
	b.base = math.MaxUint64
	return nil
}
