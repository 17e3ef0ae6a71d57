// Package trace owns ztsd's trace model: a span (one unit of work in a
// distributed trace) and the tree of method-call records it owns, plus the
// attribute values both carry.
//
// Every other package speaks in these values: the socket API and importers
// produce them, storedir stores them, queries return them. The model is
// deliberately format-neutral; each importer maps its source's concepts onto
// it (see DESIGN.md "Importers").
//
// Invariants:
//   - A Span's TraceID is never zero; its SpanID is never zero once stored
//     (storedir assigns one when a producer left it empty).
//   - Record times are relative to the owning span's StartNS; durations are
//     non-negative nanoseconds.
//   - Attrs are kept sorted by key with unique keys (use Attrs.Set / Sort), so
//     encoding is deterministic and equal spans encode to equal bytes.
//
// Files and what each owns:
//   - trace.go, value.go: the model types and their invariants (Validate);
//   - walk.go: the rules every walk over a span's tree applies, written
//     once: depth accounting and bounds (MaxDepth, MaxValueDepth), the
//     cause chain bound, attribute key order, and the error texts for
//     their violations;
//   - limits.go: decoder Limits and the configured IngestLimits;
//   - codec.go: the chunk payload (CBOR) encoder and decoder, ChunkView;
//   - json.go: the Trace JSON writer and reader;
//   - equal.go: Equal and Diff; assemble.go: building span trees.
//
// The encoders and decoders of both formats each keep their own walk (the
// kind switch is the format's byte writing or reading); what the walks check
// comes from walk.go, so a rule changes in one place.
package trace

import (
	"encoding/hex"
	"fmt"
	"strconv"
)

// TraceID is a 128-bit trace identifier.
type TraceID [16]byte

// IsZero reports whether id is all zeroes.
func (id TraceID) IsZero() bool { return id == TraceID{} }

// String returns the 32-digit lower-case hex form.
func (id TraceID) String() string { return hex.EncodeToString(id[:]) }

// ParseTraceID parses 32 hex digits (16 digits are accepted too and fill the
// low 64 bits with zeroes, as Zorka agents send them).
func ParseTraceID(s string) (TraceID, error) {
	var id TraceID
	switch len(s) {
	case 32:
		if _, err := hex.Decode(id[:], []byte(s)); err != nil {
			return id, fmt.Errorf("trace id %q: %w", s, err)
		}
	case 16:
		if _, err := hex.Decode(id[:8], []byte(s)); err != nil {
			return id, fmt.Errorf("trace id %q: %w", s, err)
		}
	default:
		return id, fmt.Errorf("trace id %q: want 32 hex digits, got %d characters", s, len(s))
	}
	return id, nil
}

// SpanID is a 64-bit span identifier; zero means "none".
type SpanID uint64

// String returns 16 hex digits, or "" for zero.
func (id SpanID) String() string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("%016x", uint64(id))
}

// ParseSpanID parses up to 16 hex digits; "" is zero.
func ParseSpanID(s string) (SpanID, error) {
	if s == "" {
		return 0, nil
	}
	if len(s) > 16 {
		return 0, fmt.Errorf("span id %q: more than 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("span id %q: not hex", s)
	}
	return SpanID(v), nil
}

// Source names the format a span was recorded in.
const (
	SourceZorka = "zorka"
	SourceWTF   = "wtf"
	SourceDial9 = "dial9"
	SourceATF   = "atf"
	SourceJSON  = "json"
	SourceOTLP  = "otlp"
)

// Span is one unit of work: a root method-call record plus the span-level
// summary used by the indexes.
type Span struct {
	TraceID    TraceID
	SpanID     SpanID
	ParentID   SpanID
	Type       string
	StartNS    int64 // nanoseconds since the Unix epoch
	DurationNS int64
	Calls      int64 // method calls seen by the tracer in this span
	Errors     int64 // records carrying an exception
	Recs       int64 // records in the tree
	Error      bool  // the span as a whole failed
	Source     string
	// ChunkNum orders the pieces of a span that was streamed in several
	// submissions (Zorka chunked traces); 0 for a whole span.
	ChunkNum uint32
	Attrs    Attrs
	Root     *Record
	// Children holds child spans when a span tree is assembled for reading;
	// it is never stored (each span is stored on its own).
	Children []*Span
}

// Record is one method call (or scope, or poll) and the calls it made.
type Record struct {
	Method     string
	StartNS    int64 // nanoseconds from the owning span's StartNS
	DurationNS int64
	Calls      int64
	Errors     int64
	Attrs      Attrs
	Exception  *Exception
	Children   []*Record
	// Open marks a record that had not ended when the chunk holding it was
	// written: a streamed span (Zorka chunked traces) continues it in the
	// next chunk, whose corresponding record is the first child at the same
	// position. AssembleChunks merges such pieces; a finished tree has no
	// open records unless the producer never closed them.
	Open bool
}

// Exception is an error raised in a record, with its cause chain.
type Exception struct {
	Class   string
	Message string
	Stack   []StackFrame
	Cause   *Exception
}

// StackFrame is one element of an exception's stack trace.
type StackFrame struct {
	Class  string
	Method string
	File   string
	Line   int64
}

// Walk calls fn for r and every descendant, depth first, with its depth
// (r itself has depth 1). It stops early when fn returns false.
func (r *Record) Walk(fn func(rec *Record, depth int) bool) {
	var walk func(rec *Record, depth int) bool
	walk = func(rec *Record, depth int) bool {
		if !fn(rec, depth) {
			return false
		}
		for _, c := range rec.Children {
			if !walk(c, depth+1) {
				return false
			}
		}
		return true
	}
	if r != nil {
		walk(r, 1)
	}
}

// CountRecords returns the number of records in the tree rooted at r.
func (r *Record) CountRecords() int64 {
	var n int64
	r.Walk(func(*Record, int) bool { n++; return true })
	return n
}

// FillSummary sets Recs, and Errors when it is zero, from the record tree.
// Importers call it after building a tree; the socket API calls it for
// Trace JSON that left those counts out.
func (s *Span) FillSummary() {
	if s.Root == nil {
		return
	}
	var recs, errs int64
	s.Root.Walk(func(r *Record, _ int) bool {
		recs++
		if r.Exception != nil {
			errs++
		}
		return true
	})
	s.Recs = recs
	if s.Errors == 0 {
		s.Errors = errs
	}
	if s.Calls == 0 {
		s.Calls = s.Root.Calls
	}
}

// Validate checks the invariants a span must hold before it is stored.
func (s *Span) Validate() error {
	if s.TraceID.IsZero() {
		return fmt.Errorf("span: trace id is zero")
	}
	if s.DurationNS < 0 {
		return fmt.Errorf("span %s/%s: negative duration %d", s.TraceID, s.SpanID, s.DurationNS)
	}
	if err := s.Attrs.validate(); err != nil {
		return fmt.Errorf("span %s/%s: %w", s.TraceID, s.SpanID, err)
	}
	var err error
	s.Root.Walk(func(r *Record, depth int) bool {
		if recordTooDeep(depth) {
			err = fmt.Errorf(msgRecordTooDeep, MaxDepth)
			return false
		}
		if r.DurationNS < 0 {
			err = fmt.Errorf("record %q: negative duration %d", r.Method, r.DurationNS)
			return false
		}
		if e := r.Attrs.validate(); e != nil {
			err = fmt.Errorf("record %q: %w", r.Method, e)
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("span %s/%s: %w", s.TraceID, s.SpanID, err)
	}
	return nil
}
