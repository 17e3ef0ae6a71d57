package otlp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ztsd/ztsd/trace"
)

// How long a client is told to wait (Retry-After, RetryInfo).
const (
	retryAfterOverloaded  = 1 * time.Second
	retryAfterUnavailable = 10 * time.Second
)

// maxPooledBuffer bounds the body buffers kept for reuse.
const maxPooledBuffer = 4 << 20

// limiter bounds the requests in flight; nil is unbounded.
type limiter chan struct{}

func newLimiter(n int) limiter {
	if n < 0 {
		return nil
	}
	return make(limiter, n)
}

// tryAcquire takes a slot without waiting.
func (l limiter) tryAcquire() bool {
	if l == nil {
		return true
	}
	select {
	case l <- struct{}{}:
		return true
	default:
		return false
	}
}

func (l limiter) release() {
	if l != nil {
		<-l
	}
}

// httpHandler serves OTLP/HTTP: POST of an ExportTraceServiceRequest.
type httpHandler struct {
	app      Appender
	opt      Options
	inFlight limiter
	bufs     sync.Pool // *bytes.Buffer
}

// NewHTTPHandler returns the OTLP/HTTP trace receiver: it takes POST bodies
// of Content-Type application/x-protobuf or application/json, identity or
// gzip Content-Encoding, and answers with an ExportTraceServiceResponse (or
// on failure a google.rpc.Status) in the request's encoding, as the OTLP/HTTP
// specification says: 200 (with partial_success when spans were rejected),
// 400 undecodable body, 405 not POST, 413 body (compressed or not) or span
// count beyond the limits, 415 other content type or encoding, 429 too many
// requests in flight, and what opt.Status makes of an Append error (503
// with Retry-After for disk full or shutting down).
func NewHTTPHandler(app Appender, opt Options) http.Handler {
	opt = opt.withDefaults()
	return &httpHandler{app: app, opt: opt, inFlight: newLimiter(opt.MaxInFlight)}
}

func (h *httpHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeHTTPError(w, encodingJSON, http.StatusMethodNotAllowed, fmt.Sprintf("method %s: OTLP takes POST", r.Method))
		return
	}
	enc, err := parseContentType(r.Header.Get("Content-Type"))
	if err != nil {
		writeHTTPError(w, encodingJSON, http.StatusUnsupportedMediaType, err.Error())
		return
	}
	if !h.inFlight.tryAcquire() {
		w.Header().Set("Retry-After", retryAfterSeconds(retryAfterOverloaded))
		writeHTTPError(w, enc, http.StatusTooManyRequests, fmt.Sprintf("ztsd is overloaded: %d OTLP requests in flight", cap(h.inFlight)))
		return
	}
	defer h.inFlight.release()

	buf := h.getBuffer()
	defer h.putBuffer(buf)
	if err := h.readBody(w, r, buf); err != nil {
		writeHTTPError(w, enc, requestErrorStatus(err), err.Error())
		return
	}
	spans, rejected, msg, err := decodeBody(buf.Bytes(), enc, h.opt)
	if err != nil {
		writeHTTPError(w, enc, requestErrorStatus(err), err.Error())
		return
	}
	if len(spans) > 0 {
		if err := h.app.Append(r.Context(), spans); err != nil {
			status, code := appendErrorStatus(h.opt, err)
			if status >= 500 {
				h.opt.Logger.Error("OTLP append failed", "spans", len(spans), "status", status, "err", err)
			}
			switch status {
			case http.StatusTooManyRequests:
				w.Header().Set("Retry-After", retryAfterSeconds(retryAfterOverloaded))
			case http.StatusServiceUnavailable:
				w.Header().Set("Retry-After", retryAfterSeconds(retryAfterUnavailable))
			}
			writeHTTPError(w, enc, status, code+": "+err.Error())
			return
		}
	}
	writeHTTPMessage(w, enc, http.StatusOK, exportResponse(rejected, msg))
}

