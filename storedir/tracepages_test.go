package storedir

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// pagedSpan is one span of the trace-paging data set and the store (phase)
// it is written to.
type pagedSpan struct {
	sp    *trace.Span
	phase int
}

const pagingPhases = 4

// pagingTick is the time grain of the trace-paging data set: coarse, so
// that many spans (of one trace and of different traces) start together.
const pagingTick = int64(time.Millisecond)

// newPagedSpan makes a span of trace tid starting at tick; the other
// properties (what queries it matches) come from the arguments.
func newPagedSpan(tid trace.TraceID, sid, parent trace.SpanID, tick int, tier, method string, durMS int64, isErr bool) *trace.Span {
	sp := &trace.Span{
		TraceID: tid, SpanID: sid, ParentID: parent, Type: "http",
		StartNS: workload.Base + int64(tick)*pagingTick, DurationNS: durMS * int64(time.Millisecond),
		Source: trace.SourceJSON,
	}
	sp.Attrs.Set("tier", trace.String(tier))
	sp.Attrs.Set("region", trace.String([]string{"eu", "us"}[sid%2]))
	sp.Root = &trace.Record{Method: method, DurationNS: sp.DurationNS, Calls: 1}
	sp.FillSummary()
	sp.Error = isErr
	return sp
}

// handPagedSpans are traces built to hit the cases trace-mode paging gets
// wrong most easily; each matches "tier=gold" at several times:
//   - trace 0xa1: its newest gold span is in the newest store, older gold
//     spans are in every older store;
//   - trace 0xa2: the other way round (its newest gold span was written
//     first, to the oldest store, and older ones later: a late import);
//   - traces 0xa3, 0xa4: their newest gold spans start at the same tick as
//     each other and as one of 0xa1's (ties broken by trace id);
//   - trace 0xa5: two gold spans at the same tick (ties broken by span id).
func handPagedSpans() []pagedSpan {
	tid := func(b byte) (id trace.TraceID) {
		id[0], id[15] = 0x40, b
		return id
	}
	var out []pagedSpan
	add := func(id byte, sid trace.SpanID, tick int, tier string, phase int) {
		parent := trace.SpanID(0)
		if sid != 1 {
			parent = 1
		}
		out = append(out, pagedSpan{newPagedSpan(tid(id), sid, parent, tick, tier, "Hand.op", 10, false), phase})
	}
	add(0xa1, 1, 90, "gold", 3)
	add(0xa1, 2, 60, "gold", 2)
	add(0xa1, 3, 30, "gold", 1)
	add(0xa1, 4, 5, "gold", 0)
	add(0xa1, 5, 95, "silver", 0)
	add(0xa2, 1, 88, "gold", 0)
	add(0xa2, 2, 50, "gold", 1)
	add(0xa2, 3, 20, "gold", 2)
	add(0xa2, 4, 2, "gold", 3)
	add(0xa3, 1, 60, "gold", 1)
	add(0xa3, 2, 10, "gold", 3)
	add(0xa4, 1, 60, "gold", 0)
	add(0xa4, 2, 59, "gold", 2)
	add(0xa5, 1, 45, "gold", 2)
	add(0xa5, 2, 45, "gold", 1)
	add(0xa5, 3, 44, "gold", 0)
	return out
}

// randomPagedSpans makes ntraces traces of 1–8 spans whose spans start at
// random ticks of [0, 100) (so many tie) and land in random stores.
func randomPagedSpans(seed uint64, ntraces int) []pagedSpan {
	r := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	tiers := []string{"gold", "silver", "bronze"}
	methods := []string{"Dao.query", "Cache.get", "Needle.find", "Json.encode"}
	var out []pagedSpan
	for t := 0; t < ntraces; t++ {
		var tid trace.TraceID
		for i := range tid {
			tid[i] = byte(r.UintN(256))
		}
		if t%7 == 0 {
			tid[0] = 0x41 // trace ids sharing leading bytes
		}
		n := 1 + r.IntN(8)
		var root trace.SpanID
		for j := 0; j < n; j++ {
			sid := trace.SpanID(r.Uint64() | 1)
			parent := root
			if j == 0 {
				root, parent = sid, 0
			}
			sp := newPagedSpan(tid, sid, parent, r.IntN(100), tiers[r.IntN(len(tiers))],
				methods[r.IntN(len(methods))], r.Int64N(50), r.IntN(4) == 0)
			out = append(out, pagedSpan{sp, r.IntN(pagingPhases)})
		}
	}
	return out
}

