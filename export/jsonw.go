package export

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
)

// JSON writing helpers for the Chrome format: append-style, so that one
// event is built in a reused buffer.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD; control characters and U+2028/U+2029 are escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	b = appendJSONStringBody(b, s)
	return append(b, '"')
}

// appendJSONStringBody appends s escaped for a JSON string, without quotes.
func appendJSONStringBody(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c >= 0x20 && c != 0x7f:
				b = append(b, c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028':
			b = append(b, `\u2028`...)
		case r == '\u2029':
			b = append(b, `\u2029`...)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// appendMicros appends ns as microseconds with at most three decimals,
// exactly (no float rounding).
func appendMicros(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = uint64(-(ns + 1)) + 1
	}
	b = strconv.AppendUint(b, u/1000, 10)
	frac := u % 1000
	if frac == 0 {
		return b
	}
	d := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for n > 0 && d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

// appendAttrsJSON appends attrs as the members of an object (without the
// braces), the first one prefixed by a comma when comma is set; a key
// equal to one of the reserved keys gets the suffix " (attribute)". It
// returns whether it appended a member (or comma was set).
func appendAttrsJSON(b []byte, attrs trace.Attrs, comma bool, reserved []string) ([]byte, bool, error) {
	var err error
	for i := range attrs {
		if comma {
			b = append(b, ',')
		}
		comma = true
		key := attrs[i].Key
		b = append(b, '"')
		b = appendJSONStringBody(b, key)
		for _, r := range reserved {
			if key == r {
				b = append(b, " (attribute)"...)
				break
			}
		}
		b = append(b, '"', ':')
		if b, err = trace.AppendValueJSON(b, &attrs[i].Value); err != nil {
			return b, comma, fmt.Errorf("attribute %q: %w", attrs[i].Key, err)
		}
	}
	return b, comma, nil
}

// appendExceptionJSON appends an exception and its cause chain (at most
// trace.MaxDepth causes) as nested objects.
func appendExceptionJSON(b []byte, x *trace.Exception) []byte {
	depth := 0
	for ; x != nil && depth <= trace.MaxDepth; x = x.Cause {
		if depth > 0 {
			b = append(b, `,"cause":`...)
		}
		depth++
		b = append(b, `{"class":`...)
		b = appendJSONString(b, x.Class)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, x.Message)
		b = append(b, `,"stack":[`...)
		for i, f := range x.Stack {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, frameText(f))
		}
		b = append(b, ']')
	}
	for ; depth > 0; depth-- {
		b = append(b, '}')
	}
	return b
}

// frameText renders a stack frame the way Java prints it.
func frameText(f trace.StackFrame) string {
	s := f.Method
	if f.Class != "" {
		s = f.Class + "." + f.Method
	}
	switch {
	case f.File != "" && f.Line > 0:
		return s + "(" + f.File + ":" + strconv.FormatInt(f.Line, 10) + ")"
	case f.File != "":
		return s + "(" + f.File + ")"
	}
	return s
}
