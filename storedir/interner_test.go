package storedir

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// TestInternerMatchesDefinition interns spans that repeat strings at the
// same positions (what the interner's positional shortcut takes), at other
// positions, within one span, as numbers, booleans, floats, empty strings
// and nested values, and checks every span's Texts and Attrs, and the text
// ids, against the definition: every searchable string in a fixed order
// (type, attributes, then each record's method, attributes and exception
// chain), each string's id the text batch's, each text and each (key,
// value) pair listed once per span in order of first occurrence.
func TestInternerMatchesDefinition(t *testing.T) {
	var spans []*trace.Span
	for i := range 60 {
		attrs := trace.Attrs{
			{Key: "service.name", Value: trace.String("orders")},
			{Key: "http.status_code", Value: trace.Int(int64(200 + (i%3)*100))},
			{Key: "big", Value: trace.Int(int64(i / 7 * 1_000_003))},
			{Key: "retry", Value: trace.Bool(i%4 == 0)},
			{Key: "ratio", Value: trace.Float(float64(i%5) / 4)},
			{Key: "user.id", Value: trace.String(fmt.Sprint("u-", i%11))},
			{Key: "empty", Value: trace.String("")},
			{Key: "", Value: trace.String("keyless")},
			{Key: "list", Value: trace.List(trace.String("x"), trace.Int(1))},
			{Key: "200", Value: trace.Int(200)}, // a key that is also a value
			{Key: "inf", Value: trace.Float(math.Inf(1))},
		}
		// Shift positions now and then, and repeat strings within a span.
		if i%9 == 4 {
			attrs = append(trace.Attrs{{Key: "extra", Value: trace.String("orders")}}, attrs...)
		}
		if i%13 == 5 {
			attrs = attrs[3:]
		}
		sp := &trace.Span{Type: []string{"GET /orders", "SELECT", "GET /orders", "orders"}[i%4], Attrs: attrs}
		if i%3 == 0 {
			sp.Root = &trace.Record{Method: "handle", Attrs: trace.Attrs{{Key: "db.statement", Value: trace.String("SELECT 1")}, {Key: "http.status_code", Value: trace.Int(200)}},
				Exception: &trace.Exception{Class: "java.io.IOException", Message: "orders", Cause: &trace.Exception{Class: "", Message: fmt.Sprint(i % 2)}},
				Children:  []*trace.Record{{Method: "GET /orders", Attrs: trace.Attrs{{Key: "service.name", Value: trace.String("orders")}}}}}
		}
		spans = append(spans, sp)
	}

	ix := openTestIndexes(t)
	in := newInterner(ix.text.NewBatch(), 4)
	ref := ix.text.NewBatch() // same committed state: the same ids for the same order
	for n, sp := range spans {
		var e index.SpanEntry
		in.internSpan(sp, &e)
		wantTexts, wantAttrs := internNaive(ref, sp)
		if !slices.Equal(e.Texts, wantTexts) || !slices.Equal(e.Attrs, wantAttrs) {
			t.Fatalf("span %d: texts %v attrs %v, want %v %v", n, e.Texts, e.Attrs, wantTexts, wantAttrs)
		}
	}
	if in.tb.Len() != ref.Len() || in.tb.Len() == 0 {
		t.Fatalf("%d new strings, want %d", in.tb.Len(), ref.Len())
	}
}

// internNaive is the definition internSpan implements: one Intern per
// occurrence, no shortcuts.
func internNaive(tb *textindex.Batch, sp *trace.Span) ([]uint64, []index.KV) {
	var texts []uint64
	var attrs []index.KV
	add := func(s string) uint64 {
		if s == "" {
			return 0
		}
		id := tb.Intern(s)
		if !slices.Contains(texts, id) {
			texts = append(texts, id)
		}
		return id
	}
	addAttrs := func(as trace.Attrs) {
		for _, a := range as {
			k := add(a.Key)
			if a.Value.Kind == trace.KindList || a.Value.Kind == trace.KindMap {
				continue
			}
			v := add(a.Value.Text())
			if kv := (index.KV{Key: k, Value: v}); k != 0 && v != 0 && !slices.Contains(attrs, kv) {
				attrs = append(attrs, kv)
			}
		}
	}
	add(sp.Type)
	addAttrs(sp.Attrs)
	if sp.Root != nil {
		sp.Root.Walk(func(r *trace.Record, _ int) bool {
			add(r.Method)
			addAttrs(r.Attrs)
			for ex := r.Exception; ex != nil; ex = ex.Cause {
				add(ex.Class)
				add(ex.Message)
			}
			return true
		})
	}
	return texts, attrs
}
