package wtf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ztsd/ztsd/trace"
)

// maxArrayElems bounds the elements kept of one array argument: each element
// becomes a trace.Value, so longer arrays are cut (with a warning) to keep
// memory proportional to the input.
const maxArrayElems = 1 << 16

// elemSize is the byte size of one array element.
func elemSize(t argType) int {
	switch t {
	case argInt8Array, argUint8Array, argCharArray:
		return 1
	case argInt16Array, argUint16Array, argWCharArray:
		return 2
	}
	return 4
}

// argError names the argument that could not be read.
func argError(spec argSpec, err error) error {
	return fmt.Errorf("argument %q (%s): %w", spec.name, spec.typ, err)
}

// arrayTooLong is reported when an array argument is cut.
const arrayTooLong = "array-cut"

// cffArgs decodes the arguments of one CFF event: 4-byte little-endian
// slots, each argument starting on a slot; off is the byte offset of the
// first argument slot in buf. It returns the values and the offset after
// the arguments.
func (l *loader) cffArgs(specs []argSpec, buf []byte, off int, tbl *stringTable, out []trace.Value) ([]trace.Value, int, error) {
	for _, spec := range specs {
		if len(buf)-off < 4 {
			return out, off, argError(spec, errf(ErrTruncated, "need 4 bytes at %d, event buffer has %d", off, len(buf)))
		}
		slot := buf[off : off+4]
		word := binary.LittleEndian.Uint32(slot)
		off += 4
		var v trace.Value
		switch spec.typ {
		case argBool:
			v = trace.Bool(slot[0] != 0)
		case argInt8:
			v = trace.Int(int64(int8(slot[0])))
		case argUint8:
			v = trace.Int(int64(slot[0]))
		case argInt16:
			v = trace.Int(int64(int16(binary.LittleEndian.Uint16(slot))))
		case argUint16:
			v = trace.Int(int64(binary.LittleEndian.Uint16(slot)))
		case argInt32:
			v = trace.Int(int64(int32(word)))
		case argUint32, argFlowID:
			v = trace.Int(int64(word))
		case argFloat32:
			v = trace.Float(float64(math.Float32frombits(word)))
		case argTime32:
			v = trace.Float(float64(word) / 1000)
		case argChar:
			v = trace.String(string(rune(slot[0])))
		case argWChar:
			v = trace.String(utf16String([]uint16{binary.LittleEndian.Uint16(slot)}))
		case argASCII, argUTF8:
			sv, err := tbl.value(word)
			if err != nil {
				return out, off, argError(spec, err)
			}
			v = sv
		case argAny:
			text, ok, err := tbl.text(word)
			if err != nil {
				return out, off, argError(spec, err)
			}
			if ok {
				v = l.anyValue(text)
			}
		default: // arrays: a count slot, then the elements padded to a slot
			if word == ordinalNull {
				break
			}
			size := uint64(word) * uint64(elemSize(spec.typ))
			if size > uint64(len(buf)-off) {
				return out, off, argError(spec, errf(ErrTruncated, "array of %d elements needs %d bytes at %d, event buffer has %d", word, size, off, len(buf)))
			}
			data := buf[off : off+int(size)]
			off += int(size+3) &^ 3
			if off > len(buf) {
				// Padding past the end of the part: the elements are whole.
				off = len(buf)
			}
			v = l.arrayValue(spec.typ, data, int(word), binary.LittleEndian)
		}
		out = append(out, v)
	}
	return out, off, nil
}

// arrayValue converts array elements; char[] and wchar[] become strings.
func (l *loader) arrayValue(t argType, data []byte, n int, order binary.ByteOrder) trace.Value {
	switch t {
	case argCharArray:
		return trace.String(latin1(data))
	case argWCharArray:
		units := make([]uint16, n)
		for i := range units {
			units[i] = order.Uint16(data[2*i:])
		}
		return trace.String(utf16String(units))
	}
	if n > maxArrayElems {
		l.warn.add(arrayTooLong, fmt.Sprintf("array argument of %d elements cut to %d", n, maxArrayElems))
		n = maxArrayElems
	}
	list := make([]trace.Value, n)
	for i := range list {
		switch t {
		case argInt8Array:
			list[i] = trace.Int(int64(int8(data[i])))
		case argUint8Array:
			list[i] = trace.Int(int64(data[i]))
		case argInt16Array:
			list[i] = trace.Int(int64(int16(order.Uint16(data[2*i:]))))
		case argUint16Array:
			list[i] = trace.Int(int64(order.Uint16(data[2*i:])))
		case argInt32Array:
			list[i] = trace.Int(int64(int32(order.Uint32(data[4*i:]))))
		case argUint32Array:
			list[i] = trace.Int(int64(order.Uint32(data[4*i:])))
		case argFloat32Array:
			// Floats are little-endian in both encodings (§2.4 of the notes).
			list[i] = trace.Float(float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))))
		}
	}
	return trace.Value{Kind: trace.KindList, List: list}
}

// anyValue parses the JSON text of an "any" argument; text that is not JSON
// is kept as a string, with a warning.
func (l *loader) anyValue(text string) trace.Value {
	if text == "" {
		return trace.Null()
	}
	v, err := parseJSONValue(text)
	if err != nil {
		l.warn.add("any-json", fmt.Sprintf("\"any\" argument is not JSON (%v); kept as text", err))
		return trace.String(text)
	}
	return v
}

