// Package server owns ztsd's socket API: HTTP/1.1 handlers for writes,
// trace reads, search, attribute listings, store listings, health and
// metrics, plus access control by the unix peer's uid/gid.
//
// Invariants:
//   - A write request is decoded and validated whole before anything is
//     appended: a request refused as bad input (4xx) stores nothing.
//   - A write is answered 2xx only after storedir acknowledged it (durable
//     under the sync policy). Any other failure (5xx, 503, the client went
//     away) may still have stored some or all of the request's spans;
//     retrying is safe because storedir writes are idempotent by (trace id,
//     span id, chunk number).
//   - Every error is JSON {"error": "...", "code": "..."} with the status
//     DESIGN.md names: 400 bad input, 403 forbidden, 404 unknown trace, 413
//     too large, 503 disk full or shutting down.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/export"
	"github.com/ztsd/ztsd/ingest/otlp"
	"github.com/ztsd/ztsd/ingest/zorka"
	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Limits bound what one request may ask of the daemon.
type Limits struct {
	MaxBodySize         int64
	MaxTracesPerRequest int
	// MaxSearchLimit is the largest limit= a search may ask for (at most
	// storedir.MaxSearchLimit).
	MaxSearchLimit int
	// Decode bounds what the body decoders build (memory safety).
	Decode trace.Limits
	// Ingest are the documented per-span limits (max_attrs, max_string_size,
	// max_records_per_span, max_depth) every write path checks before
	// storing: 400, or 413 for max_string_size, naming the limit.
	Ingest trace.IngestLimits
}

// DefaultLimits are the embedded defaults.
func DefaultLimits() Limits {
	return Limits{MaxBodySize: 64 << 20, MaxTracesPerRequest: 100000, MaxSearchLimit: storedir.MaxSearchLimit, Decode: trace.DefaultLimits(),
		Ingest: trace.DefaultIngestLimits()}
}

// Options configure a Server.
type Options struct {
	Limits  Limits
	Access  Access
	Logger  *slog.Logger
	Metrics *Metrics
	// Zorka, when set, serves the Zorka agent protocol
	// (/agent/submit/agd, /agent/submit/trc) with these sessions.
	Zorka *zorka.Sessions
	// OTLP, when set, serves OTLP/HTTP bodies (application/x-protobuf and
	// application/json) posted to /v1/traces.
	OTLP http.Handler
	// Routes are further handlers served behind the same access checks
	// (query APIs, the web UI), each owned by its own package.
	Routes []Route
	// QueryOnly refuses every write (403, code "query_only"): the daemon
	// is a query node serving stores from a bucket (ztsd --query).
	QueryOnly bool
	// RemoteStores, when set, counts the stores served from a bucket, for
	// /healthz.
	RemoteStores func() int
	// Budget is the daemon's memory budget: every write request reserves
	// BodyMemoryFactor times its body size (max_body_size when the length
	// is not known) until it is answered, and is refused 503 with
	// Retry-After past it. Nil is unlimited.
	Budget *membudget.Budget
}

// BodyMemoryFactor is what a write request is accounted as holding per byte
// of body while it is decoded, validated, encoded and appended: the body,
// the decoded spans (about twice the body), and the encoded chunks. It was
// measured as 3.75 (16 concurrent 60 MiB bodies took 3.6 GB RSS).
const BodyMemoryFactor = otlp.BodyMemoryFactor

// Access kinds a Route declares: who may call it.
const (
	AccessNone  = none  // anyone who can reach the listener (health, UI assets)
	AccessRead  = read  // read access (queries)
	AccessWrite = write // write access (ingest)
	// AccessAdmin guards operator endpoints (/debug/pprof/): the peers
	// that may write, but unlike AccessWrite it still answers while the
	// daemon shuts down.
	AccessAdmin = admin
)

// AccessKind says which access list guards a route.
type AccessKind = accessKind

// Route is one handler mounted on the API mux by another package.
type Route struct {
	Pattern string // an http.ServeMux pattern, e.g. "GET /api/services"
	Access  AccessKind
	Handler http.Handler
}

