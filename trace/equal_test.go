package trace_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ztsd/ztsd/trace"
	"github.com/ztsd/ztsd/trace/tracetest"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name   string
		modify func(s *trace.Span)
		want   string
	}{
		{"trace id", func(s *trace.Span) { s.TraceID[15] = 0 }, "trace_id: 7f128efec83c68ec733c1116ad0c9105 != 7f128efec83c68ec733c1116ad0c9100"},
		{"span id", func(s *trace.Span) { s.SpanID = 0 }, `span_id: "0000000000000002" != ""`},
		{"error", func(s *trace.Span) { s.Error = false }, "error: true != false"},
		{"chunk num", func(s *trace.Span) { s.ChunkNum = 3 }, "chunk_num: 0 != 3"},
		{"span attr value", func(s *trace.Span) { s.Attrs[0].Value = trace.Int(5) }, `attrs["component"]: string "jdbc" != int 5`},
		{"span attr missing", func(s *trace.Span) { s.Attrs = nil }, `attrs: 1 entries != 0 (first extra key "component")`},
		{"root nil", func(s *trace.Span) { s.Root = nil }, "root: record != nil"},
		{"root method", func(s *trace.Span) { s.Root.Method = "x" }, `root.method: "a" != "x"`},
		{"child open", func(s *trace.Span) { s.Root.Children[0].Open = true }, "root.children[0].open: false != true"},
		{"child missing", func(s *trace.Span) { s.Root.Children = nil }, "root.children: 1 children != 0"},
		{"nested list value", func(s *trace.Span) { s.Root.Children[0].Attrs[0].Value.List[1] = trace.Float(2) },
			`root.children[0].attrs["rows"][1]: float 1.5 != float 2`},
		{"list length", func(s *trace.Span) { s.Root.Children[0].Attrs[0].Value.List = nil },
			`root.children[0].attrs["rows"]: list of 3 != list of 0`},
		{"exception frame", func(s *trace.Span) { s.Root.Children[0].Exception.Stack[0].Line = 7 },
			"root.children[0].exception.stack[0]: {Class:a Method:b File:F.java Line:42} != {Class:a Method:b File:F.java Line:7}"},
		{"exception cause", func(s *trace.Span) { s.Root.Children[0].Exception.Cause = &trace.Exception{Class: "C"} },
			"root.children[0].exception.cause: nil != exception"},
		{"child span", func(s *trace.Span) { s.Children = []*trace.Span{{}} }, "spans: 0 child spans != 1"},
	}
	for _, c := range cases {
		a, b := exampleSpan(), exampleSpan()
		c.modify(b)
		if got := trace.Diff(a, b); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%s: Equal reports true", c.name)
		}
	}
	// Nested child span and cause differences name the whole path.
	a, b := exampleSpan(), exampleSpan()
	a.Children = []*trace.Span{exampleSpan()}
	b.Children = []*trace.Span{exampleSpan()}
	b.Children[0].Root.Children[0].Exception.Cause = &trace.Exception{Class: "C"}
	a.Children[0].Root.Children[0].Exception.Cause = &trace.Exception{Class: "D"}
	if got, want := trace.Diff(a, b), `spans[0].root.children[0].exception.cause.class: "D" != "C"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestEqual(t *testing.T) {
	var nilSpan *trace.Span
	if !nilSpan.Equal(nil) || nilSpan.Equal(exampleSpan()) || exampleSpan().Equal(nil) {
		t.Error("nil span equality wrong")
	}
	// NaN equals NaN; nil and empty slices are equal.
	a := &trace.Span{Attrs: trace.Attrs{{Key: "f", Value: trace.Float(math.NaN())}}, Root: &trace.Record{Children: []*trace.Record{}}}
	b := &trace.Span{Attrs: trace.Attrs{{Key: "f", Value: trace.Float(math.NaN())}}, Root: &trace.Record{}}
	if d := trace.Diff(a, b); d != "" {
		t.Errorf("NaN / empty slices: %s", d)
	}
	var nilRec *trace.Record
	var nilExc *trace.Exception
	if !nilRec.Equal(nil) || !nilExc.Equal(nil) || nilExc.Equal(&trace.Exception{}) {
		t.Error("nil record/exception equality wrong")
	}
	r := rand.New(rand.NewPCG(5, 5))
	for range 200 {
		s := tracetest.RandomSpan(r, tracetest.GenOptions{NonFinite: true})
		if d := trace.Diff(s, s); d != "" {
			t.Fatalf("span differs from itself: %s", d)
		}
		if !s.Root.Equal(s.Root) {
			t.Fatal("record differs from itself")
		}
	}
}
