package migrate

import (
	"fmt"
	"io"
	"strings"

	"github.com/ztsd/ztsd/chunk"
)

// Bounds on what a report lists individually (the totals count the rest).
const (
	maxListedRegions  = 100
	maxListedWarnings = 100
	maxListedProblems = 100
)

// Region is a bad region of a source data file that was skipped: its
// traces could not be read and are not in the target.
type Region struct {
	Store  string `json:"store"` // the store directory
	Offset int64  `json:"offset"`
	Length int64  `json:"length"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

func regionOf(dir string, b chunk.BadRegion) Region {
	r := Region{Store: dir, Offset: b.Offset, Length: b.Length, Reason: b.Reason.String()}
	if b.Err != nil {
		r.Detail = b.Err.Error()
	}
	return r
}

// Counters count what the copy read and wrote; they survive resumes (they
// are part of the checkpoint).
type Counters struct {
	StoresRead   int   `json:"stores_read"`
	ChunksRead   int64 `json:"chunks_read"`
	BytesRead    int64 `json:"bytes_read"` // data-file bytes of the chunks read
	SpansRead    int64 `json:"spans_read"` // pieces decoded from the sources
	SpansWritten int64 `json:"spans_written"`
	Duplicates   int64 `json:"duplicates_skipped"`
	// NewerVersions counts pieces met again with different content (a
	// span the source daemon stored again, superseding the earlier one):
	// each is written after the earlier one, which it supersedes in the
	// target as it did in the source. SpansWritten counts distinct pieces.
	NewerVersions int64 `json:"newer_versions"`
	// DroppedByTime and DroppedByAttr count pieces of traces the filters
	// left out (a trace dropped by attribute counts there even when it
	// is also outside the time range).
	DroppedByTime int64 `json:"dropped_by_time"`
	DroppedByAttr int64 `json:"dropped_by_attr"`
	// InvalidSpans are pieces a daemon would not have stored (zero span
	// id, invalid attributes): skipped.
	InvalidSpans int64 `json:"invalid_spans"`
	// BadChunks are chunks whose framing and checksum are valid but whose
	// payload does not decode: skipped.
	BadChunks  int64    `json:"bad_chunks"`
	BadRegions []Region `json:"bad_regions"`
	// BadRegionsTotal counts every bad region, listed or not.
	BadRegionsTotal int      `json:"bad_regions_total"`
	Warnings        []string `json:"warnings"`
}

func (c *Counters) add(o Counters) {
	c.StoresRead += o.StoresRead
	c.ChunksRead += o.ChunksRead
	c.BytesRead += o.BytesRead
	c.SpansRead += o.SpansRead
	c.SpansWritten += o.SpansWritten
	c.Duplicates += o.Duplicates
	c.NewerVersions += o.NewerVersions
	c.DroppedByTime += o.DroppedByTime
	c.DroppedByAttr += o.DroppedByAttr
	c.InvalidSpans += o.InvalidSpans
	c.BadChunks += o.BadChunks
	c.BadRegionsTotal += o.BadRegionsTotal
	for _, r := range o.BadRegions {
		if len(c.BadRegions) < maxListedRegions {
			c.BadRegions = append(c.BadRegions, r)
		}
	}
	for _, w := range o.Warnings {
		c.warn(w)
	}
}

func (c *Counters) warn(w string) {
	if len(c.Warnings) < maxListedWarnings {
		c.Warnings = append(c.Warnings, w)
	} else if len(c.Warnings) == maxListedWarnings {
		c.Warnings = append(c.Warnings, "further warnings left out")
	}
}

func (c *Counters) region(r Region) {
	c.BadRegionsTotal++
	if len(c.BadRegions) < maxListedRegions {
		c.BadRegions = append(c.BadRegions, r)
	}
}

func (c *Counters) normalize() {
	if c.BadRegions == nil {
		c.BadRegions = []Region{}
	}
	if c.Warnings == nil {
		c.Warnings = []string{}
	}
}

// Verification is what Verify checked.
type Verification struct {
	// SourcePieces is how many pieces of the sources the filters keep,
	// duplicates included; each was found in the seen-set.
	SourcePieces int64 `json:"source_pieces"`
	// Pieces is how many distinct pieces the target must hold, and
	// TargetPieces how many its data files hold.
	Pieces       int64 `json:"pieces"`
	TargetPieces int64 `json:"target_pieces"`
	// OlderVersions is how many of TargetPieces are superseded versions
	// (a piece whose content changed in the sources keeps its older
	// versions before the current one, as the source did); Pieces +
	// OlderVersions = TargetPieces when OK.
	OlderVersions int64 `json:"older_versions"`
	// Traces is how many traces were read back through the target's
	// indexes and compared span by span with the sources.
	Traces int64 `json:"traces"`
	// StoresVerified is how many target stores recovery.VerifyDataDir
	// (what `ztsctl verify` runs) checked.
	StoresVerified int      `json:"stores_verified"`
	Problems       []string `json:"problems"`
	ProblemsTotal  int      `json:"problems_total"`
	OK             bool     `json:"ok"`
	Seconds        float64  `json:"seconds"`
}

func (v *Verification) problem(format string, args ...any) {
	v.ProblemsTotal++
	if len(v.Problems) < maxListedProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// Report is what a migration did; `ztsctl migrate --json` prints it.
type Report struct {
	Sources []string `json:"sources"`
	Target  string   `json:"target"`
	InPlace bool     `json:"in_place"`
	// Resumed: this run continued an interrupted one (the counters cover
	// every run). AlreadyComplete: there was nothing left to do; the
	// report is the one the finishing run recorded.
	Resumed         bool     `json:"resumed"`
	AlreadyComplete bool     `json:"already_complete"`
	Compression     string   `json:"compression"`
	Checksums       bool     `json:"checksums"`
	SinceNS         int64    `json:"since_ns"`
	UntilNS         int64    `json:"until_ns"`
	DropAttrs       []string `json:"drop_attrs"`
	SourceStores    int      `json:"source_stores"`
	SourceBytes     int64    `json:"source_bytes"`
	// UpgradedStores counts source stores of an older format version.
	UpgradedStores int `json:"upgraded_stores"`
	Counters
	TargetStores int          `json:"target_stores"`
	TargetBytes  int64        `json:"target_bytes"`
	Verify       Verification `json:"verify"`
	// Seconds is this run's wall time (verification included); MBPerS
	// and SpansPerS the source data-file bytes and spans this run copied
	// per second of it.
	Seconds   float64 `json:"seconds"`
	MBPerS    float64 `json:"mb_per_s"`
	SpansPerS float64 `json:"spans_per_s"`
}

func (r *Report) normalize() {
	if r.Sources == nil {
		r.Sources = []string{}
	}
	if r.DropAttrs == nil {
		r.DropAttrs = []string{}
	}
	if r.Verify.Problems == nil {
		r.Verify.Problems = []string{}
	}
	r.Counters.normalize()
}

// WriteText renders the report for a terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	opts := r.Compression
	if r.Checksums {
		opts += "+crc32"
	}
	mode := "into " + r.Target
	if r.InPlace {
		mode = "in place: " + r.Target
	}
	fmt.Fprintf(&b, "migrate %s %s (%s)\n", strings.Join(r.Sources, " + "), mode, opts)
	switch {
	case r.AlreadyComplete:
		b.WriteString("  the migration had already completed; this is its report\n")
	case r.Resumed:
		b.WriteString("  resumed an interrupted migration\n")
	}
	if r.SinceNS != 0 || r.UntilNS != 0 || len(r.DropAttrs) > 0 {
		fmt.Fprintf(&b, "  filters: since %d, until %d, drop %s\n", r.SinceNS, r.UntilNS, strings.Join(r.DropAttrs, ", "))
	}
	fmt.Fprintf(&b, "  read %d stores (%d upgraded), %d chunks, %.2f MB, %d spans\n",
		r.StoresRead, r.UpgradedStores, r.ChunksRead, float64(r.BytesRead)/1e6, r.SpansRead)
	fmt.Fprintf(&b, "  wrote %d spans into %d stores (%.2f MB); skipped %d duplicates, %d by time, %d by attribute, %d invalid\n",
		r.SpansWritten, r.TargetStores, float64(r.TargetBytes)/1e6, r.Duplicates, r.DroppedByTime, r.DroppedByAttr, r.InvalidSpans)
	if r.NewerVersions > 0 {
		fmt.Fprintf(&b, "  wrote %d newer versions of spans met before (each supersedes the earlier one, as in the source)\n", r.NewerVersions)
	}
	if r.BadRegionsTotal > 0 || r.BadChunks > 0 {
		fmt.Fprintf(&b, "  LOST: %d bad regions and %d undecodable chunks of the sources were skipped\n", r.BadRegionsTotal, r.BadChunks)
		for _, br := range r.BadRegions {
			fmt.Fprintf(&b, "    %s [%d, %d) %s %s\n", br.Store, br.Offset, br.Offset+br.Length, br.Reason, br.Detail)
		}
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "  warning: %s\n", wn)
	}
	v := r.Verify
	if v.OK {
		fmt.Fprintf(&b, "  verified: %d source pieces, %d target pieces, %d traces read back, %d stores pass verify (%.2f s)\n",
			v.SourcePieces, v.TargetPieces, v.Traces, v.StoresVerified, v.Seconds)
	} else {
		fmt.Fprintf(&b, "  VERIFICATION FAILED: %d problems\n", v.ProblemsTotal)
		for _, p := range v.Problems {
			fmt.Fprintf(&b, "    %s\n", p)
		}
	}
	fmt.Fprintf(&b, "migrate: %s in %.2f s (%.1f MB/s, %.0f spans/s)\n", map[bool]string{true: "OK", false: "FAILED"}[v.OK], r.Seconds, r.MBPerS, r.SpansPerS)
	_, err := io.WriteString(w, b.String())
	return err
}
