package zorka

import (
	"math"
	"strconv"

	"github.com/ztsd/ztsd/trace"
)

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

// intArg is the integer an unsigned (major 0) or negative (major 1) item
// head stands for: v when it fits int64, else its decimal text.
func intArg(major byte, arg uint64) (v int64, text string, fits bool) {
	switch {
	case arg > math.MaxInt64:
		return 0, bigIntText(major, arg), false
	case major == majorNegInt:
		return int64(^arg), "", true
	}
	return int64(arg), "", true
}

// value reads an attribute value at nesting depth (1 for a value directly
// in an attribute map). Zorka writes text, integers, null and, in 1.90,
// string refs; zorka-tdb also accepts booleans, byte strings, lists and maps.
// Floats are rejected in 1.90 data (its agent writes them as text) and
// accepted in 2.x data.
func (d *traceDecoder) value(depth int) (trace.Value, error) {
	r := &d.r
	off := r.pos
	if depth > trace.MaxValueDepth {
		return trace.Value{}, decodeErrorf(off, "attribute value nested deeper than %d", trace.MaxValueDepth)
	}
	major, ai, arg, err := r.head()
	if err != nil {
		return trace.Value{}, err
	}
	switch major {
	case majorUint, majorNegInt:
		if ai == aiIndefinite {
			break
		}
		v, text, fits := intArg(major, arg)
		if !fits {
			return trace.String(text), nil
		}
		return trace.Int(v), nil
	case majorBytes, majorText:
		if ai == aiIndefinite {
			return trace.Value{}, decodeErrorf(off, "indefinite-length strings are not supported")
		}
		p, err := r.bytesOf(off, arg, "attribute value")
		if err != nil {
			return trace.Value{}, err
		}
		if major == majorBytes {
			return trace.String(bytesValue(p)), nil
		}
		return trace.String(textString(p)), nil
	case majorArray:
		indefinite := ai == aiIndefinite
		if !indefinite && arg > uint64(r.left()) {
			return trace.Value{}, decodeErrorf(off, "list of %d elements does not fit the %d bytes left", arg, r.left())
		}
		var vs []trace.Value
		if !indefinite && arg > 0 {
			vs = make([]trace.Value, 0, arg)
		}
		for i := uint64(0); indefinite || i < arg; i++ {
			if indefinite {
				nb, ok := r.peek()
				if !ok {
					return trace.Value{}, decodeErrorf(r.pos, "unexpected end of data in a list that starts at offset %d", off)
				}
				if nb == cborBreak {
					r.pos++
					break
				}
			}
			v, err := d.value(depth + 1)
			if err != nil {
				return trace.Value{}, err
			}
			vs = append(vs, v)
		}
		return trace.List(vs...), nil
	case majorMap:
		kv, err := d.mapEntries(off, ai == aiIndefinite, arg, depth+1)
		if err != nil {
			return trace.Value{}, err
		}
		return trace.MapValue(kv), nil
	case majorTag:
		if d.wire.stringRefs && ai != aiIndefinite && arg == tagStringRef {
			id, err := r.uint("string ref")
			if err != nil {
				return trace.Value{}, err
			}
			s, err := d.str(off, id, "attribute value")
			if err != nil {
				return trace.Value{}, err
			}
			return trace.String(s), nil
		}
		return trace.Value{}, decodeErrorf(off, "unexpected tag %d in an attribute value", arg)
	case majorSimple:
		switch r.b[off] {
		case cborFalse:
			return trace.Bool(false), nil
		case cborTrue:
			return trace.Bool(true), nil
		case cborNull, cborUndef:
			return trace.Null(), nil
		case 0xF9, 0xFA, 0xFB:
			if !d.wire.floats {
				return trace.Value{}, decodeErrorf(off, "float in an attribute value: the Zorka 1.90 agent writes floats as text")
			}
			switch ai {
			case 25:
				return trace.Float(halfToFloat64(uint16(arg))), nil
			case 26:
				return trace.Float(float64(math.Float32frombits(uint32(arg)))), nil
			}
			return trace.Float(math.Float64frombits(arg)), nil
		}
	}
	return trace.Value{}, decodeErrorf(off, "unexpected %s in an attribute value", describeByte(r.b[off]))
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
		major, ai, arg, err := r.head()
		if err != nil {
			return "", err
		}
		if ai == aiIndefinite {
			break
		}
		v, text, fits := intArg(major, arg)
		if !fits {
			return text, nil
		}
		return formatInt(v), nil
	case majorTag:
		if d.wire.stringRefs {
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

// halfToFloat64 converts an IEEE 754 half-precision float.
func halfToFloat64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(frac+1024, exp-25)
}
