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

// TestJSONIntegerFields: span counts and times read by the one-pass path
// (up to 18 digits) and by the general one (signs, 19 digits and more,
// fractions, exponents, leading zeros) give the same values and errors.
func TestJSONIntegerFields(t *testing.T) {
	for _, c := range []struct {
		lit  string
		want int64
		err  string
	}{
		{"0", 0, ""}, {"7", 7, ""}, {"10", 10, ""},
		{"123456789012345678", 123456789012345678, ""},
		{"1234567890123456789", 1234567890123456789, ""},
		{"9223372036854775807", 9223372036854775807, ""},
		{"-0", 0, ""}, {"-15", -15, ""},
		{"9223372036854775808", 0, "integer 9223372036854775808 overflows int64"},
		{"0.5", 0, "calls: want an integer, got 0.5"},
		{"12e3", 0, "calls: want an integer, got 12e3"},
		{"123456789012345678.0", 0, "want an integer, got 123456789012345678.0"},
		{"01", 0, "unexpected '1'"},
		{"00", 0, "unexpected '0'"},
	} {
		var s Span
		err := s.UnmarshalJSON([]byte(`{"calls":` + c.lit + `}`))
		var v Span // the same literal as an attribute value
		verr := v.UnmarshalJSON([]byte(`{"attrs":{"n":` + c.lit + `}}`))
		if c.err == "" || strings.HasPrefix(c.err, "integer") || strings.HasPrefix(c.err, "unexpected") {
			if (verr == nil) != (c.err == "") || verr == nil && (len(v.Attrs) != 1 || !v.Attrs[0].Value.Equal(Int(c.want))) {
				t.Errorf("attribute %s: %v, %v; want %d (error %q)", c.lit, v.Attrs, verr, c.want, c.err)
			}
		}
		if c.err == "" {
			if err != nil || s.Calls != c.want {
				t.Errorf("calls %s: %d, %v; want %d", c.lit, s.Calls, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("calls %s: %v, want an error naming %q", c.lit, err, c.err)
		}
	}
}