// Server serves the socket API over a storedir.DB.
type Server struct {
	db       *storedir.DB
	limits   atomic.Pointer[Limits]
	access   atomic.Pointer[Access]
	log      *slog.Logger
	metrics  *Metrics
	mux      *http.ServeMux
	shutting atomic.Bool
	otlp     http.Handler
	budget   *membudget.Budget
	// queryOnly and remoteStores: Options.QueryOnly and RemoteStores.
	queryOnly    bool
	remoteStores func() int
	// unavailable rate-limits the logging of 503 answers.
	unavailable *rateLog
}

// New returns a server for db.
func New(db *storedir.DB, opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Metrics == nil {
		opt.Metrics = NewMetrics(db)
	}
	if opt.Limits.MaxBodySize == 0 {
		opt.Limits = DefaultLimits()
	}
	s := &Server{db: db, log: opt.Logger, metrics: opt.Metrics, mux: http.NewServeMux(), budget: opt.Budget,
		unavailable: newRateLog(unavailableLogEvery), queryOnly: opt.QueryOnly, remoteStores: opt.RemoteStores}
	s.limits.Store(&opt.Limits)
	s.access.Store(&opt.Access)
	s.route("POST /v1/traces", "put", write, s.handlePut)
	s.route("GET /v1/traces/{id}", "get", read, s.handleGet)
	s.route("GET /v1/search", "search", read, s.handleSearch)
	s.route("GET /v1/attributes", "attribute_keys", read, s.handleAttributeKeys)
	s.route("GET /v1/attributes/{key}", "attributes", read, s.handleAttributes)
	s.route("GET /v1/services", "services", read, s.handleServices)
	s.route("GET /v1/stores", "stores", read, s.handleStores)
	s.route("GET /healthz", "healthz", none, s.handleHealth)
	s.mux.Handle("GET /metrics", s.checked(read, s.metrics.Handler()))
	if opt.Zorka != nil {
		s.registerAgent(opt.Zorka)
	}
	s.otlp = opt.OTLP
	for _, rt := range opt.Routes {
		s.mux.Handle(rt.Pattern, s.checked(rt.Access, rt.Handler))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler is the API's http.Handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Metrics returns the server's metrics.
func (s *Server) Metrics() *Metrics { return s.metrics }

// SetLimits replaces the request limits (SIGHUP).
func (s *Server) SetLimits(l Limits) { s.limits.Store(&l) }

// Limits returns the request limits in force.
func (s *Server) Limits() Limits { return *s.limits.Load() }

// SetAccess replaces the access lists (SIGHUP).
func (s *Server) SetAccess(a Access) { s.access.Store(&a) }

// BeginShutdown makes writes answer 503 while in-flight requests finish.
func (s *Server) BeginShutdown() { s.shutting.Store(true) }

type accessKind uint8

const (
	none accessKind = iota
	read
	write
	admin
)

func (s *Server) route(pattern, name string, kind accessKind, h func(http.ResponseWriter, *http.Request) error) {
	hist := s.metrics.requestDuration.WithLabelValues(name)
	s.mux.Handle(pattern, s.checked(kind, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		w := &startedWriter{ResponseWriter: rw}
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
		hist.Observe(time.Since(t0).Seconds())
	})))
}

func (s *Server) checked(kind accessKind, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.access.Load().check(r.Context(), kind); err != nil {
			writeError(w, http.StatusForbidden, "forbidden", err.Error())
			return
		}
		if kind == write && s.queryOnly {
			writeError(w, http.StatusForbidden, "query_only", QueryOnlyMessage)
			return
		}
		if kind == write && s.shutting.Load() {
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "shutting_down", "ztsd is shutting down")
			return
		}
		if kind == write && s.budget != nil {
			n := r.ContentLength
			if max := s.limits.Load().MaxBodySize; n < 0 || n > max {
				n = max // unknown length (or one MaxBytesReader will refuse): account the most it may be
			}
			n *= BodyMemoryFactor
			if err := s.budget.TryReserve("request body", n); err != nil {
				w.Header().Set("Retry-After", "1")
				writeError(w, http.StatusServiceUnavailable, "memory_budget", err.Error())
				return
			}
			defer s.budget.Release(n)
		}
		h.ServeHTTP(w, r)
	})
}

