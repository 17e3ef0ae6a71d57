package zorka

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"time"

	"github.com/ztsd/ztsd/trace"
)

const (
	maxClockMS = math.MaxInt64 / int64(time.Millisecond)
	// noStart marks a record whose start time never arrived.
	noStart = math.MinInt64
	// maxExceptions bounds the exceptions remembered per trace (for
	// exception refs and causes).
	maxExceptions = 1 << 16
)

// maxCauseDepth bounds an exception's cause chain, as the store does.
var maxCauseDepth = trace.DefaultLimits().MaxDepth

// frame is one record that has begun and not yet ended.
type frame struct {
	rec       *trace.Record // the record in the current submission's piece
	off       int           // byte offset of the record start, in the submission it began in
	start     int64         // raw start, in the version's unit (wireVersion)
	stop      int64
	hasStart  bool
	hasStop   bool
	method    string
	calls     int64
	errors    int64 // records with an exception in this record's subtree, within its span, so far
	hasExc    bool
	errorMark bool       // ERROR_MARK seen before any span owned the record
	span      *spanState // the span this record began, if any
	owner     *spanState // the span this record belongs to (nil: none yet)
	continued bool       // began in an earlier submission
}

// spanState is a span being decoded (possibly across submissions).
type spanState struct {
	id         trace.SpanID
	wireParent trace.SpanID
	enclosing  *spanState // span the record that began this one was nested in
	clockMS    int64
	typ        string
	typeID     uint64 // trace-type symbol, for 2.x upward attributes
	extra      trace.Attrs
	errorMark  bool
	legacyType bool // typeID came from a pre-1.90 agent (beside errorMark: no padding, 128 bytes)
	nextChunk  uint32
	root       *frame      // nil for a span begun outside any record
	piece      *trace.Span // this submission's piece
	bareAttrs  trace.Attrs
}

// excEntry is an exception already sent in a trace, for refs and causes.
type excEntry struct {
	exc   *trace.Exception
	depth int // length of its cause chain, itself included
}

// openTrace is what a trace that left records open at the end of a
// submission keeps until the next submission continues it.
type openTrace struct {
	wire        *wireVersion
	frames      []*frame
	excs        map[uint64]excEntry
	submissions uint64
	lastUsed    time.Time
}

// traceStats counts what one submission held.
type traceStats struct {
	records    int
	exceptions int
}

// traceDecoder decodes one trace submission.
type traceDecoder struct {
	r          cborReader
	wire       *wireVersion
	syms       *symbolTable
	traceID    trace.TraceID
	submission uint64 // 0 for the first submission of a trace
	frames     []*frame
	free       []*frame
	pieces     []*spanState
	bare       *spanState // span begun at top level, taking top-level attributes
	excs       map[uint64]excEntry
	excsOwned  bool
	digest     *[sha256.Size]byte
	stats      traceStats
}

// decodeTrace decodes body, continuing st when the trace has open records.
// It returns one piece per span touched and the state to keep (nil when no
// record is left open). st is never modified.
func decodeTrace(syms *symbolTable, traceID trace.TraceID, body []byte, st *openTrace) ([]*trace.Span, *openTrace, traceStats, error) {
	d := &traceDecoder{r: cborReader{b: body}, syms: syms, traceID: traceID}
	if st != nil {
		d.wire = st.wire
		d.resume(st)
	} else {
		d.wire = detectWire(body)
	}
	if err := d.run(); err != nil {
		return nil, nil, d.stats, err
	}
	spans, next, err := d.finish()
	return spans, next, d.stats, err
}

