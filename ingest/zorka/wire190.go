package zorka

import (
	"encoding/binary"
	"math"

	"github.com/ztsd/ztsd/trace"
)

// Zorka 1.90 tags (zorka-cbor TraceDataTags).
const (
	tagStringDef    = 0x01
	tagMethodDef    = 0x02
	tagStringRef    = 0x06
	tagTraceStart   = 0x08
	tagTraceAttr    = 0x09
	tagPrologBE     = 0x0A
	tagPrologLE     = 0x0B
	tagEpilogBE     = 0x0C
	tagEpilogLE     = 0x0D
	tagTraceInfo    = 0x0E
	tagTraceFlags   = 0x0F
	tagTraceBegin   = 0x21
	tagException    = 0x22
	tagExceptionRef = 0x23
)

// Trace info keys (TraceInfoConstants) that carry meaning on the wire; the
// store-internal ones (chunk number/offset/length, duration, recs, errors,
// FLAGS_C) are accepted and ignored, as zorka-tdb does.
const (
	tiTstamp = 0x05
	tiCalls  = 0x09
	tiFlags  = 0x0B
	tiTstart = 0x0C
	tiTstop  = 0x0D
	tiMethod = 0x0E
	tiParent = 0x11
	tiSpan   = 0x12
)

// flagErrorMark is TraceRecordFlags.ERROR_MARK, the only trace flag with a
// meaning outside the agent.
const flagErrorMark = 0x08

// legacyTraceTypeLimit: a 2-element TraceBegin [clock, n] with 0 < n below
// this comes from a pre-1.90 agent, where n is a trace-type id; 1.90 span
// ids are random 64-bit values.
const legacyTraceTypeLimit = 1 << 16

// wire190 is the Zorka 1.90 trace data: prolog and epilog words in ticks,
// C6 string refs in attributes, no floats.
var wire190 = &wireVersion{items: items190, ticks: true, stringRefs: true}

const (
	mask40    = 1<<40 - 1
	tickShift = 16 // 1 tick = 2^16 ns
)

// ticksSince converts a 40-bit tick counter value to ns after base (the
// counter wraps).
func ticksSince(raw, base int64) int64 { return int64(uint64(raw-base)&mask40) << tickShift }

// begin190 is the 1.90 TraceBegin D8 21 [clock, span id?, parent id?].
var begin190 = beginForm{
	what: "TraceBegin", arity: "1 to 3 elements", minN: 1, maxN: 3,
	clock: "TraceBegin clock", span: "TraceBegin span id", parent: "TraceBegin parent id",
}

// exception190 is the 1.90 EXCEPTION D8 22 [id, C6 class, message (text or
// symbol id), cause, stack].
var exception190 = exceptionForm{
	what: "exception", arity: "5 elements [id, class, message, cause, stack]", minN: 5, maxN: 5,
	classRef: true, messageSymbol: true,
}

// item190 reads one tagged item of 1.90 trace data.
func (d *traceDecoder) item190(off int, tag uint64) error {
	r := &d.r
	switch tag {
	case tagTraceStart:
		if !r.next(0x9F) {
			return notRecordArray(off, "record start (tag 8)")
		}
		_, err := d.openRecord(off)
		return err
	case tagPrologBE, tagPrologLE:
		return d.prolog190(off, tag == tagPrologLE)
	case tagEpilogBE, tagEpilogLE:
		return d.epilog190(off, tag == tagEpilogLE)
	case tagTraceAttr:
		kv, err := d.attrMap()
		if err != nil {
			return err
		}
		return d.addAttrs(off, kv)
	case tagTraceBegin:
		return d.traceBegin190(off)
	case tagTraceFlags:
		v, err := r.uint("trace flags")
		if err != nil || v&flagErrorMark == 0 {
			return err
		}
		return d.markError(off)
	case tagTraceInfo:
		return d.traceInfo190()
	case tagException:
		return d.exception(off, &exception190)
	case tagExceptionRef:
		return d.exceptionRef(off)
	}
	return decodeErrorf(off, "unknown tag %d in Zorka 1.90 trace data", tag)
}

// word reads an 8-byte prolog/epilog word in the given byte order.
func (d *traceDecoder) word(le bool) uint64 {
	p := d.r.b[d.r.pos : d.r.pos+8]
	d.r.pos += 8
	if le {
		return binary.LittleEndian.Uint64(p)
	}
	return binary.BigEndian.Uint64(p)
}

// prolog190 reads a prolog: start ticks and method id of the record.
func (d *traceDecoder) prolog190(off int, le bool) error {
	f, err := d.inRecord(off, "prolog")
	if err != nil {
		return err
	}
	r := &d.r
	if r.left() < 9 || r.b[r.pos] != 0x48 {
		return decodeErrorf(off, "prolog must be an 8-byte byte string")
	}
	r.pos++
	w := d.word(le)
	m, err := d.method(off, w>>40)
	if err != nil {
		return err
	}
	d.setStart(f, int64(w&mask40))
	d.setMethod(f, m)
	return nil
}

