package queryapi

import (
	"sort"

	"github.com/ztsd/ztsd/trace"
)

// ServiceSummary counts the spans of one service in a trace.
type ServiceSummary struct {
	Name           string
	SpanCount      int
	ErrorSpanCount int
}

// TraceSummary is what a search result list shows of a trace without
// loading it: Jaeger's TraceSummary (GET /api/v3/trace-summaries), computed
// as Jaeger's fallback computes it from the whole trace, over the spans the
// v3 API shows for the trace (stored spans and their record-spans, see
// Expand).
type TraceSummary struct {
	TraceID           trace.TraceID
	RootServiceName   string // of the earliest span without a parent; "" when there is none
	RootOperationName string
	MinStartNS        int64 // the earliest span start
	MaxEndNS          int64 // the latest span end
	SpanCount         int
	ErrorSpanCount    int              // spans with status ERROR
	OrphanSpanCount   int              // spans whose parent is not in the trace
	Services          []ServiceSummary // sorted by name
}

// Summarize summarizes one trace's stored spans (as GetTrace returns them,
// record trees included).
func Summarize(id trace.TraceID, roots []*trace.Span) TraceSummary {
	ts := TraceSummary{TraceID: id}
	ids := map[trace.SpanID]bool{}
	var parents []trace.SpanID
	svcs := map[string]*ServiceSummary{}
	rootStart := int64(0)
	haveRoot := false
	for _, sp := range Flatten(roots) {
		Expand(sp, func(v *Span) error {
			ids[v.SpanID] = true
			if v.ParentID != 0 {
				parents = append(parents, v.ParentID)
			}
			s := svcs[v.Service]
			if s == nil {
				s = &ServiceSummary{Name: v.Service}
				svcs[v.Service] = s
			}
			s.SpanCount++
			ts.SpanCount++
			if v.Status == StatusError {
				s.ErrorSpanCount++
				ts.ErrorSpanCount++
			}
			end := v.StartNS + v.DurationNS
			if ts.SpanCount == 1 || v.StartNS < ts.MinStartNS {
				ts.MinStartNS = v.StartNS
			}
			if ts.SpanCount == 1 || end > ts.MaxEndNS {
				ts.MaxEndNS = end
			}
			if v.ParentID == 0 && (!haveRoot || v.StartNS < rootStart) {
				haveRoot, rootStart = true, v.StartNS
				ts.RootServiceName, ts.RootOperationName = v.Service, v.Name
			}
			return nil
		})
	}
	for _, p := range parents {
		if !ids[p] {
			ts.OrphanSpanCount++
		}
	}
	ts.Services = make([]ServiceSummary, 0, len(svcs))
	for _, s := range svcs {
		ts.Services = append(ts.Services, *s)
	}
	sort.Slice(ts.Services, func(i, j int) bool { return ts.Services[i].Name < ts.Services[j].Name })
	return ts
}
