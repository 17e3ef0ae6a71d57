package textindex

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/index/postings"
)

// maxQueryTrigrams bounds how many of a pattern's trigrams a search
// intersects; the candidates are verified against the strings anyway.
const maxQueryTrigrams = 8

// Search returns the ids, ascending, of the committed strings that contain
// substr case-insensitively (see the package documentation), at most limit
// of them (limit ≤ 0: all); truncated reports that more exist. It stops
// with ctx's error when ctx is done.
func (ix *Index) Search(ctx context.Context, substr string, limit int) (ids []uint64, truncated bool, err error) {
	if err := ix.acquire(); err != nil {
		return nil, false, err
	}
	defer ix.release()
	pattern := strings.ToLower(substr)
	// Strings are visible to r once count covers them; ids above count,
	// committed while the search opens its iterators, are ignored. So are
	// postings above posted (a block completed meanwhile): those strings
	// are verified from unposted, as taken here.
	ix.mu.RLock()
	count, posted, unposted := ix.count, ix.posted, ix.unposted
	ix.mu.RUnlock()
	r, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		return nil, false, fmt.Errorf("text index %s: search: %w", ix.dir, err)
	}
	defer r.Close()
	s := &searcher{ix: ix, ctx: ctx, r: r, pattern: pattern, limit: limit, count: count, posted: posted}
	if len(pattern) < 3 {
		err = s.scan()
	} else if err = s.trigrams(); err == nil && !s.truncated {
		err = s.unposted(unposted)
	}
	if err != nil {
		return nil, false, fmt.Errorf("text index %s: search %q: %w", ix.dir, substr, err)
	}
	return s.ids, s.truncated, nil
}

type searcher struct {
	ix        *Index
	ctx       context.Context
	r         *kv.PointReader
	pattern   string // lower-cased
	limit     int
	count     uint64
	posted    uint64 // postings above it are ignored (see Search)
	ids       []uint64
	truncated bool
	buf       []byte
	key       []byte // a lookup's key buffer
	checked   int
}

// add records a match; it returns false once the limit is exceeded.
func (s *searcher) add(id uint64) bool {
	if s.limit > 0 && len(s.ids) == s.limit {
		s.truncated = true
		return false
	}
	s.ids = append(s.ids, id)
	return true
}

// matches reports whether str contains the pattern case-insensitively.
func (s *searcher) matches(str []byte) bool {
	ascii := true
	for _, c := range str {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii {
		return strings.Contains(strings.ToLower(string(str)), s.pattern)
	}
	s.buf = append(s.buf[:0], str...)
	for i, c := range s.buf {
		if 'A' <= c && c <= 'Z' {
			s.buf[i] = c + 'a' - 'A'
		}
	}
	return bytes.Contains(s.buf, []byte(s.pattern))
}

func (s *searcher) tick() error {
	s.checked++
	if s.checked&1023 == 0 {
		return s.ctx.Err()
	}
	return nil
}

// scan checks every string (patterns too short for trigrams).
func (s *searcher) scan() error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	lower := []byte{prefixID}
	iter, err := s.ix.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixID + 1}})
	if err != nil {
		return err
	}
	defer iter.Close()
	for iter.First(); iter.Valid(); iter.Next() {
		if err := s.tick(); err != nil {
			return err
		}
		id, n, ok := readOrdered(iter.Key()[1:])
		if !ok || 1+n != len(iter.Key()) {
			return fmt.Errorf("%w: id key %x malformed", ErrCorrupt, iter.Key())
		}
		if id > s.count {
			return nil
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		if s.matches(v) && !s.add(id) {
			return nil
		}
	}
	return iter.Error()
}

// postingCursor walks the blocks of one posting-list prefix in order.
type postingCursor struct {
	prefix []byte
	iter   *pebble.Iterator
	block  uint64
	valid  bool
	key    []byte // seek's key buffer
	pos    int    // the trigram's position in the pattern
}

