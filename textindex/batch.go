package textindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// Batch interns strings and sets the watermark; Commit writes them
// atomically. It is not safe for concurrent use, and only one batch may be
// open at a time (the store has one writer). A batch that is never
// committed leaves no trace; the ids it handed out are handed out again.
type Batch struct {
	ix      *Index
	base    uint64 // committed count when the batch was created
	pending map[string]uint64
	order   []string // new strings, id base+1+i
	err     error

	hasWatermark bool
	watermark    int64
}

// NewBatch starts a batch whose new ids follow the committed ones.
func (ix *Index) NewBatch() *Batch {
	ix.writeMu.Lock()
	pending := ix.spare
	ix.spare = nil
	ix.writeMu.Unlock()
	if pending == nil {
		pending = make(map[string]uint64)
	}
	return &Batch{ix: ix, base: ix.Count(), pending: pending}
}

// maxSpareStrings bounds the new strings of a batch whose map Commit keeps
// for the next batch (Index.spare): a bulk load's or an unusually large
// batch's map is left to the collector.
const maxSpareStrings = 1 << 16

// Intern returns the id of s: its existing id, or the next new one. It sees
// strings interned earlier in the same batch. If the index cannot be read
// (or s is longer than MaxStringBytes), Intern returns 0 and Commit fails.
func (b *Batch) Intern(s string) uint64 {
	if id, ok := b.ix.ids.get(s); ok {
		return id
	}
	id, kept, found := b.intern(s, false)
	if found {
		b.ix.ids.put(kept, id)
	}
	return id
}

// InternKept is Intern for a writer that remembers the ids it is given
// (storedir's interner): the index's string → id cache, which such a
// writer would only fill with strings it already holds, is neither read
// nor filled, and s is given to the batch: it must be a string no other
// memory depends on (not a substring of a larger buffer), such as the
// copy the writer keeps, and the batch keeps it instead of a copy.
func (b *Batch) InternKept(s string) uint64 {
	id, _, _ := b.intern(s, true)
	return id
}

// intern returns the id of s, the string the batch keeps for it (s, or a
// copy unless owned) and whether it was committed before this batch.
func (b *Batch) intern(s string, owned bool) (uint64, string, bool) {
	if id, ok := b.pending[s]; ok {
		return id, s, false
	}
	if b.err != nil {
		return 0, s, false
	}
	if b.pending == nil {
		b.err = fmt.Errorf("intern after commit: %w", ErrBatchConflict)
		return 0, s, false
	}
	if len(s) > MaxStringBytes {
		b.err = fmt.Errorf("string of %d bytes exceeds %d", len(s), MaxStringBytes)
		return 0, s, false
	}
	id, ok, err := b.ix.writerLookup(s, b.base)
	if err != nil {
		b.err = err
		return 0, s, false
	}
	if !owned {
		s = strings.Clone(s) // the caller's string may pin a large buffer
	}
	if ok {
		return id, s, true
	}
	id = b.base + uint64(len(b.order)) + 1
	b.pending[s] = id
	b.order = append(b.order, s)
	return id, s, false
}

// Len returns the number of new strings in the batch.
func (b *Batch) Len() int { return len(b.order) }

// SetWatermark records the data-file offset up to which the index is
// complete once this batch is committed.
func (b *Batch) SetWatermark(off int64) {
	b.hasWatermark = true
	b.watermark = off
}

// writerLookup looks s up among the committed strings for the writer.
func (ix *Index) writerLookup(s string, count uint64) (uint64, bool, error) {
	if err := ix.acquire(); err != nil {
		return 0, false, err
	}
	defer ix.release()
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	if ix.committed != nil && !ix.committed.mayContain(s) {
		return 0, false, nil // certainly never committed
	}
	if ix.writerReader == nil {
		r, err := kv.NewPointReader(ix.db.DB)
		if err != nil {
			return 0, false, fmt.Errorf("text index %s: intern: %w", ix.dir, err)
		}
		ix.writerReader = r
	}
	id, ok, err := ix.lookup(ix.writerReader, s, count)
	if err != nil {
		return 0, false, fmt.Errorf("text index %s: intern: %w", ix.dir, err)
	}
	return id, ok, nil
}

// A trigram posting in Commit is one word: the trigram in the top
// gramBits bits and the string's id below them (so ids must stay below
// 1<<idBits, which is 2^40: a trillion distinct strings).
const (
	gramBits = 24
	idBits   = 64 - gramBits
)

