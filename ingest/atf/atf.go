package atf

import (
	"context"
	"fmt"
	"math"
	"os"
	"path"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// Format is the Summary.Format of this importer.
const Format = "atf"

// Sniff reports whether the first bytes of a file are an ATF v2 index
// header ("ATI2"). Detail files alone are not importable and do not match.
func Sniff(head []byte) bool {
	return len(head) >= 4 && string(head[:4]) == IndexMagic
}

// FileReport is the recovery decision taken for one file, reported under
// Summary.Details["files"] keyed by the file's identity (pathInfo.Key).
type FileReport struct {
	// Recovery is how the count was decided: "footer", "eof_footer" or
	// "size" for index files, "footer" or "walk" for detail files.
	Recovery Recovery `json:"recovery"`
	Events   int64    `json:"events"`
	// TornBytes are the bytes dropped: a torn last record, or events
	// beyond the footer's count.
	TornBytes int64 `json:"torn_bytes"`
	// Clamped: the footer claimed more events than the file holds.
	Clamped bool `json:"clamped,omitempty"`
}

// ThreadInput is one thread's file images for DecodeThread.
type ThreadInput struct {
	// Name is the index file's path; its thread_N, pid_N and session_…
	// components name the thread, the process and the session start time,
	// and identify the file in trace ids.
	Name     string
	Index    []byte // index.atf
	Detail   []byte // detail.atf, nil when none
	Manifest []byte // manifest.json, nil when none
}

// Decode imports one index.atf image (no detail file, no manifest).
func Decode(ctx context.Context, name string, data []byte, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	return DecodeThread(ctx, ThreadInput{Name: name, Index: data}, opts, emit)
}

// DecodeThread imports one thread from file images held in memory. The
// returned summary is never nil; on error it covers what was emitted.
func DecodeThread(ctx context.Context, in ThreadInput, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	im := newImporter(ctx, in.Name, opts, emit)
	info := identify(in.Name)
	idx, err := ParseIndex(info.Key, in.Index)
	if err != nil {
		return im.summary(), err
	}
	t := &Thread{Name: threadName(info, idx.Header), Index: idx}
	if in.Detail != nil {
		d, err := ParseDetail(detailKey(info.Key), in.Detail)
		if err != nil {
			if !opts.KeepGoing {
				return im.summary(), err
			}
			im.warn("%v (thread imported without detail)", err)
		} else {
			t.Detail = d
		}
	}
	var symbols SymbolTable
	if in.Manifest != nil {
		m, err := ParseManifest(in.Manifest)
		if err != nil {
			im.warn("%v (functions are named by id)", err)
		} else {
			im.manifests++
			symbols = m.SymbolTable()
		}
	}
	lo := ^uint64(0)
	for i := range idx.Events {
		lo = min(lo, idx.Events[i].TimestampNS)
	}
	clk := newClock(info, lo, len(idx.Events) > 0)
	if info.SessionStart.IsZero() {
		im.warn("%s", rawClockWarning)
	}
	err = im.decodeThread(t, info, int64(len(in.Index)), symbols, clk)
	return im.summary(), err
}

// Import reads an ATF v2 session: path is an index file, a thread
// directory, a pid_N session directory, or a directory above session
// directories (thread_*/index.atf are searched a few levels deep). Each
// session directory's manifest.json names functions when present. Threads
// are imported in order (session directory, thread number); within a
// thread, spans are emitted in time order. The returned summary is never
// nil; on error it covers what was emitted before.
func Import(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	im := newImporter(ctx, path, opts, emit)
	srcs, err := discover(path)
	if err != nil {
		return im.summary(), err
	}
	for start := 0; start < len(srcs); {
		end := start + 1
		for end < len(srcs) && srcs[end].Group == srcs[start].Group {
			end++
		}
		if err := im.importGroup(srcs[start:end]); err != nil {
			return im.summary(), err
		}
		start = end
	}
	return im.summary(), nil
}

// importGroup imports the threads of one session directory.
func (im *importer) importGroup(srcs []threadSource) error {
	group := srcs[0].Group
	standard := srcs[0].Info.Thread != ""
	var symbols SymbolTable
	if standard {
		m, err := readManifest(group)
		switch {
		case err != nil:
			im.warn("atf: %v (functions are named by id)", err)
		case m == nil:
			im.warn("%s: no %s: functions are named by id", group, ManifestFileName)
		default:
			im.manifests++
			symbols = m.SymbolTable()
			have := make(map[int64]bool, len(srcs))
			for _, s := range srcs {
				have[threadNumber(s.Info.Thread)] = true
			}
			for _, th := range m.Threads {
				if !have[int64(th.ID)] {
					im.warn("%s: manifest lists thread_%d, which has no %s", group, th.ID, IndexFileName)
				}
			}
		}
	}
	// One clock per session: the session directory's wall time is the time
	// of the earliest event of any of its threads, including threads not
	// being imported (so that importing one thread directory gives the same
	// times as importing the session).
	var clk clock
	if info := srcs[0].Info; !info.SessionStart.IsZero() {
		lo, any := ^uint64(0), false
		for _, s := range sessionThreads(group, srcs) {
			l, ok := im.scanTimestamps(s)
			if ok {
				lo, any = min(lo, l), true
			}
		}
		if err := im.ctx.Err(); err != nil {
			return err
		}
		clk = newClock(info, lo, any)
	} else {
		im.warn("%s: %s", group, rawClockWarning)
	}
	for _, s := range srcs {
		if err := im.importThread(s, symbols, clk); err != nil {
			return err
		}
	}
	return nil
}

// scanTimestamps returns the smallest timestamp of a thread's index file
// (a streaming pass); ok is false when the file is unreadable or empty.
func (im *importer) scanTimestamps(s threadSource) (uint64, bool) {
	f, err := os.Open(s.IndexPath)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false
	}
	l, err := ReadIndexLayout(s.Info.Key, f, fi.Size())
	if err != nil || l.Count == 0 {
		return 0, false
	}
	lo, _, err := timestampRange(im.ctx, s.Info.Key, f, l)
	return lo, err == nil
}