// resume rebuilds the open record stack of st with fresh records: each
// continued record is the first child of its continued parent, and each
// continued span gets a new piece with the next chunk number.
func (d *traceDecoder) resume(st *openTrace) {
	d.submission = st.submissions
	d.excs = st.excs
	clones := make(map[*spanState]*spanState)
	clone := func(s *spanState) *spanState {
		if s == nil {
			return nil
		}
		if c, ok := clones[s]; ok {
			return c
		}
		c := *s
		c.piece = nil
		clones[s] = &c
		return &c
	}
	for i, old := range st.frames {
		f := *old
		f.span, f.owner = clone(old.span), clone(old.owner)
		f.continued = true
		f.rec = &trace.Record{Method: f.method, StartNS: noStart, Open: true}
		if f.hasStart {
			f.rec.StartNS = f.start
		}
		if f.span != nil {
			s := f.span
			s.root = &f
			s.piece = &trace.Span{ChunkNum: s.nextChunk, Root: f.rec}
			s.nextChunk++
			d.pieces = append(d.pieces, s)
		} else if i > 0 {
			p := d.frames[i-1].rec
			p.Children = append(p.Children, f.rec)
		}
		d.frames = append(d.frames, &f)
	}
	for _, c := range clones {
		if e, ok := clones[c.enclosing]; ok {
			c.enclosing = e
		}
	}
}

func (d *traceDecoder) top() *frame { return d.frames[len(d.frames)-1] }

// inRecord returns the innermost open record, or an error naming what was
// found outside any record.
func (d *traceDecoder) inRecord(off int, what string) (*frame, error) {
	if len(d.frames) == 0 {
		return nil, decodeErrorf(off, "%s outside a record", what)
	}
	return d.top(), nil
}

// openRecord begins a record (its start at off) inside the innermost one.
func (d *traceDecoder) openRecord(off int) (*frame, error) {
	if len(d.frames) >= trace.MaxDepth {
		return nil, decodeErrorf(off, "records nested deeper than %d", trace.MaxDepth)
	}
	var f *frame
	if n := len(d.free); n > 0 {
		f = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		f = new(frame)
	}
	f.off = off
	f.rec = &trace.Record{StartNS: noStart}
	if n := len(d.frames); n > 0 {
		p := d.frames[n-1]
		f.owner = p.owner
		p.rec.Children = append(p.rec.Children, f.rec)
	} else {
		d.bare = nil
	}
	d.frames = append(d.frames, f)
	d.stats.records++
	return f, nil
}

func (d *traceDecoder) setStart(f *frame, raw int64) {
	f.start, f.hasStart = raw, true
	f.rec.StartNS = raw
}

func (d *traceDecoder) setMethod(f *frame, m string) {
	f.method = m
	f.rec.Method = m
}

// closeRecord ends the innermost record; off is where its end was found.
func (d *traceDecoder) closeRecord(off int) error {
	f := d.top()
	rec := f.rec
	if f.hasStart && f.hasStop {
		switch dur := f.stop - f.start; {
		case d.wire.ticks:
			rec.DurationNS = ticksSince(f.stop, f.start)
		case f.stop >= f.start && dur >= 0:
			rec.DurationNS = dur
		default:
			return nsDurationError(off, f.start, f.stop)
		}
	}
	rec.Calls, rec.Errors, rec.Open = f.calls, f.errors, false
	d.frames = d.frames[:len(d.frames)-1]
	if len(d.frames) == 0 {
		if f.owner == nil {
			return decodeErrorf(f.off, "top-level record has no TraceBegin, so it belongs to no span")
		}
	} else if f.span == nil {
		d.top().errors += f.errors
	}
	if f.span == nil {
		*f = frame{}
		d.free = append(d.free, f)
	}
	return nil
}

// spanBegin is what a TraceBegin carries, in either version.
type spanBegin struct {
	clockMS          int64
	spanID, parentID uint64 // 0: none sent
	typ              string // trace type
	typeID           uint64 // its symbol id
	legacyType       bool   // typeID came from a pre-1.90 agent
	extra            trace.Attrs
}

