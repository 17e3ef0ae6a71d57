package wtf

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Decoders wrap them in a *DecodeError that says where the
// problem is; callers branch with errors.Is.
var (
	// ErrNotWTF: the bytes are not any WTF encoding.
	ErrNotWTF = errors.New("not a WTF trace")
	// ErrUnsupported: a WTF variant this importer does not read (pre-release
	// big-endian CFF, format versions other than 3/10, JSON v1).
	ErrUnsupported = errors.New("unsupported WTF variant")
	// ErrTruncated: the input ends inside a header, chunk or event.
	ErrTruncated = errors.New("truncated")
	// ErrUnknownEvent: an event uses a wire id (or JSON event id/name) that
	// no wtf.event#define record defined before it.
	ErrUnknownEvent = errors.New("undefined event type")
	// ErrBadSignature: a define record's name or argument list is invalid.
	ErrBadSignature = errors.New("invalid event signature")
	// ErrStringRange: a string-table ordinal is outside the chunk's table.
	ErrStringRange = errors.New("string ordinal out of range")
	// ErrMalformed: a structural field is inconsistent (lengths, offsets,
	// JSON shape).
	ErrMalformed = errors.New("malformed")
	// ErrLimit: the input exceeds a limit of this importer (nesting depth).
	ErrLimit = errors.New("limit exceeded")
)

// DecodeError locates a decode failure. Encoding names the encoding
// (legacy-binary, cff-binary, cff-json, legacy-json). Chunk is the chunk's
// ordinal in the file (-1 when the encoding has no chunks), ChunkID the id
// the chunk header gives it and Part the part's index in the chunk (-1:
// none). Offset is the byte offset of the failing event (or header) in the
// file, or, when InPart is set, in the decoded body of the event buffer part
// (CFF JSON); -1 when unknown. Entry is the entry index of a legacy JSON
// event list (-1 otherwise). Err wraps one of the sentinel errors.
type DecodeError struct {
	Encoding string
	Chunk    int
	ChunkID  uint32
	Part     int
	InPart   bool
	Offset   int64
	Entry    int
	Err      error
}

func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString("wtf ")
	b.WriteString(e.Encoding)
	if e.Chunk >= 0 {
		fmt.Fprintf(&b, ": chunk %d (id %d)", e.Chunk, e.ChunkID)
		if e.Part >= 0 {
			fmt.Fprintf(&b, " part %d", e.Part)
		}
	}
	if e.Entry >= 0 {
		fmt.Fprintf(&b, ": entry %d", e.Entry)
	}
	if e.Offset >= 0 {
		if e.InPart {
			fmt.Fprintf(&b, ": event buffer offset %d (0x%x)", e.Offset, e.Offset)
		} else {
			fmt.Fprintf(&b, ": offset %d (0x%x)", e.Offset, e.Offset)
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// errf wraps a sentinel with a formatted detail: errors.Is(err, sentinel)
// holds for the result.
func errf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// warnings collects warning messages, folding repeats of the same kind into
// one line so that hostile input cannot grow the list without bound.
type warnings struct {
	order  []string
	first  map[string]string
	counts map[string]int
}

func newWarnings() *warnings {
	return &warnings{first: map[string]string{}, counts: map[string]int{}}
}

// add records msg under kind; only the first message of a kind is kept, the
// others are counted.
func (w *warnings) add(kind, msg string) {
	if _, ok := w.first[kind]; !ok {
		w.order = append(w.order, kind)
		w.first[kind] = msg
	}
	w.counts[kind]++
}

func (w *warnings) list() []string {
	out := make([]string, 0, len(w.order))
	for _, k := range w.order {
		msg := w.first[k]
		if n := w.counts[k]; n > 1 {
			msg = fmt.Sprintf("%s (and %d more like it)", msg, n-1)
		}
		out = append(out, msg)
	}
	return out
}
