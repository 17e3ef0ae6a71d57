package storedir

import (
	"context"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// BenchmarkSearchPages measures the first and the second page of trace-mode
// searches (limit 100, the API default) over several rotated stores. A
// page after a cursor also checks that each trace it lists was not listed
// on an earlier page (tracePager): "next" against "first" is that cost.
// The "-heads" queries add what /v1/search answers in trace mode (each
// trace's span count and root span), "operation" the exact operation
// filter (a summary read per candidate span).
func BenchmarkSearchPages(b *testing.B) {
	reqs, spans, _ := benchRequests(2, 50_000, 500)
	o := benchOptions(SyncNone)
	o.MaxStoreSize = 4 << 20 // several stores: traces are checked in each
	db := openBenchDB(b, o)
	for _, r := range reqs {
		if err := db.Append(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d stores", len(db.Stores()))
	mid := spans[len(spans)/2]
	user, _ := mid.Attrs.Get("user.id")
	queries := []struct {
		name string
		q    Query
	}{
		{"all", Query{}},
		{"attribute", Query{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("checkout")}}}},
		{"text", Query{Text: user.Str}},
		{"duration", Query{MinDurationNS: int64(20 * time.Millisecond)}},
		{"errors", Query{ErrorsOnly: true}},
		// What /v1/search adds in trace mode: each trace's span count and
		// root span (TraceHeads); against "all" that is its cost.
		{"all-heads", Query{TraceHeads: true}},
		{"attribute-heads", Query{TraceHeads: true, Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("checkout")}}}},
		{"operation", Query{Operation: OperationOf(mid)}},
		{"max-duration", Query{MaxDurationNS: int64(2 * time.Millisecond)}},
	}
	ctx := context.Background()
	for _, qq := range queries {
		q := qq.q
		q.Limit = 100
		first, err := db.Search(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if len(first.Spans) == 0 {
			b.Fatalf("query %+v finds nothing", q)
		}
		pages := []struct {
			name   string
			cursor string
		}{{"first", ""}, {"next", first.Cursor}}
		for _, p := range pages {
			if p.name == "next" && p.cursor == "" {
				continue // one page only
			}
			b.Run(qq.name+"/"+p.name, func(b *testing.B) {
				q := q
				q.Cursor = p.cursor
				cpu0 := processCPU()
				var n int
				for b.Loop() {
					res, err := db.Search(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					n = len(res.Spans)
				}
				b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(n), "results")
			})
		}
	}
}
