package wtf

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
)

// parseJSONValue decodes JSON text (an "any" argument, a header object)
// straight into a value: integers stay exact (int64), other numbers become
// floats, objects become sorted maps (the last of duplicate keys wins, as
// in JSON.parse). Lists and maps that would nest deeper than
// trace.MaxValueDepth are kept as their JSON text.
func parseJSONValue(text string) (trace.Value, error) {
	p := jsonParser{s: text}
	p.space()
	v, err := p.value(1)
	if err != nil {
		return trace.Value{}, err
	}
	p.space()
	if p.i != len(p.s) {
		return trace.Value{}, p.fail("trailing data after the JSON value")
	}
	return v, nil
}

// rawToValue decodes a JSON fragment of a JSON document; absent is null.
func rawToValue(raw json.RawMessage) (trace.Value, error) {
	if len(raw) == 0 {
		return trace.Null(), nil
	}
	return parseJSONValue(string(raw))
}

// jsonParser is a recursive-descent JSON parser; recursion is bounded by
// trace.MaxValueDepth (deeper containers are skipped iteratively).
type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) fail(msg string) error {
	return errf(ErrMalformed, "JSON at %d: %s", p.i, msg)
}

func (p *jsonParser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (trace.Value, error) {
	if p.i >= len(p.s) {
		return trace.Value{}, p.fail("unexpected end")
	}
	switch c := p.s[p.i]; {
	case c == '{' || c == '[':
		if depth >= trace.MaxValueDepth {
			return p.deepText()
		}
		if c == '{' {
			return p.object(depth)
		}
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return trace.String(s), err
	case c == 't':
		return trace.Bool(true), p.literal("true")
	case c == 'f':
		return trace.Bool(false), p.literal("false")
	case c == 'n':
		return trace.Null(), p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return trace.Value{}, p.fail("unexpected character " + strconv.QuoteRune(rune(p.s[p.i])))
}

func (p *jsonParser) literal(word string) error {
	if !strings.HasPrefix(p.s[p.i:], word) {
		return p.fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *jsonParser) object(depth int) (trace.Value, error) {
	p.i++ // {
	var attrs trace.Attrs
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return trace.MapValue(trace.Attrs{}), nil
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return trace.Value{}, p.fail("expected an object key")
		}
		key, err := p.str()
		if err != nil {
			return trace.Value{}, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return trace.Value{}, p.fail("expected ':'")
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return trace.Value{}, err
		}
		attrs = append(attrs, trace.Attr{Key: key, Value: v})
		p.space()
		if p.i >= len(p.s) {
			return trace.Value{}, p.fail("unterminated object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return trace.MapValue(attrs), nil
		default:
			return trace.Value{}, p.fail("expected ',' or '}'")
		}
	}
}

func (p *jsonParser) array(depth int) (trace.Value, error) {
	p.i++ // [
	list := []trace.Value{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return trace.Value{Kind: trace.KindList, List: list}, nil
	}
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return trace.Value{}, err
		}
		list = append(list, v)
		p.space()
		if p.i >= len(p.s) {
			return trace.Value{}, p.fail("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return trace.Value{Kind: trace.KindList, List: list}, nil
		default:
			return trace.Value{}, p.fail("expected ',' or ']'")
		}
	}
}

// deepText skips a container without recursion and returns its JSON text.
func (p *jsonParser) deepText() (trace.Value, error) {
	start := p.i
	nest := 0
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case '"':
			if _, err := p.str(); err != nil {
				return trace.Value{}, err
			}
			continue
		case '{', '[':
			nest++
		case '}', ']':
			nest--
			if nest == 0 {
				p.i++
				text := p.s[start:p.i]
				if !json.Valid([]byte(text)) {
					return trace.Value{}, p.fail("invalid nested JSON")
				}
				return trace.String(text), nil
			}
		}
		p.i++
	}
	return trace.Value{}, p.fail("unterminated container")
}

func (p *jsonParser) number() (trace.Value, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if n := digits(); n == 0 || (n > 1 && p.s[intStart] == '0') {
		return trace.Value{}, p.fail("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return trace.Value{}, p.fail("invalid number")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return trace.Value{}, p.fail("invalid number")
		}
	}
	return numberValue(p.s[start:p.i]), nil
}

// str reads a JSON string at p.i (which is '"').
func (p *jsonParser) str() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		}
		if c == '\\' {
			return p.escapedStr(start)
		}
		if c < 0x20 {
			return "", p.fail("control character in string")
		}
		p.i++
	}
	return "", p.fail("unterminated string")
}

func (p *jsonParser) escapedStr(start int) (string, error) {
	var b strings.Builder
	b.WriteString(p.s[start:p.i])
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			s := b.String()
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			b.WriteByte(c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			break
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A pair is two escapes; a lone surrogate becomes U+FFFD.
				if strings.HasPrefix(p.s[p.i:], `\u`) {
					save := p.i
					p.i += 2
					if r2, ok := p.hex4(); ok {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							b.WriteRune(d)
							continue
						}
					}
					p.i = save
				}
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	v, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}

// numberValue keeps integers exact and everything else as float.
func numberValue(s string) trace.Value {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return trace.Int(i)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return trace.String(s) // out of float range: keep the text
	}
	return trace.Float(f)
}
