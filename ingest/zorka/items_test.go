package zorka

import (
	"errors"
	"strings"
	"testing"
)

// Errors of the item shapes both versions share (items.go) that the
// per-version error tables do not reach: each names the offset of the
// offending item, in both versions' words.
func TestSharedItemErrors(t *testing.T) {
	const begin2x = "c39f 00 01 c5 82 01 00" // record, span [clock 1, no type]; next item at 8
	tests := []struct {
		name   string
		body   string
		offset int
		msg    string
	}{
		{"1.90 record start without array", recStart + prolog1 + begin1 + "c8 80", 24, "record start (tag 8) must be followed by an indefinite array"},
		{"2.x record start without array", "c3 80", 0, "TRACE_START (tag 3) must be followed by an indefinite array"},
		{"2.x end outside", "c4 82 00 00", 0, "TRACE_END outside a record"},
		{"1.90 span id not an integer", recStart + prolog1 + "d821 82 01 6178", 16, "TraceBegin span id: expected an integer"},
		{"1.90 parent id not an integer", recStart + prolog1 + "d821 83 01 02 6178", 17, "TraceBegin parent id: expected an integer"},
		{"2.x trace type not a symbol id", "c39f 00 01 c5 82 01 6178", 7, "TRACE_BEGIN trace type: expected an unsigned integer"},
		{"2.x span id not an integer", "c39f 00 01 c5 83 01 00 6178", 8, "TRACE_BEGIN span id: expected an integer"},
		{"2.x attribute key undefined", begin2x + "c6 82 09 6131", 10, "TRACE_ATTR key: undefined string symbol 9"},
		{"2.x upward attribute type", begin2x + "c6 83 6178 04 6131", 10, "TRACE_ATTR trace type: expected an unsigned integer"},
		{"2.x exception class undefined", begin2x + "c7 85 01 09 60 00 f6", 11, "exception class: undefined string symbol 9"},
		{"2.x exception message not text", begin2x + "c7 85 01 05 04 00 f6", 12, "exception message: expected a text string"},
		{"2.x exception attributes not a map", begin2x + "c7 86 01 05 60 00 f6 80", 15, "exception attributes must be a definite-length map, found an array"},
		{"2.x exception attributes too many", begin2x + "c7 86 01 05 60 00 f6 b8ff", 15, "map of 255 entries does not fit"},
		{"2.x exception attribute key undefined", begin2x + "c7 86 01 05 60 00 f6 a1 09 6131", 16, "exception attribute key: undefined string symbol 9"},
		{"2.x exception stack not an array", begin2x + "c7 85 01 05 60 00 a0", 14, "exception stack: expected a definite-length array"},
		{"1.90 exception message symbol undefined", recStart + prolog1 + begin1 + "d822 85 01 c605 09 00 80", 30, "exception message: undefined string symbol 9"},
		{"1.90 exception stack null", recStart + prolog1 + begin1 + "d822 85 01 c605 60 00 f6", 32, "exception stack: expected a definite-length array, found null"},
		{"2.x exception ref unknown", begin2x + "c8 05", 8, "exception ref 5: no exception with that id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSessions(t, "s")
			spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, tc.body))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %d spans, err %v; want a DecodeError", len(spans), err)
			}
			if de.Offset != tc.offset || !strings.Contains(de.Msg, tc.msg) {
				t.Fatalf("got offset %d %q, want offset %d containing %q", de.Offset, de.Msg, tc.offset, tc.msg)
			}
		})
	}
}

// A 1.90 exception message may be a symbol id instead of text (zorka-tdb
// accepts it); the class is a C6 string ref.
func TestException190MessageSymbol(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"d822 85 01 c605 04 00 80"+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 || spans[0].Root.Exception == nil {
		t.Fatalf("spans %+v", spans)
	}
	if exc := spans[0].Root.Exception; exc.Class != "java.lang.Error" || exc.Message != "key" || exc.Stack != nil || spans[0].Errors != 1 {
		t.Fatalf("exception %+v, errors %d", exc, spans[0].Errors)
	}
}

// A 2-element 1.90 TraceBegin whose second element is negative is a span
// id (a Java long), never a pre-1.90 trace type, however small its
// magnitude.
func TestTraceBegin190NegativeSpanID(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+"d821 82 1b 0000016a79b81110 20"+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 || uint64(spans[0].SpanID) != 1<<64-1 || spans[0].Type != "" {
		t.Fatalf("spans %+v", spans)
	}
	if _, ok := spans[0].Attrs.Get("zorka.trace_type"); ok {
		t.Fatalf("a negative span id read as a trace type: %v", spans[0].Attrs)
	}
	if _, ok := spans[0].Attrs.Get("zorka.tstart_unit"); ok {
		t.Fatalf("legacy start unit on a 1.90 span: %v", spans[0].Attrs)
	}
}

// A 1.90 exception message that starts like a symbol id must be one: an
// indefinite-length head (1F) or a truncated one is an error at the
// message, not symbol 0 (which the reader used to fall back to, reading on
// after the bad byte).
func TestException190MessageSymbolMalformed(t *testing.T) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("s", true, hx(t, testAgd190+"c1 83 00 61 7a 00")); err != nil { // symbol 0 = "z"
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, body, msg string }{
		{"indefinite", recStart + prolog1 + begin1 + "d822 85 01 c605 1f 00 80" + epilog1, "exception message: expected an unsigned integer, found an invalid byte 0x1f"},
		{"truncated", recStart + prolog1 + begin1 + "d822 85 01 c605 19 00", "truncated item head 0x19"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, tc.body))
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset != 30 || !strings.Contains(de.Msg, tc.msg) {
				t.Fatalf("got %d spans, %v; want a DecodeError at offset 30 containing %q", len(spans), err, tc.msg)
			}
		})
	}
}

// Integer attribute keys keep their decimal text, beyond int64 too; an
// indefinite-length integer head is no key (as it is no value).
func TestIntegerAttributeKeys(t *testing.T) {
	s := newTestSessions(t, "s")
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+
		"c9 a4 1b ffffffffffffffff 01 3b ffffffffffffffff 02 20 03 17 04"+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int64{"18446744073709551615": 1, "-18446744073709551616": 2, "-1": 3, "23": 4} {
		if v, ok := spans[0].Attrs.Get(key); !ok || v.Int != want {
			t.Errorf("key %s = %v, want %d (attrs %v)", key, v, want, spans[0].Attrs)
		}
	}
	for _, b := range []string{"1f", "3f"} {
		_, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"c9 a1 "+b+" 01"+epilog1))
		var de *DecodeError
		if !errors.As(err, &de) || de.Offset != 26 || !strings.Contains(de.Msg, "attribute key must be a string or a string ref, found an invalid byte 0x"+b) {
			t.Errorf("key %s: got %v", b, err)
		}
	}
}
