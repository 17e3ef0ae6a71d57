package zorka

import (
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// hx decodes hex with spaces, for hand-written bodies.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// Hand-written agent data: strings 1 "com.a.A" (class), 2 "run" (method),
// 3 "()V" (signature), 4 "key" (plain), 5 "java.lang.Error" (class),
// 6 "db" (plain); method 1 = void com.a.A.run(), method 2 = same class,
// method "run", signature "()V" too.
const testAgd190 = `
c1 83 01 67 636f6d2e612e41 05
c1 83 02 63 72756e 06
c1 83 03 63 282956 08
c1 83 04 63 6b6579 00
c1 83 05 6f 6a6176612e6c616e672e4572726f72 05
c1 83 06 62 6462 00
c2 84 01 01 02 03
c2 84 02 01 02 03`

const (
	recStart  = "c89f"
	prolog1   = "ca48 0000010000000000" // method 1, tstart 0
	prolog1LE = "cb48 0000000000010000" // the same, little-endian
	begin1    = "d821 81 1b 0000016a79b81110"
	epilog1   = "cc48 0000010000000010 ff" // calls 1, tstop 16 ticks
	epilog1LE = "cd48 1000000000010000 ff"
)

func newTestSessions(t testing.TB, session string) *Sessions {
	t.Helper()
	s := NewSessions(Options{})
	if err := s.SubmitAgentData(session, true, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	return s
}

const testTraceID = "0102030405060708090a0b0c0d0e0f10"

func TestTraceDecodeErrors(t *testing.T) {
	deep := strings.Repeat(recStart+prolog1, trace.MaxDepth+1)
	deepValue := recStart + prolog1 + begin1 + "c9 a1 c604" + strings.Repeat("81", 40) + "00"
	tests := []struct {
		name   string
		body   string
		offset int
		msg    string
	}{
		{"unknown tag", recStart + prolog1 + begin1 + "d863 00", 24, "unknown tag 99"},
		{"float value", recStart + prolog1 + begin1 + "c9 a1 c604 fa3f800000", 28, "float in an attribute value"},
		{"half float value", recStart + prolog1 + begin1 + "c9 a1 6161 f93c00", 28, "float"},
		{"undefined method", recStart + "ca48 0000090000000000", 2, "undefined method id 9"},
		{"undefined key ref", recStart + prolog1 + begin1 + "c9 a1 c61863 6178", 26, "attribute key: undefined string symbol 99"},
		{"undefined value ref", recStart + prolog1 + begin1 + "c9 a1 c604 c61863", 28, "attribute value: undefined string symbol 99"},
		{"truncated prolog", recStart + "ca48 000001", 2, "prolog must be an 8-byte byte string"},
		{"truncated text", recStart + prolog1 + begin1 + "c9 a1 c604 6a 6162", 28, "runs past the end"},
		{"truncated head", recStart + prolog1 + "d821 81 1b 0000", 15, "truncated item head"},
		{"truncated map", recStart + prolog1 + begin1 + "c9 a2 c604 6161", 30, "unexpected end of data"},
		{"huge list", recStart + prolog1 + begin1 + "c9 a1 c604 9b ffffffffffffffff", 28, "does not fit"},
		{"huge map", recStart + prolog1 + begin1 + "c9 bb 0fffffffffffffff", 25, "does not fit"},
		{"huge string", recStart + prolog1 + begin1 + "c9 a1 c604 7b 7fffffffffffffff", 28, "runs past the end"},
		{"records too deep", deep, 12 * trace.MaxDepth, "records nested deeper than 1000"},
		{"value too deep", deepValue, 28 + 32, "nested deeper than 32"},
		{"epilog not last", recStart + prolog1 + begin1 + "cc48 0000010000000010 c9a0", 34, "epilog must be the last item"},
		{"epilog bad size", recStart + prolog1 + begin1 + "cc4c 000000000000000000000000 ff", 24, "8- or 16-byte"},
		{"TraceBegin arity", recStart + prolog1 + "d821 84 01 02 03 04", 12, "1 to 3 elements, has 4"},
		{"TraceBegin clock range", recStart + prolog1 + "d821 81 1b 7fffffffffffffff", 12, "out of range"},
		{"TraceBegin negative clock", recStart + prolog1 + "d821 81 20", 12, "out of range"},
		{"second TraceBegin", recStart + prolog1 + begin1 + begin1, 24, "second TraceBegin in the record that starts at offset 0"},
		{"break outside", "ff", 0, "break outside a record"},
		{"attrs outside", "c9a0", 0, "attributes outside a record"},
		{"prolog outside", prolog1, 0, "prolog outside a record"},
		{"exception outside", "d822 85 01 c605 60 00 80", 0, "exception outside a record"},
		{"untagged item", "01", 0, "expected a tagged item, found an unsigned integer"},
		{"no TraceBegin", recStart + prolog1 + epilog1, 0, "top-level record has no TraceBegin"},
		{"open without TraceBegin", recStart + prolog1 + recStart, 0, "top-level record has no TraceBegin"},
		{"exception ref unknown", recStart + prolog1 + begin1 + "d823 05", 24, "exception ref 5"},
		{"exception cause unknown", recStart + prolog1 + begin1 + "d822 85 01 c605 60 07 80", 24, "exception cause 7 was not sent before"},
		{"exception class not a ref", recStart + prolog1 + begin1 + "d822 85 01 05 60 00 80", 28, "exception class must be a string ref"},
		{"exception arity", recStart + prolog1 + begin1 + "d822 84 01 c605 60 00", 24, "must have 5 elements"},
		{"exception class undefined", recStart + prolog1 + begin1 + "d822 85 01 c609 60 00 80", 28, "exception class: undefined string symbol 9"},
		{"stack element arity", recStart + prolog1 + begin1 + "d822 85 01 c605 60 00 81 83 01 02 03 00", 33, "stack element must have 4 elements"},
		{"stack element undefined", recStart + prolog1 + begin1 + "d822 85 01 c605 60 00 81 84 01 02 09 05", 33, "stack element file: undefined string symbol 9"},
		{"reserved additional info", recStart + prolog1 + begin1 + "c9 bc", 25, "malformed item head"},
		{"indefinite string", recStart + prolog1 + begin1 + "c9 a1 c604 7f 6161 ff", 28, "indefinite-length strings"},
		{"tag in value", recStart + prolog1 + begin1 + "c9 a1 c604 c1 00", 28, "unexpected tag 1 in an attribute value"},
		{"bad key", recStart + prolog1 + begin1 + "c9 a1 f5 00", 26, "attribute key must be a string"},
		{"simple value", recStart + prolog1 + begin1 + "c9 a1 c604 f0", 28, "unexpected a simple value 0xf0"},
		{"trace flags not uint", recStart + prolog1 + begin1 + "cf 61 78", 25, "trace flags: expected an unsigned integer"},
		{"trace info not map", recStart + prolog1 + begin1 + "ce 80", 25, "trace info must be a definite-length map"},
		{"trace info empty", recStart + prolog1 + begin1 + "ce a0", 25, "trace info map of 0 entries"},
		{"trace info outside", "ce a1 0c 00", 2, "trace info key 12 outside a record"},
		{"trace info span outside", "ce a1 12 05", 2, "outside any span"},
		{"2.x unknown tag", "c39f 00 01 c9 a0", 4, "unknown tag 9 in Zorka 2.x trace data"},
		{"2.x symbol def in trace", "c39f 00 01 c1 82 01 60", 4, "symbols belong in agent data"},
		{"2.x undefined method", "c39f 00 09", 3, "undefined method id 9"},
		{"2.x end before start", "c39f 0a 01 c5 82 1b 0000016a79b81110 00 c4 82 05 01 ff", 16, "before it started"},
		{"2.x negative calls", "c39f 00 01 c5 82 01 00 c4 82 05 20 ff", 11, "TRACE_END calls -1 is negative"},
		{"2.x end not last", "c39f 00 01 c5 82 01 00 c4 82 05 01 c4", 12, "TRACE_END must be the last item"},
		{"2.x begin arity", "c39f 00 01 c5 81 01", 4, "2 to 4 elements"},
		{"2.x undefined trace type", "c39f 00 01 c5 82 01 09", 7, "trace type: undefined string symbol 9"},
		{"2.x attr arity", "c39f 00 01 c5 82 01 00 c6 84 01 02 03 04", 8, "2 or 3 elements"},
		{"2.x exception arity", "c39f 00 01 c5 82 01 00 c7 84 01 05 60 00", 8, "5 or 6 elements"},
		{"2.x float ok, tag not", "c39f 00 01 c5 82 01 00 c6 82 04 c6 00", 11, "unexpected tag 6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSessions(t, "s")
			body := hx(t, tc.body)
			spans, err := s.SubmitTraceData("s", false, testTraceID, body)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %d spans, err %v; want a DecodeError", len(spans), err)
			}
			if de.Offset != tc.offset || !strings.Contains(de.Msg, tc.msg) {
				t.Fatalf("got offset %d %q, want offset %d containing %q", de.Offset, de.Msg, tc.offset, tc.msg)
			}
			if errors.Is(err, ErrUnknownSession) {
				t.Fatal("a decode error must not look like an unknown session")
			}
			if spans != nil {
				t.Fatal("spans returned with an error")
			}
		})
	}
}

