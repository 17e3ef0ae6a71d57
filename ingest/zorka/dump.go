package zorka

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// FormatName is the importer's Summary.Format.
const FormatName = "zorka"

// maxDumpLine bounds one JSON line of a request dump.
const maxDumpLine = 64 << 20

// Sniff reports whether head (the first bytes of a file, up to 64 are
// looked at) looks like a ZICO request dump: a JSON object naming a uri,
// headers, an agent submission path or an X-Zorka header.
func Sniff(head []byte) bool {
	if len(head) > 64 {
		head = head[:64]
	}
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) == 0 || head[0] != '{' {
		return false
	}
	lower := bytes.ToLower(head)
	for _, marker := range []string{`"uri"`, `"headers"`, `"body"`, `x-zorka-`, `agent\/submit`, `agent/submit`} {
		if bytes.Contains(lower, []byte(marker)) {
			return true
		}
	}
	return false
}

// Import replays a ZICO request dump file (see Decode).
func Import(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("zorka import: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("zorka import: %w", err)
	}
	sum, err := DecodeReader(ctx, filepath.Base(path), fi.Size(), f, opts, emit)
	if sum != nil {
		sum.Source = path
	}
	if err != nil {
		return sum, fmt.Errorf("zorka import %s: %w", path, err)
	}
	return sum, nil
}

// Decode replays a request dump held in memory; name is the file's base
// name (for ids and the source.file attribute).
func Decode(ctx context.Context, name string, data []byte, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	return DecodeReader(ctx, name, int64(len(data)), bytes.NewReader(data), opts, emit)
}

// dumpRequest is one line of a ZICO request dump.
type dumpRequest struct {
	URI     string                     `json:"uri"`
	Headers map[string]json.RawMessage `json:"headers"`
	Body    string                     `json:"body"`
}

// header returns a header's first value, matching the name case-
// insensitively; ZICO writes values as arrays of strings.
func (q *dumpRequest) header(name string) string {
	for k, raw := range q.Headers {
		if !strings.EqualFold(k, name) {
			continue
		}
		var vs []string
		if json.Unmarshal(raw, &vs) == nil {
			if len(vs) > 0 {
				return vs[0]
			}
			return ""
		}
		var v string
		if json.Unmarshal(raw, &v) == nil {
			return v
		}
	}
	return ""
}

// spanKey identifies a span across pieces.
type spanKey struct {
	trace trace.TraceID
	span  trace.SpanID
}