// begin starts a span (its TraceBegin at off) at the innermost open record
// or, outside any record, a span without a root record.
func (d *traceDecoder) begin(off int, b spanBegin) error {
	if b.clockMS < 0 || b.clockMS > maxClockMS {
		return decodeErrorf(off, "TraceBegin clock %d ms is out of range", b.clockMS)
	}
	s := &spanState{
		id: trace.SpanID(b.spanID), wireParent: trace.SpanID(b.parentID), clockMS: b.clockMS,
		typ: b.typ, typeID: b.typeID, legacyType: b.legacyType, extra: b.extra, nextChunk: 1,
		piece: &trace.Span{},
	}
	if s.id == 0 {
		s.id = d.generatedSpanID(off)
	}
	if len(d.frames) == 0 {
		d.bare = s
		d.pieces = append(d.pieces, s)
		return nil
	}
	f := d.top()
	if f.continued {
		return decodeErrorf(off, "TraceBegin in a record continued from an earlier submission")
	}
	if f.span != nil {
		return decodeErrorf(off, "second TraceBegin in the record that starts at offset %d", f.off)
	}
	s.root = f
	s.enclosing = f.owner
	s.errorMark = f.errorMark
	s.piece.Root = f.rec
	f.span, f.owner = s, s
	if n := len(d.frames); n > 1 {
		// The record leaves the enclosing span's tree: it is the root of its
		// own span now. Being open, it is its parent's last child.
		p := d.frames[n-2].rec
		if k := len(p.Children); k > 0 && p.Children[k-1] == f.rec {
			p.Children[k-1] = nil
			p.Children = p.Children[:k-1]
		}
	}
	d.pieces = append(d.pieces, s)
	return nil
}

// generatedSpanID derives an id for a span the agent sent none for from the
// trace id, the submission and the offset: never 0, unique within a trace,
// and the same when the same bytes are submitted again.
func (d *traceDecoder) generatedSpanID(off int) trace.SpanID {
	if d.digest == nil {
		sum := sha256.Sum256(d.r.b)
		d.digest = &sum
	}
	var buf [16 + sha256.Size + 16]byte
	copy(buf[:], d.traceID[:])
	copy(buf[16:], d.digest[:])
	binary.BigEndian.PutUint64(buf[16+sha256.Size:], d.submission)
	binary.BigEndian.PutUint64(buf[24+sha256.Size:], uint64(off))
	sum := sha256.Sum256(buf[:])
	if id := binary.BigEndian.Uint64(sum[:8]); id != 0 {
		return trace.SpanID(id)
	}
	return 1
}

// markError records an ERROR_MARK flag.
func (d *traceDecoder) markError(off int) error {
	if len(d.frames) == 0 {
		if d.bare == nil {
			return decodeErrorf(off, "trace flags outside a record")
		}
		d.bare.errorMark = true
		return nil
	}
	f := d.top()
	if f.owner != nil {
		f.owner.errorMark = true
	} else {
		f.errorMark = true
	}
	return nil
}

// addAttrs appends attributes to the innermost record (or the top-level
// span). They are sorted, last one winning, when the submission ends.
func (d *traceDecoder) addAttrs(off int, kv trace.Attrs) error {
	if len(d.frames) == 0 {
		if d.bare == nil {
			return decodeErrorf(off, "attributes outside a record")
		}
		d.bare.bareAttrs = append(d.bare.bareAttrs, kv...)
		return nil
	}
	f := d.top()
	f.rec.Attrs = append(f.rec.Attrs, kv...)
	return nil
}

// setException attaches exc to the innermost record; a record counts once
// in errors however many exceptions it gets.
func (d *traceDecoder) setException(off int, exc *trace.Exception) error {
	f, err := d.inRecord(off, "exception")
	if err != nil {
		return err
	}
	f.rec.Exception = exc
	if !f.hasExc {
		f.hasExc = true
		f.errors++
	}
	return nil
}

// defineException remembers a full exception under the agent's id and
// links its cause.
func (d *traceDecoder) defineException(off int, id, causeID uint64, exc *trace.Exception) error {
	depth := 1
	if causeID != 0 {
		c, ok := d.excs[causeID]
		if !ok {
			return decodeErrorf(off, "exception cause %d was not sent before in this trace", causeID)
		}
		exc.Cause = c.exc
		depth = c.depth + 1
		if depth > maxCauseDepth {
			return decodeErrorf(off, "exception cause chain longer than %d", maxCauseDepth)
		}
	}
	if !d.excsOwned {
		m := make(map[uint64]excEntry, len(d.excs)+4)
		for k, v := range d.excs {
			m[k] = v
		}
		d.excs, d.excsOwned = m, true
	}
	if _, ok := d.excs[id]; !ok && len(d.excs) >= maxExceptions {
		return decodeErrorf(off, "more than %d exceptions in one trace", maxExceptions)
	}
	d.excs[id] = excEntry{exc: exc, depth: depth}
	d.stats.exceptions++
	return d.setException(off, exc)
}

