package storedir

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/trace"
)

// ErrNotFound is returned for an unknown trace or span.
var ErrNotFound = errors.New("not found")

// ErrBadCursor is returned for a cursor this DB did not produce.
var ErrBadCursor = errors.New("bad cursor")

type spanPiece struct {
	store *Store
	ref   index.SpanRef
}

// GetTrace returns every span of a trace, from every chunk of every store,
// assembled into span trees (roots first, newest root last). Spans stored
// in a damaged chunk are left out (GetTraceWithWarnings names the chunks).
func (db *DB) GetTrace(ctx context.Context, id trace.TraceID) ([]*trace.Span, error) {
	roots, _, err := db.GetTraceWithWarnings(ctx, id)
	return roots, err
}

// GetTraceWithWarnings is GetTrace that also names the damaged chunks it
// skipped. A trace whose every indexed span is in a damaged chunk yields no
// spans, its warnings and no error.
func (db *DB) GetTraceWithWarnings(ctx context.Context, id trace.TraceID) ([]*trace.Span, []Warning, error) {
	spans, warns, err := db.getSpans(ctx, id, func(s *Store) ([]index.SpanRef, error) { return s.meta.TraceSpans(id) }, nil)
	if err != nil {
		return nil, nil, err
	}
	return trace.AssembleTree(spans), warns, nil
}

// ReadTrace is GetTraceWithWarnings for a caller done with the spans when
// fn returns (the get handler encodes them into its answer): it calls fn
// with the trace's span trees and warnings, and the spans, with every
// string, attribute and record in them, are valid only until fn returns.
// fn must copy whatever it keeps. The payload buffers of the chunks read
// for it (at 10M spans, a ~52 KB string table and a ~8 KB frame per get)
// are then reused by later reads instead of left to the garbage
// collector, once the chunk cache has let go of their views too. fn is
// not called when the read fails (ErrNotFound included).
func (db *DB) ReadTrace(ctx context.Context, id trace.TraceID, fn func(roots []*trace.Span, warns []Warning) error) error {
	var sc readScope
	defer sc.release()
	spans, warns, err := db.getSpans(ctx, id, func(s *Store) ([]index.SpanRef, error) { return s.meta.TraceSpans(id) }, &sc)
	if err != nil {
		return err
	}
	return fn(trace.AssembleTree(spans), warns)
}

// GetSpan returns one span of a trace (all its chunks assembled), with its
// child spans linked under it.
func (db *DB) GetSpan(ctx context.Context, id trace.TraceID, spanID trace.SpanID) (*trace.Span, error) {
	sp, warns, err := db.GetSpanWithWarnings(ctx, id, spanID)
	if err == nil && sp == nil {
		return nil, fmt.Errorf("span %s of trace %s: %w: %s", spanID, id, ErrNotFound, warns[0].Error)
	}
	return sp, err
}

// GetSpanWithWarnings is GetSpan that also names the damaged chunks it
// skipped. When the span itself was only in damaged chunks, it returns a
// nil span, the warnings and no error.
func (db *DB) GetSpanWithWarnings(ctx context.Context, id trace.TraceID, spanID trace.SpanID) (*trace.Span, []Warning, error) {
	spans, warns, err := db.getSpans(ctx, id, func(s *Store) ([]index.SpanRef, error) { return s.meta.TraceSpans(id) }, nil)
	if err != nil {
		return nil, nil, err
	}
	trace.AssembleTree(spans)
	for _, sp := range spans {
		if sp.SpanID == spanID {
			return sp, warns, nil
		}
	}
	if len(warns) > 0 {
		return nil, warns, nil
	}
	return nil, nil, fmt.Errorf("span %s of trace %s: %w", spanID, id, ErrNotFound)
}