func TestAgentDataErrors(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		offset int
		msg    string
	}{
		{"unknown tag", "c3 82 01 60", 0, "unknown tag 3"},
		{"untagged", "82 01 60", 0, "expected a tagged definition"},
		{"string def arity", "c1 84 01 60 00 00", 0, "must have 3 elements"},
		{"string def type", "c1 83 01 60 03", 4, "type 3 is not one of 0, 4–8"},
		{"string def text", "c1 83 01 01 00", 3, "string def text: expected a text string"},
		{"method def undefined", "c1 83 01 60 05 c2 84 01 01 09 03", 5, "method def 1: undefined string symbol 9"},
		{"method def arity", "c2 83 01 01 01", 0, "must have 4 elements"},
		{"truncated", "c1 83 01 65 6162", 3, "runs past the end"},
		{"float", "c1 83 01 60 fa00000000", 4, "string def type: expected an unsigned integer, found a float"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSessions(t, "s")
			err := s.SubmitAgentData("s", false, hx(t, tc.body))
			var de *DecodeError
			if !errors.As(err, &de) || de.Offset != tc.offset || !strings.Contains(de.Msg, tc.msg) {
				t.Fatalf("got %v, want offset %d containing %q", err, tc.offset, tc.msg)
			}
		})
	}
}