// readBody reads the request body into buf, decompressing gzip, and bounds
// it by MaxBodySize both as received and as decompressed.
func (h *httpHandler) readBody(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) error {
	limit := h.opt.MaxBodySize
	if r.ContentLength > limit {
		return fmt.Errorf("%w: body of %d bytes, limit %d", ErrTooLarge, r.ContentLength, limit)
	}
	raw := http.MaxBytesReader(w, r.Body, limit)
	var src io.Reader = raw
	what := "body"
	ce := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding")))
	switch ce {
	case "", "identity":
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(raw)
		if err != nil {
			return bodyReadError("gzip header", err, limit)
		}
		defer zr.Close()
		src, what = zr, "gzip body"
	default:
		return fmt.Errorf("%w: content encoding %q: OTLP takes gzip or identity", ErrUnsupportedMediaType, ce)
	}
	n, err := buf.ReadFrom(io.LimitReader(src, limit+1))
	if err != nil {
		return bodyReadError(fmt.Sprintf("%s at decompressed offset %d", what, n), err, limit)
	}
	if n > limit {
		return fmt.Errorf("%w: body decompresses to more than %d bytes", ErrTooLarge, limit)
	}
	return nil
}

// bodyReadError classifies a failed read: beyond the limit is 413, a
// truncated or corrupt body 400.
func bodyReadError(what string, err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: body of more than %d bytes", ErrTooLarge, limit)
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
}

func (h *httpHandler) getBuffer() *bytes.Buffer {
	if b, ok := h.bufs.Get().(*bytes.Buffer); ok {
		return b
	}
	return new(bytes.Buffer)
}

func (h *httpHandler) putBuffer(b *bytes.Buffer) {
	if b.Cap() > maxPooledBuffer {
		return
	}
	b.Reset()
	h.bufs.Put(b)
}

// requestErrorStatus is the HTTP status of a request-level decode error.
func requestErrorStatus(err error) int {
	var le *trace.LimitError
	switch {
	case errors.As(err, &le) && le.Size:
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrLimit):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType
	case errors.Is(err, ErrMalformed):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// appendErrorStatus maps an Append error through opt.Status; a status that
// is not an error status becomes 500.
func appendErrorStatus(opt Options, err error) (int, string) {
	status, code := opt.Status(err)
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	}
	return status, code
}

// grpcCodeOf is the gRPC code matching an HTTP status (used in the
// google.rpc.Status of HTTP error bodies and by the gRPC service).
func grpcCodeOf(status int) codes.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnsupportedMediaType, http.StatusNotFound:
		return codes.InvalidArgument
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusMethodNotAllowed:
		return codes.Unimplemented
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	if status >= 400 && status < 500 {
		return codes.FailedPrecondition
	}
	return codes.Internal
}

func exportResponse(rejected int64, msg string) *collectortrace.ExportTraceServiceResponse {
	resp := &collectortrace.ExportTraceServiceResponse{}
	if rejected > 0 || msg != "" {
		resp.PartialSuccess = &collectortrace.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: strings.ToValidUTF8(msg, "\uFFFD")}
	}
	return resp
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(d / time.Second))
}

// writeHTTPError answers with a google.rpc.Status in the request's encoding.
func writeHTTPError(w http.ResponseWriter, enc bodyEncoding, status int, msg string) {
	writeHTTPMessage(w, enc, status, &spb.Status{Code: int32(grpcCodeOf(status)), Message: strings.ToValidUTF8(msg, "\uFFFD")})
}

func writeHTTPMessage(w http.ResponseWriter, enc bodyEncoding, status int, m proto.Message) {
	var (
		b   []byte
		err error
		ct  string
	)
	if enc == encodingJSON {
		b, err = protojson.Marshal(m)
		ct = ContentTypeJSON
	} else {
		b, err = proto.Marshal(m)
		ct = ContentTypeProtobuf
	}
	if err != nil {
		// These messages hold only strings, ints and enums: marshalling
		// cannot fail. Answer something rather than nothing if it does.
		status, b, ct = http.StatusInternalServerError, []byte(err.Error()), "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