// getSpans reads every piece listed by refsOf in every store and assembles
// the pieces of each span; of a (span, chunk number) stored more than once
// only the newest version is read (the index keeps the latest entry of a
// store; stores are visited newest first). A piece in a damaged chunk is
// skipped and named in the warnings; a trace the index lists but whose
// every piece is damaged yields no spans and no error. The spans are read
// in scope sc (nil: unscoped, see readSpanAs).
func (db *DB) getSpans(ctx context.Context, id trace.TraceID, refsOf func(*Store) ([]index.SpanRef, error), sc *readScope) ([]*trace.Span, []Warning, error) {
	if err := db.waitIndexed(ctx); err != nil {
		return nil, nil, err
	}
	stores, release := db.snapshot()
	defer release()
	type pieceKey struct {
		span  uint64
		chunk uint32
	}
	seen := map[pieceKey]bool{}
	bySpan := map[uint64][]*trace.Span{}
	var order []uint64
	var warns warnings
	for _, s := range stores { // newest store first: a newer version wins
		if w, ok := s.catchUpWarning(); ok {
			warns.addWarning(w)
		}
		if s.remote == nil && !s.mayHoldTrace(id) {
			continue // the store's trace filter rules it out: no index lookup
		}
		refs, err := db.storeTraceRefs(ctx, s, id, refsOf, &warns)
		if err != nil {
			return nil, nil, fmt.Errorf("store %s: %w", StoreName(s.id), err)
		}
		for _, ref := range refs {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			k := pieceKey{ref.SpanID, ref.ChunkNum}
			if seen[k] {
				continue
			}
			seen[k] = true
			sp, err := db.readSpanAs(s, ref, (*trace.ChunkView).Span, sc)
			if warns.add(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("trace %s span %016x: %w", id, ref.SpanID, err)
			}
			if _, ok := bySpan[ref.SpanID]; !ok {
				order = append(order, ref.SpanID)
			}
			bySpan[ref.SpanID] = append(bySpan[ref.SpanID], sp)
		}
	}
	if len(order) == 0 {
		if len(warns.list) > 0 {
			return nil, warns.list, nil
		}
		return nil, nil, fmt.Errorf("trace %s: %w", id, ErrNotFound)
	}
	out := make([]*trace.Span, 0, len(order))
	for _, sid := range order {
		pieces := bySpan[sid]
		if len(pieces) == 1 {
			out = append(out, pieces[0])
			continue
		}
		sort.SliceStable(pieces, func(i, j int) bool { return pieces[i].ChunkNum < pieces[j].ChunkNum })
		sp, err := trace.AssembleChunks(pieces)
		if errors.Is(err, trace.ErrMissingChunks) && sp != nil {
			// A lost chunk (cut as a torn tail, damaged, or in a deleted
			// store): show what is left rather than nothing.
			db.log.Warn("span assembled with chunks missing", "trace", id, "span", trace.SpanID(sid), "err", err)
		} else if err != nil {
			return nil, nil, fmt.Errorf("trace %s span %016x: %w", id, sid, err)
		}
		out = append(out, sp)
	}
	return out, warns.list, nil
}

// readSpan reads the span ref locates, through the chunk cache (unscoped).
func (db *DB) readSpan(s *Store, ref index.SpanRef) (*trace.Span, error) {
	return db.readSpanAs(s, ref, (*trace.ChunkView).Span, nil)
}

// readSummary reads the span ref locates without its record tree (search
// results), through the chunk cache (unscoped).
func (db *DB) readSummary(s *Store, ref index.SpanRef) (*trace.Span, error) {
	return db.readSpanAs(s, ref, (*trace.ChunkView).Summary, nil)
}

// readSpanAs reads the span ref locates through the chunk cache. A chunk
// that is damaged (bad checksum or framing, a payload that does not
// decode, an index entry pointing where no chunk or span is, or at a span
// other than the one it names) yields a *CorruptChunkError, noted in the
// DB's damage log (logged and counted once); a chunk known damaged is not
// read again.
//
// A read in scope sc holds the view until sc is released (the caller's
// spans point into its buffers until then); an unscoped read (sc nil)
// pins the view, so that its buffers are never reused (see cachedView).
func (db *DB) readSpanAs(s *Store, ref index.SpanRef, decode func(*trace.ChunkView, int) (*trace.Span, error), sc *readScope) (*trace.Span, error) {
	loc := ref.Loc
	if ce, ok := db.damage.known(s.key(), loc.ChunkOffset); ok {
		return nil, ce
	}
	cv, ok := db.cache.get(s.key(), loc.ChunkOffset) // held if found
	if !ok {
		view, err := db.readView(s, loc.ChunkOffset)
		if err != nil {
			return nil, err
		}
		cv = newCachedView(view) // held by this read
		db.cache.put(s.key(), loc.ChunkOffset, cv)
	}
	if sc != nil {
		sc.views = append(sc.views, cv)
	} else {
		cv.pinned.Store(true)
		defer cv.drop()
	}
	sp, err := decode(cv.view, int(loc.Index))
	if err != nil {
		if isChunkDamage(err) { // a frame of the chunk that does not decode
			return nil, db.damage.note(s.key(), s.name(), loc.ChunkOffset, err)
		}
		return nil, db.damage.note(s.key(), s.name(), loc.ChunkOffset, fmt.Errorf("payload: %w", err))
	}
	if sp.TraceID != ref.TraceID || uint64(sp.SpanID) != ref.SpanID || sp.ChunkNum != ref.ChunkNum {
		return nil, db.damage.note(s.key(), s.name(), loc.ChunkOffset, fmt.Errorf("payload span %d is span %s/%s piece %d, the index names %s/%s piece %d",
			loc.Index, sp.TraceID, sp.SpanID, sp.ChunkNum, trace.TraceID(ref.TraceID), trace.SpanID(ref.SpanID), ref.ChunkNum))
	}
	return sp, nil
}

