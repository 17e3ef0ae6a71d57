package wtf

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
)

// latin1 decodes WTF's legacy "ascii" strings: one byte per character (the
// writer kept the low 8 bits of each UTF-16 unit).
func latin1(b []byte) string {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			var sb strings.Builder
			sb.Grow(len(b) + len(b)/2)
			for _, c := range b {
				sb.WriteRune(rune(c))
			}
			return sb.String()
		}
	}
	return string(b)
}

// cesu8 decodes WTF's "utf8" strings. The legacy writer encoded each UTF-16
// unit on its own, so characters outside the BMP arrive as two 3-byte
// surrogate sequences; those are recombined. Bytes that are neither UTF-8
// nor CESU-8 become U+FFFD.
func cesu8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); {
		if hi, ok := surrogateAt(b, i); ok {
			if lo, ok := surrogateAt(b, i+3); ok && utf16.IsSurrogate(hi) && hi < 0xDC00 && lo >= 0xDC00 {
				sb.WriteRune(utf16.DecodeRune(hi, lo))
				i += 6
				continue
			}
			sb.WriteRune(utf8.RuneError)
			i += 3
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		sb.WriteRune(r)
		i += n
	}
	return sb.String()
}

// surrogateAt decodes a 3-byte encoded UTF-16 surrogate (ED A0..BF xx) at i.
func surrogateAt(b []byte, i int) (rune, bool) {
	if i+3 > len(b) || b[i] != 0xED || b[i+1]&0xE0 != 0xA0 || b[i+2]&0xC0 != 0x80 {
		return 0, false
	}
	return 0xD000 | rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F), true
}

// utf16String decodes UTF-16 code units; lone surrogates become U+FFFD.
func utf16String(units []uint16) string {
	return string(utf16.Decode(units))
}

// Special string-table ordinals.
const (
	ordinalNull  = 0xFFFFFFFF
	ordinalEmpty = 0xFFFFFFFE
)

// stringTable is the string table of one CFF event-data chunk.
type stringTable struct {
	entries []string
}

// newStringTable splits a binary string-table part: UTF-8 strings each
// followed by a NUL. Entries share the memory of one string conversion.
func newStringTable(body []byte) *stringTable {
	s := string(body)
	if !utf8.ValidString(s) {
		s = cesu8(body)
	}
	s = strings.TrimSuffix(s, "\x00")
	if s == "" && len(body) == 0 {
		return &stringTable{}
	}
	return &stringTable{entries: strings.Split(s, "\x00")}
}

// value resolves an ordinal: null and empty specials, or an entry.
func (t *stringTable) value(ord uint32) (trace.Value, error) {
	switch ord {
	case ordinalNull:
		return trace.Null(), nil
	case ordinalEmpty:
		return trace.String(""), nil
	}
	if t == nil || uint64(ord) >= uint64(len(t.entries)) {
		n := 0
		if t != nil {
			n = len(t.entries)
		}
		return trace.Value{}, errf(ErrStringRange, "ordinal %d, table has %d strings", ord, n)
	}
	return trace.String(t.entries[ord]), nil
}

// text resolves an ordinal to its text; ok is false for null.
func (t *stringTable) text(ord uint32) (s string, ok bool, err error) {
	v, err := t.value(ord)
	if err != nil || v.Kind == trace.KindNull {
		return "", false, err
	}
	return v.Str, true, nil
}