// QueryOnlyMessage is what a query node answers a write (403, code
// "query_only").
const QueryOnlyMessage = "query-only node: it serves the stores in a bucket and takes no writes; writes go to an ingesting node"

// Error is an API error with its status and code.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

func badRequest(format string, args ...any) error {
	return &Error{Status: http.StatusBadRequest, Code: "bad_request", Msg: fmt.Sprintf(format, args...)}
}

// startedWriter remembers whether the answer has begun, so that an error
// after the first byte becomes an error trailer instead of a status.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(status int) {
	w.started = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *startedWriter) Write(p []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ErrorTrailer is the last line of a JSON-lines answer (GET
// /v1/traces/{id}) that failed after its first line was sent: the status
// line said 200, so the error comes as {"error": "...", "code": "...",
// "status": 500} on a line of its own, and a client must treat the whole
// answer as failed. No data line starts with `{"error"`.
type ErrorTrailer struct {
	Error  string `json:"error"`
	Code   string `json:"code"`
	Status int    `json:"status"`
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := StatusOf(err)
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The client went away. A write may still be stored (it was
		// queued); a retry is harmless (idempotent writes).
		s.log.Info("client went away before the answer; a write may still have been stored", "method", r.Method, "path", r.URL.Path)
		return
	}
	if status == http.StatusServiceUnavailable {
		// Expected while the disk is full or the daemon stops: rate-limited.
		s.unavailable.log(s.log, code, "request answered 503", "code", code, "method", r.Method, "path", r.URL.Path, "err", err)
	} else if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if sw, ok := w.(*startedWriter); ok && sw.started {
		s.log.Error("request failed after the answer began; sent an error trailer",
			"method", r.Method, "path", r.URL.Path, "err", err)
		b, _ := json.Marshal(ErrorTrailer{Error: err.Error(), Code: code, Status: status})
		w.Write(append(b, '\n'))
		return
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "10")
	}
	writeError(w, status, code, err.Error())
}

// StatusOf maps an error to its HTTP status and error code.
func StatusOf(err error) (int, string) {
	var ae *Error
	var mbe *http.MaxBytesError
	var le *trace.LimitError
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Code
	case errors.As(err, &le):
		if le.Size {
			return http.StatusRequestEntityTooLarge, "too_large"
		}
		return http.StatusBadRequest, "limit_exceeded"
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, storedir.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, storedir.ErrQueryOnly):
		return http.StatusForbidden, "query_only"
	case errors.Is(err, storedir.ErrInvalid), errors.Is(err, storedir.ErrBadCursor):
		return http.StatusBadRequest, "bad_request"
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusServiceUnavailable, "disk_full"
	case errors.Is(err, membudget.ErrExhausted):
		return http.StatusServiceUnavailable, "memory_budget"
	case errors.Is(err, storedir.ErrClosed):
		return http.StatusServiceUnavailable, "shutting_down"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "timeout"
	}
	return http.StatusInternalServerError, "internal"
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// PutResponse answers a successful write.
type PutResponse struct {
	Spans int `json:"spans"`
}