// readView reads the chunk at off of s into a view (not through the chunk
// cache). Of a local store's chunk only the frames the view reads are
// read and decompressed (chunk.Frames: the string table's, then each
// span's as it is read), each checked by its own checksum, when its first
// frame is an LZ4 lead frame (which lists the others) or it was read
// before (its layout in db.layouts, see layoutCache); else the first read
// reads it whole and checks its CRC-32. A remote store's chunk is decoded
// whole. Damage is noted in the damage log.
func (db *DB) readView(s *Store, off int64) (*trace.ChunkView, error) {
	readErr := func(err error) error {
		if isChunkDamage(err) {
			return db.damage.note(s.key(), s.name(), off, err)
		}
		return fmt.Errorf("store %s: %w", s.name(), err)
	}
	var view *trace.ChunkView
	var err error
	if s.remote != nil {
		payload, _, rerr := s.readChunk(off)
		if rerr != nil {
			return nil, readErr(rerr)
		}
		view, err = trace.NewChunkView(payload, db.opt.Limits)
	} else {
		var fr *chunk.Frames
		var rerr error
		if l, ok := db.layouts.get(s.key(), off); ok {
			fr, _, rerr = s.data.ReadFramesKnown(off, l)
		} else if fr, _, rerr = s.data.ReadFrames(off); rerr == nil && fr.Layout() != nil {
			db.layouts.put(s.key(), off, fr.Layout())
		}
		if rerr != nil {
			return nil, readErr(rerr)
		}
		view, err = trace.NewPartialChunkView(fr, db.opt.Limits)
	}
	if err != nil {
		if !isChunkDamage(err) { // else a frame of the chunk that does not decode
			err = fmt.Errorf("payload: %w", err)
		}
		return nil, db.damage.note(s.key(), s.name(), off, err)
	}
	return view, nil
}

// Query is a search. Zero fields do not filter.
type Query struct {
	SinceNS, UntilNS int64 // start time range [since, until)
	MinDurationNS    int64
	MaxDurationNS    int64 // 0 = unbounded
	ErrorsOnly       bool
	Attrs            []trace.Attr // AND of exact matches (value compared as text)
	Text             string       // case-insensitive substring of any string in the span
	// TextExact, when set, requires this exact string among the span's
	// strings (its type, attribute keys and values, record methods,
	// exception classes and messages); it cannot be combined with Text.
	TextExact string
	// Operation, when set, requires the span's operation (OperationOf: its
	// root record's method) to be exactly this string. The index narrows
	// the search to spans holding the string (unless Text or TextExact
	// already fill the index's text condition), and each candidate the
	// search walks is confirmed on its summary (one span read, through the
	// chunk cache), so pages and cursors stay exact.
	Operation string
	Spans     bool // one result per span instead of per trace
	// TraceHeads, in trace mode, fills Result.Traces: per result trace
	// its span count, time range and root span, from the index records of
	// the page's traces (one index lookup per trace and store) and one
	// summary read per trace.
	TraceHeads bool
	Limit      int
	Cursor     string
}

// Result is one page of search results, newest first.
type Result struct {
	Spans []*trace.Span // summaries: no Root, no Children
	// Cursor continues after the last result; "" when there are no more.
	Cursor string
	// Warnings name the damaged chunks whose spans the page left out.
	Warnings []Warning
	// Traces, for a trace-mode Query with TraceHeads, describes the trace
	// of each result: Traces[i] is Spans[i]'s trace.
	Traces []TraceInfo
}