// Commit writes the batch's new strings and the watermark atomically
// (without syncing), and the trigram postings of every block of ids the
// batch completes (see Index.unposted): a block's lists are written once,
// when its last id is committed, instead of a merge operand per trigram
// per batch. The postings of the ids of the open block are kept in memory
// (searches verify those strings directly) and rebuilt from the stored
// strings at the next open if they are lost.
func (b *Batch) Commit() error {
	ix := b.ix
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	if b.err != nil {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, b.err)
	}
	if ix.db.ReadOnly() {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, ErrReadOnly)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.mu.RLock()
	count, watermark, posted, unposted := ix.count, ix.watermark, ix.posted, ix.unposted
	ix.mu.RUnlock()
	if count != b.base {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, ErrBatchConflict)
	}

	wb := &ix.wb
	defer wb.Reset(ix.keep)
	var strBytes int
	for _, s := range b.order {
		strBytes += len(s)
	}
	wb.Grow(2*len(b.order)+1, 2*strBytes+24*len(b.order))
	var key, val []byte
	for i, s := range b.order {
		id := b.base + uint64(i) + 1
		if id >= 1<<idBits {
			return fmt.Errorf("text index %s: commit: text id %d exceeds 2^%d", ix.dir, id, idBits)
		}
		key = stringKey(key[:0], s)
		val = binary.AppendUvarint(val[:0], id)
		wb.Set(key, val)
		key = idKey(key[:0], id)
		wb.Set(key, []byte(s))
	}
	newCount := b.base + uint64(len(b.order))
	// Appending past the end readers see (they read what they took): the
	// index's own unposted changes only once the batch is committed.
	for _, s := range b.order {
		unposted = unposted.append(s)
	}
	// The last id of the last complete block (ids id>>blockShift == k
	// for every k below the one newCount+1 opens).
	postTo := (newCount + 1) &^ (blockSize - 1)
	if postTo > 0 {
		postTo--
	}
	if len(unposted.lower) > maxUnpostedBytes {
		postTo = newCount
	}
	if postTo > posted {
		ix.posts.appendPostings(wb, posted, unposted, int(postTo-posted), ix.keep)
	}
	if b.hasWatermark {
		watermark = b.watermark
	}
	newPosted := max(posted, postTo)
	wb.Set(keyState, appendState(nil, newCount, watermark, newPosted))
	if err := wb.Commit(ix.db.DB); err != nil {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, err)
	}
	if ix.writerReader != nil && len(b.order) > 0 {
		ix.writerReader.Close()
		ix.writerReader = nil
	}
	if ix.committed != nil {
		for _, s := range b.order {
			ix.committed.add(s)
		}
	}
	if newPosted > posted {
		// New arrays: the posted strings are not kept alive behind them.
		unposted = unposted.from(int(newPosted - posted))
	}
	ix.mu.Lock()
	ix.count, ix.watermark = newCount, watermark
	ix.posted, ix.unposted = newPosted, unposted
	ix.mu.Unlock()
	// The new strings are not put in the string → id cache: the writer
	// (storedir's interner) remembers them itself, and a reader's Lookup
	// fills the cache with what it looks up.
	// The batch is spent: committing it again conflicts.
	b.base = math.MaxUint64
	if len(b.pending) <= maxSpareStrings {
		clear(b.pending)
		ix.spare = b.pending
	}
	b.pending, b.order = nil, nil
	return nil
}

// maxUnpostedBytes bounds the bytes of the strings whose postings a text
// index keeps in memory (Index.unposted): past it, a commit writes them
// all, the open block's too (its later strings then add a second operand
// to its lists, which the merge operator unions).
const maxUnpostedBytes = 8 << 20

// postAll writes the postings of every string that has none in Pebble yet
// (Flush, Compact: a store being sealed, a rebuild being finished).
func (ix *Index) postAll() error {
	if ix.db.ReadOnly() {
		return nil
	}
	// Held like a Commit: Close or a Reopen (ReleaseMemTables) must not
	// close the database under the write.
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.mu.RLock()
	count, watermark, posted, unposted := ix.count, ix.watermark, ix.posted, ix.unposted
	ix.mu.RUnlock()
	if posted == count {
		return nil
	}
	wb := &ix.wb
	defer wb.Reset(ix.keep)
	ix.posts.appendPostings(wb, posted, unposted, unposted.len(), ix.keep)
	wb.Set(keyState, appendState(nil, count, watermark, count))
	if err := wb.Commit(ix.db.DB); err != nil {
		return fmt.Errorf("text index %s: write postings: %w", ix.dir, err)
	}
	ix.mu.Lock()
	ix.posted, ix.unposted = count, unpostedStrings{}
	ix.mu.Unlock()
	return nil
}

