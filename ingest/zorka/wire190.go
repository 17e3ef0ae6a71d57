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

func (d *traceDecoder) run190() error {
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
		case tagTraceStart:
			if nb, ok := r.peek(); !ok || nb != 0x9F {
				return decodeErrorf(off, "record start (tag 8) must be followed by an indefinite array")
			}
			r.pos++
			err = d.openRecord(off)
		case tagPrologBE, tagPrologLE:
			err = d.prolog190(off, tag == tagPrologLE)
		case tagEpilogBE, tagEpilogLE:
			err = d.epilog190(off, tag == tagEpilogLE)
		case tagTraceAttr:
			var kv trace.Attrs
			if kv, err = d.attrMap(off); err == nil {
				err = d.addAttrs(off, kv)
			}
		case tagTraceBegin:
			err = d.traceBegin190(off)
		case tagTraceFlags:
			var v uint64
			if v, err = r.uint("trace flags"); err == nil && v&flagErrorMark != 0 {
				err = d.markError(off)
			}
		case tagTraceInfo:
			err = d.traceInfo190(off)
		case tagException:
			err = d.exception190(off)
		case tagExceptionRef:
			var id uint64
			if id, err = r.uint("exception ref"); err == nil {
				err = d.exceptionRef(off, id)
			}
		default:
			return decodeErrorf(off, "unknown tag %d in Zorka 1.90 trace data", tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
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
	f.stop, f.hasStop = int64(w&mask40), true
	calls := w >> 40
	if n == 16 {
		calls = d.word(le)
		if calls > math.MaxInt64 {
			calls = math.MaxInt64
		}
	}
	f.calls = int64(calls)
	if nb, ok := r.peek(); !ok || nb != cborBreak {
		return decodeErrorf(r.pos, "epilog must be the last item of its record (followed by a break)")
	}
	r.pos++
	return d.closeRecord(off)
}

func (d *traceDecoder) traceBegin190(off int) error {
	r := &d.r
	n, err := r.arrayLen("TraceBegin", 1)
	if err != nil {
		return err
	}
	if n < 1 || n > 3 {
		return decodeErrorf(off, "TraceBegin must have 1 to 3 elements, has %d", n)
	}
	clock, err := r.int64("TraceBegin clock")
	if err != nil {
		return err
	}
	var spanID, parentID, typeID uint64
	var typ string
	var extra trace.Attrs
	if n >= 2 {
		elemOff := r.pos
		if spanID, err = r.intBits("TraceBegin span id"); err != nil {
			return err
		}
		if n == 2 && r.b[elemOff]>>5 == majorUint && spanID > 0 && spanID < legacyTraceTypeLimit {
			typeID, spanID = spanID, 0
			if s, ok := d.syms.strs[typeID]; ok {
				typ = s
			} else {
				extra = trace.Attrs{{Key: "zorka.trace_type", Value: trace.Int(int64(typeID))}}
			}
		}
	}
	if n == 3 {
		if parentID, err = r.intBits("TraceBegin parent id"); err != nil {
			return err
		}
	}
	return d.begin(off, clock, spanID, parentID, typ, typeID, extra)
}

func (d *traceDecoder) traceInfo190(off int) error {
	r := &d.r
	moff := r.pos
	major, ai, n, err := r.head()
	if err != nil {
		return err
	}
	if major != majorMap || ai == aiIndefinite {
		return decodeErrorf(moff, "trace info must be a definite-length map, found %s", describeByte(r.b[moff]))
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
		return d.begin(off, int64(v), 0, 0, "", 0, nil)
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

func (d *traceDecoder) exception190(off int) error {
	r := &d.r
	n, err := r.arrayLen("exception", 1)
	if err != nil {
		return err
	}
	if n != 5 {
		return decodeErrorf(off, "exception must have 5 elements [id, class, message, cause, stack], has %d", n)
	}
	id, err := r.uint("exception id")
	if err != nil {
		return err
	}
	coff := r.pos
	major, ai, tag, err := r.head()
	if err != nil {
		return err
	}
	if major != majorTag || ai == aiIndefinite || tag != tagStringRef {
		return decodeErrorf(coff, "exception class must be a string ref (tag 6), found %s", describeByte(r.b[coff]))
	}
	cid, err := r.uint("exception class")
	if err != nil {
		return err
	}
	exc := &trace.Exception{}
	if exc.Class, err = d.str(coff, cid, "exception class"); err != nil {
		return err
	}
	moff := r.pos
	if nb, ok := r.peek(); ok && nb>>5 == majorUint {
		mid, _ := r.uint("exception message")
		if exc.Message, err = d.str(moff, mid, "exception message"); err != nil {
			return err
		}
	} else if exc.Message, err = r.text("exception message", true); err != nil {
		return err
	}
	cause, err := r.uint("exception cause")
	if err != nil {
		return err
	}
	if exc.Stack, err = d.stack(); err != nil {
		return err
	}
	return d.defineException(off, id, cause, exc)
}

// stack reads an exception's stack: an array of [class, method, file, line]
// with plain symbol ids.
func (d *traceDecoder) stack() ([]trace.StackFrame, error) {
	r := &d.r
	k, err := r.arrayLen("exception stack", 5)
	if err != nil {
		return nil, err
	}
	if k == 0 {
		return nil, nil
	}
	frames := make([]trace.StackFrame, k)
	for i := range frames {
		eoff := r.pos
		n, err := r.arrayLen("stack element", 1)
		if err != nil {
			return nil, err
		}
		if n != 4 {
			return nil, decodeErrorf(eoff, "stack element must have 4 elements [class, method, file, line], has %d", n)
		}
		var ids [3]uint64
		for j := range ids {
			if ids[j], err = r.uint("stack element symbol"); err != nil {
				return nil, err
			}
		}
		line, err := r.int64("stack element line")
		if err != nil {
			return nil, err
		}
		fr := &frames[i]
		if fr.Class, err = d.frameStr(eoff, ids[0], "stack element class"); err != nil {
			return nil, err
		}
		if fr.Method, err = d.frameStr(eoff, ids[1], "stack element method"); err != nil {
			return nil, err
		}
		if fr.File, err = d.frameStr(eoff, ids[2], "stack element file"); err != nil {
			return nil, err
		}
		fr.Line = line
	}
	return frames, nil
}

// attrMap reads a TRACE_ATTR map (definite or indefinite).
func (d *traceDecoder) attrMap(off int) (trace.Attrs, error) {
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

// mapEntries reads the entries of a map whose head is at moff; values are
// at the given nesting depth.
func (d *traceDecoder) mapEntries(moff int, indefinite bool, n uint64, depth int) (trace.Attrs, error) {
	r := &d.r
	if !indefinite && n > uint64(r.left()/2) {
		return nil, decodeErrorf(moff, "map of %d entries does not fit the %d bytes left", n, r.left())
	}
	var kv trace.Attrs
	if !indefinite {
		kv = make(trace.Attrs, 0, n)
	}
	for i := uint64(0); indefinite || i < n; i++ {
		if indefinite {
			nb, ok := r.peek()
			if !ok {
				return nil, decodeErrorf(r.pos, "unexpected end of data in a map that starts at offset %d", moff)
			}
			if nb == cborBreak {
				r.pos++
				break
			}
		}
		k, err := d.key()
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		kv = append(kv, trace.Attr{Key: k, Value: v})
	}
	return kv, nil
}

// key reads an attribute key: a string ref (1.90), text, or an integer
// (kept as its decimal text).
func (d *traceDecoder) key() (string, error) {
	r := &d.r
	off := r.pos
	nb, ok := r.peek()
	if !ok {
		return "", decodeErrorf(off, "unexpected end of data: attribute key expected")
	}
	switch nb >> 5 {
	case majorText:
		return r.text("attribute key", false)
	case majorUint, majorNegInt:
		_, _, arg, err := r.head()
		if err != nil {
			return "", err
		}
		if nb>>5 == majorUint {
			if arg > math.MaxInt64 {
				return bigIntText(majorUint, arg), nil
			}
			return formatInt(int64(arg)), nil
		}
		if arg > math.MaxInt64 {
			return bigIntText(majorNegInt, arg), nil
		}
		return formatInt(int64(^arg)), nil
	case majorTag:
		if d.format == format190 {
			_, ai, tag, err := r.head()
			if err != nil {
				return "", err
			}
			if ai != aiIndefinite && tag == tagStringRef {
				id, err := r.uint("attribute key ref")
				if err != nil {
					return "", err
				}
				return d.str(off, id, "attribute key")
			}
		}
	}
	return "", decodeErrorf(off, "attribute key must be a string or a string ref, found %s", describeByte(nb))
}