// TraceInfo summarizes a whole trace (see TraceHead).
type TraceInfo struct {
	// Root is the trace's root span as a summary (its root record's own
	// fields, no record tree): the earliest stored span without a parent;
	// nil when every stored span has a parent.
	Root           *trace.Span
	StartNS, EndNS int64 // the time range over all its spans
	Spans          int   // distinct spans stored
}

// OperationOf is the span's operation: its root record's method (the OTLP
// span name); a span without a root record is named after its type. It is
// what Query.Operation matches and what the Jaeger and Tempo APIs call the
// operation (queryapi.OperationOf).
func OperationOf(sp *trace.Span) string {
	if sp.Root != nil {
		return sp.Root.Method
	}
	return sp.Type
}

// MaxSearchLimit bounds Query.Limit.
const MaxSearchLimit = 10000

// maxTextIDs bounds how many matching strings a text search follows.
const maxTextIDs = 4096

type hit struct {
	store *Store
	ref   index.SpanRef
	trace index.HitTrace // the trace's entries in store, as the search read them
}

func hitLess(a, b hit) bool { // newer first
	if a.ref.StartNS != b.ref.StartNS {
		return a.ref.StartNS > b.ref.StartNS
	}
	if c := bytes.Compare(a.ref.TraceID[:], b.ref.TraceID[:]); c != 0 {
		return c > 0
	}
	return a.ref.SpanID > b.ref.SpanID
}