func (s *searcher) newCursor(prefix []byte) (*postingCursor, error) {
	iter, err := s.ix.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	c := &postingCursor{prefix: prefix, iter: iter}
	if err := c.settle(iter.First()); err != nil {
		iter.Close()
		return nil, err
	}
	return c, nil
}

func (c *postingCursor) settle(valid bool) error {
	c.valid = valid
	if !valid {
		return c.iter.Error()
	}
	k := c.iter.Key()
	blk, n, ok := readOrdered(k[len(c.prefix):])
	if !ok || len(c.prefix)+n != len(k) {
		return fmt.Errorf("%w: posting key %x malformed", ErrCorrupt, k)
	}
	c.block = blk
	return nil
}

func (c *postingCursor) seek(block uint64) error {
	c.key = appendOrdered(append(c.key[:0], c.prefix...), block)
	return c.settle(c.iter.SeekGE(c.key))
}

func (c *postingCursor) next() error { return c.settle(c.iter.Next()) }

// moveTo moves the cursor to the first block ≥ block: by one step when
// block follows the cursor's (a trigram in every block, as common ones
// are: far cheaper than a seek), else by a seek.
func (c *postingCursor) moveTo(block uint64) error {
	if c.block >= block {
		return nil
	}
	if c.block+1 == block {
		if err := c.next(); err != nil || !c.valid || c.block >= block {
			return err
		}
	}
	return c.seek(block)
}

func (c *postingCursor) offsets(dst []uint32) ([]uint32, error) {
	v, err := c.iter.ValueAndErr()
	if err != nil {
		return dst, err
	}
	out, err := postings.Decode(v, blockSize, dst)
	if err != nil {
		return dst, fmt.Errorf("posting list %x: %w", c.iter.Key(), err)
	}
	return out, nil
}

// filter keeps the candidates the cursor's posting list holds.
func (c *postingCursor) filter(f *postings.Filter, cands []uint32) ([]uint32, error) {
	v, err := c.iter.ValueAndErr()
	if err != nil {
		return cands, err
	}
	f.Reset(cands)
	if err := f.Add(v, blockSize); err != nil {
		return cands, fmt.Errorf("posting list %x: %w", c.iter.Key(), err)
	}
	return f.Kept(), nil
}

// queryGram is a trigram of a pattern and its byte position there.
type queryGram struct {
	gram uint32
	pos  int
}

// chooseTrigrams returns up to maxQueryTrigrams distinct trigrams of p,
// spread over it (first and last included).
func chooseTrigrams(p string) []queryGram {
	all := make([]uint32, 0, len(p))
	for i := 0; i+3 <= len(p); i++ {
		all = append(all, uint32(p[i])<<16|uint32(p[i+1])<<8|uint32(p[i+2]))
	}
	seen := make(map[uint32]bool)
	var out []queryGram
	n := len(all)
	for k := 0; k < maxQueryTrigrams && k < n; k++ {
		i := 0
		if maxQueryTrigrams > 1 && n > 1 {
			i = k * (n - 1) / (min(maxQueryTrigrams, n) - 1)
		}
		if !seen[all[i]] {
			seen[all[i]] = true
			out = append(out, queryGram{all[i], i})
		}
	}
	return out
}

// joinOrder orders the trigram cursors (each at its first block) for the
// join: the smallest first list leads; then, greedily, a trigram that
// overlaps none of those before it in the pattern (independent ones cut
// the candidates most: "567" and "234" of a number, rather than "567" and
// "456", which occur together in every "4567"), the smaller list first.
func joinOrder(grams []*postingCursor) {
	size := func(c *postingCursor) int { return len(c.iter.Value()) }
	for i := range grams {
		best := i
		overlaps := func(c *postingCursor) bool {
			for _, d := range grams[:i] {
				if c.pos-d.pos < 3 && d.pos-c.pos < 3 {
					return true
				}
			}
			return false
		}
		for j := i + 1; j < len(grams); j++ {
			a, b := grams[j], grams[best]
			oa, ob := overlaps(a), overlaps(b)
			if oa != ob && !oa || oa == ob && size(a) < size(b) {
				best = j
			}
		}
		grams[i], grams[best] = grams[best], grams[i]
	}
}

