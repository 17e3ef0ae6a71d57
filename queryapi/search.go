package queryapi

import (
	"context"
	"fmt"
	"sort"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// Conjunct is one AND of conditions on a span. Service, Attrs,
// MinDurationNS, MaxDurationNS and ErrorsOnly are index terms; Operation is
// storedir.Query.Operation (the index narrows to spans holding the text,
// each candidate is confirmed in the walk, pages stay exact); Check holds what no index can
// answer and is evaluated on each span the index returns (a head: the span
// with its root record's own fields, see trace.ChunkView.Summary).
type Conjunct struct {
	Service       string
	Attrs         []trace.Attr
	Operation     string
	MinDurationNS int64
	MaxDurationNS int64 // inclusive; 0 = unbounded
	ErrorsOnly    bool
	Check         func(*trace.Span) bool
}

// Search is an OR of conjuncts over a time range, for at most Limit
// traces. An empty Any matches every span.
type Search struct {
	Any              []Conjunct
	SinceNS, UntilNS int64 // span start in [SinceNS, UntilNS); 0 = unbounded
	Limit            int
	// PerTrace is how many matching spans each hit keeps (≥ 1).
	PerTrace int
	// Heads asks for each hit's TraceHit.Head where the index search
	// can fill it in the same walk (storedir.Query.TraceHeads: one index
	// search answers s, with no Check and PerTrace 1); else hits have none.
	Heads bool
}

// TraceHit is one trace found, with its newest matching spans (heads).
type TraceHit struct {
	TraceID trace.TraceID
	Spans   []*trace.Span // newest first, at most Search.PerTrace
	// Head is the whole trace's span count, time range and root span,
	// when Search.Heads asked and the search read it; else nil.
	Head   *storedir.TraceInfo
	newest int64
}

// MaxFilterPages bounds the pages of span heads (of FilterPageSize each)
// a conjunct with a Check reads: beyond them the search stops and reports
// itself truncated.
const (
	MaxFilterPages = 10
	FilterPageSize = 1000
)

// FindTraces runs s: one storedir.Search per conjunct and service
// alternative (see ServiceTerms) when nothing needs checking — the same
// work as /v1/search for the same filter — else pages of span heads, each
// checked, at most MaxFilterPages. Traces come newest first (by their
// newest matching span). truncated reports that a checked conjunct ran out
// of pages before finding Limit traces.
func FindTraces(ctx context.Context, db *storedir.DB, s Search) (hits []*TraceHit, truncated bool, err error) {
	if s.Limit <= 0 {
		s.Limit = 20
	}
	if s.Limit > storedir.MaxSearchLimit {
		s.Limit = storedir.MaxSearchLimit
	}
	if s.PerTrace < 1 {
		s.PerTrace = 1
	}
	any := s.Any
	if len(any) == 0 {
		any = []Conjunct{{}}
	}
	// Heads come with the search only when one index search answers s:
	// with several, most of each one's traces can be dropped from the
	// merged page, and their heads would be read for nothing.
	altsOf := make([][][]trace.Attr, len(any))
	searches := 0
	for i, c := range any {
		altsOf[i] = [][]trace.Attr{nil}
		if c.Service != "" {
			altsOf[i] = ServiceTerms(c.Service)
		}
		searches += len(altsOf[i])
	}
	heads := s.Heads && searches == 1
	byTrace := map[trace.TraceID]*TraceHit{}
	add := func(sp *trace.Span) {
		h := byTrace[sp.TraceID]
		if h == nil {
			h = &TraceHit{TraceID: sp.TraceID, newest: sp.StartNS}
			byTrace[sp.TraceID] = h
		}
		if sp.StartNS > h.newest {
			h.newest = sp.StartNS
		}
		if len(h.Spans) < s.PerTrace {
			for _, o := range h.Spans {
				if o.SpanID == sp.SpanID {
					return
				}
			}
			h.Spans = append(h.Spans, sp)
		}
	}
	for i, c := range any {
		for _, alt := range altsOf[i] {
			q := storedir.Query{SinceNS: s.SinceNS, UntilNS: s.UntilNS, MinDurationNS: c.MinDurationNS, MaxDurationNS: c.MaxDurationNS,
				ErrorsOnly: c.ErrorsOnly, Operation: c.Operation}
			q.Attrs = append(append(q.Attrs, alt...), c.Attrs...)
			check := c.Check
			if check == nil && s.PerTrace == 1 {
				q.Limit, q.TraceHeads = s.Limit, heads
				res, err := db.Search(ctx, q)
				if err != nil {
					return nil, false, fmt.Errorf("search: %w", err)
				}
				for i, sp := range res.Spans {
					add(sp)
					if h := byTrace[sp.TraceID]; i < len(res.Traces) && h.Head == nil {
						h.Head = &res.Traces[i]
					}
				}
				continue
			}
			q.Spans, q.Limit = true, FilterPageSize
			found := map[trace.TraceID]bool{}
			pages := 0
			for {
				res, err := db.Search(ctx, q)
				if err != nil {
					return nil, false, fmt.Errorf("search: %w", err)
				}
				pages++
				for _, sp := range res.Spans {
					if check != nil && !check(sp) {
						continue
					}
					if !found[sp.TraceID] && len(found) >= s.Limit {
						continue
					}
					found[sp.TraceID] = true
					add(sp)
				}
				if res.Cursor == "" || len(found) >= s.Limit {
					break
				}
				if pages >= MaxFilterPages {
					truncated = len(found) < s.Limit
					break
				}
				q.Cursor = res.Cursor
			}
		}
	}
	hits = make([]*TraceHit, 0, len(byTrace))
	for _, h := range byTrace {
		hits = append(hits, h)
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].newest != hits[j].newest {
			return hits[i].newest > hits[j].newest
		}
		return string(hits[i].TraceID[:]) > string(hits[j].TraceID[:])
	})
	if len(hits) > s.Limit {
		hits = hits[:s.Limit]
	}
	for _, h := range hits {
		sort.SliceStable(h.Spans, func(i, j int) bool { return h.Spans[i].StartNS > h.Spans[j].StartNS })
	}
	return hits, truncated, nil
}