// Search returns spans (or traces) matching q, newest first, a page of at
// most q.Limit at a time.
//
// In span mode (q.Spans) every matching span is one result. In trace mode
// every trace with a matching span is one result, represented by its newest
// matching span, whose position in search order (hitLess) is the trace's
// position; following the cursors lists each trace exactly once over the
// whole walk of pages, even when its spans are spread over several stores.
// A page after a cursor leaves out the traces that an earlier page listed:
// those with a matching span before the cursor (newer), which each store's
// index.Matcher finds from the trace's own entries (see tracePager).
func (db *DB) Search(ctx context.Context, q Query) (*Result, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > MaxSearchLimit {
		return nil, fmt.Errorf("%w: limit %d exceeds %d", ErrInvalid, q.Limit, MaxSearchLimit)
	}
	if q.MaxDurationNS < 0 || q.MinDurationNS < 0 {
		return nil, fmt.Errorf("%w: negative duration bound", ErrInvalid)
	}
	var after *index.Cursor
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return nil, err
		}
		after = &c
	}
	if err := db.waitIndexed(ctx); err != nil {
		return nil, err
	}
	snap, release := db.snapshot()
	defer release()
	// Remote stores outside the time range are left out (their indexes
	// are not fetched); the others have their indexes cached.
	stores, err := db.remoteReadyForRange(ctx, snap, q.SinceNS, q.UntilNS)
	if err != nil {
		return nil, err
	}
	type storeSearch struct {
		s       *Store
		iq      index.Query
		latest  int64 // s.latestStart, when bounded
		bounded bool
	}
	// A store whose index turns out damaged is left out of the answer,
	// named in its warnings, and rebuilt (DB.indexDamaged).
	var warns warnings
	var targets []storeSearch
	texts := db.searchTexts(ctx, stores, q.Text)
	for i, s := range stores {
		if w, ok := s.catchUpWarning(); ok {
			warns.addWarning(w)
		}
		var text *textIDs
		if texts != nil {
			text = &texts[i]
		}
		iq, ok, err := db.storeQuery(ctx, s, q, after, text)
		if err != nil && isIndexDamage(err) {
			warns.addWarning(db.indexDamaged(s, err))
			continue
		}
		if err != nil {
			return nil, err
		}
		if ok {
			latest, bounded := s.latestStart()
			targets = append(targets, storeSearch{s, iq, latest, bounded})
		}
	}
	var pager *tracePager
	if !q.Spans && after != nil {
		pager = &tracePager{after: *after, log: db.log, known: make(map[trace.TraceID]bool)}
		defer pager.close()
		kept := targets[:0]
		for _, t := range targets {
			if err := pager.addStore(t.s, t.iq); err != nil {
				if isIndexDamage(err) {
					warns.addWarning(db.indexDamaged(t.s, err))
					continue
				}
				return nil, err
			}
			kept = append(kept, t)
		}
		targets = kept
	}
	// Each store yields up to limit+1 hits (in trace mode, of distinct
	// traces not listed before) in its order; the global page is the
	// newest of their union. A trace in several stores is represented by
	// its newest hit, which sorts first. A store that had more hits than
	// it yielded bounds how far the page may walk: past its last hit, its
	// unread hits could be newer (that only happens when damaged chunks
	// are skipped and the page walks beyond limit hits).
	//
	// A sealed store whose spans all start before limit+1 results already
	// found (its latest start is older than theirs) cannot add to the page
	// and is not searched: with time-ordered stores a page costs about one
	// store's hits, not limit+1 hits of every store. Its latest start
	// bounds the walk like a horizon (prunedNS), in case damaged chunks
	// make the walk go that far. Stores are searched latest first for
	// that (those without a known bound first).
	slices.SortStableFunc(targets, func(a, b storeSearch) int {
		switch {
		case a.bounded != b.bounded:
			if !a.bounded {
				return -1
			}
			return 1
		case a.latest != b.latest:
			return cmp.Compare(b.latest, a.latest)
		}
		return 0
	})
	var all []hit
	var horizon *hit
	pruned, prunedNS := false, int64(0)
	for _, t := range targets {
		s := t.s
		if t.bounded && resultsAfter(all, t.latest, q.Spans) > q.Limit {
			if !pruned || t.latest > prunedNS {
				pruned, prunedNS = true, t.latest
			}
			continue
		}
		seenTrace := map[trace.TraceID]bool{}
		n := 0
		var cbErr error
		var lastOfStore hit
		before := len(all)
		err := s.meta.SearchTraces(ctx, t.iq, func(h index.Hit, tr index.HitTrace) bool {
			// Only the newest version of a span is a result.
			if old, err := isSuperseded(stores, s, h.SpanRef); err != nil {
				cbErr = err
				return false
			} else if old {
				return true
			}
			if !q.Spans {
				if seenTrace[h.TraceID] {
					return true
				}
				if pager != nil {
					listed, err := pager.listed(ctx, h.TraceID)
					if err != nil {
						cbErr = err
						return false
					}
					if listed {
						return true
					}
				}
				seenTrace[h.TraceID] = true
			}
			lastOfStore = hit{store: s, ref: h.SpanRef, trace: tr}
			all = append(all, lastOfStore)
			n++
			return n < q.Limit+1
		})
		if err == nil {
			err = cbErr
		}
		if err != nil && cbErr == nil && isIndexDamage(err) {
			all = all[:before]
			warns.addWarning(db.indexDamaged(s, err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store %s: search: %w", StoreName(s.id), err)
		}
		if n == q.Limit+1 && (horizon == nil || hitLess(lastOfStore, *horizon)) {
			h := lastOfStore
			horizon = &h
		}
	}
	sort.Slice(all, func(i, j int) bool { return hitLess(all[i], all[j]) })
	res := &Result{}
	var resHits []hit // resHits[i] is the hit of res.Spans[i]
	seen := map[trace.TraceID]bool{}
	var last hit // the last result, or damaged hit, the page walked past
	walked := false
	more := false
	for _, h := range all {
		if !q.Spans {
			if seen[h.ref.TraceID] {
				continue
			}
			seen[h.ref.TraceID] = true
		}
		if len(res.Spans) == q.Limit || (horizon != nil && walked && hitLess(*horizon, h)) || (pruned && walked && h.ref.StartNS <= prunedNS) {
			more = true
			break
		}
		sp, err := db.readSummary(h.store, h.ref)
		if warns.add(err) {
			last, walked = h, true
			continue
		}
		if err != nil {
			return nil, err
		}
		sp.Children = nil
		res.Spans = append(res.Spans, sp)
		resHits = append(resHits, h)
		last, walked = h, true
	}
	if horizon != nil && walked {
		// A store has hits past those it yielded: the walk continues.
		more = true
	}
	if more {
		res.Cursor = encodeCursor(index.Cursor{StartNS: last.ref.StartNS, TraceID: last.ref.TraceID, SpanID: last.ref.SpanID})
	}
	if q.TraceHeads && !q.Spans {
		res.Traces = make([]TraceInfo, len(res.Spans))
		for i, sp := range res.Spans {
			ti, rootRef, err := db.traceHead(ctx, snap, sp.TraceID, &resHits[i])
			if err != nil {
				return nil, err
			}
			if rootRef != nil {
				// The root span leaves the answer without its name
				// when its chunk is damaged.
				ti.Root, err = db.readSummary(rootRef.store, rootRef.ref)
				if err != nil && !warns.add(err) {
					return nil, err
				}
			}
			res.Traces[i] = ti
		}
	}
	res.Warnings = warns.list
	return res, nil
}

// resultsAfter counts the results among hits (distinct traces, or in span
// mode distinct spans) that start after ns.
func resultsAfter(hits []hit, ns int64, spans bool) int {
	type key struct {
		trace trace.TraceID
		span  uint64
	}
	seen := make(map[key]bool, len(hits))
	for _, h := range hits {
		if h.ref.StartNS <= ns {
			continue
		}
		k := key{trace: h.ref.TraceID}
		if spans {
			k.span = h.ref.SpanID
		}
		seen[k] = true
	}
	return len(seen)
}

// latestStart is the latest span start in s, when s is sealed (or in a
// bucket) and that is known: no span added later can start after it.
// A store still taking writes or catching up with its data file has none.
func (s *Store) latestStart() (int64, bool) {
	if s.remote == nil && s.catching.Load() {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remote == nil && s.props.State != stateSealed || s.lastNS == 0 {
		return 0, false
	}
	return s.lastNS, true
}

// maxKnownTraces bounds the decisions a tracePager remembers.
const maxKnownTraces = 8192

// tracePager decides, for a trace-mode page after a cursor, which traces
// an earlier page listed. Pages list traces in the order of their newest
// matching span and the cursor is the position of the last one listed, so
// the traces listed before are exactly the cursor's own trace and those
// with a matching span strictly before the cursor (newer), in any store.
// Only the trace's own entries are read for that (index.Matcher), not the
// query's other matches: the work is bounded by the hits the page walks.
//
// The answer is as of the page's snapshot: a trace that gains a newer
// matching span while a client pages moves up to an earlier page and is
// not listed again.
type tracePager struct {
	after    index.Cursor
	log      *slog.Logger
	stores   []*Store
	matchers []*index.Matcher
	known    map[trace.TraceID]bool // decisions, at most maxKnownTraces
}

// addStore adds a store whose index can match iq (its After is ignored).
// The matcher holds the store's index open until close, also while the
// page searches that index: no Index.Close can be waiting in between (it
// is only called by Store.close, which first waits for the DB snapshot the
// page holds), so the nested hold cannot deadlock.
func (p *tracePager) addStore(s *Store, iq index.Query) error {
	m, err := s.meta.NewMatcher(iq)
	if err != nil {
		return fmt.Errorf("store %s: %w", StoreName(s.id), err)
	}
	p.stores = append(p.stores, s)
	p.matchers = append(p.matchers, m)
	return nil
}

// listed reports whether an earlier page listed trace id.
func (p *tracePager) listed(ctx context.Context, id trace.TraceID) (bool, error) {
	if id == p.after.TraceID {
		return true, nil
	}
	if v, ok := p.known[id]; ok {
		return v, nil
	}
	listed := false
	for i, m := range p.matchers { // newest store first: the likeliest
		_, ok, err := m.FirstHit(ctx, id, &p.after)
		if err != nil {
			return false, fmt.Errorf("store %s: trace %s: %w", StoreName(p.stores[i].id), id, err)
		}
		if ok {
			listed = true
			break
		}
	}
	if len(p.known) >= maxKnownTraces {
		clear(p.known)
	}
	p.known[id] = listed
	return listed, nil
}

func (p *tracePager) close() {
	for i, m := range p.matchers {
		if err := m.Close(); err != nil { // read-only: nothing is lost
			p.log.Warn("closing a search matcher", "store", StoreName(p.stores[i].id), "err", err)
		}
	}
}

// textIDs is what a store's text index answered for a search's text.
type textIDs struct {
	ids       []uint64
	truncated bool
	err       error
}

// searchTexts runs the text search of text (when not empty) in every
// store's text index, as many at once as there are CPUs, and returns the
// answers in the order of stores (nil when text is empty or there is one
// store). A search's text is looked up in every store before any is
// searched, and the text index is most of a text search's work: done in
// parallel, a text search over several stores takes about the time of
// its largest store's, not their sum.
func (db *DB) searchTexts(ctx context.Context, stores []*Store, text string) []textIDs {
	if text == "" || len(stores) < 2 {
		return nil
	}
	out := make([]textIDs, len(stores))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := &out[i]
			r.ids, r.truncated, r.err = s.text.Search(ctx, text, maxTextIDs)
		}()
	}
	wg.Wait()
	return out
}

