package trace

// Trace JSON (DESIGN.md "Trace JSON"): the shape `get`, `search`, `put` and
// the socket API speak. Both directions are hand-written so that field order
// is fixed, ints and floats keep their kind, and nesting is bounded.
//
// Output rules (Marshal → Unmarshal → Marshal is byte-identical):
//   - span fields in this order: trace_id, span_id, parent_id, type,
//     start_ns, duration_ns, calls, errors, recs, error, source, chunk_num,
//     attrs, root, spans; span_id and parent_id are "" when zero.
//   - record fields: method, start_ns, duration_ns, calls, errors, open,
//     attrs, exception, children.
//   - exception fields: class, message, stack, cause; stack frames are
//     {"class","method","file","line"}.
//   - omitted when empty: chunk_num (0), attrs, root (nil), spans, open
//     (false), exception (nil), children, cause (nil). Everything else is
//     always written; "stack" is [] when empty.
//   - attribute objects are written in sorted key order; a float is written
//     with a '.' or exponent (1.0, not 1); an int is written as a plain
//     integer; NaN, +Inf and -Inf are written {"$float":"NaN"},
//     {"$float":"Infinity"} and {"$float":"-Infinity"}, and a map value
//     that would read back as such a wrapper is written inside
//     {"$map":{...}} (see jsonFloatKey; docs/format/trace-json.md).
//
// Input rules: unknown and repeated fields are rejected, ids must be hex,
// counts and times must be JSON integers that fit int64, null is accepted
// for the optional objects and arrays (attrs, root, spans, exception, cause,
// children, stack). A number without '.', 'e' or 'E' is an int value,
// otherwise a float. Attributes are sorted, the last of repeated keys wins.
// The two wrapper objects read back as the float and the map they wrap.
//
// The bounds and orders both directions check (depths, cause chain,
// attribute key order) and their error texts are walk.go's; this file keeps
// the JSON bytes.

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONError reports Trace JSON that cannot be decoded.
type JSONError struct {
	Line   int // 1-based line number for DecodeJSONLines; 0 for a single document
	Offset int // byte offset within the line or document
	Reason string
}

func (e *JSONError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("trace json line %d, offset %d: %s", e.Line, e.Offset, e.Reason)
	}
	return fmt.Sprintf("trace json at offset %d: %s", e.Offset, e.Reason)
}

// ---------------------------------------------------------------------------
// Output

// MarshalJSON returns the full Trace JSON of s: the span, its root record
// tree and its child spans ("spans").
func (s *Span) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return appendSpanJSON(make([]byte, 0, 256), s, true, 1)
}

// AppendSpanJSON appends the full Trace JSON of s (as MarshalJSON gives
// it) to b, so that a writer of many spans can reuse one buffer. On error
// it returns b with part of the span appended.
func AppendSpanJSON(b []byte, s *Span) ([]byte, error) {
	if s == nil {
		return append(b, "null"...), nil
	}
	return appendSpanJSON(b, s, true, 1)
}

// MarshalSummaryJSON returns the search-result form of s: the full form
// without "spans", and with "root" reduced to the root record's own fields
// (method, start_ns, duration_ns, calls, errors, open: no attrs, exception
// or children) so that a result can be named.
func MarshalSummaryJSON(s *Span) ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return appendSpanJSON(make([]byte, 0, 256), s, false, 1)
}

func appendSpanJSON(b []byte, s *Span, full bool, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return b, fmt.Errorf("trace json: span tree deeper than %d", MaxDepth)
	}
	b = append(b, `{"trace_id":"`...)
	b = appendHex(b, s.TraceID[:])
	b = append(b, `","span_id":"`...)
	b = appendSpanIDHex(b, s.SpanID)
	b = append(b, `","parent_id":"`...)
	b = appendSpanIDHex(b, s.ParentID)
	b = append(b, `","type":`...)
	b = appendJSONString(b, s.Type)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, s.StartNS, 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, s.DurationNS, 10)
	b = append(b, `,"calls":`...)
	b = strconv.AppendInt(b, s.Calls, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendInt(b, s.Errors, 10)
	b = append(b, `,"recs":`...)
	b = strconv.AppendInt(b, s.Recs, 10)
	b = append(b, `,"error":`...)
	b = strconv.AppendBool(b, s.Error)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, s.Source)
	if s.ChunkNum != 0 {
		b = append(b, `,"chunk_num":`...)
		b = strconv.AppendUint(b, uint64(s.ChunkNum), 10)
	}
	var err error
	if len(s.Attrs) > 0 {
		b = append(b, `,"attrs":`...)
		if b, err = appendAttrsJSON(b, s.Attrs, 1); err != nil {
			return b, fmt.Errorf("trace json: span attrs: %w", err)
		}
	}
	if s.Root != nil {
		root := s.Root
		if !full {
			root = &Record{Method: root.Method, StartNS: root.StartNS, DurationNS: root.DurationNS,
				Calls: root.Calls, Errors: root.Errors, Open: root.Open}
		}
		b = append(b, `,"root":`...)
		if b, err = appendRecordJSON(b, root, 1); err != nil {
			return b, err
		}
	}
	if full {
		if len(s.Children) > 0 {
			b = append(b, `,"spans":[`...)
			for i, c := range s.Children {
				if c == nil {
					return b, fmt.Errorf("trace json: child span %d is nil", i)
				}
				if i > 0 {
					b = append(b, ',')
				}
				if b, err = appendSpanJSON(b, c, true, depth+1); err != nil {
					return b, err
				}
			}
			b = append(b, ']')
		}
	}
	return append(b, '}'), nil
}

