package index

import (
	"errors"
	"fmt"
	"math"
	"slices"

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

// openBlock is the in-memory index of the open block: its posting lists as
// they will be written when it is sealed, and, for searches, the entries
// by text set (Texts plus attribute values). The writer changes it under
// Index.mu; searches read it under Index.mu's read lock.
type openBlock struct {
	blk   uint64
	posts blockPostings
	texts postingLists[uint64]
}

func newOpenBlock(blk uint64) *openBlock {
	return &openBlock{blk: blk, posts: newBlockPostings(), texts: newPostingLists[uint64]()}
}

func (o *openBlock) add(off uint32, r row) {
	o.posts.add(off, r)
	for _, t := range r.texts {
		o.texts.addOnce(t, off)
	}
	if r.valuesInTexts {
		return
	}
	for _, kv := range r.attrs {
		o.texts.addOnce(kv.Value, off)
	}
}

// postingLists are posting lists by key, held in one slice and found
// through a map of their positions: extending a list costs one map lookup
// (a map of slices costs a lookup and an assignment).
type postingLists[K comparable] struct {
	at    map[K]int32
	lists [][]uint32
}

func newPostingLists[K comparable]() postingLists[K] {
	return postingLists[K]{at: make(map[K]int32)}
}

// add appends off to k's list.
func (p *postingLists[K]) add(k K, off uint32) {
	if i, ok := p.at[k]; ok {
		p.lists[i] = append(p.lists[i], off)
		return
	}
	p.at[k] = int32(len(p.lists))
	p.lists = append(p.lists, []uint32{off})
}

// addOnce appends off to k's list unless the list ends with it.
func (p *postingLists[K]) addOnce(k K, off uint32) {
	if i, ok := p.at[k]; ok {
		if l := p.lists[i]; l[len(l)-1] != off {
			p.lists[i] = append(l, off)
		}
		return
	}
	p.at[k] = int32(len(p.lists))
	p.lists = append(p.lists, []uint32{off})
}

// get returns k's list (nil when there is none).
func (p *postingLists[K]) get(k K) []uint32 {
	if i, ok := p.at[k]; ok {
		return p.lists[i]
	}
	return nil
}

// set replaces k's list.
func (p *postingLists[K]) set(k K, offs []uint32) {
	if i, ok := p.at[k]; ok {
		p.lists[i] = offs
		return
	}
	p.at[k] = int32(len(p.lists))
	p.lists = append(p.lists, offs)
}

// all yields every key with its list, in no particular order.
func (p *postingLists[K]) all(yield func(K, []uint32) bool) {
	for k, i := range p.at {
		if !yield(k, p.lists[i]) {
			return
		}
	}
}

// blockPostings are the posting lists of one block being built: those of
// attribute pairs and those of texts apart, so that each map's key is
// plain memory hashed in one go (a text's is one word).
type blockPostings struct {
	attrs postingLists[KV]
	words postingLists[uint64]
}

func newBlockPostings() blockPostings {
	return blockPostings{attrs: newPostingLists[KV](), words: newPostingLists[uint64]()}
}

// get returns the list of k (nil when there is none).
func (p *blockPostings) get(k postKey) []uint32 {
	if k.prefix == prefixText {
		return p.words.get(k.a)
	}
	return p.attrs.get(KV{k.a, k.b})
}

// set replaces the list of k.
func (p *blockPostings) set(k postKey, offs []uint32) {
	if k.prefix == prefixText {
		p.words.set(k.a, offs)
		return
	}
	p.attrs.set(KV{k.a, k.b}, offs)
}

// all yields every list with its key, in no particular order.
func (p *blockPostings) all(yield func(postKey, []uint32) bool) {
	for kv, offs := range p.attrs.all {
		if !yield(postKey{prefix: prefixAttr, a: kv.Key, b: kv.Value}, offs) {
			return
		}
	}
	for t, offs := range p.words.all {
		if !yield(postKey{prefix: prefixText, a: t}, offs) {
			return
		}
	}
}

// add adds the entry at offset off with row r: one posting per attribute,
// and one per text that is not also an attribute value of the entry (those
// are found through the attribute's list, see Query.TextAny).
//
// Its cost is linear in the row's attributes and texts: a row with many
// attributes looks its texts up in a set of its attribute values.
func (p *blockPostings) add(off uint32, r row) {
	for _, kv := range r.attrs {
		p.attrs.add(kv, off)
	}
	isValue := func(t uint64) bool {
		for _, kv := range r.attrs {
			if kv.Value == t {
				return true
			}
		}
		return false
	}
	if len(r.attrs) > smallRow {
		values := make(map[uint64]struct{}, len(r.attrs))
		for _, kv := range r.attrs {
			values[kv.Value] = struct{}{}
		}
		isValue = func(t uint64) bool { _, ok := values[t]; return ok }
	}
	for _, t := range r.texts {
		if isValue(t) {
			continue
		}
		p.words.add(t, off)
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

// smallRow is the number of attributes up to which scanning them beats
// building a set.
const smallRow = 32

// NewBatch starts a batch whose entries follow everything committed so far.
func (ix *Index) NewBatch() *Batch {
	ix.mu.RLock()
	base := ix.spans
	ix.mu.RUnlock()
	return &Batch{ix: ix, base: base}
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
	if ix.readOnly {
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
	wb := &kv.Batch{}
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
		if !ix.recent.contains(id) {
			if probe == nil {
				var err error
				if probe, err = kv.NewPointReader(ix.db); err != nil {
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
		wb.Merge(key, appendTraceOperand(val[:0], byTrace[id]))
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
		wb.Merge(numKey(key[:0], prefixSeqs, group), appendSeqOperand(val[:0], uint32(seq&(1<<seqGroupShift-1)), runs))
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
		wb.Merge(numKey(key[:0], prefixColumn, blk), appendColumnOperand(val[:0], firstOff, b.cols[i:end]))
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
			wb.Merge(numKey(key[:0], prefixRows, blk), appendRowsOperand(val[:0], firstOff, b.rows[i:end]))
			tail, openRows = s, b.rows[i:end]
			i = end
			continue
		}
		// The block is full: write its posting lists once.
		posts := newBlockPostings()
		if firstOff > 0 {
			for k, offs := range ix.open.posts.all {
				posts.set(k, slices.Clip(offs)) // appending copies: ix.open stays as is
			}
			wb.Delete(numKey(key[:0], prefixRows, blk))
		}
		for j, r := range b.rows[i:end] {
			posts.add(firstOff+uint32(j), r)
		}
		for k, offs := range posts.all {
			wb.Set(postingKey(key[:0], k.prefix, k.a, k.b, blk), postings.Append(val[:0], offs))
			if k.prefix == prefixAttr && !ix.pairs.contains(KV{k.a, k.b}) {
				newPairs = append(newPairs, KV{k.a, k.b})
				wb.Set(valueKey(key[:0], k.b, k.a), nil)
			}
		}
		wb.Set(numKey(key[:0], prefixBlock, blk), appendSummary(val[:0], s))
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
	if err := wb.Commit(ix.db); err != nil {
		return fmt.Errorf("index %s: commit: %w", ix.dir, err)
	}

	// Committed: update the writer's memory, then the readers' view.
	for _, id := range order {
		ix.recent.add(id)
	}
	for _, kv := range newPairs {
		ix.pairs.add(kv)
	}
	order2 := ix.order
	if len(newSealed)-order2.upto >= rebuildEvery {
		order2 = buildOrder(order2, newSealed)
	}
	ix.mu.Lock()
	if len(newSealed) > len(sealed) {
		ix.open = newOpenBlock(uint64(len(newSealed)))
	}
	if openRows != nil {
		firstOff := tail.n - uint32(len(openRows))
		for j, r := range openRows {
			ix.open.add(firstOff+uint32(j), r)
		}
	}
	ix.spans, ix.traces, ix.watermark = newState.spans, newState.traces, newState.watermark
	ix.sealed, ix.tail, ix.order = newSealed, tail, order2
	ix.mu.Unlock()

	// The batch is spent: a second Commit conflicts.
	b.entries, b.cols, b.rows = nil, nil, nil
	b.base = math.MaxUint64
	return nil
}
