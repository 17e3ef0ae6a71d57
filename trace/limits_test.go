package trace

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func manyAttrs(n int) Attrs {
	a := make(Attrs, n)
	for i := range a {
		a[i] = Attr{Key: fmt.Sprintf("k%07d", i), Value: Int(int64(i))}
	}
	return a
}

func deepRecord(depth int) *Record {
	r := &Record{Method: "leaf"}
	for i := 1; i < depth; i++ {
		r = &Record{Method: "m", Children: []*Record{r}}
	}
	return r
}

// TestIngestLimitsHostileSpans: each hostile span is refused with a
// *LimitError naming the limit, its value and the limit's value; spans at
// the limits pass.
func TestIngestLimitsHostileSpans(t *testing.T) {
	lim := IngestLimits{MaxAttrs: 1024, MaxStringSize: 1 << 10, MaxRecordsPerSpan: 100, MaxDepth: 16}
	id := TraceID{1}
	wide := &Record{Method: "root"}
	for i := 0; i < 100; i++ {
		wide.Children = append(wide.Children, &Record{Method: "c"})
	}
	for _, tc := range []struct {
		name string
		span *Span
		want string // "" = accepted
		size bool
	}{
		{"1024 span attributes pass", &Span{TraceID: id, Attrs: manyAttrs(1024)}, "", false},
		{"70000 span attributes", &Span{TraceID: id, Attrs: manyAttrs(70000)}, "70000 attributes exceeds max_attrs (1024)", false},
		{"1025 attributes on a nested record", &Span{TraceID: id, Root: &Record{Method: "a", Children: []*Record{{Method: "b", Attrs: manyAttrs(1025)}}}},
			`record 2: 1025 attributes exceeds max_attrs (1024)`, false},
		{"list value elements count", &Span{TraceID: id, Attrs: Attrs{{Key: "l", Value: List(make([]Value, 2000)...)}}},
			"attributes exceeds max_attrs (1024)", false},
		{"map value entries count", &Span{TraceID: id, Attrs: Attrs{{Key: "m", Value: Value{Kind: KindMap, Map: manyAttrs(1500)}}}},
			"attributes exceeds max_attrs (1024)", false},
		{"string value at max_string_size passes", &Span{TraceID: id, Attrs: Attrs{{Key: "s", Value: String(strings.Repeat("x", 1024))}}}, "", false},
		{"string value over max_string_size", &Span{TraceID: id, Attrs: Attrs{{Key: "s", Value: String(strings.Repeat("x", 1025))}}},
			`1025 bytes in attribute "s" value exceeds max_string_size (1024)`, true},
		{"long attribute key", &Span{TraceID: id, Attrs: Attrs{{Key: strings.Repeat("k", 2000), Value: Int(1)}}},
			"2000 bytes in attribute key exceeds max_string_size (1024)", true},
		{"long method", &Span{TraceID: id, Root: &Record{Method: strings.Repeat("m", 5000)}}, "record 1: 5000 bytes in method exceeds max_string_size (1024)", true},
		{"long span type", &Span{TraceID: id, Type: strings.Repeat("t", 1025)}, "1025 bytes in type exceeds max_string_size (1024)", true},
		{"long exception message", &Span{TraceID: id, Root: &Record{Method: "x", Exception: &Exception{Class: "E", Cause: &Exception{Message: strings.Repeat("e", 3000)}}}},
			"record 1: 3000 bytes in exception message exceeds max_string_size (1024)", true},
		{"long stack frame", &Span{TraceID: id, Root: &Record{Method: "x", Exception: &Exception{Stack: []StackFrame{{File: strings.Repeat("f", 1100)}}}}},
			"record 1: 1100 bytes in stack frame exceeds max_string_size (1024)", true},
		{"101 records", &Span{TraceID: id, Root: wide}, "101 records exceeds max_records_per_span (100)", false},
		{"depth 16 passes", &Span{TraceID: id, Root: deepRecord(16)}, "", false},
		{"depth 17", &Span{TraceID: id, Root: deepRecord(17)}, "record 17: 17 levels of nesting exceeds max_depth (16)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := lim.CheckSpan(tc.span)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LimitError", err)
			}
			if !strings.Contains(err.Error(), tc.want) || le.Size != tc.size {
				t.Fatalf("got %q (size %v), want it to contain %q (size %v)", err, le.Size, tc.want, tc.size)
			}
		})
	}
	spans := []*Span{{TraceID: id}, {TraceID: id}, {TraceID: id, Attrs: manyAttrs(70000)}}
	if err := DefaultIngestLimits().CheckSpans(spans); err == nil || err.Error() != "span 3: 70000 attributes exceeds max_attrs (1024)" {
		t.Fatalf("CheckSpans: %v", err)
	}
	if err := (IngestLimits{}).CheckSpan(&Span{TraceID: id, Attrs: manyAttrs(1025)}); err == nil {
		t.Fatal("zero IngestLimits do not apply the defaults")
	}
}

// BenchmarkCheckSpan70000Attrs: checking is linear and cheap next to
// decoding.
func BenchmarkCheckSpan70000Attrs(b *testing.B) {
	sp := &Span{TraceID: TraceID{1}, Attrs: manyAttrs(70000)}
	lim := IngestLimits{MaxAttrs: 100000}
	for i := 0; i < b.N; i++ {
		if err := lim.CheckSpan(sp); err != nil {
			b.Fatal(err)
		}
	}
}
