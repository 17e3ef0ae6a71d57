package zorka

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
)

// CBOR major types (the top three bits of an item's first byte).
const (
	majorUint   = 0
	majorNegInt = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	majorMap    = 5
	majorTag    = 6
	majorSimple = 7
)

const (
	aiIndefinite = 31   // additional info of an indefinite length / break
	cborBreak    = 0xFF // ends an indefinite array or map (and a Zorka record)
	cborFalse    = 0xF4
	cborTrue     = 0xF5
	cborNull     = 0xF6
	cborUndef    = 0xF7
)

// maxStringLen bounds any one decoded string; it is what the chunk encoder
// accepts.
var maxStringLen = trace.DefaultLimits().MaxStringLen

// cborReader reads CBOR items from a body held in memory. Every method
// checks lengths against what is left before it slices or allocates, and
// reports problems as *DecodeError at the offset of the offending item.
type cborReader struct {
	b   []byte
	pos int
}

func (r *cborReader) left() int { return len(r.b) - r.pos }

func (r *cborReader) eof() bool { return r.pos >= len(r.b) }

// head reads an item's initial byte and argument. For ai 31 (indefinite
// length or break) arg is 0.
func (r *cborReader) head() (major, ai byte, arg uint64, err error) {
	off := r.pos
	if off >= len(r.b) {
		return 0, 0, 0, decodeErrorf(off, "unexpected end of data")
	}
	ib := r.b[off]
	major, ai = ib>>5, ib&0x1f
	switch {
	case ai < 24:
		r.pos++
		return major, ai, uint64(ai), nil
	case ai == 24, ai == 25, ai == 26, ai == 27:
		n := 1 << (ai - 24)
		if len(r.b)-off-1 < n {
			return 0, 0, 0, decodeErrorf(off, "truncated item head 0x%02x: needs %d more bytes, %d left", ib, n, len(r.b)-off-1)
		}
		p := r.b[off+1 : off+1+n]
		switch n {
		case 1:
			arg = uint64(p[0])
		case 2:
			arg = uint64(binary.BigEndian.Uint16(p))
		case 4:
			arg = uint64(binary.BigEndian.Uint32(p))
		default:
			arg = binary.BigEndian.Uint64(p)
		}
		r.pos += 1 + n
		return major, ai, arg, nil
	case ai == aiIndefinite:
		r.pos++
		return major, ai, 0, nil
	}
	return 0, 0, 0, decodeErrorf(off, "malformed item head 0x%02x (reserved additional info %d)", ib, ai)
}

// peek returns the next byte without consuming it; ok is false at the end.
func (r *cborReader) peek() (byte, bool) {
	if r.pos >= len(r.b) {
		return 0, false
	}
	return r.b[r.pos], true
}

// next consumes the next byte if it is b.
func (r *cborReader) next(b byte) bool {
	if r.pos < len(r.b) && r.b[r.pos] == b {
		r.pos++
		return true
	}
	return false
}

// uint reads an unsigned integer.
func (r *cborReader) uint(what string) (uint64, error) {
	off := r.pos
	major, ai, arg, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != majorUint || ai == aiIndefinite {
		return 0, decodeErrorf(off, "%s: expected an unsigned integer, found %s", what, describeByte(r.b[off]))
	}
	return arg, nil
}

// intBits reads a signed or unsigned integer and returns its 64-bit two's
// complement pattern (how Java longs such as span ids travel).
func (r *cborReader) intBits(what string) (uint64, error) {
	off := r.pos
	major, ai, arg, err := r.head()
	if err != nil {
		return 0, err
	}
	switch {
	case ai == aiIndefinite:
	case major == majorUint:
		return arg, nil
	case major == majorNegInt:
		if arg > math.MaxInt64 {
			return 0, decodeErrorf(off, "%s: negative integer -1-%d does not fit 64 bits", what, arg)
		}
		return ^arg, nil
	}
	return 0, decodeErrorf(off, "%s: expected an integer, found %s", what, describeByte(r.b[off]))
}

// int64 reads an integer that must fit a signed 64-bit value.
func (r *cborReader) int64(what string) (int64, error) {
	off := r.pos
	b, err := r.intBits(what)
	if err != nil {
		return 0, err
	}
	if r.b[off]>>5 == majorUint && b > math.MaxInt64 {
		return 0, decodeErrorf(off, "%s: %d does not fit a signed 64-bit integer", what, b)
	}
	return int64(b), nil
}