func appendRecordJSON(b []byte, r *Record, depth int) ([]byte, error) {
	if recordTooDeep(depth) {
		return b, fmt.Errorf("trace json: "+msgRecordTooDeep, MaxDepth)
	}
	b = append(b, `{"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, r.StartNS, 10)
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, r.DurationNS, 10)
	b = append(b, `,"calls":`...)
	b = strconv.AppendInt(b, r.Calls, 10)
	b = append(b, `,"errors":`...)
	b = strconv.AppendInt(b, r.Errors, 10)
	if r.Open {
		b = append(b, `,"open":true`...)
	}
	var err error
	if len(r.Attrs) > 0 {
		b = append(b, `,"attrs":`...)
		if b, err = appendAttrsJSON(b, r.Attrs, 1); err != nil {
			return b, fmt.Errorf("trace json: record %q attrs: %w", truncateForError(r.Method), err)
		}
	}
	if r.Exception != nil {
		b = append(b, `,"exception":`...)
		if b, err = appendExceptionJSON(b, r.Exception); err != nil {
			return b, err
		}
	}
	if len(r.Children) > 0 {
		b = append(b, `,"children":[`...)
		for i, c := range r.Children {
			if c == nil {
				return b, fmt.Errorf("trace json: record %q: child %d is nil", truncateForError(r.Method), i)
			}
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendRecordJSON(b, c, depth+1); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendExceptionJSON writes x and its cause chain iteratively: the causes
// nest as the last field of each object.
func appendExceptionJSON(b []byte, x *Exception) ([]byte, error) {
	n := 0
	for ; x != nil; x = x.Cause {
		if n++; causeChainTooLong(n, MaxDepth) {
			return b, fmt.Errorf("trace json: "+msgCauseChainTooLong, MaxDepth)
		}
		if n > 1 {
			b = append(b, `,"cause":`...)
		}
		b = append(b, `{"class":`...)
		b = appendJSONString(b, x.Class)
		b = append(b, `,"message":`...)
		b = appendJSONString(b, x.Message)
		b = append(b, `,"stack":[`...)
		for i := range x.Stack {
			f := &x.Stack[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"class":`...)
			b = appendJSONString(b, f.Class)
			b = append(b, `,"method":`...)
			b = appendJSONString(b, f.Method)
			b = append(b, `,"file":`...)
			b = appendJSONString(b, f.File)
			b = append(b, `,"line":`...)
			b = strconv.AppendInt(b, f.Line, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	for range n {
		b = append(b, '}')
	}
	return b, nil
}

// appendAttrsJSON writes a as an object in sorted key order; depth is the
// nesting depth of its values.
func appendAttrsJSON(b []byte, a Attrs, depth int) ([]byte, error) {
	a = sortedAttrs(a)
	b = append(b, '{')
	var err error
	for i := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, a[i].Key)
		b = append(b, ':')
		if b, err = appendValueJSON(b, &a[i].Value, depth); err != nil {
			return b, fmt.Errorf("key %q: %w", truncateForError(a[i].Key), err)
		}
	}
	return append(b, '}'), nil
}

// sortedAttrs returns a when it is sorted with unique keys, else a sorted,
// de-duplicated copy (so output is canonical even for unsorted input).
func sortedAttrs(a Attrs) Attrs {
	if firstUnsorted(a) < 0 {
		return a
	}
	c := append(Attrs(nil), a...)
	c.Sort()
	return c
}

func appendValueJSON(b []byte, v *Value, depth int) ([]byte, error) {
	if valueTooDeep(depth) {
		return b, fmt.Errorf(msgValueTooDeep, MaxValueDepth)
	}
	switch v.Kind {
	case KindNull:
		return append(b, "null"...), nil
	case KindString:
		return appendJSONString(b, v.Str), nil
	case KindInt:
		return strconv.AppendInt(b, v.Int, 10), nil
	case KindFloat:
		if name, ok := NonFiniteName(v.Float); ok {
			b = append(b, `{"`+jsonFloatKey+`":"`...)
			b = append(b, name...)
			return append(b, `"}`...), nil
		}
		return appendJSONFloat(b, v.Float), nil
	case KindBool:
		return strconv.AppendBool(b, v.Bool), nil
	case KindList:
		b = append(b, '[')
		var err error
		for i := range v.List {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValueJSON(b, &v.List[i], depth+1); err != nil {
				return b, fmt.Errorf("list element %d: %w", i, err)
			}
		}
		return append(b, ']'), nil
	case KindMap:
		if !mapNeedsWrapper(v.Map) {
			return appendAttrsJSON(b, v.Map, depth+1)
		}
		b = append(b, `{"`+jsonMapKey+`":`...)
		b, err := appendAttrsJSON(b, v.Map, depth+1)
		return append(b, '}'), err
	}
	return b, fmt.Errorf(msgUnknownKind, v.Kind)
}

// AppendValueJSON appends v as Trace JSON writes an attribute value
// (non-finite floats as {"$float":"NaN"}), for other JSON writers that
// carry attribute values (the exports).
func AppendValueJSON(b []byte, v *Value) ([]byte, error) { return appendValueJSON(b, v, 1) }

// The two wrapper objects of Trace JSON attribute values. An object whose
// first member is "$float" is a non-finite float: {"$float": "NaN"},
// {"$float": "Infinity"} or {"$float": "-Infinity"}; one whose first
// member is "$map" is the map written inside it, its members taken
// literally: {"$map": {"$float": 1.5}}. Both have exactly one member. The
// writer uses "$map" only for a map whose first key (in sorted order) is
// "$float" or "$map"; every other object is a plain map.
const (
	jsonFloatKey = "$float"
	jsonMapKey   = "$map"
)

// mapNeedsWrapper reports whether m, written as a plain object (keys in
// sorted order), would read back as a wrapper: its first key is one of
// the wrapper keys.
func mapNeedsWrapper(m Attrs) bool {
	m = sortedAttrs(m)
	return len(m) > 0 && (m[0].Key == jsonFloatKey || m[0].Key == jsonMapKey)
}

// appendJSONFloat writes a finite f like encoding/json does, plus ".0"
// when the result would read back as an integer.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // 1e-07 → 1e-7, as encoding/json
		if n := len(b); n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
		return b
	}
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

const hexDigits = "0123456789abcdef"

func appendHex(b []byte, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

func appendSpanIDHex(b []byte, id SpanID) []byte {
	if id == 0 {
		return b
	}
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(id>>uint(shift))&0xf])
	}
	return b
}

