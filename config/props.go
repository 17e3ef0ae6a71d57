package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxPropsSize bounds the size of a properties text that ParseProps accepts.
// A store's config.props is a few hundred bytes; anything near this limit is
// not one.
const MaxPropsSize = 1 << 20

// ErrPropsTooLarge is returned (wrapped) by ParseProps when the input exceeds
// MaxPropsSize.
var ErrPropsTooLarge = errors.New("properties text exceeds the size limit")

// PropsSyntaxError is a malformed properties text. Line and Column are 1-based
// (Column counts bytes); Offset is the byte offset in the input.
type PropsSyntaxError struct {
	Line, Column, Offset int
	Msg                  string
}

func (e *PropsSyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d (offset %d): %s", e.Line, e.Column, e.Offset, e.Msg)
}

// Props is an ordered set of string properties: the content of a Java
// properties file. Keys keep the order in which they were first set (or first
// appeared in the parsed text); setting an existing key replaces its value in
// place. The zero value is an empty Props ready to use. A Props is not safe for
// concurrent mutation.
type Props struct {
	entries []propEntry
	index   map[string]int // key → position in entries
}

type propEntry struct {
	key, value string
	line       int // line of the key in the parsed text; 0 when set by Set
}

// NewProps returns an empty Props.
func NewProps() *Props { return &Props{} }

// Len returns the number of keys.
func (p *Props) Len() int { return len(p.entries) }

// Get returns the value of key and whether it is present.
func (p *Props) Get(key string) (string, bool) {
	i, ok := p.index[key]
	if !ok {
		return "", false
	}
	return p.entries[i].value, true
}

// Set sets key to value, keeping the key's position if it is already present.
func (p *Props) Set(key, value string) { p.set(key, value, 0) }

func (p *Props) set(key, value string, line int) {
	if i, ok := p.index[key]; ok {
		p.entries[i].value = value
		p.entries[i].line = line
		return
	}
	if p.index == nil {
		p.index = make(map[string]int)
	}
	p.index[key] = len(p.entries)
	p.entries = append(p.entries, propEntry{key: key, value: value, line: line})
}

// Delete removes key and reports whether it was present.
func (p *Props) Delete(key string) bool {
	i, ok := p.index[key]
	if !ok {
		return false
	}
	p.entries = append(p.entries[:i], p.entries[i+1:]...)
	delete(p.index, key)
	for j := i; j < len(p.entries); j++ {
		p.index[p.entries[j].key] = j
	}
	return true
}

// Keys returns the keys in order.
func (p *Props) Keys() []string {
	keys := make([]string, len(p.entries))
	for i, e := range p.entries {
		keys[i] = e.key
	}
	return keys
}

// Line returns the line on which key was (last) defined in the text it was
// parsed from, or 0 if the key is absent or was set with Set.
func (p *Props) Line(key string) int {
	if i, ok := p.index[key]; ok {
		return p.entries[i].line
	}
	return 0
}