// storeQuery translates q into s's text ids; ok is false when s cannot
// match (an attribute or text it has never seen). text, when not nil, is
// s's answer to q.Text (searchTexts).
func (db *DB) storeQuery(ctx context.Context, s *Store, q Query, after *index.Cursor, text *textIDs) (index.Query, bool, error) {
	iq := index.Query{SinceNS: q.SinceNS, UntilNS: q.UntilNS, MinDurationNS: q.MinDurationNS,
		MaxDurationNS: q.MaxDurationNS, ErrorsOnly: q.ErrorsOnly, After: after}
	if q.Operation != "" {
		op := q.Operation
		iq.Accept = func(ref index.SpanRef) (bool, error) {
			if ref.ChunkNum > 1 {
				return false, nil // the root record is in the span's first chunk
			}
			sp, err := db.readSummary(s, ref)
			if errors.As(err, new(*CorruptChunkError)) {
				return true, nil // the page's walk skips it and names the damaged chunk
			}
			if err != nil {
				return false, err
			}
			return OperationOf(sp) == op, nil
		}
		if q.Text == "" && q.TextExact == "" {
			q.TextExact = op // spans holding the string: a superset
		}
	}
	for _, a := range q.Attrs {
		k, ok, err := s.text.Lookup(a.Key)
		if err != nil || !ok {
			return iq, false, err
		}
		v, ok, err := s.text.Lookup(a.Value.Text())
		if err != nil || !ok {
			return iq, false, err
		}
		iq.Attrs = append(iq.Attrs, index.KV{Key: k, Value: v})
	}
	if q.TextExact != "" {
		if q.Text != "" {
			return iq, false, fmt.Errorf("%w: text and an exact text cannot be combined", ErrInvalid)
		}
		id, ok, err := s.text.Lookup(q.TextExact)
		if err != nil || !ok {
			return iq, false, err
		}
		iq.TextAny = []uint64{id}
	}
	if q.Text != "" {
		if text == nil {
			text = new(textIDs)
			text.ids, text.truncated, text.err = s.text.Search(ctx, q.Text, maxTextIDs)
		}
		ids, truncated, err := text.ids, text.truncated, text.err
		if err != nil {
			return iq, false, fmt.Errorf("store %s: text search: %w", StoreName(s.id), err)
		}
		if truncated {
			return iq, false, fmt.Errorf("%w: text %q matches more than %d distinct strings; make it longer", ErrInvalid, q.Text, maxTextIDs)
		}
		if len(ids) == 0 {
			return iq, false, nil
		}
		iq.TextAny = ids
	}
	return iq, true, nil
}