// DecodeReader replays a request dump of size bytes read from r: one JSON
// object per line with uri, headers (name → [values]) and a base64 body.
// Requests to /agent/submit/agd and /agent/submit/trc go, in file order,
// through one private Sessions exactly as the socket API would send them.
// Pieces of streamed spans are assembled (trace.AssembleChunks) before they
// are emitted, so every emitted span is whole; a span still open at the end
// is emitted with its open records and a warning. Each span gets a
// source.file attribute (the base name), and a thread attribute copied from
// the agent's thread.name when it sent one. A trace request without X-Zorka-Trace-ID gets a
// trace id derived from the file name, size and line number, so importing
// the same file twice yields the same ids.
//
// Without opts.KeepGoing the first bad line or request stops the import;
// with it, each becomes a warning (the import fails only when no request
// could be replayed at all).
func DecodeReader(ctx context.Context, name string, size int64, r io.Reader, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	sum := &ingest.Summary{Format: FormatName, Source: name, Warnings: []string{}}
	details := map[string]int64{}
	sessions := NewSessions(Options{
		IdleTimeout: 100 * 365 * 24 * time.Hour,
		Now:         func() time.Time { return time.Unix(0, 0) },
	})

	var traces ingest.TraceSet
	var pending = make(map[spanKey][]*trace.Span)
	var pendingOrder []spanKey
	emitSpan := func(s *trace.Span) error {
		s.Attrs.Set("source.file", trace.String(name))
		if v, ok := s.Attrs.Get("thread.name"); ok {
			if _, has := s.Attrs.Get("thread"); !has {
				s.Attrs.Set("thread", v)
			}
		}
		if err := s.Validate(); err != nil {
			return fmt.Errorf("decoded span is invalid: %w", err)
		}
		traces.Add(s)
		sum.Traces = traces.Len()
		sum.Records += s.Recs
		details["spans"]++
		if emit != nil {
			return emit(s)
		}
		return nil
	}
	assemble := func(pieces []*trace.Span) (*trace.Span, error) {
		if len(pieces) == 1 {
			return pieces[0], nil
		}
		return trace.AssembleChunks(pieces)
	}

	var firstErr error
	fail := func(line int, err error) error {
		err = fmt.Errorf("line %d: %w", line, err)
		if !opts.KeepGoing {
			return err
		}
		if firstErr == nil {
			firstErr = err
		}
		sum.Warnings = append(sum.Warnings, err.Error())
		return nil
	}

	maxLine := int64(maxDumpLine)
	if size >= 0 && size+1 < maxLine {
		maxLine = size + 1
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, int(maxLine))), int(maxLine))
	line := 0
	for sc.Scan() {
		line++
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var q dumpRequest
		if err := json.Unmarshal(text, &q); err != nil {
			if err := fail(line, fmt.Errorf("not a JSON request object: %v", err)); err != nil {
				return sum, err
			}
			continue
		}
		body, err := base64.StdEncoding.DecodeString(q.Body)
		if err != nil {
			body, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(q.Body, "="))
		}
		if err != nil {
			if err := fail(line, fmt.Errorf("body is not base64: %v", err)); err != nil {
				return sum, err
			}
			continue
		}
		path := q.URI
		if i := strings.IndexAny(path, "?#"); i >= 0 {
			path = path[:i]
		}
		session := q.header("X-Zorka-Session-ID")
		reset := strings.EqualFold(strings.TrimSpace(q.header("X-Zorka-Session-Reset")), "true")
		switch {
		case strings.HasSuffix(path, "/agent/submit/agd"):
			st, err := sessions.submitAgentData(session, reset, body)
			if err != nil {
				if err := fail(line, err); err != nil {
					return sum, err
				}
				continue
			}
			details["agent_data"]++
			details["string_defs"] += int64(st.strings)
			details["method_defs"] += int64(st.methods)
		case strings.HasSuffix(path, "/agent/submit/trc"):
			tid := strings.TrimSpace(q.header("X-Zorka-Trace-ID"))
			if tid == "" {
				tid = dumpTraceID(name, size, line)
			}
			pieces, st, err := sessions.submitTraceData(session, reset, tid, body)
			if err != nil {
				if err := fail(line, err); err != nil {
					return sum, err
				}
				continue
			}
			details["trace_data"]++
			details["records_decoded"] += int64(st.records)
			details["exceptions"] += int64(st.exceptions)
			for _, p := range pieces {
				k := spanKey{p.TraceID, p.SpanID}
				prev, waiting := pending[k]
				if p.Root != nil && p.Root.Open {
					if !waiting {
						pendingOrder = append(pendingOrder, k)
					}
					pending[k] = append(prev, p)
					continue
				}
				if waiting {
					delete(pending, k)
				}
				whole, err := assemble(append(prev, p))
				if err != nil {
					return sum, fmt.Errorf("line %d: %w", line, err)
				}
				if err := emitSpan(whole); err != nil {
					return sum, fmt.Errorf("line %d: %w", line, err)
				}
			}
		default:
			sum.Warnings = append(sum.Warnings, fmt.Sprintf("line %d: uri %q is not an agent submission; skipped", line, q.URI))
			details["skipped"]++
			continue
		}
		sum.Events++
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line %d is longer than %d bytes", line+1, maxLine)
		}
		return sum, err
	}
	for _, k := range pendingOrder {
		pieces, ok := pending[k]
		if !ok {
			continue
		}
		whole, err := assemble(pieces)
		if err != nil {
			return sum, err
		}
		sum.Warnings = append(sum.Warnings, fmt.Sprintf("span %s/%s still has open records at the end of the dump", k.trace, k.span))
		if err := emitSpan(whole); err != nil {
			return sum, err
		}
	}
	sum.Details = make(map[string]any, len(details))
	for k, v := range details {
		sum.Details[k] = v
	}
	if firstErr != nil && sum.Events == 0 {
		return sum, firstErr
	}
	return sum, nil
}

// dumpTraceID derives a trace id for a dumped trace request that carries
// none: SHA-256 over the format, file name, file size and line number.
func dumpTraceID(name string, size int64, line int) string {
	h := sha256.New()
	h.Write([]byte(FormatName))
	h.Write([]byte{0})
	h.Write([]byte(name))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(size))
	binary.BigEndian.PutUint64(b[8:], uint64(line))
	h.Write(b[:])
	sum := h.Sum(nil)
	sum[0] |= 1 // never zero
	return hex.EncodeToString(sum[:16])
}
