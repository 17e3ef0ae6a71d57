package storedir

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/bench"
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
	in := newInterner(ix.text, 4)
	in.begin(ix.text, ix.text.NewBatch())
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

// TestInternerKeptAcrossCalls interns group after group with one interner,
// as a store's ChunkIndexer does, against the definition on a second text
// index that gets a fresh batch per group: every span's Texts and Attrs
// and every new string's id are the same, across a group whose batch is
// dropped (its new strings get the same ids again in the next group), the
// bounds (tiny here, so that the interner forgets often) and a move to
// another text index.
func TestInternerKeptAcrossCalls(t *testing.T) {
	g := bench.NewGenerator(bench.Workload{Seed: 11})
	var groups [][]*trace.Span
	for range 24 {
		var spans []*trace.Span
		for len(spans) < 40 {
			spans = append(spans, g.Trace()...)
		}
		groups = append(groups, spans)
	}
	kept, ref := openTestIndexes(t), openTestIndexes(t)
	in := &interner{maxTexts: 300, maxBytes: 12 << 10}
	forgot := 0
	for n, spans := range groups {
		text := kept.text
		if n == 17 {
			// Another index (a store's indexes reset and reopened): the
			// interner must forget the ids of the first one.
			other := openTestIndexes(t)
			for _, sp := range groups[0] {
				var e index.SpanEntry
				in.begin(other.text, other.text.NewBatch())
				in.internSpan(sp, &e)
				in.end(false)
			}
		}
		tb, rb := text.NewBatch(), ref.text.NewBatch()
		before := len(in.texts)
		in.begin(text, tb)
		if len(in.texts) < before {
			forgot++
		}
		for i, sp := range spans {
			var e index.SpanEntry
			in.internSpan(sp, &e)
			wantTexts, wantAttrs := internNaive(rb, sp)
			if !slices.Equal(e.Texts, wantTexts) || !slices.Equal(e.Attrs, wantAttrs) {
				t.Fatalf("group %d span %d: texts %v attrs %v, want %v %v", n, i, e.Texts, e.Attrs, wantTexts, wantAttrs)
			}
		}
		if tb.Len() != rb.Len() {
			t.Fatalf("group %d: %d new strings, want %d", n, tb.Len(), rb.Len())
		}
		if n%5 == 3 {
			in.end(false) // a batch that is not committed
			continue
		}
		if err := tb.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := rb.Commit(); err != nil {
			t.Fatal(err)
		}
		in.end(true)
	}
	if forgot < 3 {
		t.Fatalf("the interner forgot %d times under its bounds, want several", forgot)
	}
	if a, b := kept.text.Count(), ref.text.Count(); a != b || a == 0 {
		t.Fatalf("%d strings interned, want %d", a, b)
	}
	for id := uint64(1); id <= ref.text.Count(); id++ {
		a, err1 := kept.text.String(id)
		b, err2 := ref.text.String(id)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("text id %d: %q (%v), want %q (%v)", id, a, err1, b, err2)
		}
	}
}

// TestChunkIndexerMatchesIndexChunks: a ChunkIndexer called group after
// group writes the text ids, counts and watermarks IndexChunks writes,
// and forgets nothing it should keep when a call fails.
func TestChunkIndexerMatchesIndexChunks(t *testing.T) {
	g := bench.NewGenerator(bench.Workload{Seed: 12})
	var chunks []ChunkSpans
	off := int64(16)
	for range 8 {
		var spans []*trace.Span
		for len(spans) < 200 {
			spans = append(spans, g.Trace()...)
		}
		chunks = append(chunks, ChunkSpans{Off: off, Next: off + 1000, Spans: spans})
		off += 1000
	}
	kept, ref := openTestIndexes(t), openTestIndexes(t)
	var x ChunkIndexer
	for i, c := range chunks {
		if i == 5 {
			// A failing call (a gap) interns nothing that stays.
			if err := x.IndexChunks(kept.meta, kept.text, []ChunkSpans{c, {Off: c.Next + 1, Next: c.Next + 2}}, true, true); err == nil {
				t.Fatal("a gap was indexed")
			}
		}
		if err := x.IndexChunks(kept.meta, kept.text, chunks[i:i+1], true, true); err != nil {
			t.Fatal(err)
		}
		if err := IndexChunks(ref.meta, ref.text, chunks[i:i+1], true, true); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := kept.text.Count(), ref.text.Count(); a != b || a == 0 {
		t.Fatalf("%d strings, want %d", a, b)
	}
	for id := uint64(1); id <= ref.text.Count(); id++ {
		a, err1 := kept.text.String(id)
		b, err2 := ref.text.String(id)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("text id %d: %q (%v), want %q (%v)", id, a, err1, b, err2)
		}
	}
	if a, b := kept.meta.Stats(), ref.meta.Stats(); a != b {
		t.Fatalf("metadata stats %+v, want %+v", a, b)
	}
	var a, b []index.SpanRef
	for _, p := range []struct {
		ix  testIndexes
		out *[]index.SpanRef
	}{{kept, &a}, {ref, &b}} {
		if err := p.ix.meta.Entries(func(r index.SpanRef) error { *p.out = append(*p.out, r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Fatalf("%d entries, want %d (or they differ)", len(a), len(b))
	}
	x.Release()
	if x.in != nil {
		t.Fatal("Release kept the interner")
	}
}

// TestInternerStringsSharingBytes: strings that start at the same address
// (cut from one buffer, as a decoded chunk's strings are from its string
// table) but differ in length, and equal strings at different addresses,
// get the definition's ids.
func TestInternerStringsSharingBytes(t *testing.T) {
	table := strings.Repeat("orders.internal", 2)
	a, b, c := table[:6], table[:5], table[:15] // "orders", "order", "orders.internal"
	d := strings.Clone(a)
	var spans []*trace.Span
	for i := range 40 {
		cut := []string{a, b, c, d}
		sp := &trace.Span{Type: cut[i%4], Attrs: trace.Attrs{
			{Key: cut[(i+1)%4], Value: trace.String(cut[(i+2)%4])},
			{Key: "x" + cut[i%3], Value: trace.String(cut[(i+3)%4])},
		}}
		sp.Root = &trace.Record{Method: cut[(i/2)%4], Children: []*trace.Record{{Method: table[i%7 : i%7+5]}}}
		spans = append(spans, sp)
	}
	ix := openTestIndexes(t)
	in := newInterner(ix.text, 4)
	in.begin(ix.text, ix.text.NewBatch())
	ref := ix.text.NewBatch()
	for n, sp := range spans {
		var e index.SpanEntry
		in.internSpan(sp, &e)
		wantTexts, wantAttrs := internNaive(ref, sp)
		if !slices.Equal(e.Texts, wantTexts) || !slices.Equal(e.Attrs, wantAttrs) {
			t.Fatalf("span %d: texts %v attrs %v, want %v %v", n, e.Texts, e.Attrs, wantTexts, wantAttrs)
		}
	}
}
