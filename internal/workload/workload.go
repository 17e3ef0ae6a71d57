// Package workload generates reproducible trace workloads for tests and
// benchmarks (spans in traces of 1–10, low- and high-cardinality
// attributes, nested records, rare exceptions) and holds the brute-force
// search filter that the store's search results are checked against.
package workload

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/ztsd/ztsd/trace"
)

// Base is the start of the generated time range.
var Base = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).UnixNano()

var (
	services  = []string{"checkout", "cart", "payment", "search", "auth"}
	endpoints = []string{"/api/buy", "/api/list", "/api/login", "/health", "/api/items/{id}"}
	methods   = []string{"HttpHandler.serve", "Dao.query", "Cache.get", "Template.render", "Json.encode", "Auth.check"}
)

// Spans makes n spans from seed: traces of 1–10 spans (the first is the
// root, the others its children) spread over 20 days, each span with six
// attributes and a small record tree; about 1% of records throw.
func Spans(seed uint64, n int) []*trace.Span {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []*trace.Span
	for len(out) < n {
		var tid trace.TraceID
		for i := range tid {
			tid[i] = byte(r.UintN(256))
		}
		nspans := 1 + r.IntN(10)
		start := Base + r.Int64N(int64(20*24*time.Hour))
		var parent trace.SpanID
		for j := 0; j < nspans && len(out) < n; j++ {
			sp := &trace.Span{
				TraceID: tid, SpanID: trace.SpanID(r.Uint64() | 1), ParentID: parent,
				Type: "http", StartNS: start + int64(j)*1000, DurationNS: r.Int64N(int64(50 * time.Millisecond)),
				Source: trace.SourceJSON,
			}
			if j == 0 {
				parent = sp.SpanID
			}
			sp.Attrs.Set("service.name", trace.String(services[r.IntN(len(services))]))
			sp.Attrs.Set("http.route", trace.String(endpoints[r.IntN(len(endpoints))]))
			sp.Attrs.Set("http.status_code", trace.Int(int64([]int{200, 200, 200, 404, 500}[r.IntN(5)])))
			sp.Attrs.Set("user.id", trace.String(fmt.Sprintf("user-%d", r.IntN(5000))))
			sp.Attrs.Set("db.rows", trace.Int(r.Int64N(100)))
			sp.Attrs.Set("sampled", trace.Bool(r.IntN(2) == 0))
			root := &trace.Record{Method: methods[r.IntN(len(methods))], DurationNS: sp.DurationNS, Calls: 1}
			for k := 0; k < r.IntN(4); k++ {
				c := &trace.Record{Method: methods[r.IntN(len(methods))], StartNS: int64(k) * 100, DurationNS: 50, Calls: 1}
				if r.IntN(100) == 0 {
					c.Exception = &trace.Exception{Class: "java.sql.SQLException", Message: fmt.Sprintf("deadlock detected %d", r.IntN(50))}
				}
				root.Children = append(root.Children, c)
			}
			sp.Root = root
			sp.FillSummary()
			sp.Error = sp.Errors > 0 || r.IntN(200) == 0
			out = append(out, sp)
		}
	}
	return out
}

// Filter is a search as the brute-force matcher sees it.
type Filter struct {
	SinceNS, UntilNS int64
	MinDurationNS    int64
	MaxDurationNS    int64 // 0 = unbounded
	ErrorsOnly       bool
	Attrs            []trace.Attr
	Text             string
	Operation        string // the root record's method (the type without one), exactly
}

// Match reports whether sp satisfies f, by definition.
func Match(sp *trace.Span, f Filter) bool {
	if f.SinceNS != 0 && sp.StartNS < f.SinceNS || f.UntilNS != 0 && sp.StartNS >= f.UntilNS {
		return false
	}
	if sp.DurationNS < f.MinDurationNS || f.MaxDurationNS > 0 && sp.DurationNS > f.MaxDurationNS {
		return false
	}
	if f.Operation != "" && (sp.Root == nil && sp.Type != f.Operation || sp.Root != nil && sp.Root.Method != f.Operation) {
		return false
	}
	if f.ErrorsOnly && !sp.Error {
		return false
	}
	for _, a := range f.Attrs {
		if !hasAttr(sp, a) {
			return false
		}
	}
	if f.Text != "" && !containsText(sp, strings.ToLower(f.Text)) {
		return false
	}
	return true
}

// hasAttr reports whether the span or any of its records has the
// attribute a (value compared as text), as attribute search matches.
func hasAttr(sp *trace.Span, a trace.Attr) bool {
	if v, ok := sp.Attrs.Get(a.Key); ok && v.Text() == a.Value.Text() {
		return true
	}
	found := false
	if sp.Root != nil {
		sp.Root.Walk(func(r *trace.Record, _ int) bool {
			if v, ok := r.Attrs.Get(a.Key); ok && v.Text() == a.Value.Text() {
				found = true
			}
			return !found
		})
	}
	return found
}

func containsText(sp *trace.Span, needle string) bool {
	found := false
	check := func(s string) {
		if !found && s != "" && strings.Contains(strings.ToLower(s), needle) {
			found = true
		}
	}
	checkAttrs := func(as trace.Attrs) {
		for _, a := range as {
			check(a.Key)
			if a.Value.Kind != trace.KindList && a.Value.Kind != trace.KindMap {
				check(a.Value.Text())
			}
		}
	}
	check(sp.Type)
	checkAttrs(sp.Attrs)
	sp.Root.Walk(func(r *trace.Record, _ int) bool {
		check(r.Method)
		checkAttrs(r.Attrs)
		for e := r.Exception; e != nil; e = e.Cause {
			check(e.Class)
			check(e.Message)
		}
		return !found
	})
	return found
}

// Newest sorts spans the way search returns them: start time descending,
// then trace id, then span id, descending.
func Newest(spans []*trace.Span) {
	sort.Slice(spans, func(i, j int) bool {
		a, b := spans[i], spans[j]
		if a.StartNS != b.StartNS {
			return a.StartNS > b.StartNS
		}
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c > 0
		}
		return a.SpanID > b.SpanID
	})
}

// Expected returns the spans matching f, newest first.
func Expected(spans []*trace.Span, f Filter) []*trace.Span {
	var out []*trace.Span
	for _, sp := range spans {
		if Match(sp, f) {
			out = append(out, sp)
		}
	}
	Newest(out)
	return out
}

// Filters returns a varied set of searches over a workload from Spans.
func Filters(spans []*trace.Span) []Filter {
	mid := spans[len(spans)/2].StartNS
	return []Filter{
		{SinceNS: mid, UntilNS: mid + int64(2*time.Hour)},
		{MinDurationNS: int64(49 * time.Millisecond)},
		{ErrorsOnly: true},
		{Attrs: []trace.Attr{{Key: "user.id", Value: trace.String("user-42")}}},
		{Attrs: []trace.Attr{{Key: "service.name", Value: trace.String("payment")},
			{Key: "http.status_code", Value: trace.Int(500)}}, MinDurationNS: int64(40 * time.Millisecond)},
		{Text: "DEADLOCK detected 7"},
		{Text: "user-499", ErrorsOnly: true},
		{Attrs: []trace.Attr{{Key: "http.route", Value: trace.String("/health")}}, SinceNS: mid - int64(24*time.Hour), UntilNS: mid},
		{Attrs: []trace.Attr{{Key: "no.such.key", Value: trace.String("x")}}},
		{Text: "no such string anywhere"},
	}
}
