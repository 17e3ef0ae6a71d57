package zorka

import (
	"github.com/ztsd/ztsd/trace"
)

// wireVersion is what one generation of the agent protocol brings to the
// shared trace decoder: how its tagged items are read (its tag numbering
// and framing) and how its record times count. Everything else — records,
// spans, exceptions, attributes, symbols, limits and errors — is handled
// once, in tracedata.go and in the shared-shape items below.
type wireVersion struct {
	// items says which item switch reads the version's tagged items.
	items itemSet
	// ticks: record times are 40-bit tick counters (ticksSince) rather
	// than nanoseconds. A flag, not a func value: durations and starts are
	// converted per record, and a call through a func value is never
	// inlined.
	ticks bool
	// stringRefs: attribute keys and values may be C6 string refs.
	stringRefs bool
	// floats: attribute values may be CBOR floats.
	floats bool
}

// itemSet names a version's item switch. It is not a func value: called
// through one, the decoder would escape to the heap (an allocation more
// per body).
type itemSet uint8

const (
	items190 itemSet = iota // traceDecoder.item190
	items2x                 // traceDecoder.item2x
)

// detectWire tells the two generations apart from a trace body's first
// bytes: 2.x records start with C3, its other trace tags are C4–C7 and its
// C8 (exception ref) is followed by an integer, while the 1.90 C8 (record
// start) is followed by 9F. Anything else is read as 1.90.
func detectWire(b []byte) *wireVersion {
	if len(b) == 0 {
		return wire190
	}
	switch b[0] {
	case 0xC3, 0xC4, 0xC5, 0xC6, 0xC7:
		return wire2x
	case 0xC8:
		if len(b) > 1 && b[1] != 0x9F {
			return wire2x
		}
	}
	return wire190
}