// postingsScratch holds appendPostings' arrays from one call to the next
// (a block's postings take a few MB of them; a bulk load posts block after
// block).
type postingsScratch struct {
	posts, buf []uint64
}

// appendPostings adds to wb the trigram postings ('g') and long-string
// lists ('l') of the first n strings of strs, those of ids after+1, …; it
// keeps its arrays for the next call while they hold at most keep bytes.
func (sc *postingsScratch) appendPostings(wb *kv.Batch, after uint64, strs unpostedStrings, n, keep int) {
	maxPosts := 0
	for i := range n {
		if l := len(strs.str(i)); l <= maxTrigramBytes {
			maxPosts += max(l-2, 0)
		}
	}
	var key, val []byte
	// Trigram postings as words (trigram, id), and the long strings' ids,
	// both in id order.
	if cap(sc.posts) < maxPosts {
		sc.posts = make([]uint64, 0, maxPosts)
	}
	posts := sc.posts[:0]
	defer func() {
		if cap(sc.posts) > keep/8 {
			sc.posts = nil
		}
		if cap(sc.buf) > keep/8 {
			sc.buf = nil
		}
	}()
	var longIDs []uint64
	for i := range n {
		id := after + uint64(i) + 1
		lower := strs.str(i)
		if len(lower) > maxTrigramBytes {
			longIDs = append(longIDs, id)
			continue
		}
		// Every trigram, repeats included: the sort below brings a
		// string's repeats of a trigram together, and they are dropped
		// there (cheaper than sorting each string's trigrams).
		for j := 0; j+3 <= len(lower); j++ {
			g := uint64(lower[j])<<16 | uint64(lower[j+1])<<8 | uint64(lower[j+2])
			posts = append(posts, g<<idBits|id)
		}
	}
	// Sorted by trigram, stably, the postings of each (trigram, block)
	// list are adjacent with their offsets ascending (a string's repeats
	// of a trigram next to each other): the lists come out in key order
	// and none is built in a map.
	if cap(sc.buf) < len(posts) {
		sc.buf = make([]uint64, len(posts))
	}
	posts = sortByGram(posts, sc.buf[:len(posts)])
	var offs []uint32
	// emit writes the lists of ids (ascending) under prefix, one per block.
	emit := func(prefix []byte, ids []uint64) {
		for i := 0; i < len(ids); {
			blk := ids[i] >> blockShift
			offs = offs[:0]
			for ; i < len(ids) && ids[i]>>blockShift == blk; i++ {
				offs = append(offs, uint32(ids[i]&(blockSize-1)))
			}
			key = appendOrdered(append(key[:0], prefix...), blk)
			val = postings.Append(val[:0], offs)
			wb.Merge(key, val)
		}
	}
	var ids []uint64
	for i := 0; i < len(posts); {
		g := posts[i] >> idBits
		ids = ids[:0]
		for ; i < len(posts) && posts[i]>>idBits == g; i++ {
			if id := posts[i] & (1<<idBits - 1); len(ids) == 0 || ids[len(ids)-1] != id {
				ids = append(ids, id)
			}
		}
		emit([]byte{prefixGram, byte(g >> 16), byte(g >> 8), byte(g)}, ids)
	}
	emit([]byte{prefixLong}, longIDs)
}

// sortByGram sorts trigram postings (see gramBits) by their trigram,
// stably: an LSD radix sort on the trigram's three bytes, so postings of
// one trigram keep their (ascending id) order. It returns the sorted
// slice, which is posts or buf (of the same length, its contents
// overwritten).
func sortByGram(posts, buf []uint64) []uint64 {
	if len(posts) < 2 {
		return posts
	}
	src, dst := posts, buf
	for shift := uint(idBits); shift < 64; shift += 8 {
		var counts [256]int
		for _, p := range src {
			counts[byte(p>>shift)]++
		}
		at := 0
		for i, c := range counts {
			counts[i] = at
			at += c
		}
		for _, p := range src {
			d := byte(p >> shift)
			dst[counts[d]] = p
			counts[d]++
		}
		src, dst = dst, src
	}
	return src
}
