// Package ingest holds what every importer shares: the summary an import
// prints, the options it takes, and format detection. Each format lives in
// its own sub-package (ingest/zorka, ingest/wtf, ingest/dial9, ingest/atf)
// and turns its source into trace.Span values; nothing here knows about
// storage or sockets.
package ingest

import "github.com/ztsd/ztsd/trace"

// Summary is what `ztsctl import` prints as JSON (DESIGN.md "Importers").
// Events counts source events as the format's own reference reader counts
// them; Traces counts distinct trace ids among the spans emitted (TraceSet);
// Details holds format-specific counts named in each format's issue.
type Summary struct {
	Format  string `json:"format"`
	Source  string `json:"source"`
	Events  int64  `json:"events"`
	Traces  int64  `json:"traces"`
	Records int64  `json:"records"`
	// Stored counts the spans stored (set by ztsctl import; 0 on a dry run
	// or when the input failed to decode without --keep-going).
	Stored   int64          `json:"stored"`
	Warnings []string       `json:"warnings"`
	Details  map[string]any `json:"details,omitempty"`
}

// Options tune an import.
type Options struct {
	// KeepGoing turns a decode error after some data was decoded into a
	// warning: what was decoded before it is kept.
	KeepGoing bool
}

// Emit receives each decoded span. An error stops the import and is
// returned by the decoder unchanged.
type Emit func(*trace.Span) error

// TraceSet counts the distinct trace ids of the spans an import emits:
// Summary.Traces is that count (a trace split over several parentless
// spans, or spread over the input, counts once).
type TraceSet struct {
	seen map[trace.TraceID]struct{}
}

// Add records the trace of sp.
func (s *TraceSet) Add(sp *trace.Span) {
	if s.seen == nil {
		s.seen = make(map[trace.TraceID]struct{})
	}
	s.seen[sp.TraceID] = struct{}{}
}

// Len is the number of distinct trace ids added.
func (s *TraceSet) Len() int64 { return int64(len(s.seen)) }

// Counting returns an Emit that adds each span to s before passing it on.
func (s *TraceSet) Counting(emit Emit) Emit {
	return func(sp *trace.Span) error {
		s.Add(sp)
		return emit(sp)
	}
}