// MarshalText renders p as properties text: one "key=value" line per key, in
// order, escaped as java.util.Properties.store does (so the text is pure
// ASCII: other characters become \uXXXX escapes). ParseProps of the result
// yields the same keys, values and order. It fails only if a key or value is
// not valid UTF-8.
func (p *Props) MarshalText() ([]byte, error) {
	var buf bytes.Buffer
	for _, e := range p.entries {
		if !utf8.ValidString(e.key) {
			return nil, fmt.Errorf("property key %q is not valid UTF-8", e.key)
		}
		if !utf8.ValidString(e.value) {
			return nil, fmt.Errorf("property %q: value is not valid UTF-8", e.key)
		}
		appendEscaped(&buf, e.key, true)
		buf.WriteByte('=')
		appendEscaped(&buf, e.value, false)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// WriteTo writes p's MarshalText form to w.
func (p *Props) WriteTo(w io.Writer) (int64, error) {
	text, err := p.MarshalText()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(text)
	return int64(n), err
}

// appendEscaped escapes s like java.util.Properties.saveConvert with
// escUnicode: in a key every space is escaped, in a value only a leading one.
func appendEscaped(buf *bytes.Buffer, s string, isKey bool) {
	const hexDigits = "0123456789ABCDEF"
	for i, r := range s {
		switch r {
		case ' ':
			if i == 0 || isKey {
				buf.WriteByte('\\')
			}
			buf.WriteByte(' ')
		case '\t':
			buf.WriteString(`\t`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\f':
			buf.WriteString(`\f`)
		case '=', ':', '#', '!', '\\':
			buf.WriteByte('\\')
			buf.WriteByte(byte(r))
		default:
			if r >= 0x20 && r <= 0x7e {
				buf.WriteByte(byte(r))
				continue
			}
			units := []rune{r}
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				units = []rune{hi, lo}
			}
			for _, u := range units {
				buf.WriteString(`\u`)
				buf.WriteByte(hexDigits[u>>12&0xf])
				buf.WriteByte(hexDigits[u>>8&0xf])
				buf.WriteByte(hexDigits[u>>4&0xf])
				buf.WriteByte(hexDigits[u&0xf])
			}
		}
	}
}

// ParseProps reads java.util.Properties text from r. The text must be UTF-8
// (a file written by MarshalText is ASCII, so it is also valid ISO 8859-1, the
// encoding Java's Properties.load(InputStream) assumes). Syntax:
//
//   - natural lines end with "\n", "\r" or "\r\n"; a line whose first
//     non-blank character is '#' or '!' is a comment; blank lines are ignored;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading blanks (space, tab, form feed) are skipped;
//   - the key runs to the first unescaped '=', ':' or blank; blanks and at most
//     one '=' or ':' separate it from the value, which runs to the end of the
//     logical line (trailing blanks included);
//   - escapes: \t \n \r \f, \uXXXX (UTF-16 code units; surrogate pairs are
//     combined, a lone surrogate is an error), and backslash before any other
//     character stands for that character.
//
// A key that appears twice keeps its first position and takes the last value,
// as Properties.load does. Errors are *PropsSyntaxError (line, column, offset)
// or wrap ErrPropsTooLarge.
func ParseProps(r io.Reader) (*Props, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPropsSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading properties: %w", err)
	}
	if len(data) > MaxPropsSize {
		return nil, fmt.Errorf("%w (%d bytes)", ErrPropsTooLarge, MaxPropsSize)
	}
	return parseProps(data)
}

// propsSegment maps a stretch of a logical line back to the input.
type propsSegment struct {
	start  int // position in the logical line
	offset int // byte offset in the input
	line   int // 1-based line number
	column int // 1-based column of offset
}

// logicalLine is one entry's text with its continuations joined.
type logicalLine struct {
	text     []byte
	segments []propsSegment
}

func (l *logicalLine) errorAt(pos int, format string, args ...any) *PropsSyntaxError {
	seg := l.segments[0]
	for _, s := range l.segments {
		if s.start <= pos {
			seg = s
		}
	}
	d := pos - seg.start
	return &PropsSyntaxError{Line: seg.line, Column: seg.column + d, Offset: seg.offset + d, Msg: fmt.Sprintf(format, args...)}
}

func isPropsBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func parseProps(data []byte) (*Props, error) {
	p := &Props{}
	var (
		pos     int // start of the next natural line
		lineNo  int
		logical logicalLine
	)
	// nextLine returns the next natural line (without its terminator) and its
	// start offset.
	nextLine := func() (line []byte, start int, ok bool) {
		if pos >= len(data) {
			return nil, 0, false
		}
		start = pos
		end := start
		for end < len(data) && data[end] != '\n' && data[end] != '\r' {
			end++
		}
		pos = end
		if pos < len(data) {
			if data[pos] == '\r' && pos+1 < len(data) && data[pos+1] == '\n' {
				pos++
			}
			pos++
		}
		lineNo++
		return data[start:end], start, true
	}
	for {
		line, start, ok := nextLine()
		if !ok {
			break
		}
		skip := 0
		for skip < len(line) && isPropsBlank(line[skip]) {
			skip++
		}
		if skip == len(line) || line[skip] == '#' || line[skip] == '!' {
			continue
		}
		logical.text = append(logical.text[:0], line[skip:]...)
		logical.segments = append(logical.segments[:0], propsSegment{start: 0, offset: start + skip, line: lineNo, column: skip + 1})
		for endsInContinuation(logical.text) {
			logical.text = logical.text[:len(logical.text)-1]
			next, nstart, ok := nextLine()
			if !ok {
				break
			}
			nskip := 0
			for nskip < len(next) && isPropsBlank(next[nskip]) {
				nskip++
			}
			logical.segments = append(logical.segments, propsSegment{start: len(logical.text), offset: nstart + nskip, line: lineNo, column: nskip + 1})
			logical.text = append(logical.text, next[nskip:]...)
		}
		if err := parseEntry(p, &logical); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// endsInContinuation reports whether b ends in an odd number of backslashes.
func endsInContinuation(b []byte) bool {
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func parseEntry(p *Props, l *logicalLine) error {
	text := l.text
	if !utf8.Valid(text) {
		for i := 0; i < len(text); {
			r, size := utf8.DecodeRune(text[i:])
			if r == utf8.RuneError && size == 1 {
				return l.errorAt(i, "invalid UTF-8 byte 0x%02x", text[i])
			}
			i += size
		}
	}
	keyEnd, valueStart := len(text), len(text)
	hasSep, escaped := false, false
	for i, c := range text {
		if !escaped && (c == '=' || c == ':') {
			keyEnd, valueStart, hasSep = i, i+1, true
			break
		}
		if !escaped && isPropsBlank(c) {
			keyEnd, valueStart = i, i+1
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(text) {
		c := text[valueStart]
		if !isPropsBlank(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	key, err := unescapeProps(l, 0, keyEnd)
	if err != nil {
		return err
	}
	value, err := unescapeProps(l, valueStart, len(text))
	if err != nil {
		return err
	}
	p.set(key, value, l.segments[0].line)
	return nil
}

// unescapeProps decodes the escapes in l.text[from:to].
func unescapeProps(l *logicalLine, from, to int) (string, error) {
	text := l.text[from:to]
	if bytes.IndexByte(text, '\\') < 0 {
		return string(text), nil
	}
	var b strings.Builder
	b.Grow(len(text))
	for i := 0; i < len(text); {
		c := text[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(text) {
			// A lone backslash at the very end: the continuation logic has
			// already consumed it unless the text ended; Java drops it.
			break
		}
		c = text[i+1]
		switch c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			u, err := hex4(l, from+i, text[i+2:])
			if err != nil {
				return "", err
			}
			i += 6
			if !utf16.IsSurrogate(rune(u)) {
				b.WriteRune(rune(u))
				continue
			}
			if u >= 0xdc00 {
				return "", l.errorAt(from+i-6, `unpaired low surrogate \u%04X`, u)
			}
			if i+1 >= len(text) || text[i] != '\\' || text[i+1] != 'u' {
				return "", l.errorAt(from+i-6, `high surrogate \u%04X is not followed by a \u low surrogate`, u)
			}
			lo, err := hex4(l, from+i, text[i+2:])
			if err != nil {
				return "", err
			}
			if lo < 0xdc00 || lo > 0xdfff {
				return "", l.errorAt(from+i, `high surrogate \u%04X is followed by \u%04X, not a low surrogate`, u, lo)
			}
			b.WriteRune(utf16.DecodeRune(rune(u), rune(lo)))
			i += 6
			continue
		default:
			// Backslash before any other character stands for the
			// character; copy a multi-byte rune whole.
			_, size := utf8.DecodeRune(text[i+1:])
			b.Write(text[i+1 : i+1+size])
			i += 1 + size
			continue
		}
		i += 2
	}
	return b.String(), nil
}

// hex4 decodes the four hex digits of a \u escape starting at escapePos.
func hex4(l *logicalLine, escapePos int, digits []byte) (uint16, error) {
	if len(digits) < 4 {
		return 0, l.errorAt(escapePos, `malformed \uXXXX escape: want 4 hex digits, have %d characters`, len(digits))
	}
	var u uint16
	for k := 0; k < 4; k++ {
		c := digits[k]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, l.errorAt(escapePos+2+k, `malformed \uXXXX escape: %q is not a hex digit`, rune(c))
		}
		u = u<<4 | uint16(v)
	}
	return u, nil
}

// ReadPropsFile reads and parses the properties file at path.
func ReadPropsFile(path string) (*Props, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ParseProps(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// PropsFileMode is the permission WritePropsFileAtomic gives the file.
const PropsFileMode os.FileMode = 0o644

// WritePropsFileAtomic replaces the file at path with p's MarshalText form,
// atomically and durably: it writes a temporary file in the same directory,
// fsyncs it, renames it over path and fsyncs the directory. Whatever happens
// (error or crash), path holds either its old content or the new one. A crash
// can leave the temporary file behind; RemoveStaleTemps deletes it.
func WritePropsFileAtomic(path string, p *Props) error {
	text, err := p.MarshalText()
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return writeFileAtomic(path, text, PropsFileMode, nil)
}
