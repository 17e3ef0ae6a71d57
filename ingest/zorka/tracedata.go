package zorka

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// wireFormat is the generation of the agent protocol a body is written in.
type wireFormat uint8

const (
	format190 wireFormat = iota + 1 // Zorka 1.90.x, what zorka-tdb consumes
	format2x                        // Zorka 2.x
)

// detectTraceFormat tells the two generations apart from a body's first
// bytes: 2.x records start with C3, its other trace tags are C4–C7 and its
// C8 (exception ref) is followed by an integer, while the 1.90 C8 (record
// start) is followed by 9F. Anything else is read as 1.90.
func detectTraceFormat(b []byte) wireFormat {
	if len(b) == 0 {
		return format190
	}
	switch b[0] {
	case 0xC3, 0xC4, 0xC5, 0xC6, 0xC7:
		return format2x
	case 0xC8:
		if len(b) > 1 && b[1] != 0x9F {
			return format2x
		}
	}
	return format190
}

const (
	mask40     = 1<<40 - 1
	tickShift  = 16 // 1 tick = 2^16 ns
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
	start     int64         // raw start: ticks (1.90) or ns (2.x)
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
	typeID     uint64 // 2.x trace-type symbol, for upward attributes
	extra      trace.Attrs
	errorMark  bool
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
	format      wireFormat
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
	format     wireFormat
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
		d.format = st.format
		d.resume(st)
	} else {
		d.format = detectTraceFormat(body)
	}
	var err error
	if d.format == format2x {
		err = d.run2x()
	} else {
		err = d.run190()
	}
	if err != nil {
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

func (d *traceDecoder) openRecord(off int) error {
	if len(d.frames) >= trace.MaxDepth {
		return decodeErrorf(off, "records nested deeper than %d", trace.MaxDepth)
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
	return nil
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
		if d.format == format190 {
			rec.DurationNS = int64(uint64(f.stop-f.start)&mask40) << tickShift
		} else {
			if f.stop < f.start {
				return decodeErrorf(off, "record ends at %d ns, before it started at %d ns", f.stop, f.start)
			}
			dur := f.stop - f.start
			if dur < 0 {
				return decodeErrorf(off, "record duration from %d ns to %d ns overflows", f.start, f.stop)
			}
			rec.DurationNS = dur
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

// begin starts a span at the innermost open record (or, outside any record,
// a span without a root record).
func (d *traceDecoder) begin(off int, clockMS int64, spanID, parentID uint64, typ string, typeID uint64, extra trace.Attrs) error {
	if clockMS < 0 || clockMS > maxClockMS {
		return decodeErrorf(off, "TraceBegin clock %d ms is out of range", clockMS)
	}
	s := &spanState{
		id: trace.SpanID(spanID), wireParent: trace.SpanID(parentID), clockMS: clockMS,
		typ: typ, typeID: typeID, extra: extra, nextChunk: 1,
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

func (d *traceDecoder) exceptionRef(off int, id uint64) error {
	e, ok := d.excs[id]
	if !ok {
		return decodeErrorf(off, "exception ref %d: no exception with that id was sent before in this trace", id)
	}
	return d.setException(off, e.exc)
}

// str resolves a string symbol.
func (d *traceDecoder) str(off int, id uint64, what string) (string, error) {
	s, ok := d.syms.strs[id]
	if !ok {
		return "", decodeErrorf(off, "%s: undefined string symbol %d", what, id)
	}
	return s, nil
}

// frameStr resolves a stack-frame symbol, where 0 stands for an unknown
// (null) class, method or file.
func (d *traceDecoder) frameStr(off int, id uint64, what string) (string, error) {
	if s, ok := d.syms.strs[id]; ok {
		return s, nil
	}
	if id == 0 {
		return "", nil
	}
	return "", decodeErrorf(off, "%s: undefined string symbol %d", what, id)
}

func (d *traceDecoder) method(off int, id uint64) (string, error) {
	m, ok := d.syms.methods[id]
	if !ok {
		return "", decodeErrorf(off, "undefined method id %d", id)
	}
	return m, nil
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
	return spans, &openTrace{format: d.format, frames: d.frames, excs: d.excs, submissions: d.submission + 1}, nil
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
		nanoStarts := d.format == format190 && s.typeID != 0 && legacyNanoStarts(root, base)
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
		r.StartNS = int64(uint64(r.StartNS-base) & mask40)
	case d.format == format190:
		r.StartNS = int64(uint64(r.StartNS-base)&mask40) << tickShift
	default:
		r.StartNS -= base
	}
	n := int64(1)
	for _, c := range r.Children {
		n += d.finishRecords(c, base, nanoStarts)
	}
	return n
}

// legacyNanoStarts reports whether the record tree of a pre-1.90 agent's
// span carries its prolog tstart values in nanoseconds rather than ticks,
// as the 2017 agent of the zorka-tdb Tomcat sample wrote them (its epilogs hold tstart
// + duration in ticks, so durations are right either way). The protocol
// and zorka-tdb read ticks; ztsd reads nanoseconds only when the ticks do
// not nest (a child starting or ending outside its parent by more than a
// tick) and nanoseconds do. Such a span gets zorka.tstart_unit = "ns".
func legacyNanoStarts(root *trace.Record, base int64) bool {
	ticks := func(raw int64) int64 { return int64(uint64(raw-base)&mask40) << tickShift }
	nanos := func(raw int64) int64 { return int64(uint64(raw-base) & mask40) }
	return !recordsNest(root, ticks) && recordsNest(root, nanos)
}

// recordsNest reports whether every child of r, at every depth, lies
// within its parent and after its earlier sibling (one tick of slack) when
// raw starts convert by conv. A record that never ended has no end to
// check against.
func recordsNest(r *trace.Record, conv func(int64) int64) bool {
	const slack = 1 << tickShift
	if r.StartNS == noStart {
		return true
	}
	ps := conv(r.StartNS)
	prevEnd := ps
	for _, c := range r.Children {
		if c.StartNS != noStart {
			cs := conv(c.StartNS)
			if cs < prevEnd-slack || !r.Open && !c.Open && cs+c.DurationNS > ps+r.DurationNS+slack {
				return false
			}
			prevEnd = cs + c.DurationNS
		}
		if !recordsNest(c, conv) {
			return false
		}
	}
	return true
}