// AppendJSONString appends s as a JSON string, as Trace JSON writes every
// string (the query APIs write theirs with it too).
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// appendJSONString writes s as a JSON string. Invalid UTF-8 is written as
// U+FFFD; control characters, U+2028 and U+2029 are escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ---------------------------------------------------------------------------
// Input

// UnmarshalJSON decodes one Trace JSON object (full or summary form) with
// DefaultLimits. JSON null leaves s unchanged. It does not call Validate.
func (s *Span) UnmarshalJSON(data []byte) error {
	p := jsonParser{data: data, lim: DefaultLimits()}
	p.ws()
	if p.literal("null") {
		p.ws()
		if p.off == len(data) {
			return nil
		}
		return p.fail("data after null")
	}
	var out Span
	if err := p.document(&out); err != nil {
		return err
	}
	*s = out
	return nil
}

// jsonLineReaders pools DecodeJSONLines' 64 KiB line readers: a request of
// one small span must not allocate and zero one (it was 3.4% of the
// daemon's CPU, plus GC, under 1-span requests).
var jsonLineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// DecodeJSONLines reads JSON lines (NDJSON) of Trace JSON spans from r and
// calls fn for each, in order. Blank lines are skipped. A decode error is a
// *JSONError naming the line; an error from fn is returned unchanged and
// stops decoding. Limits apply per line (lim zero fields mean defaults).
func DecodeJSONLines(r io.Reader, lim Limits, fn func(*Span) error) error {
	lim = lim.withDefaults()
	br := jsonLineReaders.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil) // drop r; the spans decoded copied what they keep
		jsonLineReaders.Put(br)
	}()
	var long []byte
	p := jsonParser{lim: lim} // reused across lines: scratch and interned strings
	for line := 1; ; line++ {
		var text []byte
		eof := false
		long = long[:0]
		for {
			frag, err := br.ReadSlice('\n')
			if len(long)+len(frag) > lim.MaxLineBytes {
				return &JSONError{Line: line, Offset: lim.MaxLineBytes, Reason: fmt.Sprintf("line longer than %d bytes", lim.MaxLineBytes)}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				long = append(long, frag...)
				continue
			}
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return fmt.Errorf("trace json line %d: %w", line, err)
			}
			if len(long) > 0 {
				long = append(long, frag...)
				text = long
			} else {
				text = frag // still in br's buffer: decoded before the next read
			}
			break
		}
		p.data, p.off, p.spans, p.records = text, 0, 0, 0
		p.ws()
		if p.off < len(text) {
			s := &Span{}
			if err := p.document(s); err != nil {
				var je *JSONError
				if errors.As(err, &je) {
					je.Line = line
				}
				return err
			}
			if err := fn(s); err != nil {
				return err
			}
		}
		if eof {
			return nil
		}
	}
}

type jsonParser struct {
	data    []byte
	off     int
	lim     Limits
	spans   int
	records int
	buf     []byte    // scratch for strings with escapes
	kids    []*Record // stack of children being collected, so each
	// Children slice is allocated once at its final size
	attrStack []Attr // the same for the attributes of each object
	// Records, and Children slices of up to maxCarve elements, are carved
	// from shared arrays (codec.go's slab).
	recSlab slab[Record]
	kidSlab slab[*Record]
	strs    map[string]string // interned short strings (method names repeat)
}