// legacyReader reads the legacy binary encoding: packed arguments, integers
// big-endian (little-endian in the spec's layout), floats little-endian.
type legacyReader struct {
	buf   []byte
	order binary.ByteOrder
	le    bool
	tbl   *stringTable // only when a legacy event buffer sits in a CFF chunk
}

func (r *legacyReader) u16(off int) uint16 {
	if r.le {
		return binary.LittleEndian.Uint16(r.buf[off:])
	}
	return binary.BigEndian.Uint16(r.buf[off:])
}

func (r *legacyReader) u32(off int) uint32 {
	if r.le {
		return binary.LittleEndian.Uint32(r.buf[off:])
	}
	return binary.BigEndian.Uint32(r.buf[off:])
}

func (r *legacyReader) need(off, n int) error {
	if n > len(r.buf)-off {
		return errf(ErrTruncated, "need %d bytes at %d, have %d", n, off, len(r.buf)-off)
	}
	return nil
}

// asciiString reads a legacy ascii string: u16 character count (0 = null,
// 0xFFFF = u32 string-table ordinal follows), then one byte per character.
func (r *legacyReader) asciiString(off int) (trace.Value, int, error) {
	if err := r.need(off, 2); err != nil {
		return trace.Value{}, off, err
	}
	n := int(r.u16(off))
	off += 2
	switch n {
	case 0:
		return trace.Null(), off, nil
	case 0xFFFF:
		return r.tableString(off)
	}
	if err := r.need(off, n); err != nil {
		return trace.Value{}, off, err
	}
	return trace.String(latin1(r.buf[off : off+n])), off + n, nil
}

// utf8String reads a legacy utf8 string: u16 UTF-16 unit count (0 = null,
// no byte count follows; 0xFFFF = string-table ordinal), u16 byte count,
// then the CESU-8 bytes.
func (r *legacyReader) utf8String(off int) (trace.Value, int, error) {
	if err := r.need(off, 2); err != nil {
		return trace.Value{}, off, err
	}
	n := int(r.u16(off))
	off += 2
	switch n {
	case 0:
		return trace.Null(), off, nil
	case 0xFFFF:
		return r.tableString(off)
	}
	if err := r.need(off, 2); err != nil {
		return trace.Value{}, off, err
	}
	b := int(r.u16(off))
	off += 2
	if err := r.need(off, b); err != nil {
		return trace.Value{}, off, err
	}
	return trace.String(cesu8(r.buf[off : off+b])), off + b, nil
}

func (r *legacyReader) tableString(off int) (trace.Value, int, error) {
	if err := r.need(off, 4); err != nil {
		return trace.Value{}, off, err
	}
	v, err := r.tbl.value(r.u32(off))
	return v, off + 4, err
}

// legacyArgs decodes the packed arguments of one legacy event starting at
// off; it returns the values and the offset after them.
func (l *loader) legacyArgs(r *legacyReader, specs []argSpec, off int, out []trace.Value) ([]trace.Value, int, error) {
	for _, spec := range specs {
		var v trace.Value
		var err error
		switch spec.typ {
		case argBool, argInt8, argUint8, argChar:
			if err = r.need(off, 1); err == nil {
				c := r.buf[off]
				off++
				switch spec.typ {
				case argBool:
					v = trace.Bool(c != 0)
				case argInt8:
					v = trace.Int(int64(int8(c)))
				case argUint8:
					v = trace.Int(int64(c))
				default:
					v = trace.String(string(rune(c)))
				}
			}
		case argInt16, argUint16, argWChar:
			if err = r.need(off, 2); err == nil {
				u := r.u16(off)
				off += 2
				switch spec.typ {
				case argInt16:
					v = trace.Int(int64(int16(u)))
				case argUint16:
					v = trace.Int(int64(u))
				default:
					v = trace.String(utf16String([]uint16{u}))
				}
			}
		case argInt32, argUint32, argFlowID, argTime32, argFloat32:
			if err = r.need(off, 4); err == nil {
				u := r.u32(off)
				switch spec.typ {
				case argInt32:
					v = trace.Int(int64(int32(u)))
				case argUint32, argFlowID:
					v = trace.Int(int64(u))
				case argTime32:
					v = trace.Float(float64(u) / 1000)
				default:
					v = trace.Float(float64(math.Float32frombits(binary.LittleEndian.Uint32(r.buf[off:]))))
				}
				off += 4
			}
		case argASCII:
			v, off, err = r.asciiString(off)
		case argUTF8:
			v, off, err = r.utf8String(off)
		case argAny:
			v, off, err = r.utf8String(off)
			if err == nil && v.Kind == trace.KindString {
				v = l.anyValue(v.Str)
			}
		default: // arrays: u32 count, then the packed elements
			if err = r.need(off, 4); err != nil {
				break
			}
			n := r.u32(off)
			off += 4
			size := uint64(n) * uint64(elemSize(spec.typ))
			if size > uint64(len(r.buf)-off) {
				err = errf(ErrTruncated, "array of %d elements needs %d bytes at %d, have %d", n, size, off, len(r.buf)-off)
				break
			}
			v = l.arrayValue(spec.typ, r.buf[off:off+int(size)], int(n), r.order)
			off += int(size)
		}
		if err != nil {
			return out, off, argError(spec, err)
		}
		out = append(out, v)
	}
	return out, off, nil
}