// arrayLen reads a definite array head whose elements need at least
// minElem bytes each, and checks the length against what is left.
func (r *cborReader) arrayLen(what string, minElem int) (int, error) {
	off := r.pos
	major, ai, arg, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != majorArray || ai == aiIndefinite {
		return 0, decodeErrorf(off, "%s: expected a definite-length array, found %s", what, describeByte(r.b[off]))
	}
	if arg > uint64(r.left()/minElem) {
		return 0, decodeErrorf(off, "%s: array of %d elements does not fit the %d bytes left", what, arg, r.left())
	}
	return int(arg), nil
}

// mapLen reads a definite map head (what, in errors) and returns its
// number of entries, unchecked against what is left.
func (r *cborReader) mapLen(what string) (uint64, error) {
	off := r.pos
	major, ai, n, err := r.head()
	if err != nil {
		return 0, err
	}
	if major != majorMap || ai == aiIndefinite {
		return 0, decodeErrorf(off, "%s must be a definite-length map, found %s", what, describeByte(r.b[off]))
	}
	return n, nil
}

// bytesOf reads n raw bytes of a string body that starts at off.
func (r *cborReader) bytesOf(off int, arg uint64, what string) ([]byte, error) {
	if arg > uint64(r.left()) {
		return nil, decodeErrorf(off, "%s: string of %d bytes runs past the end (%d bytes left)", what, arg, r.left())
	}
	if arg > uint64(maxStringLen) {
		return nil, decodeErrorf(off, "%s: string of %d bytes is longer than %d", what, arg, maxStringLen)
	}
	p := r.b[r.pos : r.pos+int(arg)]
	r.pos += int(arg)
	return p, nil
}

// text reads a definite-length text string; nullOK also accepts null as "".
func (r *cborReader) text(what string, nullOK bool) (string, error) {
	off := r.pos
	major, ai, arg, err := r.head()
	if err != nil {
		return "", err
	}
	if nullOK && r.b[off] == cborNull {
		return "", nil
	}
	if major != majorText {
		return "", decodeErrorf(off, "%s: expected a text string, found %s", what, describeByte(r.b[off]))
	}
	if ai == aiIndefinite {
		return "", decodeErrorf(off, "%s: indefinite-length strings are not supported", what)
	}
	p, err := r.bytesOf(off, arg, what)
	if err != nil {
		return "", err
	}
	return textString(p), nil
}

// textString converts agent text to a Go string. Agents write text in the
// JVM's default charset, which is not always UTF-8: bytes that are not valid
// UTF-8 are read as ISO-8859-1, so the result is always valid UTF-8 (what
// the store requires) and no byte is lost.
func textString(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	out := make([]rune, 0, len(p))
	for len(p) > 0 {
		c, n := utf8.DecodeRune(p)
		if c == utf8.RuneError && n <= 1 {
			c, n = rune(p[0]), 1
		}
		out = append(out, c)
		p = p[n:]
	}
	return string(out)
}

// bytesValue renders a byte string attribute value: as text when it is
// valid UTF-8, else as 0x-prefixed hex.
func bytesValue(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	return "0x" + hex.EncodeToString(p)
}

// bigIntText renders integers that do not fit int64 as decimal text.
func bigIntText(major byte, arg uint64) string {
	if major == majorUint {
		return strconv.FormatUint(arg, 10)
	}
	if arg == math.MaxUint64 {
		return "-18446744073709551616"
	}
	return "-" + strconv.FormatUint(arg+1, 10)
}

// describeByte names the item an initial byte starts, for error messages.
func describeByte(b byte) string {
	ai := b & 0x1f
	if ai == aiIndefinite && (b>>5 == majorUint || b>>5 == majorNegInt || b>>5 == majorTag) {
		// No item starts so: integers and tags have no indefinite form.
		return "an invalid byte 0x" + strconv.FormatUint(uint64(b), 16)
	}
	switch b >> 5 {
	case majorUint:
		return "an unsigned integer"
	case majorNegInt:
		return "a negative integer"
	case majorBytes:
		return "a byte string"
	case majorText:
		return "a text string"
	case majorArray:
		if ai == aiIndefinite {
			return "an indefinite array"
		}
		return "an array"
	case majorMap:
		if ai == aiIndefinite {
			return "an indefinite map"
		}
		return "a map"
	case majorTag:
		return "a tag"
	}
	switch b {
	case cborFalse, cborTrue:
		return "a boolean"
	case cborNull:
		return "null"
	case cborUndef:
		return "undefined"
	case 0xF9, 0xFA, 0xFB:
		return "a float"
	case cborBreak:
		return "a break"
	}
	return "a simple value 0x" + strconv.FormatUint(uint64(b), 16)
}
