package storedir

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/trace"
)

// TestSearchTimeOrderedStores pages through searches over stores that each
// hold a later stretch of time (as rotation makes them), where a search
// leaves out the sealed stores whose spans all start before limit+1
// results found in later ones, plus late spans (old start times written to
// the newest store) and a store whose stretch overlaps the next one's, and
// compares the pages with the definition, in trace and in span mode.
func TestSearchTimeOrderedStores(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	tiers := []string{"gold", "silver"}
	const phases = 4
	var all []*trace.Span
	db := openTestDB(t, t.TempDir(), testOptions())
	defer db.Close()
	for phase := 0; phase < phases; phase++ {
		if phase > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		var batch []*trace.Span
		for tr := 0; tr < 40; tr++ {
			var tid trace.TraceID
			for i := range tid {
				tid[i] = byte(r.UintN(256))
			}
			lo := phase * 100
			if phase == 2 {
				lo -= 30 // overlaps phase 1's stretch
			}
			n := 1 + r.IntN(4)
			var root trace.SpanID
			for j := 0; j < n; j++ {
				sid := trace.SpanID(r.Uint64() | 1)
				parent := root
				if j == 0 {
					root, parent = sid, 0
				}
				tick := lo + r.IntN(100)
				if phase == phases-1 && tr%10 == 0 {
					tick = r.IntN(100) // a late span: as old as the first store's
				}
				batch = append(batch, newPagedSpan(tid, sid, parent, tick, tiers[r.IntN(2)], "Op.run", r.Int64N(50), r.IntN(5) == 0))
			}
		}
		appendAll(t, db, batch, 20)
		all = append(all, batch...)
	}
	stores, release := db.snapshot()
	sealed := 0
	for _, s := range stores {
		if _, ok := s.latestStart(); ok {
			sealed++
		}
	}
	release()
	if len(stores) != phases {
		t.Fatalf("%d stores, want %d", len(stores), phases)
	}
	if sealed != phases-1 {
		t.Fatalf("%d stores with a known latest start, want the %d sealed ones", sealed, phases-1)
	}
	gold := trace.Attr{Key: "tier", Value: trace.String("gold")}
	at := func(tick int) int64 { return workload.Base + int64(tick)*pagingTick }
	cases := []struct {
		name string
		f    workload.Filter
	}{
		{"everything", workload.Filter{}},
		{"attribute", workload.Filter{Attrs: []trace.Attr{gold}}},
		{"errors", workload.Filter{ErrorsOnly: true}},
		{"time range", workload.Filter{SinceNS: at(50), UntilNS: at(250)}},
		{"min duration", workload.Filter{MinDurationNS: 40 * int64(time.Millisecond)}},
	}
	for _, c := range cases {
		want := expectedTracePages(all, c.f)
		for _, limit := range []int{1, 2, 7, 30, 1000} {
			t.Run(fmt.Sprintf("%s/limit=%d", c.name, limit), func(t *testing.T) {
				q := Query{SinceNS: c.f.SinceNS, UntilNS: c.f.UntilNS, MinDurationNS: c.f.MinDurationNS,
					ErrorsOnly: c.f.ErrorsOnly, Attrs: c.f.Attrs, Limit: limit}
				if d := diffTracePages(tracePages(t, db, q), want); d != "" {
					t.Fatal(d)
				}
				q.Spans = true
				wantSpans := workload.Expected(all, c.f)
				got := searchAll(t, db, q)
				if len(got) != len(wantSpans) {
					t.Fatalf("span mode: %d spans, want %d", len(got), len(wantSpans))
				}
				for i := range got {
					if got[i].TraceID != wantSpans[i].TraceID || got[i].SpanID != wantSpans[i].SpanID {
						t.Fatalf("span mode result %d: %s/%s, want %s/%s", i, got[i].TraceID, got[i].SpanID, wantSpans[i].TraceID, wantSpans[i].SpanID)
					}
				}
			})
		}
	}
}

// TestResultsAfter counts what resultsAfter counts: distinct traces (or
// spans) strictly after a time.
func TestResultsAfter(t *testing.T) {
	h := func(tid byte, sid uint64, start int64) hit {
		var h hit
		h.ref.TraceID[0], h.ref.SpanID, h.ref.StartNS = tid, sid, start
		return h
	}
	hits := []hit{h(1, 1, 50), h(1, 2, 40), h(2, 1, 30), h(3, 1, 20), h(3, 1, 20)}
	for _, c := range []struct {
		ns          int64
		spans, want int
	}{{10, 0, 3}, {10, 1, 4}, {20, 0, 2}, {30, 1, 2}, {50, 0, 0}} {
		if got := resultsAfter(hits, c.ns, c.spans == 1); got != c.want {
			t.Errorf("resultsAfter(%d, spans=%v) = %d, want %d", c.ns, c.spans == 1, got, c.want)
		}
	}
}