// A rejected agent-data body changes nothing; a good one applies whole and
// re-definitions overwrite.
func TestAgentDataAtomicAndRedefinitions(t *testing.T) {
	s := newTestSessions(t, "s")
	trc := hx(t, recStart+prolog1+begin1+epilog1)
	// Redefine string 1 and method 1, then fail at the end of the body.
	bad := hx(t, "c1 83 07 63 58595a 05  c2 84 01 07 02 03  c1 83 08 60 03")
	if err := s.SubmitAgentData("s", false, bad); err == nil {
		t.Fatal("bad body accepted")
	}
	spans, err := s.SubmitTraceData("s", false, testTraceID, trc)
	if err != nil || spans[0].Root.Method != "void com.a.A.run()" {
		t.Fatalf("after a rejected body: %v %v", spans, err)
	}
	// The same redefinition, valid: method 1 now renders class XYZ.
	good := hx(t, "c1 83 07 63 58595a 05  c2 84 01 07 02 03")
	if err := s.SubmitAgentData("s", false, good); err != nil {
		t.Fatal(err)
	}
	spans, err = s.SubmitTraceData("s", false, testTraceID, trc)
	if err != nil || spans[0].Root.Method != "void XYZ.run()" {
		t.Fatalf("after redefinition: %+v %v", spans[0].Root, err)
	}
	// Reset clears: string 7 is gone, so a method def naming it fails.
	if err := s.SubmitAgentData("s", true, hx(t, "c2 84 01 07 02 03")); err == nil {
		t.Fatal("method def over a reset session resolved a cleared symbol")
	}
	// The failed reset body did not clear anything either.
	if spans, err = s.SubmitTraceData("s", false, testTraceID, trc); err != nil || spans[0].Root.Method != "void XYZ.run()" {
		t.Fatalf("after a rejected reset: %v", err)
	}
	// 2.x string defs (2 elements) are accepted and mix with 1.90 ones.
	if err := s.SubmitAgentData("s", false, hx(t, "c1 82 07 63 414243  c2 84 01 07 02 03")); err != nil {
		t.Fatal(err)
	}
	if spans, err = s.SubmitTraceData("s", false, testTraceID, trc); err != nil || spans[0].Root.Method != "void ABC.run()" {
		t.Fatalf("after 2.x string def: %v", err)
	}
}

