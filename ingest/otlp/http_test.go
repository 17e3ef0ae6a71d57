package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// statusMapper stands in for server.StatusOf.
func statusMapper(err error) (int, string) {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return http.StatusServiceUnavailable, "disk_full"
	case errors.Is(err, errOverloaded):
		return http.StatusTooManyRequests, "overloaded"
	case errors.Is(err, errInvalid):
		return http.StatusBadRequest, "bad_request"
	}
	return http.StatusInternalServerError, "internal"
}

var (
	errOverloaded = errors.New("commit queue full")
	errInvalid    = errors.New("invalid span")
)

// chunkedReader hides the length of a body so that the request is sent
// without Content-Length.
type chunkedReader struct{ r io.Reader }

func (c chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestHTTPResponses covers each response the OTLP/HTTP handler gives, and
// that no failing request appends anything.
func TestHTTPResponses(t *testing.T) {
	good, err := proto.Marshal(sampleRequest())
	if err != nil {
		t.Fatal(err)
	}
	goodJSON := toOTLPJSON(t, sampleRequest(), false)
	rejecting, _ := proto.Marshal(rejectingRequest())
	const limit = 64 << 10
	bomb := gzipBytes(t, make([]byte, 16<<20)) // 16 MiB of zeroes in ~16 KiB
	if len(bomb) > limit {
		t.Fatalf("bomb of %d bytes is not small", len(bomb))
	}
	gz := gzipBytes(t, good)
	oversized := make([]byte, limit+1)

	type req struct {
		method, contentType, encoding string
		body                          []byte
		hideLength                    bool
	}
	for _, tc := range []struct {
		name       string
		req        req
		appendErr  error
		status     int
		grpcCode   codes.Code
		respType   string
		retryAfter string
		msg        string // in the google.rpc.Status or the partial success
		appended   int    // spans appended
		rejected   int64
	}{
		{name: "protobuf", req: req{"POST", ContentTypeProtobuf, "", good, false}, status: 200, respType: ContentTypeProtobuf, appended: 4},
		{name: "json", req: req{"POST", "application/json; charset=utf-8", "", goodJSON, false}, status: 200, respType: ContentTypeJSON, appended: 4},
		{name: "gzip", req: req{"POST", ContentTypeProtobuf, "gzip", gz, false}, status: 200, respType: ContentTypeProtobuf, appended: 4},
		{name: "gzip chunked", req: req{"POST", ContentTypeProtobuf, "gzip", gz, true}, status: 200, respType: ContentTypeProtobuf, appended: 4},
		{name: "partial success", req: req{"POST", ContentTypeProtobuf, "", rejecting, false}, status: 200, respType: ContentTypeProtobuf,
			appended: 4, rejected: 2, msg: "2 of 6 spans rejected"},
		{name: "partial success json", req: req{"POST", ContentTypeJSON, "", toOTLPJSON(t, rejectingRequest(), true), false}, status: 200,
			respType: ContentTypeJSON, appended: 4, rejected: 2, msg: "span id is all zeroes"},
		{name: "malformed protobuf", req: req{"POST", ContentTypeProtobuf, "", good[:len(good)-3], false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: "protobuf at offset"},
		{name: "malformed json", req: req{"POST", ContentTypeJSON, "", []byte(`{"resourceSpans":[`), false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeJSON, msg: "JSON"},
		{name: "wrong content type", req: req{"POST", "text/plain", "", good, false}, status: 415,
			grpcCode: codes.InvalidArgument, respType: ContentTypeJSON, msg: "text/plain"},
		{name: "ndjson", req: req{"POST", "application/x-ndjson", "", []byte("{}\n"), false}, status: 415,
			grpcCode: codes.InvalidArgument, respType: ContentTypeJSON, msg: "application/x-ndjson"},
		{name: "no content type", req: req{"POST", "", "", good, false}, status: 415, grpcCode: codes.InvalidArgument, respType: ContentTypeJSON},
		{name: "unknown encoding", req: req{"POST", ContentTypeProtobuf, "br", good, false}, status: 415,
			grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: `content encoding "br"`},
		{name: "not POST", req: req{"GET", ContentTypeProtobuf, "", nil, false}, status: 405, grpcCode: codes.Unimplemented, respType: ContentTypeJSON},
		{name: "oversized", req: req{"POST", ContentTypeProtobuf, "", oversized, false}, status: 413,
			grpcCode: codes.ResourceExhausted, respType: ContentTypeProtobuf, msg: "body of 65537 bytes, limit 65536"},
		{name: "oversized chunked", req: req{"POST", ContentTypeProtobuf, "", oversized, true}, status: 413,
			grpcCode: codes.ResourceExhausted, respType: ContentTypeProtobuf, msg: "more than 65536 bytes"},
		{name: "oversized gzip chunked", req: req{"POST", ContentTypeProtobuf, "gzip", gzipBytes(t, incompressible(limit+100)), true}, status: 413,
			grpcCode: codes.ResourceExhausted, respType: ContentTypeProtobuf, msg: "more than 65536 bytes"},
		{name: "gzip bomb", req: req{"POST", ContentTypeProtobuf, "gzip", bomb, false}, status: 413,
			grpcCode: codes.ResourceExhausted, respType: ContentTypeProtobuf, msg: "decompresses to more than 65536 bytes"},
		{name: "truncated gzip", req: req{"POST", ContentTypeProtobuf, "gzip", gz[:len(gz)/2], false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: "gzip body at decompressed offset"},
		{name: "gzip without trailer", req: req{"POST", ContentTypeProtobuf, "gzip", gz[:len(gz)-4], false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: "unexpected EOF"},
		{name: "corrupt gzip checksum", req: req{"POST", ContentTypeProtobuf, "gzip", flipByte(gz, len(gz)-6), false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: "checksum"},
		{name: "not gzip", req: req{"POST", ContentTypeJSON, "gzip", goodJSON, false}, status: 400,
			grpcCode: codes.InvalidArgument, respType: ContentTypeJSON, msg: "gzip header"},
		{name: "disk full", req: req{"POST", ContentTypeProtobuf, "", good, false}, appendErr: fmt.Errorf("store 000001: fsync: %w", syscall.ENOSPC),
			status: 503, grpcCode: codes.Unavailable, respType: ContentTypeProtobuf, retryAfter: "10", msg: "disk_full: store 000001: fsync: no space left on device"},
		{name: "overloaded store", req: req{"POST", ContentTypeJSON, "", goodJSON, false}, appendErr: errOverloaded,
			status: 429, grpcCode: codes.ResourceExhausted, respType: ContentTypeJSON, retryAfter: "1", msg: "overloaded: commit queue full"},
		{name: "store rejects", req: req{"POST", ContentTypeProtobuf, "", good, false}, appendErr: errInvalid,
			status: 400, grpcCode: codes.InvalidArgument, respType: ContentTypeProtobuf, msg: "bad_request: invalid span"},
		{name: "store fails", req: req{"POST", ContentTypeProtobuf, "", good, false}, appendErr: errFailingAppend,
			status: 500, grpcCode: codes.Internal, respType: ContentTypeProtobuf, msg: "internal: append failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := &recordingAppender{err: tc.appendErr}
			h := NewHTTPHandler(app, Options{MaxBodySize: limit, Status: statusMapper})
			var body io.Reader = bytes.NewReader(tc.req.body)
			if tc.req.hideLength {
				body = chunkedReader{body}
			}
			r := httptest.NewRequest(tc.req.method, "/v1/traces", body)
			if tc.req.contentType != "" {
				r.Header.Set("Content-Type", tc.req.contentType)
			}
			if tc.req.encoding != "" {
				r.Header.Set("Content-Encoding", tc.req.encoding)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)

			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != tc.respType {
				t.Errorf("response content type %q, want %q", ct, tc.respType)
			}
			if ra := w.Header().Get("Retry-After"); ra != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", ra, tc.retryAfter)
			}
			unmarshal := proto.Unmarshal
			if tc.respType == ContentTypeJSON {
				unmarshal = protojson.Unmarshal
			}
			if tc.status == 200 {
				var resp collectortrace.ExportTraceServiceResponse
				if err := unmarshal(w.Body.Bytes(), &resp); err != nil {
					t.Fatalf("response: %v", err)
				}
				ps := resp.GetPartialSuccess()
				if ps.GetRejectedSpans() != tc.rejected || !strings.Contains(ps.GetErrorMessage(), tc.msg) {
					t.Errorf("partial success %v, want %d rejected and %q", ps, tc.rejected, tc.msg)
				}
				if tc.rejected == 0 && ps != nil {
					t.Errorf("partial success %v without rejections", ps)
				}
			} else {
				var st spb.Status
				if err := unmarshal(w.Body.Bytes(), &st); err != nil {
					t.Fatalf("error body %q: %v", w.Body, err)
				}
				if codes.Code(st.Code) != tc.grpcCode || !strings.Contains(st.Message, tc.msg) {
					t.Errorf("status %v %q, want %v and %q", codes.Code(st.Code), st.Message, tc.grpcCode, tc.msg)
				}
			}
			if got := len(app.stored()); got != tc.appended {
				t.Errorf("%d spans stored, want %d", got, tc.appended)
			}
			if tc.appendErr == nil && tc.status != 200 && app.appendCalls() != 0 {
				t.Errorf("a failed request called Append")
			}
		})
	}
}

// incompressible returns n pseudo-random bytes.
func incompressible(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

func flipByte(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}

// TestHTTPOverloaded answers 429 with Retry-After while MaxInFlight
// requests are being appended, and accepts again once they are done.
func TestHTTPOverloaded(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	h := NewHTTPHandler(app, Options{MaxInFlight: 1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	body, _ := proto.Marshal(sampleRequest())
	post := func() *http.Response {
		resp, err := http.Post(srv.URL+"/v1/traces", ContentTypeProtobuf, bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := make(chan *http.Response)
	go func() { first <- post() }()
	select {
	case <-app.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("first request never reached Append")
	}
	second := post()
	if second.StatusCode != http.StatusTooManyRequests || second.Header.Get("Retry-After") != "1" {
		t.Errorf("second request: %d, Retry-After %q", second.StatusCode, second.Header.Get("Retry-After"))
	}
	close(app.block)
	if r := <-first; r == nil || r.StatusCode != 200 {
		t.Fatalf("first request: %v", r)
	}
	app.entered = nil
	if third := post(); third.StatusCode != 200 {
		t.Errorf("third request after the first finished: %d", third.StatusCode)
	}
	if n := len(app.stored()); n != 8 {
		t.Errorf("%d spans stored, want 8", n)
	}
}

// TestHTTPAckAfterAppend: the response is written only after Append
// returned (the store acknowledges durability by returning).
func TestHTTPAckAfterAppend(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{})}
	srv := httptest.NewServer(NewHTTPHandler(app, Options{}))
	defer srv.Close()
	body, _ := proto.Marshal(sampleRequest())
	done := make(chan int)
	go func() {
		resp, err := http.Post(srv.URL, ContentTypeProtobuf, bytes.NewReader(body))
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	select {
	case code := <-done:
		t.Fatalf("answered %d before Append returned", code)
	case <-time.After(200 * time.Millisecond):
	}
	close(app.block)
	if code := <-done; code != 200 {
		t.Fatalf("status %d", code)
	}
}

// TestHTTPClientGone: a client that goes away while its spans are being
// appended cancels the append through the request context.
func TestHTTPClientGone(t *testing.T) {
	app := &recordingAppender{block: make(chan struct{}), entered: make(chan struct{}, 1)}
	h := NewHTTPHandler(app, Options{Status: statusMapper})
	body, _ := proto.Marshal(sampleRequest())
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(body)).WithContext(ctx)
	r.Header.Set("Content-Type", ContentTypeProtobuf)
	w := httptest.NewRecorder()
	go func() { <-app.entered; cancel() }()
	h.ServeHTTP(w, r)
	if w.Code == 200 || len(app.stored()) != 0 {
		t.Fatalf("status %d, %d stored", w.Code, len(app.stored()))
	}
}

// TestHTTPEmptyRequest answers an empty request with success and appends
// nothing.
func TestHTTPEmptyRequest(t *testing.T) {
	app := &recordingAppender{}
	h := NewHTTPHandler(app, Options{})
	body, _ := proto.Marshal(&collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{}}})
	r := httptest.NewRequest("POST", "/v1/traces", bytes.NewReader(body))
	r.Header.Set("Content-Type", ContentTypeProtobuf)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.Len() != 0 || app.appendCalls() != 0 {
		t.Fatalf("status %d body %q appends %d", w.Code, w.Body, app.appendCalls())
	}
}