// writePutResponse writes PutResponse{Spans: n} as writeJSON would (the
// same bytes), without an encoder and reflection per write.
func writePutResponse(w http.ResponseWriter, n int) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, 32)
	b = append(b, `{"spans":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "}\n"...)
	_, err := w.Write(b)
	return err
}

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) error {
	lim := *s.limits.Load()
	body := http.MaxBytesReader(w, r.Body, lim.MaxBodySize)
	ct := mediaType(r.Header.Get("Content-Type"))
	var spans []*trace.Span
	var payload []byte // a CBOR body: the chunk payload its spans came from
	var layout *trace.PayloadLayout
	var err error
	switch ct {
	case "application/x-ndjson", "application/jsonl", "application/json-lines":
		spans, err = decodeJSONLines(body, lim)
	case "application/cbor":
		spans, payload, layout, err = decodeCBOR(body, r.ContentLength, lim)
	case "application/x-protobuf", "application/json", "application/protobuf":
		if s.otlp == nil {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
				Msg: "OTLP ingest is not enabled in this daemon"}
		}
		r.Body = body
		s.otlp.ServeHTTP(w, r)
		return nil
	case "":
		return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Msg: "Content-Type is required: application/x-ndjson (Trace JSON lines) or application/cbor"}
	default:
		return &Error{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Msg: fmt.Sprintf("Content-Type %q is not accepted here: use application/x-ndjson (Trace JSON lines) or application/cbor", ct)}
	}
	if err != nil {
		return err
	}
	if len(spans) == 0 {
		return badRequest("request body holds no spans")
	}
	if err := lim.Ingest.CheckSpans(spans); err != nil {
		return err
	}
	// Append validates every span (Span.Validate) before anything is
	// stored: an invalid one is a storedir.ErrInvalid, answered 400.
	if payload != nil {
		err = s.db.AppendPayload(r.Context(), spans, payload, layout)
	} else {
		err = s.db.Append(r.Context(), spans)
	}
	if err != nil {
		return err
	}
	s.metrics.ingestSpans.Add(float64(len(spans)))
	s.metrics.ingestRequests.Inc()
	return writePutResponse(w, len(spans))
}

func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

func decodeJSONLines(body io.Reader, lim Limits) ([]*trace.Span, error) {
	var spans []*trace.Span
	err := trace.DecodeJSONLines(body, lim.Decode, func(sp *trace.Span) error {
		if len(spans) >= lim.MaxTracesPerRequest {
			return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
				Msg: fmt.Sprintf("more than %d spans in one request", lim.MaxTracesPerRequest)}
		}
		if sp.Source == "" {
			sp.Source = trace.SourceJSON
		}
		spans = append(spans, sp)
		return nil
	})
	if err != nil {
		var ae *Error
		var mbe *http.MaxBytesError
		if errors.As(err, &ae) || errors.As(err, &mbe) {
			return nil, err
		}
		return nil, badRequest("Trace JSON: %v", err)
	}
	return spans, nil
}

// decodeCBOR decodes a CBOR body (a chunk payload); size is its
// Content-Length (-1 when unknown), so that a body of known length is read
// into one buffer of that size instead of one grown from 512 bytes by
// doubling. It returns the body too, with its layout: storedir may store
// it as the spans' chunk (DB.AppendPayload) instead of encoding them again.
func decodeCBOR(body io.Reader, size int64, lim Limits) ([]*trace.Span, []byte, *trace.PayloadLayout, error) {
	b, err := readBody(body, size, lim.MaxBodySize)
	if err != nil {
		return nil, nil, nil, err
	}
	spans, layout, err := trace.DecodeChunkLayout(b, lim.Decode)
	if err != nil {
		return nil, nil, nil, badRequest("CBOR body: %v", err)
	}
	if len(spans) > lim.MaxTracesPerRequest {
		return nil, nil, nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large",
			Msg: fmt.Sprintf("%d spans in one request, more than %d", len(spans), lim.MaxTracesPerRequest)}
	}
	return spans, b, layout, nil
}

// readBody reads body whole. A Content-Length within max sizes the buffer
// (one more byte, so that the read sees EOF without growing it); past
// max, MaxBytesReader fails the read anyway.
func readBody(body io.Reader, size, max int64) ([]byte, error) {
	if size < 0 || size > max {
		return io.ReadAll(body)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than announced: grow
		}
	}
}

// WarningsHeader carries, on a trace read (a stream of Trace JSON lines),
// the JSON array of storedir.Warning naming the damaged chunks whose spans
// the answer leaves out. Search answers carry the same list in "warnings".
const WarningsHeader = "X-Ztsd-Warnings"

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) error {
	id, err := trace.ParseTraceID(r.PathValue("id"))
	if err != nil {
		return badRequest("%v", err)
	}
	q := r.URL.Query()
	format := q.Get("format")
	switch format {
	case "", "json", "chrome", "svg":
	default:
		return badRequest("format=%q: want json, chrome or svg", format)
	}
	if sid := q.Get("span"); sid != "" || format != "" && format != "json" {
		return s.getExport(w, r, id, sid, format)
	}
	// The answer is encoded while the spans are valid (ReadTrace: their
	// chunks' buffers are reused once it returns), into a pooled buffer
	// written after.
	bp := getBodies.Get().(*[]byte)
	defer putGetBody(bp)
	err = s.db.ReadTrace(r.Context(), id, func(roots []*trace.Span, warns []storedir.Warning) error {
		if err := setWarnings(w, warns); err != nil {
			return err
		}
		var err error
		*bp, err = appendTraceJSON((*bp)[:0], roots)
		return err
	})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(*bp)))
	_, err = w.Write(*bp)
	return err
}

// getExport answers a get of one span of a trace (span=) or of a trace
// exported as format chrome or svg: spans read with GetTraceWithWarnings
// or GetSpanWithWarnings (they stay valid as long as they are used).
func (s *Server) getExport(w http.ResponseWriter, r *http.Request, id trace.TraceID, sid, format string) error {
	var roots []*trace.Span
	var warns []storedir.Warning
	if sid != "" {
		spanID, err := trace.ParseSpanID(sid)
		if err != nil {
			return badRequest("span: %v", err)
		}
		sp, ws, err := s.db.GetSpanWithWarnings(r.Context(), id, spanID)
		if err != nil {
			return err
		}
		if sp != nil {
			roots = []*trace.Span{sp}
		}
		warns = ws
	} else {
		var err error
		if roots, warns, err = s.db.GetTraceWithWarnings(r.Context(), id); err != nil {
			return err
		}
	}
	if err := setWarnings(w, warns); err != nil {
		return err
	}
	if format == "chrome" || format == "svg" {
		return writeExport(w, id, roots, format)
	}
	bp := getBodies.Get().(*[]byte)
	defer putGetBody(bp)
	var err error
	if *bp, err = appendTraceJSON((*bp)[:0], roots); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Length", strconv.Itoa(len(*bp)))
	_, err = w.Write(*bp)
	return err
}

// appendTraceJSON appends the Trace JSON line of each root span (its
// children nested) to b.
func appendTraceJSON(b []byte, roots []*trace.Span) ([]byte, error) {
	for _, sp := range roots {
		var err error
		if b, err = trace.AppendSpanJSON(b, sp); err != nil {
			return b, err
		}
		b = append(b, '\n')
	}
	return b, nil
}

// setWarnings puts the warnings of a trace read, when there are any, in
// the answer's WarningsHeader.
func setWarnings(w http.ResponseWriter, warns []storedir.Warning) error {
	if len(warns) == 0 {
		return nil
	}
	b, err := json.Marshal(warns)
	if err != nil {
		return err
	}
	w.Header().Set(WarningsHeader, string(b))
	return nil
}

// getBodies pools the buffers handleGet encodes a trace's Trace JSON
// lines into: the whole answer is encoded first and written with its
// length in one call, not span by span in chunked encoding (one write
// to the socket instead of one per 4 KiB buffered and a chunk header
// each).
var getBodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledGetBody bounds the buffer getBodies keeps: the answer of a
// rare huge trace is not held for later gets.
const maxPooledGetBody = 1 << 20

func putGetBody(bp *[]byte) {
	if cap(*bp) <= maxPooledGetBody {
		getBodies.Put(bp)
	}
}

// writeExport answers GET /v1/traces/{id}?format=chrome|svg with the
// export package's rendering, as a download named after the trace.
func writeExport(w http.ResponseWriter, id trace.TraceID, roots []*trace.Span, format string) error {
	var buf bytes.Buffer
	var err error
	ct, ext := "application/json", "chrome.json"
	if format == "svg" {
		ct, ext = "image/svg+xml", "svg"
		err = export.SVG(&buf, roots, export.SVGOptions{})
		if errors.Is(err, export.ErrNoRecords) {
			return badRequest("trace %s has no records to draw", id)
		}
	} else {
		err = export.Chrome(&buf, [][]*trace.Span{roots})
	}
	if err != nil {
		return fmt.Errorf("trace %s: %w", id, err)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=\"%s.%s\"", id, ext))
	_, err = w.Write(buf.Bytes())
	return err
}

// SearchResponse is the body of GET /v1/search.
type SearchResponse struct {
	Results []json.RawMessage `json:"results"`
	Cursor  string            `json:"cursor,omitempty"`
	// Warnings name the damaged chunks whose spans the page leaves out.
	Warnings []storedir.Warning `json:"warnings,omitempty"`
	// Traces, in trace mode, describes the trace of each result:
	// Traces[i] is Results[i]'s trace. Each result stays a span as the
	// other endpoints write it.
	Traces []SearchTrace `json:"traces,omitempty"`
}

// SearchTrace is a whole trace of a trace-mode search result, from the
// index (one lookup per store) and one read of its root span.
type SearchTrace struct {
	TraceID    string `json:"trace_id"`
	Spans      int    `json:"spans"`       // distinct spans stored
	StartNS    int64  `json:"start_ns"`    // its first span's start
	DurationNS int64  `json:"duration_ns"` // to its last span's end
	// Root is the root span (the earliest without a parent) as a search
	// result is written: without child spans, its record tree cut to the
	// root record's own fields; absent when every stored span has a
	// parent or the root's chunk is damaged (then named in warnings).
	Root json.RawMessage `json:"root,omitempty"`
}

// ParseSearch turns query parameters into a storedir.Query.
func ParseSearch(v map[string][]string) (storedir.Query, error) {
	var q storedir.Query
	for key, vals := range v {
		switch key {
		case "attr", "text", "operation", "min_duration", "max_duration", "errors", "since", "until", "limit", "cursor", "spans":
		default:
			return q, badRequest("unknown search parameter %q", key)
		}
		if key != "attr" && len(vals) > 1 {
			return q, badRequest("search parameter %q given %d times", key, len(vals))
		}
	}
	get := func(k string) string {
		if vs := v[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	for _, a := range v["attr"] {
		k, val, err := ParseAttrFilter(a)
		if err != nil {
			return q, badRequest("attr %v", err)
		}
		q.Attrs = append(q.Attrs, trace.Attr{Key: k, Value: trace.String(val)})
	}
	q.Text = get("text")
	var err error
	if s := get("min_duration"); s != "" {
		if q.MinDurationNS, err = ParseDurationNS(s); err != nil {
			return q, badRequest("min_duration: %v", err)
		}
	}
	if s := get("max_duration"); s != "" {
		if q.MaxDurationNS, err = ParseDurationNS(s); err != nil {
			return q, badRequest("max_duration: %v", err)
		}
		if q.MaxDurationNS == 0 {
			return q, badRequest("max_duration=%q: want a duration above 0", s)
		}
		if q.MaxDurationNS < q.MinDurationNS {
			return q, badRequest("max_duration=%q is below min_duration=%q", s, get("min_duration"))
		}
	}
	if v, ok := v["operation"]; ok {
		if v[0] == "" {
			return q, badRequest("operation=: want an operation name (a root record's method)")
		}
		q.Operation = v[0]
	}
	if s := get("errors"); s != "" {
		if q.ErrorsOnly, err = strconv.ParseBool(s); err != nil {
			return q, badRequest("errors=%q: want true or false", s)
		}
	}
	if s := get("spans"); s != "" {
		if q.Spans, err = strconv.ParseBool(s); err != nil {
			return q, badRequest("spans=%q: want true or false", s)
		}
	}
	now := time.Now()
	if s := get("since"); s != "" {
		if q.SinceNS, err = ParseWhenNS(s, now); err != nil {
			return q, badRequest("since: %v", err)
		}
	}
	if s := get("until"); s != "" {
		if q.UntilNS, err = ParseWhenNS(s, now); err != nil {
			return q, badRequest("until: %v", err)
		}
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > storedir.MaxSearchLimit {
			return q, badRequest("limit=%q: want 1..%d", s, storedir.MaxSearchLimit)
		}
		q.Limit = n
	}
	q.Cursor = get("cursor")
	return q, nil
}

// ParseDurationNS parses "5ms", "1.5s" or a plain number of nanoseconds.
func ParseDurationNS(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", s)
		}
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration like 5ms or nanoseconds", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return int64(d), nil
}

// ParseAttrFilter splits an attribute filter "key:value" or "key=value" at
// its first ':' or '=' (the API and ztsctl accept both spellings).
func ParseAttrFilter(s string) (key, value string, err error) {
	i := strings.IndexAny(s, ":=")
	if i <= 0 {
		return "", "", fmt.Errorf("%q: want key:value or key=value", s)
	}
	return s[:i], s[i+1:], nil
}

// timeLayouts are the absolute time forms ParseTimeNS accepts besides
// nanoseconds: RFC 3339, and a date or date and time without zone, read
// as UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"}

// ParseTimeNS parses an absolute time: nanoseconds since the epoch,
// RFC 3339 (2026-01-02T15:04:05Z), or a date (2026-01-02) or date and
// time (2026-01-02 15:04[:05]) in UTC.
func ParseTimeNS(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("%q: want RFC 3339 (2026-01-02T15:04:05Z), a UTC date (2026-01-02), nanoseconds since the epoch, or a duration ago (90m, 7d)", s)
}

// ParseWhenNS parses a time as ParseTimeNS does, or a duration with a unit
// (ns … h, and d for days: "90m", "7d", "1d12h") meaning that long before
// now.
func ParseWhenNS(s string, now time.Time) (int64, error) {
	if n, err := ParseTimeNS(s); err == nil {
		return n, nil
	}
	d, derr := config.ParseDuration(s)
	if derr != nil || strings.IndexFunc(s, unicode.IsLetter) < 0 {
		_, err := ParseTimeNS(s)
		return 0, err
	}
	if int64(d) >= now.UnixNano() {
		return 0, nil // before the epoch: from the beginning
	}
	return now.UnixNano() - int64(d), nil
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	q, err := ParseSearch(r.URL.Query())
	if err != nil {
		return err
	}
	if max := s.limits.Load().MaxSearchLimit; max > 0 && q.Limit > max {
		return badRequest("limit=%d exceeds max_search_limit (%d)", q.Limit, max)
	}
	q.TraceHeads = !q.Spans
	res, err := s.db.Search(r.Context(), q)
	if err != nil {
		return err
	}
	out := SearchResponse{Results: make([]json.RawMessage, 0, len(res.Spans)), Cursor: res.Cursor, Warnings: res.Warnings}
	for _, sp := range res.Spans {
		b, err := trace.MarshalSummaryJSON(sp)
		if err != nil {
			return err
		}
		out.Results = append(out.Results, b)
	}
	if res.Traces != nil {
		out.Traces = make([]SearchTrace, len(res.Traces))
		for i, ti := range res.Traces {
			st := SearchTrace{TraceID: res.Spans[i].TraceID.String(), Spans: ti.Spans, StartNS: ti.StartNS, DurationNS: ti.EndNS - ti.StartNS}
			if ti.Root != nil {
				if st.Root, err = trace.MarshalSummaryJSON(ti.Root); err != nil {
					return err
				}
			}
			out.Traces[i] = st
		}
	}
	b, err := appendSearchResponse(nil, &out)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// appendSearchResponse appends out as writeJSON writes it (the same
// bytes), without passing every result through encoding/json: an encoder
// validates and compacts each json.RawMessage again, which was a quarter
// of a search's CPU at 10M spans (encoding/json.appendCompact). The
// results were written by trace's JSON writer; what json.Encoder would
// still change in them, HTML characters in strings, is escaped the same
// way (json.HTMLEscape), only when present.
func appendSearchResponse(b []byte, out *SearchResponse) ([]byte, error) {
	start := len(b)
	size := 64
	for _, r := range out.Results {
		size += len(r) + 1
	}
	for _, t := range out.Traces {
		size += len(t.Root) + 128
	}
	b = slices.Grow(b, size)
	b = append(b, `{"results":[`...)
	for i, r := range out.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r...)
	}
	b = append(b, ']')
	if out.Cursor != "" {
		b = append(b, `,"cursor":`...)
		b = appendJSONString(b, out.Cursor)
	}
	if len(out.Warnings) > 0 {
		w, err := json.Marshal(out.Warnings)
		if err != nil {
			return b, err
		}
		b = append(append(b, `,"warnings":`...), w...)
	}
	if len(out.Traces) > 0 {
		b = append(b, `,"traces":[`...)
		for i, t := range out.Traces {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"trace_id":`...)
			b = appendJSONString(b, t.TraceID)
			b = append(b, `,"spans":`...)
			b = strconv.AppendInt(b, int64(t.Spans), 10)
			b = append(b, `,"start_ns":`...)
			b = strconv.AppendInt(b, t.StartNS, 10)
			b = append(b, `,"duration_ns":`...)
			b = strconv.AppendInt(b, t.DurationNS, 10)
			if len(t.Root) > 0 {
				b = append(append(b, `,"root":`...), t.Root...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, "}\n"...)
	if r := b[start:]; bytes.IndexByte(r, '<') >= 0 || bytes.IndexByte(r, '>') >= 0 || bytes.IndexByte(r, '&') >= 0 {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[start:])
		b = append(b[:start], esc.Bytes()...)
	}
	return b, nil
}

// appendJSONString appends s as a JSON string: quoted as is when it is
// printable ASCII without quotes or backslashes (cursors, trace ids),
// else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// AttributesResponse is the body of GET /v1/attributes/{key}.
type AttributesResponse struct {
	Key    string   `json:"key"`
	Values []string `json:"values"`
}

func (s *Server) handleAttributes(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	limit := 1000
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100000 {
			return badRequest("limit=%q: want 1..100000", v)
		}
		limit = n
	}
	vals, err := s.db.AttributeValues(r.Context(), key, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, AttributesResponse{Key: key, Values: vals})
}

// StoresResponse is the body of GET /v1/stores.
type StoresResponse struct {
	Stores []storedir.Info `json:"stores"`
}

func (s *Server) handleStores(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, StoresResponse{Stores: s.db.Stores()})
}

