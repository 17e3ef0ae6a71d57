package wtf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ztsd/ztsd/ingest"
)

// Format is the Summary.Format of this importer.
const Format = "wtf"

// MaxFileSize bounds the file Import reads into memory.
const MaxFileSize = 1 << 32

// maxEventHint caps the first allocation of event slots (16 bytes each).
const maxEventHint = 1 << 22

// eventHint is the most events a file of n bytes can hold (legacy events
// take at least 6 bytes, CFF events 8, base64 11), up to maxEventHint.
func eventHint(enc encoding, n int) int {
	switch enc {
	case encLegacyBinary:
		n /= 6
	case encCFFBinary:
		n /= 8
	case encCFFJSON:
		n /= 11
	default:
		n /= 16
	}
	return min(n, maxEventHint)
}

// Import reads the WTF file at path once and decodes it (see Decode).
func Import(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wtf import: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wtf import %s: %w", path, err)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("wtf import %s: %w: %d bytes, at most %d", path, ErrLimit, fi.Size(), int64(MaxFileSize))
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("wtf import %s: %w", path, err)
	}
	return Decode(ctx, path, data, opts, emit)
}

// Decode decodes a whole WTF file held in data (any of the encodings in the
// package doc) and emits one span per top-level scope or top-level instance
// event of each zone. name is the file's path: Summary.Source is name, the
// spans' source.file its base name. data is not retained.
//
// On a decode error (*DecodeError wrapping ErrTruncated, ErrUnknownEvent,
// ErrBadSignature, ErrStringRange, ...) nothing is emitted and the error is
// returned, unless opts.KeepGoing is set and some events were decoded before
// it: then those events are imported and the error becomes a warning. An
// error from emit stops the import and is returned unchanged.
//
// Summary.Events counts every event record in the file as WTF's loader reads
// them (definitions and zone events included; for legacy JSON, every event
// and define entry). Summary.Details holds:
//
//	zones            number of zones
//	zone_names       their names, in creation order
//	scopes           scope events (records that can have children)
//	max_depth        deepest scope nesting (a top-level scope has depth 1)
//	frames           frame numbers with both a frameStart and a frameEnd
//	marks, time_ranges
//	events_per_name  stored events per event name (WTF's eventcounts)
//	events_per_zone  the same per zone name
//	encoding, timebase_ms, chunks, resources
//	accounting       where every event went: definitions + zone_events +
//	                 scopes + leaves + unmatched_leaves + append_data +
//	                 instance_records + dropped == events
func Decode(ctx context.Context, name string, data []byte, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	enc, le, err := detect(data)
	if err != nil {
		return nil, &DecodeError{Encoding: "detect", Chunk: -1, Part: -1, Offset: 0, Entry: -1, Err: err}
	}
	l := newLoader(ctx, enc)
	l.eventHint = eventHint(enc, len(data))
	switch enc {
	case encLegacyBinary:
		err = l.decodeLegacy(data, le)
	case encCFFBinary:
		err = l.decodeCFF(data)
	case encCFFJSON:
		err = l.decodeCFFJSON(data)
	case encLegacyJSON:
		err = l.decodeLegacyJSON(data)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, err
		}
		if !opts.KeepGoing || l.raw == 0 {
			return nil, err
		}
		l.warn.add("decode-error", fmt.Sprintf("decoding stopped, %d events read before the error are kept: %v", l.raw, err))
	}
	var st stats
	if err := l.prepare(opts, &st); err != nil {
		return nil, err
	}
	if err := l.build(identity{file: filepath.Base(name), size: int64(len(data))}, emit, &st); err != nil {
		return nil, err
	}
	return l.summary(name, &st), nil
}

func (l *loader) summary(name string, st *stats) *ingest.Summary {
	zoneNames := make([]string, len(l.zones))
	for i, z := range l.zones {
		zoneNames[i] = z.displayName()
	}
	perZone := make(map[string]any, len(st.perZone))
	for z, m := range st.perZone {
		perZone[z] = m
	}
	details := map[string]any{
		"encoding":        l.enc.String(),
		"zones":           len(l.zones),
		"zone_names":      zoneNames,
		"scopes":          st.scopes,
		"max_depth":       st.maxDepth,
		"frames":          st.frames,
		"marks":           st.marks,
		"time_ranges":     st.timeRanges,
		"events_per_name": st.perName,
		"events_per_zone": perZone,
		"timebase_ms":     l.header.timebaseMS,
		"stored_events":   l.stored,
		"accounting": map[string]int64{
			"definitions":      l.defines,
			"zone_events":      l.zoneEvents,
			"scopes":           st.scopes,
			"leaves":           st.leaves,
			"unmatched_leaves": st.unmatchedLeaves,
			"append_data":      st.appends,
			"instance_records": st.instances,
			"orphan_appends":   st.orphanAppends,
			"unclosed_scopes":  st.unclosed,
			"dropped":          st.dropped,
		},
	}
	if l.enc == encCFFBinary || l.enc == encCFFJSON {
		details["chunks"] = l.chunks
		details["resources"] = l.resources
	}
	return &ingest.Summary{
		Format:   Format,
		Source:   name,
		Events:   l.raw,
		Traces:   st.traces,
		Records:  st.records,
		Warnings: l.warn.list(),
		Details:  details,
	}
}
