package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"syscall"

	"github.com/ztsd/ztsd/membudget"
	"github.com/ztsd/ztsd/trace"
)

// Appender is what stores spans: storedir.(*DB).Append satisfies it. It
// returns only once the spans are durable.
type Appender interface {
	Append(ctx context.Context, spans []*trace.Span) error
}

// Defaults for zero Options fields.
const (
	DefaultMaxBodySize        = 64 << 20
	DefaultMaxSpansPerRequest = 100000
	DefaultMaxInFlight        = 32
)

// Options configure decoding and the HTTP and gRPC services.
type Options struct {
	// MaxBodySize bounds an HTTP body as received and again after gzip
	// decompression, and (through GRPCServerOptions) a gRPC message.
	// Zero means DefaultMaxBodySize.
	MaxBodySize int64
	// MaxSpansPerRequest bounds the spans of one request; a larger request
	// is rejected whole (413, RESOURCE_EXHAUSTED). Zero means
	// DefaultMaxSpansPerRequest.
	MaxSpansPerRequest int
	// Limits bound what one span may hold (MaxStringLen, MaxRecords); zero
	// fields mean trace.DefaultLimits.
	Limits trace.Limits
	// Ingest returns the documented per-span limits (max_attrs,
	// max_string_size, max_records_per_span, max_depth) in force; a span
	// beyond them fails the whole request with ErrLimit (HTTP 400, or 413
	// for max_string_size; gRPC INVALID_ARGUMENT or RESOURCE_EXHAUSTED).
	// It is a function so that a reloaded configuration applies. Nil means
	// trace.DefaultIngestLimits.
	Ingest func() trace.IngestLimits
	// Budget is the daemon's memory budget: an OTLP/gRPC request reserves
	// BodyMemoryFactor times its encoded size while it is mapped and
	// appended, and is refused (RESOURCE_EXHAUSTED with RetryInfo, naming
	// memory_budget) past it. OTLP/HTTP bodies are accounted by the socket
	// API that routes them here. Nil is unlimited.
	Budget *membudget.Budget
	// Status maps an Append error to an HTTP status and an error code (the
	// daemon passes server.StatusOf). Nil means a mapping that knows only
	// context errors and ENOSPC/EDQUOT (503) and answers 500 otherwise.
	Status func(error) (int, string)
	// Logger receives rejected spans (debug) and failed appends (error).
	// Nil discards.
	Logger *slog.Logger
	// MaxInFlight bounds the requests one handler or service decodes and
	// appends at a time; further requests are answered 429 (gRPC
	// RESOURCE_EXHAUSTED with RetryInfo) at once. Zero means
	// DefaultMaxInFlight, negative means unbounded.
	MaxInFlight int
}

func (o Options) withDefaults() Options {
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = DefaultMaxBodySize
	}
	if o.MaxSpansPerRequest <= 0 {
		o.MaxSpansPerRequest = DefaultMaxSpansPerRequest
	}
	d := trace.DefaultLimits()
	if o.Limits.MaxDepth <= 0 {
		o.Limits.MaxDepth = d.MaxDepth
	}
	if o.Limits.MaxRecords <= 0 {
		o.Limits.MaxRecords = d.MaxRecords
	}
	if o.Limits.MaxStringLen <= 0 {
		o.Limits.MaxStringLen = d.MaxStringLen
	}
	if o.Status == nil {
		o.Status = defaultStatus
	}
	if o.Ingest == nil {
		o.Ingest = trace.DefaultIngestLimits
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	return o
}

func defaultStatus(err error) (int, string) {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusServiceUnavailable, "disk_full"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "timeout"
	}
	return http.StatusInternalServerError, "internal"
}

// Errors a request can fail with as a whole; callers branch with errors.Is.
var (
	// ErrMalformed marks a body that cannot be decoded (HTTP 400, gRPC
	// INVALID_ARGUMENT).
	ErrMalformed = errors.New("malformed OTLP request")
	// ErrTooLarge marks a body or request beyond Options.MaxBodySize or
	// Options.MaxSpansPerRequest (HTTP 413, gRPC RESOURCE_EXHAUSTED).
	ErrTooLarge = errors.New("OTLP request too large")
	// ErrLimit marks a request holding a span beyond Options.Ingest; the
	// error also wraps the *trace.LimitError naming the limit.
	ErrLimit = errors.New("OTLP span beyond a configured limit")
	// ErrUnsupportedMediaType marks a content type or content encoding
	// other than OTLP's (HTTP 415).
	ErrUnsupportedMediaType = errors.New("unsupported media type")
)

// Media types of OTLP/HTTP bodies.
const (
	ContentTypeProtobuf = "application/x-protobuf"
	ContentTypeJSON     = "application/json"
)

// bodyEncoding is how a request body (and its response) is encoded.
type bodyEncoding uint8

const (
	encodingProtobuf bodyEncoding = iota + 1
	encodingJSON
)

// parseContentType returns the encoding named by a Content-Type header.
func parseContentType(contentType string) (bodyEncoding, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, fmt.Errorf("%w: content type %q: %v", ErrUnsupportedMediaType, contentType, err)
	}
	switch mt {
	case ContentTypeProtobuf, "application/protobuf":
		return encodingProtobuf, nil
	case ContentTypeJSON:
		return encodingJSON, nil
	}
	return 0, fmt.Errorf("%w: content type %q: OTLP takes %s or %s", ErrUnsupportedMediaType, mt, ContentTypeProtobuf, ContentTypeJSON)
}

// IsOTLPContentType reports whether a Content-Type header names an OTLP body
// (binary protobuf or OTLP JSON), so that a router can send POST /v1/traces
// here and keep Trace JSON lines and CBOR for itself.
func IsOTLPContentType(contentType string) bool {
	_, err := parseContentType(contentType)
	return err == nil
}

// Decode decodes an ExportTraceServiceRequest body (binary protobuf or OTLP
// JSON, as contentType says; the body must already be decompressed) and maps
// it onto trace spans. Spans that cannot be stored are left out and counted
// in rejected, with the reasons in msg. An undecodable body, a content type
// other than OTLP's or more spans than opt.MaxSpansPerRequest is an error
// (ErrMalformed, ErrUnsupportedMediaType, ErrTooLarge) and returns no spans.
func Decode(body []byte, contentType string, opt Options) (spans []*trace.Span, rejected int64, msg string, err error) {
	enc, err := parseContentType(contentType)
	if err != nil {
		return nil, 0, "", err
	}
	return decodeBody(body, enc, opt.withDefaults())
}

func decodeBody(body []byte, enc bodyEncoding, opt Options) ([]*trace.Span, int64, string, error) {
	if int64(len(body)) > opt.MaxBodySize {
		return nil, 0, "", fmt.Errorf("%w: body of %d bytes, limit %d", ErrTooLarge, len(body), opt.MaxBodySize)
	}
	switch enc {
	case encodingProtobuf:
		return decodeWire(body, opt)
	case encodingJSON:
		req, badIDs, err := unmarshalJSON(body)
		if err != nil {
			return nil, 0, "", err
		}
		return mapRequest(req, badIDs, opt)
	}
	return nil, 0, "", fmt.Errorf("%w: unknown body encoding %d", ErrUnsupportedMediaType, enc)
}