// HealthResponse is the body of GET /healthz: status "ok", "degraded" (200:
// the daemon serves, but the stores listed are not served — quarantined,
// being rebuilt or set aside; /v1/stores has the same entries — or it
// started read-only on a full disk, ReadOnly says why), or
// "shutting_down" (503). Status "catching_up" (200) says the daemon
// serves every store but some re-index, in the background, the part of
// their data file a restart found not indexed (a kill -9): CatchingUp
// lists them with the bytes left (index_lag_bytes); reads of that part
// are missing until then and their answers say so in their warnings.
type HealthResponse struct {
	Status string          `json:"status"`
	Stores []storedir.Info `json:"stores,omitempty"`
	// CatchingUp lists the stores being re-indexed in the background.
	CatchingUp []storedir.Info `json:"catching_up,omitempty"`
	// ReadOnly says why the daemon takes no writes (started on a full
	// disk); the status is then "degraded".
	ReadOnly string `json:"read_only,omitempty"`
	// QueryOnly: a query node (ztsd --query), serving the stores in a
	// bucket and taking no writes.
	QueryOnly bool `json:"query_only,omitempty"`
	// RemoteStores is how many stores are served from a bucket (present
	// when a bucket is configured).
	RemoteStores *int `json:"remote_stores,omitempty"`
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) error {
	if s.shutting.Load() {
		return writeJSON(w, http.StatusServiceUnavailable, HealthResponse{Status: "shutting_down"})
	}
	h := HealthResponse{Status: "ok", QueryOnly: s.queryOnly}
	if s.remoteStores != nil {
		n := s.remoteStores()
		h.RemoteStores = &n
	}
	catching := s.db.CatchingUp()
	if bad, ro := s.db.Degraded(), s.db.ReadOnly(); len(bad) > 0 || ro != "" {
		h.Status, h.Stores, h.ReadOnly, h.CatchingUp = "degraded", bad, ro, catching
	} else if len(catching) > 0 {
		h.Status, h.CatchingUp = "catching_up", catching
	}
	return writeJSON(w, http.StatusOK, h)
}