// AttributeKeys lists the distinct attribute keys of span attributes
// across stores, sorted, at most limit (≤ 0: 1000) of them (when there
// are more, which ones is unspecified: a store lists its keys in text-id
// order). Each store costs one index seek per distinct key.
func (db *DB) AttributeKeys(ctx context.Context, limit int) ([]string, error) {
	return db.distinctStrings(ctx, limit, func(s *Store) ([]uint64, error) {
		return s.meta.AttrKeys(limit)
	})
}

// AttributeValues lists distinct values of an attribute key across stores,
// sorted, at most limit.
func (db *DB) AttributeValues(ctx context.Context, key string, limit int) ([]string, error) {
	return db.distinctStrings(ctx, limit, func(s *Store) ([]uint64, error) {
		k, ok, err := s.text.Lookup(key)
		if err != nil || !ok {
			return nil, err
		}
		return s.meta.AttrValues(k, limit)
	})
}

// distinctStrings merges the text ids that list names in each store into
// the distinct strings they stand for, sorted, at most limit (<= 0: 1000).
// A store whose index is found damaged is left out and rebuilt, as a search
// leaves it out.
func (db *DB) distinctStrings(ctx context.Context, limit int, list func(*Store) ([]uint64, error)) ([]string, error) {
	if limit <= 0 {
		limit = 1000
	}
	if err := db.waitIndexed(ctx); err != nil {
		return nil, err
	}
	stores, release := db.snapshot()
	defer release()
	set := map[string]bool{}
	for _, s := range stores {
		if err := db.remoteReady(ctx, s); err != nil {
			return nil, err
		}
		ids, err := list(s)
		if err != nil && isIndexDamage(err) {
			db.indexDamaged(s, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", StoreName(s.id), err)
		}
		for _, id := range ids {
			v, err := s.text.String(id)
			if err != nil && isIndexDamage(err) {
				db.indexDamaged(s, err)
				break
			}
			if err != nil {
				return nil, fmt.Errorf("store %s: text id %d: %w", StoreName(s.id), id, err)
			}
			set[v] = true
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Cursors are opaque to clients: "c1." + base64url(startNS|traceID|spanID).
func encodeCursor(c index.Cursor) string {
	var b [32]byte
	binary.BigEndian.PutUint64(b[0:], uint64(c.StartNS))
	copy(b[8:], c.TraceID[:])
	binary.BigEndian.PutUint64(b[24:], c.SpanID)
	return "c1." + base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(s string) (index.Cursor, error) {
	var c index.Cursor
	rest, ok := strings.CutPrefix(s, "c1.")
	if !ok {
		return c, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != 32 {
		return c, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	c.StartNS = int64(binary.BigEndian.Uint64(b[0:]))
	copy(c.TraceID[:], b[8:24])
	c.SpanID = binary.BigEndian.Uint64(b[24:])
	return c, nil
}

// TraceHead summarizes a trace from its index records and one span read:
// its root span (the earliest stored span without a parent, read as a
// summary: its root record's own fields, no record tree; nil when every
// span has a parent), the trace's time range over all its spans and how many spans it
// has. It never reads the other spans.
func (db *DB) TraceHead(ctx context.Context, id trace.TraceID) (root *trace.Span, startNS, endNS int64, spans int, err error) {
	if err := db.waitIndexed(ctx); err != nil {
		return nil, 0, 0, 0, err
	}
	stores, release := db.snapshot()
	defer release()
	ti, rootRef, err := db.traceHead(ctx, stores, id, nil)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	if rootRef != nil {
		if ti.Root, err = db.readSummary(rootRef.store, rootRef.ref); err != nil {
			return nil, 0, 0, 0, err
		}
	}
	return ti.Root, ti.StartNS, ti.EndNS, ti.Spans, nil
}

// traceHead is TraceHead over a snapshot's stores from the index alone:
// it fills all of TraceInfo but Root and returns where the root span is
// (nil when every span has a parent). When the trace was found by a
// search, from is its hit: the entries the search read in the hit's store
// are used instead of looking the trace up there again. Stores whose trace
// filter rules the trace out are not looked in.
func (db *DB) traceHead(ctx context.Context, stores []*Store, id trace.TraceID, from *hit) (TraceInfo, *hit, error) {
	var ti TraceInfo
	var rootRef *hit
	seen := map[uint64]bool{}
	for _, s := range stores {
		var refs []index.SpanRef
		switch {
		case from != nil && from.store == s:
			refs = from.trace.Spans()
		case s.remote == nil && !s.mayHoldTrace(id):
			continue
		default:
			var err error
			refs, err = db.storeTraceRefs(ctx, s, id, func(s *Store) ([]index.SpanRef, error) { return s.meta.TraceSpans(id) }, nil)
			if err != nil {
				return ti, nil, fmt.Errorf("store %s: trace %s: %w", StoreName(s.id), id, err)
			}
		}
		for _, r := range refs {
			if !seen[r.SpanID] {
				seen[r.SpanID] = true
				ti.Spans++
			}
			if ti.Spans == 1 || r.StartNS < ti.StartNS {
				ti.StartNS = r.StartNS
			}
			if e := r.StartNS + r.DurationNS; ti.Spans == 1 || e > ti.EndNS {
				ti.EndNS = e
			}
			if r.ParentID == 0 && r.ChunkNum <= 1 && (rootRef == nil || r.StartNS < rootRef.ref.StartNS) {
				rootRef = &hit{store: s, ref: r}
			}
		}
		if err := ctx.Err(); err != nil {
			return ti, nil, err
		}
	}
	if ti.Spans == 0 {
		return ti, nil, fmt.Errorf("trace %s: %w", id, ErrNotFound)
	}
	return ti, rootRef, nil
}
