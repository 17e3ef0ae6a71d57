package client

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzReadJSONLines: any answer body either reads as its complete lines
// (none of them an error trailer) or fails; an error trailer always fails
// with an *APIError, and nothing panics.
func FuzzReadJSONLines(f *testing.F) {
	f.Add([]byte("{\"trace_id\":\"01\"}\n{\"trace_id\":\"02\"}\n"))
	f.Add([]byte("{\"trace_id\":\"01\"}\n{\"error\":\"boom\",\"code\":\"internal\",\"status\":500}\n"))
	f.Add([]byte("{\"trace_id\":\"01\"}\n{\"trace"))
	f.Add([]byte("\n\n  \n"))
	f.Add([]byte("{\"error\":1}\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var lines [][]byte
		err := readJSONLines(bytes.NewReader(body), func(line []byte) error {
			lines = append(lines, append([]byte(nil), line...))
			return nil
		})
		var want [][]byte
		trailer, cut := false, false
		parts := bytes.Split(body, []byte("\n"))
		for i, p := range parts {
			p = bytes.TrimSpace(p)
			if len(p) == 0 {
				continue
			}
			if i == len(parts)-1 {
				cut = true
				break
			}
			if bytes.HasPrefix(p, []byte(`{"error"`)) {
				trailer = true
				break
			}
			want = append(want, p)
		}
		switch {
		case trailer:
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status < 400 {
				t.Fatalf("error trailer: err %v", err)
			}
		case cut:
			if err == nil || !strings.Contains(err.Error(), "cut short") {
				t.Fatalf("cut answer: err %v", err)
			}
		default:
			if err != nil {
				t.Fatalf("complete answer: %v", err)
			}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d", len(lines), len(want))
			}
			for i := range want {
				if !bytes.Equal(lines[i], want[i]) {
					t.Fatalf("line %d: %q, want %q", i, lines[i], want[i])
				}
			}
		}
	})
}