// finish checks the end state, completes every piece and returns what to
// keep for the next submission.
func (d *traceDecoder) finish() ([]*trace.Span, *openTrace, error) {
	if len(d.frames) > 0 && d.frames[0].owner == nil {
		return nil, nil, decodeErrorf(d.frames[0].off, "top-level record has no TraceBegin, so it belongs to no span")
	}
	for _, f := range d.frames {
		f.rec.Open = true
		f.rec.Calls, f.rec.Errors = f.calls, f.errors
	}
	spans := make([]*trace.Span, 0, len(d.pieces))
	for _, s := range d.pieces {
		spans = append(spans, d.finishPiece(s))
	}
	if len(d.frames) == 0 {
		return spans, nil, nil
	}
	for _, f := range d.frames {
		f.rec = nil
		if f.span != nil {
			f.span.piece = nil
		}
	}
	return spans, &openTrace{wire: d.wire, frames: d.frames, excs: d.excs, submissions: d.submission + 1}, nil
}

func (d *traceDecoder) finishPiece(s *spanState) *trace.Span {
	p := s.piece
	p.TraceID = d.traceID
	p.SpanID = s.id
	p.Source = trace.SourceZorka
	p.Type = s.typ
	p.StartNS = s.clockMS * int64(time.Millisecond)
	switch {
	case s.wireParent != 0:
		p.ParentID = s.wireParent
	case s.enclosing != nil:
		p.ParentID = s.enclosing.id
	}
	var attrs trace.Attrs
	if root := p.Root; root != nil {
		var base int64
		if s.root.hasStart {
			base = s.root.start
		}
		// Only a pre-1.90 agent (TraceBegin [clock, trace type]) wrote
		// nanosecond starts.
		nanoStarts := s.legacyType && legacyNanoStarts(root, base)
		p.Recs = d.finishRecords(root, base, nanoStarts)
		p.DurationNS, p.Calls, p.Errors = root.DurationNS, root.Calls, root.Errors
		attrs = make(trace.Attrs, 0, len(root.Attrs)+len(s.extra)+3)
		attrs = append(attrs, root.Attrs...)
		if nanoStarts {
			attrs = append(attrs, trace.Attr{Key: "zorka.tstart_unit", Value: trace.String("ns")})
		}
	}
	attrs = append(attrs, s.bareAttrs...)
	attrs = append(attrs, s.extra...)
	if p.Root != nil && p.Root.Method != "" {
		attrs = append(attrs, trace.Attr{Key: "call.method", Value: trace.String(p.Root.Method)})
	}
	attrs = append(attrs, trace.Attr{Key: "source.format", Value: trace.String(trace.SourceZorka)})
	attrs.Sort()
	p.Attrs = attrs
	// Zorka and ZICO set the error flag from ERROR_MARK only: an exception
	// alone (maybe caught) counts in errors, it does not fail the span.
	p.Error = s.errorMark
	return p
}

// finishRecords sorts each record's attributes, turns raw start times into
// ns relative to base and returns the number of records.
func (d *traceDecoder) finishRecords(r *trace.Record, base int64, nanoStarts bool) int64 {
	if len(r.Attrs) > 1 {
		r.Attrs.Sort()
	}
	switch {
	case r.StartNS == noStart:
		r.StartNS = 0
	case nanoStarts:
		r.StartNS = legacyNanosSince(r.StartNS, base)
	case d.wire.ticks:
		r.StartNS = ticksSince(r.StartNS, base)
	default:
		r.StartNS -= base
	}
	n := int64(1)
	for _, c := range r.Children {
		n += d.finishRecords(c, base, nanoStarts)
	}
	return n
}