func TestRenderMethod(t *testing.T) {
	tests := []struct{ class, method, sig, want string }{
		{"org.apache.catalina.core.StandardEngineValve", "invoke",
			"(Lorg/apache/catalina/connector/Request;Lorg/apache/catalina/connector/Response;)V",
			"void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)"},
		{"a.B", "m", "()V", "void a.B.m()"},
		{"a.B", "m", "(IJZBCSFD)Ljava/lang/String;", "String a.B.m(int, long, boolean, byte, char, short, float, double)"},
		{"a.B", "m", "([[I[Ljava/util/Map$Entry;)[[Ljava/lang/Object;", "Object[][] a.B.m(int[][], Map$Entry[])"},
		{"a.B", "<init>", "(Ljava/lang/String;)V", "void a.B.<init>(String)"},
		{"a.B", "m", "not a descriptor", "a.B.mnot a descriptor"},
		{"a.B", "m", "(I", "a.B.m(I"},
		{"a.B", "m", "(Q)V", "a.B.m(Q)V"},
		{"a.B", "m", "()VV", "a.B.m()VV"},
		{"a.B", "m", "(L;)V", "a.B.m(L;)V"},
		{"a.B", "m", "([)V", "a.B.m([)V"},
		{"a.B", "m", "()[V", "a.B.m()[V"},
		{"a.B", "m", "", "a.B.m"},
	}
	for _, tc := range tests {
		if got := renderMethod(tc.class, tc.method, tc.sig); got != tc.want {
			t.Errorf("renderMethod(%q, %q, %q) = %q, want %q", tc.class, tc.method, tc.sig, got, tc.want)
		}
	}
}

func TestValuesAndText(t *testing.T) {
	s := newTestSessions(t, "s")
	body := hx(t, recStart+prolog1+begin1+
		"c9 bf"+ // indefinite map
		"c604 c606"+ // key → ref "db"
		"6161 f5"+ // a → true
		"6162 f4"+
		"6163 f6"+
		"6164 f7"+
		"6165 3b 7fffffffffffffff"+ // -2^63
		"6166 1b ffffffffffffffff"+ // beyond int64 → text
		"6167 3b ffffffffffffffff"+
		"6168 43 ff0001"+ // invalid UTF-8 bytes → hex
		"6169 43 616263"+ // bytes as text
		"616a 63 e96cf8"+ // Latin-1 text
		"616b 9f 01 9f ff a0 ff"+ // nested list, empty list and map
		"616c a2 01 02 21 61 78"+ // map with int keys
		"ff"+epilog1)
	spans, err := s.SubmitTraceData("s", false, testTraceID, body)
	if err != nil {
		t.Fatal(err)
	}
	got := spans[0].Root.Attrs
	want := trace.Attrs{}
	want.Set("key", trace.String("db"))
	want.Set("a", trace.Bool(true))
	want.Set("b", trace.Bool(false))
	want.Set("c", trace.Null())
	want.Set("d", trace.Null())
	want.Set("e", trace.Int(-1<<63))
	want.Set("f", trace.String("18446744073709551615"))
	want.Set("g", trace.String("-18446744073709551616"))
	want.Set("h", trace.String("0xff0001"))
	want.Set("i", trace.String("abc"))
	want.Set("j", trace.String("éløø"[:0]+"él\u00f8"))
	want.Set("k", trace.List(trace.Int(1), trace.List(), trace.MapValue(nil)))
	want.Set("l", trace.MapValue(trace.Attrs{{Key: "1", Value: trace.Int(2)}, {Key: "-2", Value: trace.String("x")}}))
	if !got.Equal(want) {
		t.Fatalf("attrs\n got %v\nwant %v", got, want)
	}
	if err := spans[0].Validate(); err != nil {
		t.Fatal(err)
	}
}

