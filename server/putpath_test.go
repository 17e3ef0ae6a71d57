package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWritePutResponseMatchesWriteJSON: the hand-written answer of a write
// is byte for byte what writeJSON gives, headers included.
func TestWritePutResponseMatchesWriteJSON(t *testing.T) {
	for _, n := range []int{0, 1, 500, 1 << 20} {
		a, b := httptest.NewRecorder(), httptest.NewRecorder()
		if err := writePutResponse(a, n); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(b, http.StatusOK, PutResponse{Spans: n}); err != nil {
			t.Fatal(err)
		}
		if a.Code != b.Code || a.Body.String() != b.Body.String() || a.Header().Get("Content-Type") != b.Header().Get("Content-Type") {
			t.Fatalf("n=%d: %d %q %q, want %d %q %q", n, a.Code, a.Body, a.Header(), b.Code, b.Body, b.Header())
		}
	}
}

// oneByteReader returns at most one byte per Read, as a slow client's body.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// TestReadBody: a body reads back whole whether its Content-Length is
// right, too small, too large or unknown, in one read or byte by byte; a
// body over the limit fails with MaxBytesReader's error.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("0123456789", 100)
	for _, size := range []int64{-1, 0, 10, 999, 1000, 1001, 5000} {
		for _, slow := range []bool{false, true} {
			var r io.Reader = strings.NewReader(body)
			if slow {
				r = oneByteReader{r}
			}
			got, err := readBody(r, size, 1<<20)
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Fatalf("size %d slow %v: %d bytes, %v", size, slow, len(got), err)
			}
		}
	}
	rec := httptest.NewRecorder()
	_, err := readBody(http.MaxBytesReader(rec, io.NopCloser(strings.NewReader(body)), 100), 100, 100)
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		t.Fatalf("a body over the limit: %v", err)
	}
}