// carve returns a copy of stack[base:], of exactly its length and
// capacity (nil when empty), from sl when it is short (fit as slab.take's;
// sl nil: always allocated on its own), and clears and drops stack[base:]
// (a nested object's collected elements are above its parent's on the
// same stack).
func carve[T any](sl *slab[T], stack *[]T, base, fit int) []T {
	st := *stack
	var out []T
	if n := len(st) - base; n > maxCarve || n > 0 && sl == nil {
		out = append(make([]T, 0, n), st[base:]...)
	} else if n > 0 {
		out = append(sl.take(n, fit), st[base:]...)
	}
	clear(st[base:])
	*stack = st[:base]
	return out
}

// left is the number of bytes left to parse: what bounds the records and
// child lists still to come, and so a slab's next array.
func (p *jsonParser) left() int { return len(p.data) - p.off }

func (p *jsonParser) newRecord() *Record {
	return &p.recSlab.take(1, p.left())[:1][0]
}

// maxInterned bounds the length of interned strings and the size of the
// intern map.
const maxInterned = 128

// intern returns b as a string, sharing one copy of short repeated strings.
func (p *jsonParser) intern(b []byte) string {
	if len(b) > maxInterned {
		return string(b)
	}
	if s, ok := p.strs[string(b)]; ok {
		return s
	}
	if p.strs == nil || len(p.strs) >= 4096 {
		p.strs = make(map[string]string, 64)
	}
	s := string(b)
	p.strs[s] = s
	return s
}

func (p *jsonParser) fail(format string, args ...any) error {
	return p.failAt(p.off, format, args...)
}

