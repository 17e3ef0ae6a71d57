package recovery

import (
	"fmt"
	"io"
	"strings"

	"github.com/ztsd/ztsd/chunk"
)

// Region is a bad region of a data file as reported.
type Region struct {
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Action is what recover did with it: "skipped" (left in place, its
	// traces are lost), "cut" (a torn tail, moved to traces.zts.broken),
	// or, in a dry run, "would cut"; empty in verify.
	Action string `json:"action,omitempty"`
}

func regionOf(b chunk.BadRegion, action string) Region {
	detail := ""
	if b.Err != nil {
		detail = b.Err.Error()
	}
	return Region{Offset: b.Offset, Length: b.Length, Reason: b.Reason.String(), Detail: detail, Action: action}
}

func (r Region) String() string {
	s := fmt.Sprintf("[%d, %d) %d bytes: %s", r.Offset, r.Offset+r.Length, r.Length, r.Reason)
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	if r.Action != "" {
		s += " (" + r.Action + ")"
	}
	return s
}

// StoreReport is what Recover did to one store.
type StoreReport struct {
	Store string `json:"store"`
	Dir   string `json:"dir"`
	// DataBytes is the size of the data file before recovery.
	DataBytes   int64  `json:"data_bytes"`
	Compression string `json:"compression"`
	Checksums   bool   `json:"checksums"`
	State       string `json:"state"`
	ChunksOK    int64  `json:"chunks_ok"`
	// ChunksBad counts bad regions: each is at least one lost chunk.
	ChunksBad  int      `json:"chunks_bad"`
	BadRegions []Region `json:"bad_regions"`
	// BytesMovedAside were cut from the data file and appended to
	// traces.zts.broken.
	BytesMovedAside int64 `json:"bytes_moved_aside"`
	Spans           int64 `json:"spans_indexed"`
	Traces          int64 `json:"traces_indexed"`
	// IndexesRebuilt is false in a dry run.
	IndexesRebuilt bool     `json:"indexes_rebuilt"`
	Actions        []string `json:"actions"`
	// Skipped says why nothing was done (e.g. no data file).
	Skipped string  `json:"skipped,omitempty"`
	Seconds float64 `json:"seconds"`
	MBPerS  float64 `json:"mb_per_s"`
}

// Report is what Recover did to a data directory (or one store).
type Report struct {
	Dir             string        `json:"dir"`
	DryRun          bool          `json:"dry_run"`
	Stores          []StoreReport `json:"stores"`
	Actions         []string      `json:"actions"`
	ChunksOK        int64         `json:"chunks_ok"`
	ChunksBad       int           `json:"chunks_bad"`
	BytesMovedAside int64         `json:"bytes_moved_aside"`
	Spans           int64         `json:"spans_indexed"`
	Traces          int64         `json:"traces_indexed"`
	DataBytes       int64         `json:"data_bytes"`
	Seconds         float64       `json:"seconds"`
	MBPerS          float64       `json:"mb_per_s"`
}

func (r *Report) add(s StoreReport) {
	r.Stores = append(r.Stores, s)
	r.ChunksOK += s.ChunksOK
	r.ChunksBad += s.ChunksBad
	r.BytesMovedAside += s.BytesMovedAside
	r.Spans += s.Spans
	r.Traces += s.Traces
	r.DataBytes += s.DataBytes
}

func mbPerS(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / seconds
}

// WriteText renders the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	verb := "recovered"
	if r.DryRun {
		verb = "dry run, nothing changed:"
	}
	for _, a := range r.Actions {
		fmt.Fprintf(&b, "%s\n", a)
	}
	for _, s := range r.Stores {
		if s.Skipped != "" {
			fmt.Fprintf(&b, "store %s: skipped: %s\n", s.Store, s.Skipped)
			continue
		}
		fmt.Fprintf(&b, "store %s (%s, %s): %d chunks ok, %d bad, %d bytes moved aside, %d spans in %d traces indexed, %.2f MB in %.2f s (%.1f MB/s)\n",
			s.Store, s.State, optionsText(s.Compression, s.Checksums), s.ChunksOK, s.ChunksBad, s.BytesMovedAside,
			s.Spans, s.Traces, float64(s.DataBytes)/1e6, s.Seconds, s.MBPerS)
		for _, reg := range s.BadRegions {
			fmt.Fprintf(&b, "  bad chunk %s\n", reg)
		}
		for _, a := range s.Actions {
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	fmt.Fprintf(&b, "%s %d stores: %d chunks ok, %d bad, %d bytes moved aside, %d traces (%d spans) indexed, %.2f MB in %.2f s (%.1f MB/s)\n",
		verb, len(r.Stores), r.ChunksOK, r.ChunksBad, r.BytesMovedAside, r.Traces, r.Spans,
		float64(r.DataBytes)/1e6, r.Seconds, r.MBPerS)
	_, err := io.WriteString(w, b.String())
	return err
}

func optionsText(compression string, checksums bool) string {
	if checksums {
		return compression + "+crc32"
	}
	return compression
}

// Problem is one thing verify found wrong.
type Problem struct {
	Store string `json:"store,omitempty"`
	// Kind classifies the problem: props, header, master, chunk, tail,
	// index-missing, index-corrupt, index-ahead,
	// unindexed-chunk, dangling-entry, entry-mismatch, text-missing-string,
	// swap-pending, no-data-file, io.
	// Index lag (an index behind its data file, or an index directory
	// nothing was flushed to) is what a crash leaves and what the daemon
	// heals when it opens the store: a note, never a problem.
	Kind   string `json:"kind"`
	Offset *int64 `json:"offset,omitempty"`
	Length int64  `json:"length,omitempty"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Kind)
	if p.Offset != nil {
		if p.Length > 0 {
			fmt.Fprintf(&b, " [%d, %d)", *p.Offset, *p.Offset+p.Length)
		} else {
			fmt.Fprintf(&b, " at %d", *p.Offset)
		}
	}
	b.WriteString(": ")
	b.WriteString(p.Detail)
	return b.String()
}

func at(off int64) *int64 { return &off }

// StoreVerify is what Verify found in one store.
type StoreVerify struct {
	Store       string    `json:"store"`
	Dir         string    `json:"dir"`
	DataBytes   int64     `json:"data_bytes"`
	Compression string    `json:"compression"`
	Checksums   bool      `json:"checksums"`
	State       string    `json:"state"`
	ChunksOK    int64     `json:"chunks_ok"`
	ChunksBad   int       `json:"chunks_bad"`
	Spans       int64     `json:"spans"`
	Traces      int64     `json:"traces_indexed"`
	BadRegions  []Region  `json:"bad_regions"`
	Problems    []Problem `json:"problems"`
	Notes       []string  `json:"notes"`
	// IndexesChecked is false when a daemon held the lock.
	IndexesChecked bool    `json:"indexes_checked"`
	Seconds        float64 `json:"seconds"`
	MBPerS         float64 `json:"mb_per_s"`
}

func (s *StoreVerify) problem(kind string, off *int64, length int64, format string, args ...any) {
	s.Problems = append(s.Problems, Problem{Store: s.Store, Kind: kind, Offset: off, Length: length, Detail: fmt.Sprintf(format, args...)})
}

func (s *StoreVerify) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// VerifyReport is what Verify found in a data directory (or one store).
type VerifyReport struct {
	Dir       string        `json:"dir"`
	Stores    []StoreVerify `json:"stores"`
	Problems  []Problem     `json:"problems"` // every problem, of every store
	Notes     []string      `json:"notes"`
	ChunksOK  int64         `json:"chunks_ok"`
	ChunksBad int           `json:"chunks_bad"`
	DataBytes int64         `json:"data_bytes"`
	Seconds   float64       `json:"seconds"`
	MBPerS    float64       `json:"mb_per_s"`
	OK        bool          `json:"ok"`
}

func (r *VerifyReport) add(s StoreVerify) {
	r.Stores = append(r.Stores, s)
	r.Problems = append(r.Problems, s.Problems...)
	r.ChunksOK += s.ChunksOK
	r.ChunksBad += s.ChunksBad
	r.DataBytes += s.DataBytes
}

// WriteText renders the report for a terminal.
func (r *VerifyReport) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, s := range r.Stores {
		idx := "indexes checked"
		if !s.IndexesChecked {
			idx = "indexes NOT checked"
		}
		fmt.Fprintf(&b, "store %s (%s, %s): %d chunks ok, %d bad, %d spans, %d traces indexed, %s, %.2f MB in %.2f s (%.1f MB/s)\n",
			s.Store, s.State, optionsText(s.Compression, s.Checksums), s.ChunksOK, s.ChunksBad, s.Spans, s.Traces, idx,
			float64(s.DataBytes)/1e6, s.Seconds, s.MBPerS)
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "  PROBLEM %s\n", p)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
	}
	for _, p := range r.Problems {
		if p.Store == "" {
			fmt.Fprintf(&b, "PROBLEM %s\n", p)
		}
	}
	if r.OK {
		fmt.Fprintf(&b, "verify: OK: %d stores, %d chunks, %.2f MB in %.2f s (%.1f MB/s)\n", len(r.Stores), r.ChunksOK, float64(r.DataBytes)/1e6, r.Seconds, r.MBPerS)
	} else {
		fmt.Fprintf(&b, "verify: %d problems in %d stores (%d chunks ok, %d bad)\n", len(r.Problems), len(r.Stores), r.ChunksOK, r.ChunksBad)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