// Zorka 2.x: nested records, a nested span, upward attributes, exception
// with attributes and a cause, the ERROR_MARK flag, a streamed record.
func TestDecode2x(t *testing.T) {
	s := NewSessions(Options{})
	agd := hx(t, `
		c1 82 01 65 612e622e43   c1 82 02 62 6d31   c1 82 03 63 282956
		c1 82 04 62 6462   c1 82 05 64 68747470   c1 82 06 63 6b6579
		c1 82 07 63 457863   c1 82 08 64 66696c65
		c2 84 01 01 02 03`)
	if err := s.SubmitAgentData("s", true, agd); err != nil {
		t.Fatal(err)
	}
	body := hx(t, `
		c39f 19 1000 01
		  c5 83 1b 0000016a79b81110 05 1b 0000000000000007
		  c6 82 06 61 31
		  c39f 19 1100 01
		    c39f 19 1200 01
		      c5 84 1b 0000016a79b81111 04 08 00
		      c6 82 06 61 32
		      c6 83 05 06 61 33
		      c7 85 0b 07 62 6f6b 00 81 84 01 02 08 20
		      c4 82 19 1300 02 ff
		    c7 86 0c 07 f6 0b f6 a1 06 61 34
		    c4 83 19 1400 05 19 1000 ff
		  c8 0c
		  c4 82 19 1500 09 ff`)
	spans, err := s.SubmitTraceData("s", false, testTraceID, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	root, child := spans[0], spans[1]
	if root.SpanID != 7 || root.Type != "http" || root.DurationNS != 0x500 || root.Calls != 9 || root.Recs != 2 ||
		root.Errors != 2 || !root.Error || root.StartNS != 1556820267280*1e6 {
		t.Errorf("root span %+v", root)
	}
	if v, _ := root.Attrs.Get("key"); v.Str != "3" {
		t.Errorf("upward attribute: root key = %v", v)
	}
	if child.SpanID != 8 || child.ParentID != 7 || child.Type != "db" || child.DurationNS != 0x100 || child.Recs != 1 ||
		child.Root.StartNS != 0 || child.Errors != 1 || child.Error { // an exception without ERROR_MARK: counted, not a failure
		t.Errorf("child span %+v", child)
	}
	if v, _ := child.Root.Attrs.Get("key"); v.Str != "2" {
		t.Errorf("child key = %v", v)
	}
	mid := root.Root.Children[0]
	if mid.StartNS != 0x100 || mid.DurationNS != 0x300 || mid.Calls != 5 || len(mid.Children) != 0 || mid.Errors != 1 {
		t.Errorf("middle record %+v", mid)
	}
	if v, _ := mid.Attrs.Get("key"); v.Str != "4" {
		t.Errorf("exception attribute: %v", mid.Attrs)
	}
	if mid.Exception == nil || mid.Exception.Class != "Exc" || mid.Exception.Message != "" || mid.Exception.Cause == nil ||
		mid.Exception.Cause.Message != "ok" || mid.Exception.Cause.Stack[0] != (trace.StackFrame{Class: "a.b.C", Method: "m1", File: "file", Line: -1}) {
		t.Errorf("exception %+v", mid.Exception)
	}
	if root.Root.Exception != mid.Exception || child.Root.Exception != mid.Exception.Cause {
		t.Errorf("exception ref: %+v", root.Root.Exception)
	}
	for _, sp := range spans {
		if err := sp.Validate(); err != nil {
			t.Fatal(err)
		}
	}

	// Streamed: the same trace cut inside the middle record.
	cut := strings.Index(hex.EncodeToString(body), "c786") / 2 // before the middle record's exception
	p1, err := s.SubmitTraceData("s", false, "ffff0000000000000000000000000001", body[:cut])
	if err != nil {
		t.Fatal(err)
	}
	p2, err := s.SubmitTraceData("s", false, "ffff0000000000000000000000000001", body[cut:])
	if err != nil {
		t.Fatal(err)
	}
	// The nested span closed before the cut; the root continues.
	if len(p1) != 2 || len(p2) != 1 || !p1[0].Root.Open || p1[1].Root.Open || p2[0].ChunkNum != 1 || p2[0].SpanID != 7 {
		t.Fatalf("pieces %d + %d", len(p1), len(p2))
	}
	whole, err := trace.AssembleChunks([]*trace.Span{p1[0], p2[0]})
	if err != nil {
		t.Fatal(err)
	}
	whole.TraceID, p1[1].TraceID = root.TraceID, root.TraceID
	if d := diffSpan(whole, root); d != "" {
		t.Fatal(d)
	}
	if d := diffSpan(p1[1], child); d != "" {
		t.Fatal(d)
	}
}

// zorka-tdb's StoreSearchRetrieve scenario: a span nested in another one
// takes the enclosing span's id as parent; a TraceBegin outside any record
// yields a span without a root record that takes the following attributes.
func TestNestedSpansAndBareTraceBegin(t *testing.T) {
	s := newTestSessions(t, "s")
	body := hx(t, recStart+prolog1+"d821 82 1b 0000016a79b81110 181f"+"c9 a1 c604 6468747470"+
		recStart+"ca48 0000010000000005"+"d821 82 1b 0000016a79b81111 1b 1000000000000002"+"c9 a1 c604 626462"+
		"cc48 000001000000000a ff"+
		epilog1)
	spans, err := s.SubmitTraceData("s", false, testTraceID, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	// [clock, 31]: a small value is a pre-1.90 trace type, not a span id.
	outer, inner := spans[0], spans[1]
	if outer.SpanID == 31 || outer.SpanID == 0 || len(outer.Root.Children) != 0 || outer.Recs != 1 || outer.Type != "" {
		t.Errorf("outer %+v", outer)
	}
	if v, _ := outer.Attrs.Get("zorka.trace_type"); v.Int != 31 {
		t.Errorf("outer trace type attribute %v", outer.Attrs)
	}
	if inner.SpanID != 0x1000000000000002 || inner.ParentID != outer.SpanID || inner.Root.StartNS != 0 ||
		inner.DurationNS != 5<<16 || inner.StartNS != 1556820267281*1e6 {
		t.Errorf("inner %+v", inner)
	}
	if v, _ := inner.Attrs.Get("key"); v.Str != "db" {
		t.Errorf("inner attrs %v", inner.Attrs)
	}

	// A trace type id the session defines becomes Span.Type.
	spans, err = s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+"d821 82 1b 0000016a79b81110 06"+epilog1))
	if err != nil || spans[0].Type != "db" {
		t.Fatalf("legacy trace type: %+v %v", spans, err)
	}

	bare := hx(t, "d821 83 1b 0000016a79b81112 03 01 c9 a1 c604 6468747470 cf 08")
	spans, err = s.SubmitTraceData("s", false, testTraceID, bare)
	if err != nil {
		t.Fatal(err)
	}
	b := spans[0]
	if len(spans) != 1 || b.Root != nil || b.SpanID != 3 || b.ParentID != 1 || !b.Error || b.Recs != 0 || b.DurationNS != 0 {
		t.Fatalf("bare span %+v", b)
	}
	if v, _ := b.Attrs.Get("key"); v.Str != "http" {
		t.Errorf("bare span attrs %v", b.Attrs)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TRACE_INFO entries act like the tagged items they stand for.
func TestTraceInfo(t *testing.T) {
	s := newTestSessions(t, "s")
	body := hx(t, recStart+"ce a4 0e 01 0c 04 05 1b 0000016a79b81110 12 1b 0000000000000063"+
		"ce a2 11 05 0b 08"+ // parent 5, error mark
		"ce a1 02 07"+ // chunk number: ignored
		"ce a2 0d 14 09 03 ff") // tstop 20, calls 3, bare break
	spans, err := s.SubmitTraceData("s", false, testTraceID, body)
	if err != nil {
		t.Fatal(err)
	}
	sp := spans[0]
	if sp.SpanID != 0x63 || sp.ParentID != 5 || !sp.Error || sp.DurationNS != 16<<16 || sp.Calls != 3 ||
		sp.StartNS != 1556820267280*1e6 || sp.Root.Method != "void com.a.A.run()" {
		t.Fatalf("span %+v", sp)
	}
}

// zorka-tdb's (ignored) SubmitChunkedTrace scenario: a root split into two
// submissions with an agent reset in between; after the second chunk the
// root has both children. A rejected chunk leaves the open records as they
// were, so the corrected chunk still continues the trace.
func TestChunkedTraceAcrossReset(t *testing.T) {
	s := newTestSessions(t, "s")
	child := recStart + "ca48 0000010000000002" + "cc48 0000010000000004 ff"
	chunk0 := hx(t, recStart+prolog1+begin1+"c9 a1 c604 61 31"+child)
	chunk1 := hx(t, "c9 a1 c604 61 32"+child+"cc48 0000030000000010 ff")
	p0, err := s.SubmitTraceData("s", false, testTraceID, chunk0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p0) != 1 || !p0[0].Root.Open || len(p0[0].Root.Children) != 1 || p0[0].ChunkNum != 0 || p0[0].DurationNS != 0 {
		t.Fatalf("chunk 0 piece %+v", p0[0])
	}
	if err := s.SubmitAgentData("s", true, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	// A corrupt continuation is rejected and changes nothing.
	if _, err := s.SubmitTraceData("s", false, testTraceID, hx(t, "c9 a1 c604 fa00000000")); err == nil {
		t.Fatal("corrupt chunk accepted")
	}
	p1, err := s.SubmitTraceData("s", false, testTraceID, chunk1)
	if err != nil {
		t.Fatal(err)
	}
	if len(p1) != 1 || p1[0].ChunkNum != 1 || p1[0].Root.Open || p1[0].SpanID != p0[0].SpanID || len(p1[0].Root.Children) != 1 {
		t.Fatalf("chunk 1 piece %+v", p1[0])
	}
	whole, err := trace.AssembleChunks([]*trace.Span{p1[0], p0[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Root.Children) != 2 || whole.Calls != 3 || whole.DurationNS != 16<<16 || whole.Recs != 3 {
		t.Fatalf("assembled %+v", whole)
	}
	if v, _ := whole.Attrs.Get("key"); v.Str != "2" {
		t.Errorf("merged attrs %v", whole.Attrs)
	}
	// The trace is finished: the same chunk now starts nothing and fails.
	if _, err := s.SubmitTraceData("s", false, testTraceID, chunk1); err == nil {
		t.Fatal("continuation of a finished trace accepted")
	}
}

// Open records of different traces and sessions do not mix.
func TestStreamsAreKeyedBySessionAndTrace(t *testing.T) {
	s := newTestSessions(t, "a")
	if err := s.SubmitAgentData("b", true, hx(t, testAgd190)); err != nil {
		t.Fatal(err)
	}
	open := hx(t, recStart+prolog1+begin1)
	if _, err := s.SubmitTraceData("a", false, testTraceID, open); err != nil {
		t.Fatal(err)
	}
	// Session b, same trace id: a fresh body; ending nothing is an error.
	if _, err := s.SubmitTraceData("b", false, testTraceID, hx(t, epilog1)); err == nil {
		t.Fatal("session b continued session a's trace")
	}
	// Session a, another trace id: likewise.
	if _, err := s.SubmitTraceData("a", false, "ffffffffffffffff", hx(t, epilog1)); err == nil {
		t.Fatal("another trace id continued the open trace")
	}
	spans, err := s.SubmitTraceData("a", false, testTraceID, hx(t, epilog1LE))
	if err != nil || len(spans) != 1 || spans[0].Root.Open || spans[0].ChunkNum != 1 {
		t.Fatalf("continuation: %v %v", spans, err)
	}
}

func TestLittleEndianPrologEpilog(t *testing.T) {
	s := newTestSessions(t, "s")
	be, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+epilog1))
	if err != nil {
		t.Fatal(err)
	}
	le, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1LE+begin1+epilog1LE))
	if err != nil {
		t.Fatal(err)
	}
	if diffRecord("root", le[0].Root, be[0].Root) != "" || le[0].DurationNS != 16<<16 || le[0].Calls != 1 {
		t.Fatalf("LE %+v vs BE %+v", le[0].Root, be[0].Root)
	}
	// 16-byte epilog: the second word carries the full call counter.
	long, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+"cc50 0000000000000010 0000010000000000 ff"))
	if err != nil || long[0].Calls != 1<<40 {
		t.Fatalf("long epilog: %+v %v", long, err)
	}
}