// run reads the body item by item: a break ends the innermost record (a
// record without epilog or TRACE_END), anything else must be a tagged item
// of the body's version.
func (d *traceDecoder) run() error {
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
		var tag uint64
		if b>>5 == majorTag && b&0x1f < 24 {
			// A one-byte tag head (C0–D7), as most items have: read here,
			// it costs no call, which pays for the call to the version's
			// item switch.
			r.pos++
			tag = uint64(b & 0x1f)
		} else {
			major, ai, arg, err := r.head()
			if err != nil {
				return err
			}
			if major != majorTag || ai == aiIndefinite {
				return decodeErrorf(off, "expected a tagged item, found %s", describeByte(b))
			}
			tag = arg
		}
		var err error
		if d.wire.items == items2x {
			err = d.item2x(off, tag)
		} else {
			err = d.item190(off, tag)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// A record is an indefinite array (9F) after its record-start tag, and the
// item that ends it (epilog, TRACE_END) is followed by the array's break:
// the version's readers check both with cborReader.next (inlined: this is
// per record) and report them with these errors.

// notRecordArray: the record-start tag (what) at off is not followed by 9F.
func notRecordArray(off int, what string) error {
	return decodeErrorf(off, "%s must be followed by an indefinite array", what)
}

// notRecordEnd: the record-ending item (what) is followed at off by
// something else than the record's break.
func notRecordEnd(off int, what string) error {
	return decodeErrorf(off, "%s must be the last item of its record (followed by a break)", what)
}

// beginForm is the layout of a version's TraceBegin array: the clock in
// ms, the trace-type symbol when typed, then an optional span id and an
// optional parent id.
type beginForm struct {
	what       string // the item's name in messages
	arity      string // the allowed lengths, for the arity error
	minN, maxN int
	typed      bool // the element after the clock is a trace-type symbol id (0: none)
	// element names in messages
	clock, typ, span, parent string
}

// readBegin reads a TraceBegin array laid out as form; off is the offset
// of its tag. It returns the array's length for the version to look at.
func (d *traceDecoder) readBegin(off int, form *beginForm) (spanBegin, int, error) {
	r := &d.r
	var b spanBegin
	n, err := r.arrayLen(form.what, 1)
	if err != nil {
		return b, 0, err
	}
	if n < form.minN || n > form.maxN {
		return b, 0, decodeErrorf(off, "%s must have %s, has %d", form.what, form.arity, n)
	}
	if b.clockMS, err = r.int64(form.clock); err != nil {
		return b, 0, err
	}
	ids := n - 1
	if form.typed {
		toff := r.pos
		if b.typeID, err = r.uint(form.typ); err != nil {
			return b, 0, err
		}
		if b.typeID != 0 {
			if b.typ, err = d.str(toff, b.typeID, form.typ); err != nil {
				return b, 0, err
			}
		}
		ids--
	}
	if ids >= 1 {
		if b.spanID, err = r.intBits(form.span); err != nil {
			return b, 0, err
		}
	}
	if ids >= 2 {
		if b.parentID, err = r.intBits(form.parent); err != nil {
			return b, 0, err
		}
	}
	return b, n, nil
}

// exceptionForm is the layout of a version's exception array: [id, class,
// message, cause id, stack] and, when maxN is 6, an attribute map.
type exceptionForm struct {
	what       string // the item's name in messages
	arity      string // the allowed lengths and elements, for the arity error
	minN, maxN int
	// classRef: the class is a C6 string ref, not a bare symbol id.
	classRef bool
	// messageSymbol: the message may be a symbol id instead of text.
	messageSymbol bool
	// nullStack: the stack may be null.
	nullStack bool
}

// exception reads an exception array laid out as form (its tag at off),
// remembers the exception for refs and causes and attaches it to the
// innermost record, with its attributes, if any.
func (d *traceDecoder) exception(off int, form *exceptionForm) error {
	r := &d.r
	n, err := r.arrayLen(form.what, 1)
	if err != nil {
		return err
	}
	if n < form.minN || n > form.maxN {
		return decodeErrorf(off, "%s must have %s, has %d", form.what, form.arity, n)
	}
	id, err := r.uint("exception id")
	if err != nil {
		return err
	}
	coff := r.pos
	if form.classRef {
		major, ai, tag, err := r.head()
		if err != nil {
			return err
		}
		if major != majorTag || ai == aiIndefinite || tag != tagStringRef {
			return decodeErrorf(coff, "exception class must be a string ref (tag 6), found %s", describeByte(r.b[coff]))
		}
	}
	cid, err := r.uint("exception class")
	if err != nil {
		return err
	}
	exc := &trace.Exception{}
	if exc.Class, err = d.str(coff, cid, "exception class"); err != nil {
		return err
	}
	if nb, ok := r.peek(); form.messageSymbol && ok && nb>>5 == majorUint {
		exc.Message, err = d.symbol("exception message")
	} else {
		exc.Message, err = r.text("exception message", true)
	}
	if err != nil {
		return err
	}
	cause, err := r.uint("exception cause")
	if err != nil {
		return err
	}
	if nb, ok := r.peek(); form.nullStack && ok && nb == cborNull {
		r.pos++
	} else if exc.Stack, err = d.stack(); err != nil {
		return err
	}
	var kv trace.Attrs
	if n == 6 {
		// Exception attributes go to the record, which has nowhere else
		// to keep them.
		if kv, err = d.symbolKeyedMap("exception attributes", "exception attribute key"); err != nil {
			return err
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

// symbolKeyedMap reads a definite map (what) from string symbol ids (named
// key in errors) to attribute values.
func (d *traceDecoder) symbolKeyedMap(what, key string) (trace.Attrs, error) {
	r := &d.r
	moff := r.pos
	m, err := r.mapLen(what)
	if err != nil {
		return nil, err
	}
	if m > uint64(r.left()/2) {
		return nil, decodeErrorf(moff, "map of %d entries does not fit the %d bytes left", m, r.left())
	}
	var kv trace.Attrs
	for i := uint64(0); i < m; i++ {
		k, err := d.symbol(key)
		if err != nil {
			return nil, err
		}
		v, err := d.value(1)
		if err != nil {
			return nil, err
		}
		kv = append(kv, trace.Attr{Key: k, Value: v})
	}
	return kv, nil
}

// exceptionRef reads an exception ref's id and attaches the exception it
// names, sent earlier in the trace, to the innermost record.
func (d *traceDecoder) exceptionRef(off int) error {
	id, err := d.r.uint("exception ref")
	if err != nil {
		return err
	}
	e, ok := d.excs[id]
	if !ok {
		return decodeErrorf(off, "exception ref %d: no exception with that id was sent before in this trace", id)
	}
	return d.setException(off, e.exc)
}
