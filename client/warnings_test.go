package client

import (
	"net/http"
	"testing"
)

// FuzzHeaderWarnings: any X-Ztsd-Warnings value decodes to warnings or a
// clear error naming the header, never a panic.
func FuzzHeaderWarnings(f *testing.F) {
	f.Add(`[{"store":"000003","offset":12345,"error":"chunk at offset 12345: checksum mismatch"}]`)
	f.Add(`[]`)
	f.Add(`[{"store":1}]`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set(warningsHeader, v)
		ws, err := headerWarnings(h)
		if err != nil && ws != nil {
			t.Fatalf("both warnings and an error: %v", err)
		}
	})
}

// TestHeaderWarnings: the daemon's header decodes to what it said, and the
// client's handler is told about each warning.
func TestHeaderWarnings(t *testing.T) {
	h := http.Header{}
	h.Set(warningsHeader, `[{"store":"000003","offset":12345,"error":"checksum mismatch"}]`)
	ws, err := headerWarnings(h)
	if err != nil || len(ws) != 1 || ws[0] != (Warning{Store: "000003", Offset: 12345, Error: "checksum mismatch"}) {
		t.Fatalf("%+v %v", ws, err)
	}
	c := New("/nonexistent")
	var got []Warning
	c.OnWarning(func(w Warning) { got = append(got, w) })
	c.warned(ws)
	if len(got) != 1 || got[0].String() != "store 000003: damaged chunk at offset 12345 left out: checksum mismatch" {
		t.Fatalf("handler got %+v", got)
	}
	if _, err := headerWarnings(http.Header{warningsHeader: {"{"}}); err == nil {
		t.Fatal("a malformed header decoded")
	}
}
