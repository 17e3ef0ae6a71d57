package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ztsd/ztsd/index/kv"
)

// maxMatcherBlocks bounds how many blocks' candidate sets a Matcher keeps
// (at most 4 bytes per entry of a block each).
const maxMatcherBlocks = 64

// maxMatcherRecs bounds the record buffer a Matcher keeps between calls.
const maxMatcherRecs = 1 << 14

// Matcher evaluates a query on the entries of one trace at a time, exactly
// as Search selects entries, without walking the query's other matches: it
// reads the trace's records (one point lookup), filters them by time,
// duration and error flag, and checks the attribute and text conditions on
// the posting lists (or rows) of the few blocks those entries are in.
// storedir uses it to page through traces, whose position is their newest
// matching span (which may lie before the page, or in another store).
//
// A Matcher reads the snapshot of the index taken when it was created and
// holds the index open until Close, like a running Search: Index.Close
// waits for it. It is not safe for concurrent use.
type Matcher struct {
	ix       *Index
	s        *searcher
	planned  bool
	entries  uint64 // entries in the snapshot: sequence numbers below are visible
	maxStart int64  // the newest start in the snapshot
	blocks   map[uint64]matchBlock
	recs     []traceRec
	closed   bool
}

// matchBlock is a block's candidate set for the matcher's query.
type matchBlock struct {
	offs []uint32 // ascending
	all  bool     // every entry is a candidate
}

// NewMatcher returns a Matcher for q (q.After is ignored). Close it when
// done.
func (ix *Index) NewMatcher(q Query) (*Matcher, error) {
	if err := ix.acquire(); err != nil {
		return nil, err
	}
	v := ix.view()
	reader, err := kv.NewPointReader(ix.db.DB)
	if err != nil {
		ix.release()
		return nil, fmt.Errorf("index %s: matcher: %w", ix.dir, err)
	}
	q.After = nil
	m := &Matcher{
		ix:       ix,
		s:        &searcher{ix: ix, v: v, reader: reader, q: q},
		entries:  uint64(len(v.sealed))<<ix.blockShift + uint64(v.tail.n),
		maxStart: math.MinInt64,
		blocks:   make(map[uint64]matchBlock),
	}
	// The first block in search order has the newest start.
	if _, sum, ok := (&blockIter{v: v}).next(); ok {
		m.maxStart = sum.maxStart
	}
	return m, nil
}

// Close releases the matcher's snapshot and its hold on the index.
func (m *Matcher) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	err := m.s.reader.Close()
	m.ix.release()
	if err != nil {
		return fmt.Errorf("index %s: matcher: %w", m.ix.dir, err)
	}
	return nil
}

// FirstHit returns the first entry of the trace, in search order, that the
// matcher's query matches and, when before is not nil, that comes strictly
// before *before in search order (is newer). The hit is the one Search
// returns at that position (the lowest matching chunk of the span). ok is
// false when the trace has no such entry.
func (m *Matcher) FirstHit(ctx context.Context, traceID [16]byte, before *Cursor) (h Hit, ok bool, err error) {
	if m.closed {
		return Hit{}, false, fmt.Errorf("index %s: match trace %x: matcher %w", m.ix.dir, traceID, ErrClosed)
	}
	h, ok, err = m.firstHit(ctx, traceID, before)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return Hit{}, false, err
		}
		return Hit{}, false, fmt.Errorf("index %s: match trace %x: %w", m.ix.dir, traceID, err)
	}
	return h, ok, nil
}

func (m *Matcher) firstHit(ctx context.Context, traceID [16]byte, before *Cursor) (Hit, bool, error) {
	s := m.s
	q := &s.q
	if q.TextFilterAll || q.UntilNS == math.MinInt64 || m.entries == 0 {
		return Hit{}, false, nil
	}
	if before != nil && m.maxStart < before.StartNS {
		return Hit{}, false, nil // nothing in this index is as new
	}
	if err := ctx.Err(); err != nil {
		return Hit{}, false, err
	}
	s.key = traceKey(s.key[:0], traceID)
	v, found, err := s.reader.Get(s.key)
	if err != nil || !found {
		return Hit{}, false, err
	}
	recs, err := decodeTraceValue(v, traceID, m.recs[:0])
	if err != nil {
		return Hit{}, false, err
	}
	defer func() {
		if cap(recs) <= maxMatcherRecs {
			m.recs = recs[:0]
		} else {
			m.recs = nil
		}
	}()
	// What the time column and the trace record decide, as Search does.
	recs = slices.DeleteFunc(recs, func(r traceRec) bool {
		start := r.ref.StartNS
		switch {
		case r.seq >= m.entries: // committed after the snapshot
		case q.SinceNS != 0 && start < q.SinceNS:
		case q.UntilNS != 0 && start >= q.UntilNS:
		case q.ErrorsOnly && !r.ref.Error:
		case r.ref.DurationNS < q.MinDurationNS:
		case q.MaxDurationNS > 0 && r.ref.DurationNS > q.MaxDurationNS:
		case before != nil && (start < before.StartNS ||
			start == before.StartNS && !keyLess(before.TraceID, before.SpanID, traceID, r.ref.SpanID)):
		default:
			return false
		}
		return true
	})
	if len(recs) == 0 {
		return Hit{}, false, nil
	}
	slices.SortFunc(recs, searchOrder)
	if !m.planned && (len(q.Attrs) > 0 || len(q.TextAny) > 0) {
		if err := s.plan(ctx); err != nil {
			return Hit{}, false, err
		}
	}
	m.planned = true
	var asked *SpanRef // the last span Accept decided on, as Search asks once per span and start
	for _, r := range recs {
		if asked != nil && asked.SpanID == r.ref.SpanID && asked.StartNS == r.ref.StartNS {
			continue
		}
		match, err := m.matchConditions(ctx, r.seq)
		if err != nil {
			return Hit{}, false, err
		}
		if !match {
			continue
		}
		if q.Accept != nil {
			asked = &r.ref
			ok, err := q.Accept(r.ref)
			if err != nil {
				return Hit{}, false, err
			}
			if !ok {
				continue
			}
		}
		return Hit{SpanRef: r.ref}, true, nil
	}
	return Hit{}, false, nil
}

// matchConditions reports whether entry seq satisfies the attribute and
// text conditions.
func (m *Matcher) matchConditions(ctx context.Context, seq uint64) (bool, error) {
	if len(m.s.conj) == 0 {
		return true, nil
	}
	blk, off := seq>>m.ix.blockShift, uint32(seq&uint64(m.s.v.blockSize-1))
	mb, ok := m.blocks[blk]
	if !ok {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		offs, all, err := m.s.candidates(blk, m.s.v.summary(blk))
		if err != nil {
			return false, err
		}
		if len(m.blocks) >= maxMatcherBlocks {
			clear(m.blocks)
		}
		mb = matchBlock{offs: offs, all: all}
		m.blocks[blk] = mb
	}
	if mb.all {
		return true, nil
	}
	_, found := slices.BinarySearch(mb.offs, off)
	return found, nil
}