func (p *jsonParser) failAt(off int, format string, args ...any) error {
	return &JSONError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

func (p *jsonParser) ws() {
	for p.off < len(p.data) {
		switch p.data[p.off] {
		case ' ', '\t', '\n', '\r':
			p.off++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *jsonParser) peek() byte {
	p.ws()
	if p.off < len(p.data) {
		return p.data[p.off]
	}
	return 0
}

// literal consumes lit if the input continues with it.
func (p *jsonParser) literal(lit string) bool {
	if len(p.data)-p.off >= len(lit) && string(p.data[p.off:p.off+len(lit)]) == lit {
		p.off += len(lit)
		return true
	}
	return false
}

func (p *jsonParser) document(s *Span) error {
	if err := p.span(s, 1); err != nil {
		return err
	}
	p.ws()
	if p.off != len(p.data) {
		return p.fail("data after the span object")
	}
	return nil
}

// null consumes a JSON null if one comes next.
func (p *jsonParser) null() bool {
	p.ws()
	return p.literal("null")
}

func (p *jsonParser) expect(c byte, what string) error {
	if p.peek() != c {
		if p.off >= len(p.data) {
			return p.fail("unexpected end of input, want %s", what)
		}
		return p.fail("unexpected %q, want %s", p.data[p.off], what)
	}
	p.off++
	return nil
}

// member advances to the next member of an object whose '{' was consumed:
// it returns the key (valid until the next string is read), or ok=false at
// the closing '}'.
func (p *jsonParser) member(first bool) (key []byte, keyAt int, ok bool, err error) {
	c := p.peek()
	if c == '}' {
		p.off++
		return nil, 0, false, nil
	}
	if !first {
		if c != ',' {
			return nil, 0, false, p.expect(',', "',' or '}'")
		}
		p.off++
		p.ws()
	}
	keyAt = p.off
	if key, err = p.strBytes(); err != nil {
		return nil, 0, false, err
	}
	if err := p.expect(':', "':'"); err != nil {
		return nil, 0, false, err
	}
	p.ws()
	return key, keyAt, true, nil
}

// array reads an array (what names it in errors: "an array of spans"), or
// null as none, calling elem to read each element.
func (p *jsonParser) array(what string, elem func() error) error {
	if p.null() {
		return nil
	}
	if err := p.expect('[', what); err != nil {
		return err
	}
	return p.elements(elem)
}

// elements reads the elements of an array whose '[' was consumed, calling
// elem to read each, through the closing ']'.
func (p *jsonParser) elements(elem func() error) error {
	for first := true; ; first = false {
		more, err := p.element(first)
		if err != nil || !more {
			return err
		}
		if err := elem(); err != nil {
			return err
		}
	}
}

// element advances to the next element of an array whose '[' was consumed;
// ok=false at the closing ']'.
func (p *jsonParser) element(first bool) (bool, error) {
	c := p.peek()
	if c == ']' {
		p.off++
		return false, nil
	}
	if !first {
		if c != ',' {
			return false, p.expect(',', "',' or ']'")
		}
		p.off++
		p.ws()
	}
	return true, nil
}

// Field numbers, for duplicate detection.
const (
	jfTraceID = iota
	jfSpanID
	jfParentID
	jfType
	jfStart
	jfDuration
	jfCalls
	jfErrors
	jfRecs
	jfError
	jfSource
	jfChunkNum
	jfAttrs
	jfRoot
	jfSpans
	jfMethod
	jfOpen
	jfException
	jfChildren
	jfClass
	jfMessage
	jfStack
	jfCause
	jfFile
	jfLine
)

// The fields of each object, as masks of field numbers.
const (
	spanFields = 1<<jfTraceID |
		1<<jfSpanID | 1<<jfParentID | 1<<jfType | 1<<jfStart | 1<<jfDuration |
		1<<jfCalls | 1<<jfErrors | 1<<jfRecs | 1<<jfError | 1<<jfSource |
		1<<jfChunkNum | 1<<jfAttrs | 1<<jfRoot | 1<<jfSpans
	recordFields = 1<<jfMethod |
		1<<jfStart | 1<<jfDuration | 1<<jfCalls | 1<<jfErrors | 1<<jfOpen |
		1<<jfAttrs | 1<<jfException | 1<<jfChildren
	exceptionFields = 1<<jfClass |
		1<<jfMessage | 1<<jfStack | 1<<jfCause
	frameFields = 1<<jfClass |
		1<<jfMethod | 1<<jfFile | 1<<jfLine
)

// jsonField returns the field number of key in any Trace JSON object, or
// -1 when no object has that field.
func jsonField(key []byte) int {
	switch string(key) {
	case "trace_id":
		return jfTraceID
	case "span_id":
		return jfSpanID
	case "parent_id":
		return jfParentID
	case "type":
		return jfType
	case "start_ns":
		return jfStart
	case "duration_ns":
		return jfDuration
	case "calls":
		return jfCalls
	case "errors":
		return jfErrors
	case "recs":
		return jfRecs
	case "error":
		return jfError
	case "source":
		return jfSource
	case "chunk_num":
		return jfChunkNum
	case "attrs":
		return jfAttrs
	case "root":
		return jfRoot
	case "spans":
		return jfSpans
	case "method":
		return jfMethod
	case "open":
		return jfOpen
	case "exception":
		return jfException
	case "children":
		return jfChildren
	case "class":
		return jfClass
	case "message":
		return jfMessage
	case "stack":
		return jfStack
	case "cause":
		return jfCause
	case "file":
		return jfFile
	case "line":
		return jfLine
	}
	return -1
}

// nextField reads the next member key of an object whose '{' was consumed
// and returns its field number; ok is false at the closing '}'. fields
// are the object's fields, seen has the bits of those already read (a key
// read twice is an error), object names it in errors ("span").
func (p *jsonParser) nextField(first bool, seen *uint32, fields uint32, object string) (f int, ok bool, err error) {
	key, keyAt, ok, err := p.member(first)
	if err != nil || !ok {
		return -1, false, err
	}
	f = jsonField(key)
	if f < 0 || fields&(1<<f) == 0 {
		return -1, false, p.failAt(keyAt, "unknown %s field %q", object, key)
	}
	if *seen&(1<<f) != 0 {
		return -1, false, p.failAt(keyAt, "repeated field %q", key)
	}
	*seen |= 1 << f
	return f, true, nil
}

func (p *jsonParser) span(s *Span, depth int) error {
	if depth > p.lim.MaxDepth {
		return p.fail("spans nested deeper than %d", p.lim.MaxDepth)
	}
	if p.spans++; p.spans > p.lim.MaxSpans {
		return p.fail("more than %d spans", p.lim.MaxSpans)
	}
	if err := p.expect('{', "a span object"); err != nil {
		return err
	}
	var seen uint32
	for first := true; ; first = false {
		f, ok, err := p.nextField(first, &seen, spanFields, "span")
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		valAt := p.off
		switch f {
		case jfTraceID:
			// Parsed from the input's bytes: no string is made of them
			// but for the error ParseTraceID would give.
			var b []byte
			p.ws()
			if b, err = p.strBytes(); err == nil {
				var ok bool
				if s.TraceID, ok = traceIDFromHex(b); !ok {
					_, err = ParseTraceID(string(b))
					return p.failAt(valAt, "trace_id: %v", err)
				}
			}
		case jfSpanID, jfParentID:
			name := "span_id"
			if f == jfParentID {
				name = "parent_id"
			}
			var b []byte
			var id SpanID
			p.ws()
			if b, err = p.strBytes(); err == nil {
				var ok bool
				if id, ok = spanIDFromHex(b); !ok {
					_, err = ParseSpanID(string(b))
					return p.failAt(valAt, "%s: %v", name, err)
				}
			}
			if f == jfSpanID {
				s.SpanID = id
			} else {
				s.ParentID = id
			}
		case jfType:
			s.Type, err = p.internStr()
		case jfStart:
			s.StartNS, err = p.int("start_ns")
		case jfDuration:
			s.DurationNS, err = p.int("duration_ns")
		case jfCalls:
			s.Calls, err = p.int("calls")
		case jfErrors:
			s.Errors, err = p.int("errors")
		case jfRecs:
			s.Recs, err = p.int("recs")
		case jfError:
			s.Error, err = p.bool("error")
		case jfSource:
			s.Source, err = p.internStr()
		case jfChunkNum:
			var v int64
			if v, err = p.int("chunk_num"); err == nil && (v < 0 || v > math.MaxUint32) {
				return p.failAt(valAt, "chunk_num %d out of range", v)
			}
			s.ChunkNum = uint32(v)
		case jfAttrs:
			s.Attrs, err = p.attrs(1)
		case jfRoot:
			if !p.null() {
				s.Root, err = p.record(1)
			}
		case jfSpans:
			err = p.array("an array of spans", func() error {
				c := &Span{}
				if err := p.span(c, depth+1); err != nil {
					return err
				}
				s.Children = append(s.Children, c)
				return nil
			})
		}
		if err != nil {
			return err
		}
	}
}

func (p *jsonParser) record(depth int) (*Record, error) {
	if depth > p.lim.MaxDepth {
		return nil, p.fail("records nested deeper than %d", p.lim.MaxDepth)
	}
	if p.records++; p.records > p.lim.MaxRecords {
		return nil, p.fail("more than %d records", p.lim.MaxRecords)
	}
	if err := p.expect('{', "a record object"); err != nil {
		return nil, err
	}
	r := p.newRecord()
	var seen uint32
	for first := true; ; first = false {
		f, ok, err := p.nextField(first, &seen, recordFields, "record")
		if err != nil {
			return nil, err
		}
		if !ok {
			return r, nil
		}
		switch f {
		case jfMethod:
			r.Method, err = p.internStr()
		case jfStart:
			r.StartNS, err = p.int("start_ns")
		case jfDuration:
			r.DurationNS, err = p.int("duration_ns")
		case jfCalls:
			r.Calls, err = p.int("calls")
		case jfErrors:
			r.Errors, err = p.int("errors")
		case jfOpen:
			r.Open, err = p.bool("open")
		case jfAttrs:
			r.Attrs, err = p.attrs(1)
		case jfException:
			if !p.null() {
				r.Exception, err = p.exception(1)
			}
		case jfChildren:
			base := len(p.kids)
			err = p.array("an array of records", func() error {
				c, err := p.record(depth + 1)
				if err != nil {
					return err
				}
				p.kids = append(p.kids, c)
				return nil
			})
			if kids := carve(&p.kidSlab, &p.kids, base, p.left()); err == nil {
				r.Children = kids
			}
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *jsonParser) exception(depth int) (*Exception, error) {
	if causeChainTooLong(depth, p.lim.MaxDepth) {
		return nil, p.fail(msgCauseChainTooLong, p.lim.MaxDepth)
	}
	if err := p.expect('{', "an exception object"); err != nil {
		return nil, err
	}
	x := &Exception{}
	var seen uint32
	for first := true; ; first = false {
		f, ok, err := p.nextField(first, &seen, exceptionFields, "exception")
		if err != nil {
			return nil, err
		}
		if !ok {
			return x, nil
		}
		switch f {
		case jfClass:
			x.Class, err = p.internStr()
		case jfMessage:
			x.Message, err = p.str()
		case jfCause:
			if !p.null() {
				x.Cause, err = p.exception(depth + 1)
			}
		case jfStack:
			err = p.array("an array of stack frames", func() error {
				fr, err := p.frame()
				if err != nil {
					return err
				}
				x.Stack = append(x.Stack, fr)
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *jsonParser) frame() (StackFrame, error) {
	var fr StackFrame
	if err := p.expect('{', "a stack frame object"); err != nil {
		return fr, err
	}
	var seen uint32
	for first := true; ; first = false {
		f, ok, err := p.nextField(first, &seen, frameFields, "stack frame")
		if err != nil {
			return fr, err
		}
		if !ok {
			return fr, nil
		}
		switch f {
		case jfClass:
			fr.Class, err = p.internStr()
		case jfMethod:
			fr.Method, err = p.internStr()
		case jfFile:
			fr.File, err = p.internStr()
		case jfLine:
			fr.Line, err = p.int("line")
		}
		if err != nil {
			return fr, err
		}
	}
}

// attrs decodes an attribute object (or null); depth is its values' depth.
func (p *jsonParser) attrs(depth int) (Attrs, error) {
	if p.null() {
		return nil, nil
	}
	if err := p.expect('{', "an attributes object"); err != nil {
		return nil, err
	}
	// The pairs are collected on attrStack (a value's nested objects
	// above them), then copied out at their final size: one allocation,
	// not one per doubling. (Cut out of a slab, as child lists are, they
	// cost no less: see chunkDecoder.attrMap.)
	base := len(p.attrStack)
	for first := true; ; first = false {
		key, _, ok, err := p.member(first)
		if err == nil && ok {
			// key may be p.buf, which the value reuses: interned first.
			a := Attr{Key: p.intern(key)}
			if err = p.value(&a.Value, depth); err == nil {
				p.attrStack = append(p.attrStack, a)
				continue
			}
		}
		if err != nil {
			clear(p.attrStack[base:])
			p.attrStack = p.attrStack[:base]
			return nil, err
		}
		break
	}
	a := Attrs(carve(nil, &p.attrStack, base, 0))
	a.Sort()
	// Sort may drop repeated keys: no room is left past the end.
	return a[:len(a):len(a)], nil
}

func (p *jsonParser) value(v *Value, depth int) error {
	if valueTooDeep(depth) {
		return p.fail(msgValueTooDeep, MaxValueDepth)
	}
	switch c := p.peek(); {
	case c == '"':
		s, err := p.str()
		*v = Value{Kind: KindString, Str: s}
		return err
	case c == '-' || c >= '0' && c <= '9':
		return p.number(v)
	case c == 't' || c == 'f':
		b, err := p.bool("value")
		*v = Value{Kind: KindBool, Bool: b}
		return err
	case c == 'n':
		if !p.literal("null") {
			return p.fail("invalid literal")
		}
		*v = Value{}
		return nil
	case c == '[':
		p.off++
		var list []Value
		if err := p.elements(func() error {
			list = append(list, Value{})
			return p.value(&list[len(list)-1], depth+1)
		}); err != nil {
			return err
		}
		*v = Value{Kind: KindList, List: list}
		return nil
	case c == '{':
		return p.object(v, depth)
	case c == 0:
		return p.fail("unexpected end of input, want a value")
	}
	return p.fail("unexpected %q, want a value", p.data[p.off])
}

// object decodes an object attribute value: a map, or one of the wrappers
// {"$float": name} and {"$map": {...}} (see jsonFloatKey). An object whose
// first member is "$float" or "$map" is a wrapper and has no other member;
// the writer wraps any map whose first key is one of them.
func (p *jsonParser) object(v *Value, depth int) error {
	start := p.off
	p.off++ // '{'
	key, keyAt, ok, err := p.member(true)
	if err != nil {
		return err
	}
	switch {
	case ok && string(key) == jsonFloatKey:
		valAt := p.off
		name, err := p.strBytes()
		if err != nil {
			return err
		}
		f, isName := ParseNonFinite(string(name))
		if !isName {
			return p.failAt(valAt, `%q wants "NaN", "Infinity" or "-Infinity"`, jsonFloatKey)
		}
		*v = Float(f)
	case ok && string(key) == jsonMapKey:
		m, err := p.attrs(depth + 1)
		if err != nil {
			return err
		}
		*v = Value{Kind: KindMap, Map: m}
	default:
		p.off = start
		m, err := p.attrs(depth + 1)
		*v = Value{Kind: KindMap, Map: m}
		return err
	}
	if _, _, more, err := p.member(false); err != nil || more {
		if err == nil {
			err = p.failAt(keyAt, "a %q wrapper object has exactly one member", key)
		}
		return err
	}
	return nil
}

func (p *jsonParser) bool(what string) (bool, error) {
	p.ws()
	switch {
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	}
	return false, p.fail("%s: want true or false", what)
}

// scanNumber consumes a JSON number and reports whether it has a fraction
// or exponent.
func (p *jsonParser) scanNumber() (lit []byte, isFloat bool, err error) {
	d, i := p.data, p.off
	start := i
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		return nil, false, p.failAt(i, "invalid number")
	}
	if i < len(d) && d[i] == '.' {
		isFloat = true
		i++
		if !digits() {
			return nil, false, p.failAt(i, "invalid number: digits must follow '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		isFloat = true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false, p.failAt(i, "invalid number: digits must follow the exponent")
		}
	}
	p.off = i
	return d[start:i], isFloat, nil
}

func (p *jsonParser) number(v *Value) error {
	if n, ok := p.smallUint(); ok {
		*v = Value{Kind: KindInt, Int: n}
		return nil
	}
	at := p.off
	lit, isFloat, err := p.scanNumber()
	if err != nil {
		return err
	}
	if isFloat {
		f, err := strconv.ParseFloat(string(lit), 64)
		if err != nil {
			return p.failAt(at, "float %s out of range", lit)
		}
		*v = Value{Kind: KindFloat, Float: f}
		return nil
	}
	n, ok := parseInt64(lit)
	if !ok {
		return p.failAt(at, "integer %s overflows int64", lit)
	}
	*v = Value{Kind: KindInt, Int: n}
	return nil
}

func (p *jsonParser) int(what string) (int64, error) {
	p.ws()
	if n, ok := p.smallUint(); ok {
		return n, nil
	}
	at := p.off
	lit, isFloat, err := p.scanNumber()
	if err != nil {
		return 0, p.failAt(at, "%s: want an integer", what)
	}
	if isFloat {
		return 0, p.failAt(at, "%s: want an integer, got %s", what, lit)
	}
	n, ok := parseInt64(lit)
	if !ok {
		return 0, p.failAt(at, "%s: integer %s overflows int64", what, lit)
	}
	return n, nil
}

// smallUint reads, when that is what comes next, a non-negative integer
// of at most 18 digits, without fraction or exponent (every time, duration
// and count of a span, as written): it cannot overflow, and is read in one
// pass. Anything else (a sign, a leading zero before more digits, a
// fraction, an exponent, more digits) is left to the general path, which
// also reports what is wrong.
func (p *jsonParser) smallUint() (int64, bool) {
	d, i := p.data, p.off
	if i >= len(d) || d[i] < '0' || d[i] > '9' {
		return 0, false
	}
	var n int64
	j := i
	for j < len(d) && j-i < 18 && d[j] >= '0' && d[j] <= '9' {
		n = n*10 + int64(d[j]-'0')
		j++
	}
	if j < len(d) && (d[j] >= '0' && d[j] <= '9' || d[j] == '.' || d[j] == 'e' || d[j] == 'E') ||
		d[i] == '0' && j-i > 1 {
		return 0, false
	}
	p.off = j
	return n, true
}

// parseInt64 parses a syntactically valid JSON integer.
func parseInt64(lit []byte) (int64, bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	var u uint64
	for _, c := range lit {
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

func (p *jsonParser) internStr() (string, error) {
	p.ws()
	b, err := p.strBytes()
	if err != nil {
		return "", err
	}
	return p.intern(b), nil
}

func (p *jsonParser) str() (string, error) {
	p.ws()
	b, err := p.strBytes()
	return string(b), err
}

// strBytes reads a JSON string and returns its decoded bytes, which alias
// the input or the parser's scratch buffer.
func (p *jsonParser) strBytes() ([]byte, error) {
	d, i := p.data, p.off
	if i >= len(d) || d[i] != '"' {
		if i >= len(d) {
			return nil, p.fail("unexpected end of input, want a string")
		}
		return nil, p.fail("unexpected %q, want a string", d[i])
	}
	i++
	start := i
	ascii := true
	for i < len(d) {
		// Skip the bytes that need no attention (printable ASCII but
		// '"' and '\\'), most of a string, in a tight loop.
		for i < len(d) && jsonPlainByte[d[i]] {
			i++
		}
		if i == len(d) {
			break
		}
		c := d[i]
		switch {
		case c == '"':
			s := d[start:i]
			if !ascii && !utf8.Valid(s) {
				return nil, p.failAt(start-1, "string is not valid UTF-8")
			}
			if len(s) > p.lim.MaxStringLen {
				return nil, p.failAt(start-1, "string of %d bytes, longer than %d", len(s), p.lim.MaxStringLen)
			}
			p.off = i + 1
			return s, nil
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return nil, p.failAt(i, "control character 0x%02x in string", c)
		case c >= utf8.RuneSelf:
			ascii = false
		}
		i++
	}
	return nil, p.failAt(start-1, "unterminated string")
}

// traceIDFromHex parses a trace id as ParseTraceID does (32 or 16 hex
// digits), from bytes; ok is false exactly where ParseTraceID fails.
func traceIDFromHex(b []byte) (id TraceID, ok bool) {
	switch len(b) {
	case 32:
		_, err := hex.Decode(id[:], b)
		return id, err == nil
	case 16:
		_, err := hex.Decode(id[:8], b)
		return id, err == nil
	}
	return id, false
}

// spanIDFromHex parses a span id as ParseSpanID does (up to 16 hex
// digits, none for zero), from bytes; ok is false exactly where
// ParseSpanID fails.
func spanIDFromHex(b []byte) (SpanID, bool) {
	if len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | uint64(d)
	}
	return SpanID(v), true
}

// hexDigit returns the value of one hex digit (either case).
func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// jsonPlainByte marks the bytes a JSON string holds as they are and that
// strBytes has nothing to check for: printable ASCII other than '"' and
// '\\'.
var jsonPlainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strEscaped decodes a string with escapes; start is just after the quote.
func (p *jsonParser) strEscaped(start int) ([]byte, error) {
	d := p.data
	out := p.buf[:0]
	run := start // start of the pending unescaped run
	flush := func(end int) error {
		if !utf8.Valid(d[run:end]) {
			return p.failAt(start-1, "string is not valid UTF-8")
		}
		out = append(out, d[run:end]...)
		return nil
	}
	for i := start; i < len(d); {
		c := d[i]
		switch {
		case c == '"':
			if err := flush(i); err != nil {
				return nil, err
			}
			if len(out) > p.lim.MaxStringLen {
				return nil, p.failAt(start-1, "string of %d bytes, longer than %d", len(out), p.lim.MaxStringLen)
			}
			p.off = i + 1
			p.buf = out
			return out, nil
		case c < 0x20:
			return nil, p.failAt(i, "control character 0x%02x in string", c)
		case c != '\\':
			i++
			continue
		}
		if err := flush(i); err != nil {
			return nil, err
		}
		if i+1 >= len(d) {
			break
		}
		switch e := d[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(d[i+2:])
			if !ok {
				return nil, p.failAt(i, "invalid \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				dec := utf8.RuneError
				if i+1 < len(d) && d[i] == '\\' && d[i+1] == 'u' {
					if r2, ok := hex4(d[i+2:]); ok {
						if dec = utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							i += 6
						}
					}
				}
				r = dec
			}
			out = utf8.AppendRune(out, r)
			run = i
			continue
		default:
			return nil, p.failAt(i, "invalid escape \\%c", e)
		}
		i += 2
		run = i
	}
	return nil, p.failAt(start-1, "unterminated string")
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