// expectedTracePages is trace mode by definition: every trace with a span
// matching f once, represented by its newest matching span, ordered by that
// span in search order (start time desc, then trace id desc, then span id
// desc, as hitLess orders hits).
func expectedTracePages(spans []*trace.Span, f workload.Filter) []*trace.Span {
	var out []*trace.Span
	seen := map[trace.TraceID]bool{}
	for _, sp := range workload.Expected(spans, f) { // newest first
		if !seen[sp.TraceID] {
			seen[sp.TraceID] = true
			out = append(out, sp)
		}
	}
	return out
}

// tracePages follows the cursors of a trace-mode search and checks the
// shape of every page: full pages but the last, a cursor exactly when
// another page follows.
func tracePages(t *testing.T, db *DB, q Query) []*trace.Span {
	t.Helper()
	var out []*trace.Span
	for page := 0; ; page++ {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		out = append(out, res.Spans...)
		if res.Cursor == "" {
			if len(res.Spans) == 0 && page > 0 {
				t.Fatalf("page %d: empty last page (the page before it promised more)", page)
			}
			return out
		}
		if len(res.Spans) != q.Limit {
			t.Fatalf("page %d: %d traces with a cursor, want a full page of %d", page, len(res.Spans), q.Limit)
		}
		if page > 10_000 {
			t.Fatal("cursor loop")
		}
		q.Cursor = res.Cursor
	}
}

