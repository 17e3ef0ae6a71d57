package trace

// This file owns the two kinds of limits: Limits, what a decoder (chunk
// payload or Trace JSON) builds from its input, and IngestLimits, the
// configured per-span limits every ingest path applies before storing.

import (
	"fmt"
	"strconv"
)

// Limits bound what a decoder (chunk payload or Trace JSON) builds from its
// input. A zero field means the DefaultLimits value.
type Limits struct {
	// MaxDepth bounds record nesting (the root record has depth 1), the
	// length of an exception's cause chain and, in Trace JSON, span nesting.
	MaxDepth int
	// MaxStrings bounds the entries of a chunk's string table.
	MaxStrings int
	// MaxSpans bounds the spans of one chunk, or of one Trace JSON document
	// (a span and its nested "spans").
	MaxSpans int
	// MaxRecords bounds the records decoded from one chunk, or from one
	// Trace JSON document.
	MaxRecords int
	// MaxStringLen bounds the length in bytes of any one string.
	MaxStringLen int
	// MaxLineBytes bounds one line of JSON lines (DecodeJSONLines).
	MaxLineBytes int
}

// DefaultLimits returns the limits used when a Limits field is zero. They
// are what EncodeChunk guarantees its output stays within.
func DefaultLimits() Limits {
	return Limits{
		MaxDepth:     MaxDepth,
		MaxStrings:   1 << 22,
		MaxSpans:     1 << 20,
		MaxRecords:   1 << 24,
		MaxStringLen: 16 << 20,
		MaxLineBytes: 64 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	orDefault(&l.MaxDepth, d.MaxDepth)
	orDefault(&l.MaxStrings, d.MaxStrings)
	orDefault(&l.MaxSpans, d.MaxSpans)
	orDefault(&l.MaxRecords, d.MaxRecords)
	orDefault(&l.MaxStringLen, d.MaxStringLen)
	orDefault(&l.MaxLineBytes, d.MaxLineBytes)
	return l
}

// IngestLimits are the documented per-span limits of the daemon's [limits]
// configuration section (max_attrs, max_string_size, max_records_per_span,
// max_depth). Every ingest path (Trace JSON lines, CBOR, OTLP over HTTP and
// gRPC, the Zorka agent protocol, ztsctl import) applies them to each span
// it decoded, before anything is stored, through CheckSpan or CheckSpans.
//
// They are deliberately not decoder limits (Limits): a store keeps whatever
// spans were accepted under the limits in force when they were written, and
// reading them back never applies today's IngestLimits.
type IngestLimits struct {
	// MaxAttrs bounds the attributes of one span or one record; elements
	// of list values and entries of map values count as attributes too.
	MaxAttrs int
	// MaxStringSize bounds the bytes of one string: span type, method,
	// attribute key or value, exception class, message or stack frame.
	MaxStringSize int
	// MaxRecordsPerSpan bounds the records of one span's tree.
	MaxRecordsPerSpan int
	// MaxDepth bounds record nesting (the root record has depth 1).
	MaxDepth int
}

// DefaultIngestLimits are the configuration defaults.
func DefaultIngestLimits() IngestLimits {
	return IngestLimits{MaxAttrs: 1024, MaxStringSize: 1 << 20, MaxRecordsPerSpan: 1000000, MaxDepth: 512}
}

// LimitError reports a span beyond one of the IngestLimits. Its message
// names the configuration key and both values, e.g.
// `record 2 "GET /": 70000 attributes exceeds max_attrs (1024)`.
type LimitError struct {
	Where string // the part of the span, e.g. `record 2 "GET /"`; "" for the span itself
	What  string // what was counted, e.g. "attributes"
	Limit string // the configuration key, e.g. "max_attrs"
	Value int64  // the count or size found
	Max   int64  // the limit
	// Size is true for a limit on bytes (max_string_size): the socket API
	// answers 413 for it, 400 for the other limits.
	Size bool
}

func (e *LimitError) Error() string {
	msg := fmt.Sprintf("%d %s exceeds %s (%d)", e.Value, e.What, e.Limit, e.Max)
	if e.Where != "" {
		return e.Where + ": " + msg
	}
	return msg
}

// withDefaults fills zero fields from DefaultIngestLimits.
func (l IngestLimits) withDefaults() IngestLimits {
	d := DefaultIngestLimits()
	orDefault(&l.MaxAttrs, d.MaxAttrs)
	orDefault(&l.MaxStringSize, d.MaxStringSize)
	orDefault(&l.MaxRecordsPerSpan, d.MaxRecordsPerSpan)
	orDefault(&l.MaxDepth, d.MaxDepth)
	return l
}

// orDefault sets *v to d when *v is zero or negative: the "zero field means
// the default" rule of both kinds of limits.
func orDefault(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

// CheckSpans checks every span; the error (a *LimitError, wrapped) names the
// first offending span by its 1-based position in spans.
func (l IngestLimits) CheckSpans(spans []*Span) error {
	l = l.withDefaults()
	for i, sp := range spans {
		if err := l.check(sp); err != nil {
			return fmt.Errorf("span %d: %w", i+1, err)
		}
	}
	return nil
}

// CheckSpan checks one span against l (zero fields mean the defaults). It
// returns a *LimitError for the first limit exceeded. Its cost is linear in
// the span's size, and it stops at the first violation.
func (l IngestLimits) CheckSpan(sp *Span) error {
	return l.withDefaults().check(sp)
}

func (l IngestLimits) check(sp *Span) error {
	if sp == nil {
		return nil
	}
	if err := l.checkString("", "type", sp.Type); err != nil {
		return err
	}
	if err := l.checkAttrs("", sp.Attrs); err != nil {
		return err
	}
	var err error
	var n int64
	sp.Root.Walk(func(r *Record, depth int) bool {
		n++
		if n > int64(l.MaxRecordsPerSpan) {
			err = &LimitError{What: "records", Limit: "max_records_per_span", Value: sp.Root.CountRecords(), Max: int64(l.MaxRecordsPerSpan)}
			return false
		}
		// checkRecord names no place: a failure is named "record n" here,
		// so that a record that passes costs no message.
		if err = l.checkRecord(r, depth); err != nil {
			if le, ok := err.(*LimitError); ok {
				le.Where = "record " + strconv.FormatInt(n, 10)
			}
			return false
		}
		return true
	})
	return err
}

// checkRecord checks one record of a span, at depth, against l; its
// error's Where is left empty for check to fill.
func (l IngestLimits) checkRecord(r *Record, depth int) error {
	const where = ""
	if depth > l.MaxDepth {
		return &LimitError{Where: where, What: "levels of nesting", Limit: "max_depth", Value: int64(depth), Max: int64(l.MaxDepth)}
	}
	if err := l.checkString(where, "method", r.Method); err != nil {
		return err
	}
	if err := l.checkAttrs(where, r.Attrs); err != nil {
		return err
	}
	for ex := r.Exception; ex != nil; ex = ex.Cause {
		for _, f := range [...]struct{ what, s string }{{"exception class", ex.Class}, {"exception message", ex.Message}} {
			if err := l.checkString(where, f.what, f.s); err != nil {
				return err
			}
		}
		for _, fr := range ex.Stack {
			for _, s := range [...]string{fr.Class, fr.Method, fr.File} {
				if err := l.checkString(where, "stack frame", s); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (l IngestLimits) checkString(where, what, s string) error {
	if len(s) <= l.MaxStringSize {
		return nil
	}
	return &LimitError{Where: where, What: "bytes in " + what, Limit: "max_string_size", Value: int64(len(s)),
		Max: int64(l.MaxStringSize), Size: true}
}

// checkAttrs counts attrs and their nested list elements and map entries
// against MaxAttrs, stopping as soon as the count passes it, and checks
// every key and string value against MaxStringSize.
func (l IngestLimits) checkAttrs(where string, attrs Attrs) error {
	n := int64(len(attrs))
	if n <= int64(l.MaxAttrs) {
		for _, a := range attrs {
			if err := l.checkString(where, "attribute key", a.Key); err != nil {
				return err
			}
			if err := l.checkValue(where, a.Value, a.Key, &n); err != nil {
				return err
			}
			if n > int64(l.MaxAttrs) {
				break
			}
		}
	}
	if n > int64(l.MaxAttrs) {
		return &LimitError{Where: where, What: "attributes", Limit: "max_attrs", Value: n, Max: int64(l.MaxAttrs)}
	}
	return nil
}

// checkValue checks the value v of attribute key (and its nested elements
// and entries, which it adds to *n) against MaxStringSize. A method, not a
// closure: checkAttrs runs for every record, and a recursive closure is
// allocated on each call.
func (l IngestLimits) checkValue(where string, v Value, key string, n *int64) error {
	switch v.Kind {
	case KindString:
		if len(v.Str) <= l.MaxStringSize { // the message is built only for an error
			return nil
		}
		return l.checkString(where, "attribute "+strconv.Quote(truncateKey(key))+" value", v.Str)
	case KindList:
		*n += int64(len(v.List))
		for _, e := range v.List {
			if err := l.checkValue(where, e, key, n); err != nil {
				return err
			}
		}
	case KindMap:
		*n += int64(len(v.Map))
		for _, e := range v.Map {
			if len(e.Key) > l.MaxStringSize {
				return l.checkString(where, "attribute "+strconv.Quote(truncateKey(key))+" map key", e.Key)
			}
			if err := l.checkValue(where, e.Value, key, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// truncateKey shortens a key quoted in an error message.
func truncateKey(k string) string {
	const max = 64
	if len(k) <= max {
		return k
	}
	return k[:max] + "…"
}
