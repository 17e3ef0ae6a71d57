package zorka

import (
	"github.com/ztsd/ztsd/trace"
)

// Zorka 2.x trace tags (zorka-common TraceDataTags).
const (
	tag2TraceStart   = 0x03
	tag2TraceEnd     = 0x04
	tag2TraceBegin   = 0x05
	tag2TraceAttr    = 0x06
	tag2Exception    = 0x07
	tag2ExceptionRef = 0x08
)

// flag2ErrorMark is the 2.x TraceMarker ERROR_MARK bit of TRACE_END flags.
const flag2ErrorMark = 0x1000

// wire2x is the Zorka 2.x trace data: record times in ns, attribute keys
// as bare symbol ids, floats allowed.
var wire2x = &wireVersion{items: items2x, floats: true}

// nsDurationError says why record times in ns (start, stop; the record
// ended at off) make no duration.
func nsDurationError(off int, start, stop int64) error {
	if stop < start {
		return decodeErrorf(off, "record ends at %d ns, before it started at %d ns", stop, start)
	}
	return decodeErrorf(off, "record duration from %d ns to %d ns overflows", start, stop)
}

// begin2x is the 2.x TRACE_BEGIN C5 [clock, trace type, span id?, parent id?].
var begin2x = beginForm{
	what: "TRACE_BEGIN", arity: "2 to 4 elements [clock, type, span id, parent id]", minN: 2, maxN: 4,
	typed: true, clock: "TRACE_BEGIN clock", typ: "TRACE_BEGIN trace type",
	span: "TRACE_BEGIN span id", parent: "TRACE_BEGIN parent id",
}

// exception2x is the 2.x EXCEPTION C7 [id, class, message, cause, stack or
// null, attributes?] with bare symbol ids.
var exception2x = exceptionForm{
	what: "EXCEPTION", arity: "5 or 6 elements [id, class, message, cause, stack, attrs]", minN: 5, maxN: 6,
	nullStack: true,
}

// item2x reads one tagged item of 2.x trace data.
func (d *traceDecoder) item2x(off int, tag uint64) error {
	switch tag {
	case tag2TraceStart:
		return d.traceStart2x(off)
	case tag2TraceEnd:
		return d.traceEnd2x(off)
	case tag2TraceBegin:
		b, _, err := d.readBegin(off, &begin2x)
		if err != nil {
			return err
		}
		return d.begin(off, b)
	case tag2TraceAttr:
		return d.traceAttr2x(off)
	case tag2Exception:
		return d.exception(off, &exception2x)
	case tag2ExceptionRef:
		return d.exceptionRef(off)
	case tagStringDef, tagMethodDef:
		return decodeErrorf(off, "symbol definition (tag %d) in trace data: symbols belong in agent data", tag)
	}
	return decodeErrorf(off, "unknown tag %d in Zorka 2.x trace data", tag)
}

// traceStart2x reads TRACE_START 9F tstart method-id and opens the record.
func (d *traceDecoder) traceStart2x(off int) error {
	r := &d.r
	if !r.next(0x9F) {
		return notRecordArray(off, "TRACE_START (tag 3)")
	}
	start, err := r.int64("TRACE_START time")
	if err != nil {
		return err
	}
	moff := r.pos
	mid, err := r.uint("TRACE_START method id")
	if err != nil {
		return err
	}
	m, err := d.method(moff, mid)
	if err != nil {
		return err
	}
	f, err := d.openRecord(off)
	if err != nil {
		return err
	}
	d.setStart(f, start)
	d.setMethod(f, m)
	return nil
}

// traceEnd2x reads TRACE_END [tstop, calls, flags?] and the break that ends
// its record.
func (d *traceDecoder) traceEnd2x(off int) error {
	f, err := d.inRecord(off, "TRACE_END")
	if err != nil {
		return err
	}
	r := &d.r
	n, err := r.arrayLen("TRACE_END", 1)
	if err != nil {
		return err
	}
	if n != 2 && n != 3 {
		return decodeErrorf(off, "TRACE_END must have 2 or 3 elements [tstop, calls, flags], has %d", n)
	}
	stop, err := r.int64("TRACE_END time")
	if err != nil {
		return err
	}
	coff := r.pos
	calls, err := r.int64("TRACE_END calls")
	if err != nil {
		return err
	}
	if calls < 0 {
		return decodeErrorf(coff, "TRACE_END calls %d is negative", calls)
	}
	if n == 3 {
		flags, err := r.uint("TRACE_END flags")
		if err != nil {
			return err
		}
		if flags&flag2ErrorMark != 0 {
			if err := d.markError(off); err != nil {
				return err
			}
		}
	}
	if !r.next(cborBreak) {
		return notRecordEnd(r.pos, "TRACE_END")
	}
	f.stop, f.hasStop, f.calls = stop, true, calls
	return d.closeRecord(off)
}

// traceAttr2x reads [key, value] for the current record, or the upward
// form [trace type, key, value] for the nearest enclosing record that began
// a span of that trace type (any span for type 0; the current record when
// there is none).
func (d *traceDecoder) traceAttr2x(off int) error {
	r := &d.r
	n, err := r.arrayLen("TRACE_ATTR", 1)
	if err != nil {
		return err
	}
	if n != 2 && n != 3 {
		return decodeErrorf(off, "TRACE_ATTR must have 2 or 3 elements, has %d", n)
	}
	var typeID uint64
	upward := n == 3
	if upward {
		if typeID, err = r.uint("TRACE_ATTR trace type"); err != nil {
			return err
		}
	}
	k, err := d.symbol("TRACE_ATTR key")
	if err != nil {
		return err
	}
	v, err := d.value(1)
	if err != nil {
		return err
	}
	kv := trace.Attrs{{Key: k, Value: v}}
	if upward {
		for i := len(d.frames) - 1; i >= 0; i-- {
			if s := d.frames[i].span; s != nil && (typeID == 0 || s.typeID == typeID) {
				d.frames[i].rec.Attrs = append(d.frames[i].rec.Attrs, kv...)
				return nil
			}
		}
	}
	return d.addAttrs(off, kv)
}