// trigrams intersects the pattern's trigram postings block by block and
// verifies every candidate; the long strings of each block (too long for
// trigrams) are candidates too.
//
// The trigram cursors are ordered by the size of their first list, the
// smallest (likely the rarest trigram) leading: the lead walks its blocks,
// its list is decoded, and each following cursor is moved to the block
// only while candidates are left, and then only read where the candidates
// are (postings.Filter). A following cursor found past the block moves the
// lead there (a leapfrog join). So a selective pattern costs about its
// rarest trigram's lists, not every trigram's: common trigrams (digits in
// a large store) are seldom positioned, and their long lists never decoded.
func (s *searcher) trigrams() error {
	var grams []*postingCursor
	var long *postingCursor
	defer func() {
		for _, c := range grams {
			c.iter.Close()
		}
		if long != nil {
			long.iter.Close()
		}
	}()
	gramsValid := true
	for _, g := range chooseTrigrams(s.pattern) {
		c, err := s.newCursor([]byte{prefixGram, byte(g.gram >> 16), byte(g.gram >> 8), byte(g.gram)})
		if err != nil {
			return err
		}
		c.pos = g.pos
		grams = append(grams, c)
		gramsValid = gramsValid && c.valid
	}
	var err error
	if long, err = s.newCursor([]byte{prefixLong}); err != nil {
		return err
	}
	if gramsValid {
		joinOrder(grams)
	}
	lead := grams[0]

	var cands, longOffs []uint32
	var filter postings.Filter
	for gramsValid || long.valid {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		blk := long.block
		if gramsValid && (!long.valid || lead.block < long.block) {
			blk = lead.block
		}
		cands = cands[:0]
		if gramsValid && lead.block == blk {
			next := blk + 1 // where the lead goes next
			if cands, err = lead.offsets(cands); err != nil {
				return err
			}
			for _, c := range grams[1:] {
				if len(cands) == 0 {
					break
				}
				if err := c.moveTo(blk); err != nil {
					return err
				}
				if !c.valid {
					gramsValid = false // no later block holds this trigram
					cands = cands[:0]
					break
				}
				if c.block > blk {
					next = c.block // no block before holds this trigram
					cands = cands[:0]
					break
				}
				if cands, err = c.filter(&filter, cands); err != nil {
					return err
				}
			}
			if gramsValid {
				if next == blk+1 {
					err = lead.next()
				} else {
					err = lead.seek(next)
				}
				if err != nil {
					return err
				}
				gramsValid = lead.valid
			}
		}
		if long.valid && long.block == blk {
			if longOffs, err = long.offsets(longOffs); err != nil {
				return err
			}
			cands = postings.Union(cands, longOffs)
			if err := long.next(); err != nil {
				return err
			}
		}
		for _, off := range cands {
			if err := s.tick(); err != nil {
				return err
			}
			id := blk<<blockShift | uint64(off)
			if id > s.posted {
				return nil // ascending: every later candidate is newer too
			}
			s.key = idKey(s.key[:0], id)
			v, ok, err := s.r.Get(s.key)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%w: posting lists name string %d, which is missing", ErrCorrupt, id)
			}
			if s.matches(v) && !s.add(id) {
				return nil
			}
		}
	}
	return nil
}

// unposted finds the pattern in the strings of ids posted+1, posted+2, …
// (whose postings are not written yet; see Index.unposted), in id order,
// after every id the postings gave.
func (s *searcher) unposted(u unpostedStrings) error {
	pattern := []byte(s.pattern)
	for at := 0; at < len(u.lower); {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		m := bytes.Index(u.lower[at:], pattern)
		if m < 0 {
			return nil
		}
		// The string holding the match: the first whose end is past it
		// (a match never spans the 0xff between two strings).
		i, _ := slices.BinarySearch(u.ends, at+m)
		if !s.add(s.posted + uint64(i) + 1) {
			return nil
		}
		at = u.ends[i] + 1
	}
	return nil
}

// prefixEnd returns the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