// A record continued from an earlier submission cannot start a span: its
// first piece already went out as part of the enclosing span.
func TestTraceBeginInContinuedRecord(t *testing.T) {
	s := newTestSessions(t, "s")
	if _, err := s.SubmitTraceData("s", false, testTraceID, hx(t, recStart+prolog1+begin1+recStart+prolog1)); err != nil {
		t.Fatal(err)
	}
	_, err := s.SubmitTraceData("s", false, testTraceID, hx(t, begin1))
	var de *DecodeError
	if !errors.As(err, &de) || de.Offset != 0 || !strings.Contains(de.Msg, "TraceBegin in a record continued from an earlier submission") {
		t.Fatalf("got %v", err)
	}
	// The trace is still open and continues normally.
	spans, err := s.SubmitTraceData("s", false, testTraceID, hx(t, epilog1+epilog1))
	if err != nil || len(spans) != 1 || spans[0].ChunkNum != 1 || spans[0].Root.Open || len(spans[0].Root.Children) != 1 {
		t.Fatalf("continuation after the rejected chunk: %+v %v", spans, err)
	}
}

// 2.x attribute values may be floats (1.90 ones may not).
func TestFloats2x(t *testing.T) {
	s := NewSessions(Options{})
	if err := s.SubmitAgentData("s", true, hx(t, "c1 82 01 61 43 c1 82 02 61 6d c1 82 03 63 282956 c1 82 04 61 6b c2 84 01 01 02 03")); err != nil {
		t.Fatal(err)
	}
	body := hx(t, "c39f 00 01 c5 82 01 00 c6 82 04 9f f93c00 f97c00 f9fc00 f90001 f9c000 fa3fc00000 fb400921fb54442d18 f97e00 ff c4 82 05 01 ff")
	spans, err := s.SubmitTraceData("s", false, testTraceID, body)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := spans[0].Root.Attrs.Get("k")
	want := trace.List(trace.Float(1), trace.Float(math.Inf(1)), trace.Float(math.Inf(-1)), trace.Float(math.Ldexp(1, -24)),
		trace.Float(-2), trace.Float(1.5), trace.Float(math.Pi), trace.Float(math.NaN()))
	if !v.Equal(want) {
		t.Fatalf("floats %v, want %v", v, want)
	}
}