// FindSpans returns the newest spans (heads, as FindTraces reads them)
// matching s, at most max of them, walking at most MaxFilterPages pages of
// FilterPageSize per conjunct and service alternative (s.Limit and
// s.PerTrace are not used). truncated reports that the page bound stopped
// a walk before it found max spans. A span matching several conjuncts is
// listed once.
func FindSpans(ctx context.Context, db *storedir.DB, s Search, max int) (spans []*trace.Span, truncated bool, err error) {
	any := s.Any
	if len(any) == 0 {
		any = []Conjunct{{}}
	}
	type key struct {
		t trace.TraceID
		s trace.SpanID
	}
	seen := map[key]bool{}
	for _, c := range any {
		alts := [][]trace.Attr{nil}
		if c.Service != "" {
			alts = ServiceTerms(c.Service)
		}
		for _, alt := range alts {
			q := storedir.Query{SinceNS: s.SinceNS, UntilNS: s.UntilNS, MinDurationNS: c.MinDurationNS, MaxDurationNS: c.MaxDurationNS,
				ErrorsOnly: c.ErrorsOnly, Operation: c.Operation, Spans: true, Limit: min(max, FilterPageSize)}
			q.Attrs = append(append(q.Attrs, alt...), c.Attrs...)
			for pages := 1; ; pages++ {
				res, err := db.Search(ctx, q)
				if err != nil {
					return nil, false, fmt.Errorf("search: %w", err)
				}
				for _, sp := range res.Spans {
					if c.Check != nil && !c.Check(sp) {
						continue
					}
					if k := (key{sp.TraceID, sp.SpanID}); !seen[k] && len(spans) < max {
						seen[k] = true
						spans = append(spans, sp)
					}
				}
				if res.Cursor == "" || len(spans) >= max {
					break
				}
				if pages >= MaxFilterPages {
					truncated = true
					break
				}
				q.Cursor = res.Cursor
			}
		}
	}
	return spans, truncated, nil
}
