// Package ingest holds what every importer shares: the summary an import
// prints, the options it takes, and format detection. Each format lives in
// its own sub-package (ingest/zorka, ingest/wtf, ingest/dial9, ingest/atf)
// and turns its source into trace.Span values; nothing here knows about
// storage or sockets.
package ingest

import "github.com/ztsd/ztsd/trace"

// Summary is what `ztsctl import` prints as JSON (DESIGN.md "Importers").
// Events counts source events as the format's own reference reader counts
// them; Details holds format-specific counts named in each format's issue.
type Summary struct {
	Format   string         `json:"format"`
	Source   string         `json:"source"`
	Events   int64          `json:"events"`
	Traces   int64          `json:"traces"`
	Records  int64          `json:"records"`
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