func diffTracePages(got, want []*trace.Span) string {
	for i := 0; i < min(len(got), len(want)); i++ {
		if got[i].TraceID != want[i].TraceID || got[i].SpanID != want[i].SpanID {
			return fmt.Sprintf("result %d: got trace %s span %s (start %d), want trace %s span %s (start %d)",
				i, got[i].TraceID, got[i].SpanID, got[i].StartNS, want[i].TraceID, want[i].SpanID, want[i].StartNS)
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d traces, want %d (the common prefix is equal)", len(got), len(want))
	}
	return ""
}

// TestTraceModePaging pages through trace-mode searches with limits 1, 2,
// 3 and 7 and compares the concatenated pages with the brute-force
// definition: each matching trace exactly once, at the position of its
// newest matching span, even when its spans are spread over several
// rotated stores and match at many different times.
func TestTraceModePaging(t *testing.T) {
	data := handPagedSpans()
	data = append(data, randomPagedSpans(7, 120)...)
	db := openTestDB(t, t.TempDir(), testOptions())
	defer db.Close()
	var all []*trace.Span
	for phase := 0; phase < pagingPhases; phase++ {
		if phase > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		var batch []*trace.Span
		for _, d := range data {
			if d.phase == phase {
				batch = append(batch, d.sp)
			}
		}
		appendAll(t, db, batch, 25)
		all = append(all, batch...)
	}
	if n := len(db.Stores()); n != pagingPhases {
		t.Fatalf("%d stores, want %d", n, pagingPhases)
	}
	at := func(tick int) int64 { return workload.Base + int64(tick)*pagingTick }
	gold := trace.Attr{Key: "tier", Value: trace.String("gold")}
	cases := []struct {
		name string
		f    workload.Filter
	}{
		{"everything", workload.Filter{}},
		{"attribute", workload.Filter{Attrs: []trace.Attr{gold}}},
		{"two attributes", workload.Filter{Attrs: []trace.Attr{gold, {Key: "region", Value: trace.String("us")}}}},
		{"text", workload.Filter{Text: "needle"}},
		{"errors", workload.Filter{ErrorsOnly: true}},
		{"min duration", workload.Filter{MinDurationNS: 30 * int64(time.Millisecond)}},
		{"time range", workload.Filter{SinceNS: at(20), UntilNS: at(61)}},
		{"attribute in a time range", workload.Filter{Attrs: []trace.Attr{gold}, SinceNS: at(10), UntilNS: at(89)}},
		{"text and errors", workload.Filter{Text: "NEEDLE.find", ErrorsOnly: true}},
		{"attribute and min duration", workload.Filter{Attrs: []trace.Attr{{Key: "tier", Value: trace.String("silver")}},
			MinDurationNS: 10 * int64(time.Millisecond)}},
		{"no match", workload.Filter{Attrs: []trace.Attr{{Key: "tier", Value: trace.String("platinum")}}}},
		{"max duration", workload.Filter{MaxDurationNS: 12 * int64(time.Millisecond)}},
		{"duration range and attribute", workload.Filter{Attrs: []trace.Attr{gold},
			MinDurationNS: 10 * int64(time.Millisecond), MaxDurationNS: 35 * int64(time.Millisecond)}},
		{"operation", workload.Filter{Operation: "Needle.find"}},
		// Span type "http" is a string of every span but no span's operation.
		{"operation held by every span but no root", workload.Filter{Operation: "http"}},
		{"operation, case differs", workload.Filter{Operation: "needle.find"}},
		{"operation and text", workload.Filter{Operation: "Needle.find", Text: "us"}},
		{"operation, attribute and max duration", workload.Filter{Operation: "Dao.query", Attrs: []trace.Attr{gold},
			MaxDurationNS: 25 * int64(time.Millisecond)}},
	}
	for _, c := range cases {
		want := expectedTracePages(all, c.f)
		for _, limit := range []int{1, 2, 3, 7} {
			t.Run(fmt.Sprintf("%s/limit=%d", c.name, limit), func(t *testing.T) {
				q := Query{SinceNS: c.f.SinceNS, UntilNS: c.f.UntilNS, MinDurationNS: c.f.MinDurationNS,
					MaxDurationNS: c.f.MaxDurationNS, ErrorsOnly: c.f.ErrorsOnly, Attrs: c.f.Attrs, Text: c.f.Text,
					Operation: c.f.Operation, Limit: limit}
				got := tracePages(t, db, q)
				if d := diffTracePages(got, want); d != "" {
					t.Fatal(d)
				}
				// Span mode is unchanged: every matching span once.
				q.Spans = true
				if n, wn := len(searchAll(t, db, q)), len(workload.Expected(all, c.f)); n != wn {
					t.Fatalf("span mode: %d spans, want %d", n, wn)
				}
			})
		}
	}
}

// TestTraceHeads checks the trace summaries a trace-mode page carries
// (Query.TraceHeads) against the data: each result's trace has its
// distinct spans counted over every store and its root span (the span
// without a parent) named, whichever span matched; span mode and a query
// without TraceHeads carry none.
func TestTraceHeads(t *testing.T) {
	data := handPagedSpans()
	data = append(data, randomPagedSpans(11, 40)...)
	db := openTestDB(t, t.TempDir(), testOptions())
	defer db.Close()
	type want struct {
		spans      int
		root       string
		start, end int64
	}
	wants := map[trace.TraceID]*want{}
	for phase := 0; phase < pagingPhases; phase++ {
		if phase > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		var batch []*trace.Span
		for _, d := range data {
			if d.phase != phase {
				continue
			}
			batch = append(batch, d.sp)
			w := wants[d.sp.TraceID]
			if w == nil {
				w = &want{start: d.sp.StartNS, end: d.sp.StartNS + d.sp.DurationNS}
				wants[d.sp.TraceID] = w
			}
			w.spans++
			w.start = min(w.start, d.sp.StartNS)
			w.end = max(w.end, d.sp.StartNS+d.sp.DurationNS)
			if d.sp.ParentID == 0 {
				w.root = d.sp.Root.Method
			}
		}
		appendAll(t, db, batch, 25)
	}
	q := Query{Limit: 7, TraceHeads: true, Attrs: []trace.Attr{{Key: "tier", Value: trace.String("gold")}}}
	listed, multi := 0, 0
	for {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Traces) != len(res.Spans) {
			t.Fatalf("%d trace summaries for %d results", len(res.Traces), len(res.Spans))
		}
		for i, sp := range res.Spans {
			got, w := res.Traces[i], wants[sp.TraceID]
			if got.Spans != w.spans || got.StartNS != w.start || got.EndNS != w.end {
				t.Fatalf("trace %s: %d spans over [%d, %d], want %d over [%d, %d]", sp.TraceID, got.Spans, got.StartNS, got.EndNS, w.spans, w.start, w.end)
			}
			if got.Root == nil || got.Root.ParentID != 0 || got.Root.TraceID != sp.TraceID || OperationOf(got.Root) != w.root {
				t.Fatalf("trace %s: root %+v, want a root named %q", sp.TraceID, got.Root, w.root)
			}
			if got.Spans > 1 {
				multi++
			}
			listed++
		}
		if res.Cursor == "" {
			break
		}
		q.Cursor = res.Cursor
	}
	if listed < 30 || multi < 20 {
		t.Fatalf("%d traces listed, %d with several spans: the test data changed", listed, multi)
	}
	for _, q := range []Query{{Limit: 5, Spans: true, TraceHeads: true}, {Limit: 5}} {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if res.Traces != nil {
			t.Fatalf("query %+v: trace summaries, want none", q)
		}
	}
}
