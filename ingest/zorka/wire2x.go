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

func (d *traceDecoder) run2x() error {
	r := &d.r
	for !r.eof() {
		off := r.pos
		b := r.b[off]
		if b == cborBreak {
			r.pos++
			if len(d.frames) == 0 {
				return decodeErrorf(off, "break outside a record")
			}
			if err := d.closeRecord(off); err != nil {
				return err
			}
			continue
		}
		major, ai, tag, err := r.head()
		if err != nil {
			return err
		}
		if major != majorTag || ai == aiIndefinite {
			return decodeErrorf(off, "expected a tagged item, found %s", describeByte(b))
		}
		switch tag {
		case tag2TraceStart:
			err = d.traceStart2x(off)
		case tag2TraceEnd:
			err = d.traceEnd2x(off)
		case tag2TraceBegin:
			err = d.traceBegin2x(off)
		case tag2TraceAttr:
			err = d.traceAttr2x(off)
		case tag2Exception:
			err = d.exception2x(off)
		case tag2ExceptionRef:
			var id uint64
			if id, err = r.uint("exception ref"); err == nil {
				err = d.exceptionRef(off, id)
			}
		case tagStringDef, tagMethodDef:
			return decodeErrorf(off, "symbol definition (tag %d) in trace data: symbols belong in agent data", tag)
		default:
			return decodeErrorf(off, "unknown tag %d in Zorka 2.x trace data", tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *traceDecoder) traceStart2x(off int) error {
	r := &d.r
	if nb, ok := r.peek(); !ok || nb != 0x9F {
		return decodeErrorf(off, "TRACE_START (tag 3) must be followed by an indefinite array")
	}
	r.pos++
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
	if err := d.openRecord(off); err != nil {
		return err
	}
	f := d.top()
	d.setStart(f, start)
	d.setMethod(f, m)
	return nil
}

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
	if nb, ok := r.peek(); !ok || nb != cborBreak {
		return decodeErrorf(r.pos, "TRACE_END must be the last item of its record (followed by a break)")
	}
	r.pos++
	f.stop, f.hasStop, f.calls = stop, true, calls
	return d.closeRecord(off)
}

func (d *traceDecoder) traceBegin2x(off int) error {
	r := &d.r
	n, err := r.arrayLen("TRACE_BEGIN", 1)
	if err != nil {
		return err
	}
	if n < 2 || n > 4 {
		return decodeErrorf(off, "TRACE_BEGIN must have 2 to 4 elements [clock, type, span id, parent id], has %d", n)
	}
	clock, err := r.int64("TRACE_BEGIN clock")
	if err != nil {
		return err
	}
	toff := r.pos
	typeID, err := r.uint("TRACE_BEGIN trace type")
	if err != nil {
		return err
	}
	var typ string
	if typeID != 0 {
		if typ, err = d.str(toff, typeID, "TRACE_BEGIN trace type"); err != nil {
			return err
		}
	}
	var spanID, parentID uint64
	if n >= 3 {
		if spanID, err = r.intBits("TRACE_BEGIN span id"); err != nil {
			return err
		}
	}
	if n == 4 {
		if parentID, err = r.intBits("TRACE_BEGIN parent id"); err != nil {
			return err
		}
	}
	return d.begin(off, clock, spanID, parentID, typ, typeID, nil)
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
	koff := r.pos
	kid, err := r.uint("TRACE_ATTR key")
	if err != nil {
		return err
	}
	k, err := d.str(koff, kid, "TRACE_ATTR key")
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

func (d *traceDecoder) exception2x(off int) error {
	r := &d.r
	n, err := r.arrayLen("EXCEPTION", 1)
	if err != nil {
		return err
	}
	if n != 5 && n != 6 {
		return decodeErrorf(off, "EXCEPTION must have 5 or 6 elements [id, class, message, cause, stack, attrs], has %d", n)
	}
	id, err := r.uint("exception id")
	if err != nil {
		return err
	}
	coff := r.pos
	cid, err := r.uint("exception class")
	if err != nil {
		return err
	}
	exc := &trace.Exception{}
	if exc.Class, err = d.str(coff, cid, "exception class"); err != nil {
		return err
	}
	if exc.Message, err = r.text("exception message", true); err != nil {
		return err
	}
	cause, err := r.uint("exception cause")
	if err != nil {
		return err
	}
	if nb, ok := r.peek(); ok && nb == cborNull {
		r.pos++
	} else if exc.Stack, err = d.stack(); err != nil {
		return err
	}
	var kv trace.Attrs
	if n == 6 {
		// Exception attributes: a map keyed by symbol ids. They go to the
		// record, which has nowhere else to keep them.
		moff := r.pos
		major, ai, m, err := r.head()
		if err != nil {
			return err
		}
		if major != majorMap || ai == aiIndefinite {
			return decodeErrorf(moff, "exception attributes must be a definite-length map, found %s", describeByte(r.b[moff]))
		}
		if m > uint64(r.left()/2) {
			return decodeErrorf(moff, "map of %d entries does not fit the %d bytes left", m, r.left())
		}
		for i := uint64(0); i < m; i++ {
			koff := r.pos
			kid, err := r.uint("exception attribute key")
			if err != nil {
				return err
			}
			k, err := d.str(koff, kid, "exception attribute key")
			if err != nil {
				return err
			}
			v, err := d.value(1)
			if err != nil {
				return err
			}
			kv = append(kv, trace.Attr{Key: k, Value: v})
		}
	}
	if err := d.defineException(off, id, cause, exc); err != nil {
		return err
	}
	if len(kv) > 0 {
		return d.addAttrs(off, kv)
	}
	return nil
}
