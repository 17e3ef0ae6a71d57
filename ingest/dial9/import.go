package dial9

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// FormatName is the format's name in summaries and on the command line.
const FormatName = trace.SourceDial9

// ctxCheckEvery is how many events pass between context checks.
const ctxCheckEvery = 1024

// Sniff reports whether head (the first bytes of a file, up to 64) looks
// like a dial9 file: a TRC\0 header, a legacy TOKIOTRC header (so that
// Import can reject it with a message naming the format), or a gzip
// stream whose decompressed prefix does not contradict either. A 64-byte
// gzip prefix rarely decompresses to anything, so any gzip stream that
// cannot be ruled out counts as dial9.
func Sniff(head []byte) bool {
	match := func(b []byte) bool {
		if len(b) < len(Magic) {
			return false
		}
		return bytes.HasPrefix(b, []byte(Magic)) || bytes.HasPrefix(b, []byte(LegacyMagic))
	}
	if match(head) {
		return true
	}
	if !IsGzip(head) {
		return false
	}
	zr, err := gzip.NewReader(bytes.NewReader(head))
	if err != nil {
		return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
	}
	buf := make([]byte, len(LegacyMagic))
	n, _ := io.ReadFull(zr, buf)
	got := buf[:n]
	if n >= len(Magic) {
		return match(got)
	}
	return bytes.HasPrefix([]byte(Magic), got) || bytes.HasPrefix([]byte(LegacyMagic), got)
}

// Import decodes the dial9 file at path and emits its spans. The file is
// read twice, streaming both times: the first pass collects the symbol
// table (which the symbolizer appends at the end of a file), the clock
// anchor and the time ranges of polls and active periods; the second
// builds and emits spans. Both passes read the file's size at the start
// (bytes appended meanwhile, as to a segment still being written, are not
// read); a file that shrank in between gives ErrFileChanged. On an
// undecodable frame the spans decoded so far are emitted and the
// *DecodeError is returned with the summary, unless opts.KeepGoing turns
// it into a warning.
func Import(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("dial9 import: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("dial9 import: %s is a directory", path)
	}
	open := func() (*Reader, io.Closer, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("dial9 import: %w", err)
		}
		// Both passes read the same bytes: the file's first st.Size()
		// bytes (a segment still being written, *.bin.active, grows).
		if now, err := f.Stat(); err != nil || now.Size() < st.Size() {
			f.Close()
			return nil, nil, fmt.Errorf("dial9 import %s: %w", path, ErrFileChanged)
		}
		r, err := NewReader(io.LimitReader(f, st.Size()))
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("dial9 import %s: %w", path, err)
		}
		return r, f, nil
	}
	return run(ctx, path, st.Size(), open, opts, emit)
}

// Decode is Import over a file's bytes; name stands for its path.
func Decode(ctx context.Context, name string, data []byte, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	open := func() (*Reader, io.Closer, error) {
		r, err := NewBytesReader(data)
		if err != nil {
			return nil, nil, fmt.Errorf("dial9 decode %s: %w", name, err)
		}
		return r, io.NopCloser(nil), nil
	}
	return run(ctx, name, int64(len(data)), open, opts, emit)
}

// drive feeds every event of r to m. It returns the decode error that
// stopped the input (nil at a clean end) and, separately, an error that
// must abort the import (context, emit).
func drive(ctx context.Context, r *Reader, m *mapper) (decodeErr, fatal error) {
	for n := 0; ; n++ {
		if n%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ev, err := r.Next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
		if err := m.event(ev); err != nil {
			return nil, err
		}
	}
}

func run(ctx context.Context, name string, size int64, open func() (*Reader, io.Closer, error),
	opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	sum := &ingest.Summary{Format: FormatName, Source: name, Warnings: []string{}}
	base := filepath.Base(name)
	info := newFileInfo()

	rd, closer, err := open()
	if err != nil {
		return sum, err
	}
	scan := newMapper(true, info, base, size, nil)
	_, fatal := drive(ctx, rd, scan)
	closer.Close()
	if fatal != nil {
		return sum, fatal
	}
	if err := scan.flush(); err != nil {
		return sum, err
	}
	info.finishScan()

	rd, closer, err = open()
	if err != nil {
		return sum, err
	}
	defer closer.Close()
	mp := newMapper(false, info, base, size, emit)
	decodeErr, fatal := drive(ctx, rd, mp)
	if fatal != nil {
		return sum, fatal
	}
	if err := mp.flush(); err != nil {
		return sum, err
	}

	st := rd.Stats()
	sum.Events = st.Events
	sum.Traces = mp.traces
	sum.Records = mp.records
	sum.Warnings = append(sum.Warnings, rd.Warnings()...)
	if info.clockSource == "" && st.Events > 0 {
		sum.Warnings = append(sum.Warnings, "no ClockSyncEvent: span start times are the file's monotonic clock, not wall-clock time")
	}
	if st.UnresolvedRefs > 0 {
		sum.Warnings = append(sum.Warnings, fmt.Sprintf("%d pooled string/stack references not found in their stream's pool", st.UnresolvedRefs))
	}
	workers := slices.Sorted(maps.Keys(info.workers))
	sum.Details = map[string]any{
		"events_per_schema":  maps.Clone(st.EventsPerSchema),
		"streams":            st.Streams,
		"workers":            workers,
		"gzip":               rd.Gzipped(),
		"decoded_bytes":      st.Bytes,
		"schema_frames":      st.SchemaFrames,
		"string_pool_frames": st.StringPoolFrames,
		"stack_pool_frames":  st.StackPoolFrames,
		"timestamp_resets":   st.TimestampResets,
		"annotation_frames":  st.AnnotationFrames,
		"polls":              mp.polls,
		"active_periods":     mp.periods,
		"spans":              mp.spans,
		"clock":              clockName(info.clockSource),
		// Where each event went; the three sum to Events.
		"accounting": map[string]int64{
			"span_boundaries": mp.acc.boundaries,
			"records":         mp.acc.records,
			"symbol_rows":     mp.acc.attributes,
		},
	}
	if decodeErr != nil {
		if opts.KeepGoing && st.Events > 0 {
			sum.Warnings = append(sum.Warnings, fmt.Sprintf("decoding stopped, %d events kept: %v", st.Events, decodeErr))
			return sum, nil
		}
		return sum, fmt.Errorf("dial9 import %s: %w", name, decodeErr)
	}
	return sum, nil
}

func clockName(src string) string {
	if src == "" {
		return "none"
	}
	return src
}
