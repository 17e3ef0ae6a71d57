package trace

import (
	"strings"
	"testing"
)

// checkIDsFromHex fails unless traceIDFromHex and spanIDFromHex (what the
// Trace JSON reader parses ids with, from its input's bytes) accept
// exactly what ParseTraceID and ParseSpanID accept, with the same ids.
func checkIDsFromHex(t *testing.T, s string) {
	t.Helper()
	want, err := ParseTraceID(s)
	got, ok := traceIDFromHex([]byte(s))
	if ok != (err == nil) || ok && got != want {
		t.Fatalf("trace id %q: traceIDFromHex %v %v, ParseTraceID %v %v", s, got, ok, want, err)
	}
	wantSpan, err := ParseSpanID(s)
	gotSpan, ok := spanIDFromHex([]byte(s))
	if ok != (err == nil) || ok && gotSpan != wantSpan {
		t.Fatalf("span id %q: spanIDFromHex %v %v, ParseSpanID %v %v", s, gotSpan, ok, wantSpan, err)
	}
}

// TestIDsFromHex: every length from 0 to 33 of valid digits (lower and
// upper case), and each with one byte that is not a digit, at every place.
func TestIDsFromHex(t *testing.T) {
	const digits = "0123456789abcdefABCDEF0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	for n := 0; n <= 33; n++ {
		s := strings.Repeat(digits, 2)[:n]
		checkIDsFromHex(t, s)
		for i := range n {
			for _, bad := range []byte{'g', 'G', 'x', ' ', '-', '+', '_', '/', ':', '@', '`', 0, 0xff} {
				b := []byte(s)
				b[i] = bad
				checkIDsFromHex(t, string(b))
			}
		}
	}
	checkIDsFromHex(t, "ffffffffffffffff")
	checkIDsFromHex(t, "0x1f")
}

func FuzzIDsFromHex(f *testing.F) {
	for _, s := range []string{"", "1", "00000000000000000000000000000001", "4bf92f3577b34da6a3ce929d0e0e4736",
		"00f067aa0ba902b7", "ZZ", "0x1f", "+1", "-1", "1_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkIDsFromHex(t, s) })
}