// epilog190 reads an epilog (stop ticks and calls) and the break that
// ends its record.
func (d *traceDecoder) epilog190(off int, le bool) error {
	f, err := d.inRecord(off, "epilog")
	if err != nil {
		return err
	}
	r := &d.r
	n := 0
	if r.left() > 0 {
		switch r.b[r.pos] {
		case 0x48:
			n = 8
		case 0x50:
			n = 16
		}
	}
	if n == 0 || r.left() < 1+n {
		return decodeErrorf(off, "epilog must be an 8- or 16-byte byte string")
	}
	r.pos++
	w := d.word(le)
	calls := w >> 40
	if n == 16 {
		calls = d.word(le)
		if calls > math.MaxInt64 {
			calls = math.MaxInt64
		}
	}
	if !r.next(cborBreak) {
		return notRecordEnd(r.pos, "epilog")
	}
	f.stop, f.hasStop, f.calls = int64(w&mask40), true, int64(calls)
	return d.closeRecord(off)
}

// traceBegin190 reads a TraceBegin. [clock, n] with 0 < n < 2^16 comes from
// a pre-1.90 agent: n is a trace-type id.
func (d *traceDecoder) traceBegin190(off int) error {
	b, n, err := d.readBegin(off, &begin190)
	if err != nil {
		return err
	}
	if n == 2 && b.spanID > 0 && b.spanID < legacyTraceTypeLimit {
		b.typeID, b.spanID, b.legacyType = b.spanID, 0, true
		if s, ok := d.syms.strs[b.typeID]; ok {
			b.typ = s
		} else {
			b.extra = trace.Attrs{{Key: "zorka.trace_type", Value: trace.Int(int64(b.typeID))}}
		}
	}
	return d.begin(off, b)
}

// traceInfo190 reads a TRACE_INFO map of trace info keys to integers.
func (d *traceDecoder) traceInfo190() error {
	r := &d.r
	moff := r.pos
	n, err := r.mapLen("trace info")
	if err != nil {
		return err
	}
	if n == 0 || n > uint64(r.left()/2) {
		return decodeErrorf(moff, "trace info map of %d entries (%d bytes left)", n, r.left())
	}
	for i := uint64(0); i < n; i++ {
		koff := r.pos
		key, err := r.uint("trace info key")
		if err != nil {
			return err
		}
		v, err := r.intBits("trace info value")
		if err != nil {
			return err
		}
		if err := d.traceInfoItem(koff, key, v); err != nil {
			return err
		}
	}
	return nil
}

// traceInfoItem applies one TRACE_INFO entry the way the equivalent tagged
// item would.
func (d *traceDecoder) traceInfoItem(off int, key, v uint64) error {
	var f *frame
	if len(d.frames) > 0 {
		f = d.top()
	}
	// The span an id applies to: the one begun by this record, else the
	// one it belongs to, else the top-level one.
	target := d.bare
	if f != nil {
		target = f.span
		if target == nil {
			target = f.owner
		}
	}
	switch key {
	case tiTstamp:
		if f != nil && f.span != nil {
			if int64(v) < 0 || int64(v) > maxClockMS {
				return decodeErrorf(off, "trace info clock %d ms is out of range", int64(v))
			}
			f.span.clockMS = int64(v)
			return nil
		}
		return d.begin(off, spanBegin{clockMS: int64(v)})
	case tiFlags:
		if v&flagErrorMark != 0 {
			return d.markError(off)
		}
		return nil
	case tiSpan, tiParent:
		if target == nil {
			return decodeErrorf(off, "trace info key %d (span/parent id) outside any span", key)
		}
		if key == tiSpan {
			if v != 0 {
				target.id = trace.SpanID(v)
			}
		} else {
			target.wireParent = trace.SpanID(v)
		}
		return nil
	case tiTstart, tiTstop, tiCalls, tiMethod:
		if f == nil {
			return decodeErrorf(off, "trace info key %d outside a record", key)
		}
		switch key {
		case tiTstart:
			d.setStart(f, int64(v&mask40))
		case tiTstop:
			f.stop, f.hasStop = int64(v&mask40), true
		case tiCalls:
			f.calls = max(int64(v), 0)
		case tiMethod:
			m, err := d.method(off, v)
			if err != nil {
				return err
			}
			d.setMethod(f, m)
		}
	}
	return nil
}

// attrMap reads a TRACE_ATTR map (definite or indefinite).
func (d *traceDecoder) attrMap() (trace.Attrs, error) {
	r := &d.r
	moff := r.pos
	major, ai, n, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != majorMap {
		return nil, decodeErrorf(moff, "attributes must be a map, found %s", describeByte(r.b[moff]))
	}
	return d.mapEntries(moff, ai == aiIndefinite, n, 1)
}

// legacyNanoStarts reports whether the record tree of a pre-1.90 agent's
// span carries its prolog tstart values in nanoseconds rather than ticks,
// as the 2017 agent of the zorka-tdb Tomcat sample wrote them (its epilogs hold tstart
// + duration in ticks, so durations are right either way). The protocol
// and zorka-tdb read ticks; ztsd reads nanoseconds only when the ticks do
// not nest (a child starting or ending outside its parent by more than a
// tick) and nanoseconds do. Such a span gets zorka.tstart_unit = "ns".
func legacyNanoStarts(root *trace.Record, base int64) bool {
	ticks := func(raw int64) int64 { return ticksSince(raw, base) }
	nanos := func(raw int64) int64 { return legacyNanosSince(raw, base) }
	return !recordsNest(root, ticks) && recordsNest(root, nanos)
}

// legacyNanosSince converts a pre-1.90 agent's 40-bit nanosecond start to
// ns after base.
func legacyNanosSince(raw, base int64) int64 { return int64(uint64(raw-base) & mask40) }

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