func (im *importer) importThread(s threadSource, symbols SymbolTable, clk clock) error {
	idx, size, err := readIndexFile(im.ctx, s)
	if err != nil {
		if cerr := im.ctx.Err(); cerr != nil {
			return cerr
		}
		if !im.opts.KeepGoing {
			return err
		}
		im.warn("%v (thread skipped)", err)
		return nil
	}
	t := &Thread{Name: threadName(s.Info, idx.Header), Index: idx}
	if s.DetailPath != "" {
		d, err := readDetailFile(s)
		if err != nil {
			if !im.opts.KeepGoing {
				return err
			}
			im.warn("%v (thread imported without detail)", err)
		} else {
			t.Detail = d
		}
	}
	return im.decodeThread(t, s.Info, size, symbols, clk)
}

// OpenThread reads one thread's files for navigation: indexPath and the
// detail.atf beside it, when present.
func OpenThread(ctx context.Context, indexPath string) (*Thread, error) {
	s := newThreadSource(indexPath)
	idx, _, err := readIndexFile(ctx, s)
	if err != nil {
		return nil, err
	}
	t := &Thread{Name: threadName(s.Info, idx.Header), Index: idx}
	if s.DetailPath != "" {
		if t.Detail, err = readDetailFile(s); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func readIndexFile(ctx context.Context, s threadSource) (*IndexFile, int64, error) {
	f, err := os.Open(s.IndexPath)
	if err != nil {
		return nil, 0, fmt.Errorf("atf: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("atf: %w", err)
	}
	idx, err := ReadIndex(ctx, s.Info.Key, f, fi.Size())
	return idx, fi.Size(), err
}

func readDetailFile(s threadSource) (*DetailFile, error) {
	data, err := os.ReadFile(s.DetailPath)
	if err != nil {
		return nil, fmt.Errorf("atf: %w", err)
	}
	return ParseDetail(detailKey(s.Info.Key), data)
}

// detailKey is the identity of the detail file beside an index file.
func detailKey(indexKey string) string {
	dir := path.Dir(indexKey)
	if dir == "." {
		return DetailFileName
	}
	return dir + "/" + DetailFileName
}

// threadName is the thread_N directory name, else "thread_<header id>".
func threadName(info pathInfo, h IndexHeader) string {
	if info.Thread != "" {
		return info.Thread
	}
	return fmt.Sprintf("thread_%d", h.ThreadID)
}

// maxWarnings bounds Summary.Warnings; later ones are counted.
const maxWarnings = 100

// importer accumulates one import's summary.
type importer struct {
	ctx          context.Context
	opts         ingest.Options
	emit         ingest.Emit
	source       string
	events       int64
	threads      int64
	detailEvents int64
	manifests    int64
	stats        threadStats
	files        map[string]FileReport
	warnings     []string
	moreWarnings int
}

func newImporter(ctx context.Context, source string, opts ingest.Options, emit ingest.Emit) *importer {
	if emit == nil {
		emit = func(*trace.Span) error { return nil } // count only
	}
	return &importer{ctx: ctx, opts: opts, emit: emit, source: source,
		files: map[string]FileReport{}, warnings: []string{}}
}

func (im *importer) warn(format string, args ...any) {
	if len(im.warnings) >= maxWarnings {
		im.moreWarnings++
		return
	}
	im.warnings = append(im.warnings, fmt.Sprintf(format, args...))
}

// decodeThread maps one parsed thread onto spans and accounts for it.
func (im *importer) decodeThread(t *Thread, info pathInfo, size int64, symbols SymbolTable, clk clock) error {
	idx := t.Index
	key := info.Key
	im.threads++
	im.events += int64(len(idx.Events))
	im.files[key] = FileReport{Recovery: idx.Recovery, Events: idx.Count, TornBytes: idx.TornBytes, Clamped: idx.Clamped}
	switch idx.Recovery {
	case RecoveryEOFFooter:
		im.warn("%s: header not finalised (crashed before its rewrite); %d events from the footer at the end of the file", key, idx.Count)
	case RecoverySize:
		im.warn("%s: no footer (crashed session); %d events counted from the file size, %d-byte torn tail dropped", key, idx.Count, idx.TornBytes)
	}
	if idx.Clamped {
		im.warn("%s: footer claims %d events, the file holds %d", key, idx.Footer.EventCount, idx.Count)
	} else if idx.Recovery != RecoverySize && idx.TornBytes != 0 {
		im.warn("%s: %d bytes beyond the footer's %d events dropped", key, idx.TornBytes, idx.Count)
	}
	if t.Detail != nil {
		d := t.Detail
		dk := detailKey(key)
		im.detailEvents += int64(d.Len())
		im.files[dk] = FileReport{Recovery: d.Recovery, Events: int64(d.Len()), TornBytes: d.TornBytes}
		if d.Recovery == RecoveryWalk {
			im.warn("%s: no footer agreeing with the records; %d records walked, %d-byte torn tail dropped", dk, d.Len(), d.TornBytes)
		}
	}
	if int64(len(idx.Events)) > math.MaxUint32 {
		return fmt.Errorf("atf: %s: %d events, more than index_seq can address", key, len(idx.Events))
	}
	order := orderEvents(idx.Events)
	order, via, removed := removeLaneCopies(idx.Events, order)
	b := &threadBuilder{
		ctx: im.ctx, thread: t, info: info, name: t.Name, size: size, symbols: symbols,
		clock: clk, emit: im.emit, base: baseAttrs(t, info), via: via,
	}
	b.stats.DuplicatesRemoved = removed
	b.stats.UnlinkedDetails = t.unlinkedDetails()
	err := b.build(order)
	s := b.stats
	im.stats.add(s)
	if s.OrphanEvents > 0 {
		im.warn("%s: %d returns/exceptions without an open call", key, s.OrphanEvents)
	}
	if s.InvalidEvents > 0 {
		im.warn("%s: %d events of unknown kind skipped", key, s.InvalidEvents)
	}
	if s.LinkErrors > 0 {
		im.warn("%s: %d detail links to no record that links back", key, s.LinkErrors)
	}
	if s.UnlinkedDetails > 0 {
		im.warn("%s: %d detail records no index event links to", detailKey(key), s.UnlinkedDetails)
	}
	if s.CallsElided > 0 {
		im.warn("%s: %d calls nested deeper than %d kept as counts (atf.calls_elided)", key, s.CallsElided, trace.MaxDepth)
	}
	return err
}

func (im *importer) summary() *ingest.Summary {
	w := im.warnings
	if im.moreWarnings > 0 {
		w = append(w[:len(w):len(w)], fmt.Sprintf("%d more warnings not shown", im.moreWarnings))
	}
	s := im.stats
	return &ingest.Summary{
		Format:   Format,
		Source:   im.source,
		Events:   im.events,
		Traces:   s.Traces,
		Records:  s.Records,
		Warnings: w,
		Details: map[string]any{
			"threads":            im.threads,
			"detail_events":      im.detailEvents,
			"duplicates_removed": s.DuplicatesRemoved,
			"files":              im.files,
			"manifests":          im.manifests,
			"crashed_calls":      s.CrashedCalls,
			"unmatched_calls":    s.UnmatchedCalls,
			"orphan_events":      s.OrphanEvents,
			"invalid_events":     s.InvalidEvents,
			"calls_elided":       s.CallsElided,
			"link_errors":        s.LinkErrors,
			"unlinked_details":   s.UnlinkedDetails,
		},
	}
}
