package textindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
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
	return &Batch{ix: ix, base: ix.Count(), pending: make(map[string]uint64)}
}

// Intern returns the id of s: its existing id, or the next new one. It sees
// strings interned earlier in the same batch. If the index cannot be read
// (or s is longer than MaxStringBytes), Intern returns 0 and Commit fails.
func (b *Batch) Intern(s string) uint64 {
	if id, ok := b.ix.ids.get(s); ok {
		return id
	}
	if id, ok := b.pending[s]; ok {
		return id
	}
	if b.err != nil {
		return 0
	}
	if b.pending == nil {
		b.err = fmt.Errorf("intern after commit: %w", ErrBatchConflict)
		return 0
	}
	if len(s) > MaxStringBytes {
		b.err = fmt.Errorf("string of %d bytes exceeds %d", len(s), MaxStringBytes)
		return 0
	}
	id, ok, err := b.ix.writerLookup(s, b.base)
	if err != nil {
		b.err = err
		return 0
	}
	if ok {
		b.ix.ids.put(strings.Clone(s), id)
		return id
	}
	s = strings.Clone(s) // the caller's string may pin a large buffer
	id = b.base + uint64(len(b.order)) + 1
	b.pending[s] = id
	b.order = append(b.order, s)
	return id
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
	if ix.writerReader == nil {
		r, err := kv.NewPointReader(ix.db)
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

type gramKey struct {
	gram  uint32 // 3 bytes, or longMarker for the long-string list
	block uint64
}

const longMarker = math.MaxUint32

// Commit writes the batch's new strings, their trigram postings and the
// watermark atomically (without syncing).
func (b *Batch) Commit() error {
	ix := b.ix
	if err := ix.acquire(); err != nil {
		return err
	}
	defer ix.release()
	if b.err != nil {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, b.err)
	}
	if ix.readOnly {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, ErrReadOnly)
	}
	ix.writeMu.Lock()
	defer ix.writeMu.Unlock()
	ix.mu.RLock()
	count, watermark := ix.count, ix.watermark
	ix.mu.RUnlock()
	if count != b.base {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, ErrBatchConflict)
	}

	var wb kv.Batch
	lists := make(map[gramKey][]uint32)
	var key, val []byte
	var grams []uint32
	for i, s := range b.order {
		id := b.base + uint64(i) + 1
		key = stringKey(key[:0], s)
		wb.Set(key, binary.AppendUvarint(val[:0], id))
		key = idKey(key[:0], id)
		wb.Set(key, []byte(s))
		blk, off := id>>blockShift, uint32(id&(blockSize-1))
		lower := strings.ToLower(s)
		if len(lower) > maxTrigramBytes {
			k := gramKey{gram: longMarker, block: blk}
			lists[k] = append(lists[k], off)
			continue
		}
		grams = appendTrigrams(grams[:0], lower)
		for _, g := range grams {
			k := gramKey{gram: g, block: blk}
			lists[k] = append(lists[k], off)
		}
	}
	for k, offs := range lists {
		if k.gram == longMarker {
			key = appendOrdered(append(key[:0], prefixLong), k.block)
		} else {
			key = appendOrdered(append(key[:0], prefixGram, byte(k.gram>>16), byte(k.gram>>8), byte(k.gram)), k.block)
		}
		wb.Merge(key, postings.Append(val[:0], offs))
	}
	newCount := b.base + uint64(len(b.order))
	if b.hasWatermark {
		watermark = b.watermark
	}
	wb.Set(keyState, appendState(nil, newCount, watermark))
	if err := wb.Commit(ix.db); err != nil {
		return fmt.Errorf("text index %s: commit: %w", ix.dir, err)
	}
	if ix.writerReader != nil && len(b.order) > 0 {
		ix.writerReader.Close()
		ix.writerReader = nil
	}
	ix.mu.Lock()
	ix.count, ix.watermark = newCount, watermark
	ix.mu.Unlock()
	for s, id := range b.pending {
		ix.ids.put(s, id)
	}
	// The batch is spent: committing it again conflicts.
	b.base = math.MaxUint64
	b.pending, b.order = nil, nil
	return nil
}

// appendTrigrams appends the distinct byte trigrams of s, sorted, each as
// a 24-bit number.
func appendTrigrams(dst []uint32, s string) []uint32 {
	start := len(dst)
	for i := 0; i+3 <= len(s); i++ {
		dst = append(dst, uint32(s[i])<<16|uint32(s[i+1])<<8|uint32(s[i+2]))
	}
	t := dst[start:]
	slices.Sort(t)
	return append(dst[:start], slices.Compact(t)...)
}
