package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/ingest/atf"
	"github.com/ztsd/ztsd/ingest/dial9"
	"github.com/ztsd/ztsd/ingest/wtf"
	"github.com/ztsd/ztsd/ingest/zorka"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

func init() { extraCommands = append(extraCommands, newImportCmd) }

// importer decodes one path of a format.
type importer func(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error)

var importers = map[string]importer{
	"zorka": zorka.Import,
	"wtf":   wtf.Import,
	"dial9": dial9.Import,
	"atf":   atf.Import,
	"json":  importJSON,
}

// detectFormat names the format of path from its first bytes (or, for a
// directory, its layout).
func detectFormat(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		if atf.SniffPath(path) {
			return "atf", nil
		}
		return "", fmt.Errorf("%s: a directory, but not an ATF session or thread directory", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 64)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if n == 0 {
		return "", fmt.Errorf("%s: empty file", path)
	}
	switch {
	case wtf.Sniff(head):
		return "wtf", nil
	case dial9.Sniff(head):
		return "dial9", nil
	case atf.Sniff(head) || atf.SniffPath(path):
		return "atf", nil
	case zorka.Sniff(head):
		return "zorka", nil
	case len(strings.TrimSpace(string(head))) > 0 && strings.TrimSpace(string(head))[0] == '{':
		return "json", nil
	}
	return "", fmt.Errorf("%s: unknown format (first bytes % x); name one with --format", path, head[:min(len(head), 8)])
}

// isZorkaBody reports whether path is a raw Zorka agent-protocol body
// (agent data or trace data as an agent POSTs it).
func isZorkaBody(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return zorka.SniffBody(head) != zorka.NotABody
}

// importJSON reads Trace JSON lines (what `ztsctl export --format json`
// and `get --json` write).
func importJSON(ctx context.Context, path string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sum := &ingest.Summary{Format: "json", Source: path, Warnings: []string{}}
	var add func(sp *trace.Span) error
	add = func(sp *trace.Span) error {
		children := sp.Children
		sp.Children = nil
		sum.Events++
		sum.Records += sp.Recs
		if err := emit(sp); err != nil {
			return err
		}
		for _, c := range children {
			if err := add(c); err != nil {
				return err
			}
		}
		return nil
	}
	err = trace.DecodeJSONLines(f, trace.DefaultLimits(), func(sp *trace.Span) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return add(sp)
	})
	if err != nil {
		return sum, fmt.Errorf("%s: %w", path, err)
	}
	return sum, nil
}

// spanSink batches spans to the daemon or into a stopped data directory,
// checking each against the daemon's per-span limits first; with put nil
// (a dry run) it drops them.
type spanSink struct {
	put     func(ctx context.Context, spans []*trace.Span) error
	limits  trace.IngestLimits
	pending []*trace.Span
	batch   int
	stored  int64
	bar     *countBar // spans stored, on a terminal
	seen    int64
}

func (s *spanSink) add(ctx context.Context, sp *trace.Span) error {
	if err := s.check(sp); err != nil {
		return err
	}
	return s.enqueue(ctx, sp)
}

// check counts sp and holds it against the per-span limits.
func (s *spanSink) check(sp *trace.Span) error {
	s.seen++
	if err := s.limits.CheckSpan(sp); err != nil {
		return fmt.Errorf("span %d (trace %s): %w (see [limits] in the daemon's config; --config names it)", s.seen, sp.TraceID, err)
	}
	return nil
}

// enqueue adds a checked span to the batch.
func (s *spanSink) enqueue(ctx context.Context, sp *trace.Span) error {
	s.pending = append(s.pending, sp)
	if len(s.pending) >= s.batch {
		return s.flush(ctx)
	}
	return nil
}

func (s *spanSink) flush(ctx context.Context) error {
	if len(s.pending) == 0 {
		return nil
	}
	if s.put == nil { // dry run
		s.bar.add(int64(len(s.pending)))
		s.pending = s.pending[:0]
		return nil
	}
	if err := s.put(ctx, s.pending); err != nil {
		return err
	}
	s.stored += int64(len(s.pending))
	s.bar.add(int64(len(s.pending)))
	s.pending = s.pending[:0]
	return nil
}

// spool stages the spans of one input in a temporary file (chunk-payload
// CBOR, each batch prefixed by its length) while the input decodes, so
// that an input that fails to decode stores nothing: replay runs only
// after the decoder finished without error.
type spool struct {
	f       *os.File
	w       *bufio.Writer
	pending []*trace.Span
	batch   int
	buf     []byte
}

func newSpool(batch int) (*spool, error) {
	f, err := os.CreateTemp("", "ztsctl-import-*.spool")
	if err != nil {
		return nil, fmt.Errorf("staging the import: %w", err)
	}
	return &spool{f: f, w: bufio.NewWriterSize(f, 1<<20), batch: batch}, nil
}

func (s *spool) add(sp *trace.Span) error {
	s.pending = append(s.pending, sp)
	if len(s.pending) >= s.batch {
		return s.flush()
	}
	return nil
}

func (s *spool) flush() error {
	if len(s.pending) == 0 {
		return nil
	}
	var err error
	if s.buf, err = trace.EncodeChunk(s.buf[:0], s.pending); err != nil {
		return fmt.Errorf("staging the import: %w", err)
	}
	var n [binary.MaxVarintLen64]byte
	s.w.Write(n[:binary.PutUvarint(n[:], uint64(len(s.buf)))])
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("staging the import in %s: %w", s.f.Name(), err)
	}
	s.pending = s.pending[:0]
	return nil
}

// replay hands every staged span, in decode order, to add.
func (s *spool) replay(ctx context.Context, add func(*trace.Span) error) error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("staging the import in %s: %w", s.f.Name(), err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(s.f, 1<<20)
	for {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return nil
		}
		if err != nil || n > 1<<31 {
			return fmt.Errorf("reading the staged import %s: bad batch length (%v)", s.f.Name(), err)
		}
		if uint64(cap(s.buf)) < n {
			s.buf = make([]byte, n)
		}
		s.buf = s.buf[:n]
		if _, err := io.ReadFull(r, s.buf); err != nil {
			return fmt.Errorf("reading the staged import %s: %w", s.f.Name(), err)
		}
		spans, err := trace.DecodeChunk(s.buf, trace.Limits{})
		if err != nil {
			return fmt.Errorf("reading the staged import %s: %w", s.f.Name(), err)
		}
		for _, sp := range spans {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := add(sp); err != nil {
				return err
			}
		}
	}
}

func (s *spool) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// importOne decodes one input and stores its spans through sink. Without
// keepGoing the spans are staged first and stored only when the whole
// input decoded, so a failed import stores nothing; with it, spans are
// stored as they decode and the summary's "stored" says how many were
// kept. sum.Traces counts distinct trace ids.
func importOne(ctx context.Context, imp importer, path string, keepGoing bool, sink *spanSink) (*ingest.Summary, error) {
	var traces ingest.TraceSet
	before := sink.stored
	finish := func(sum *ingest.Summary) {
		if sum != nil {
			sum.Traces = traces.Len()
			sum.Stored = sink.stored - before
		}
	}
	if keepGoing || sink.put == nil {
		sum, err := imp(ctx, path, ingest.Options{KeepGoing: keepGoing},
			traces.Counting(func(sp *trace.Span) error { return sink.add(ctx, sp) }))
		if ferr := sink.flush(ctx); err == nil {
			err = ferr
		}
		finish(sum)
		return sum, err
	}
	sp, err := newSpool(sink.batch)
	if err != nil {
		return nil, err
	}
	defer sp.close()
	sum, err := imp(ctx, path, ingest.Options{}, traces.Counting(func(s *trace.Span) error {
		if err := sink.check(s); err != nil {
			return err
		}
		return sp.add(s)
	}))
	if err != nil {
		finish(sum)
		return sum, fmt.Errorf("%w (nothing stored; --keep-going stores what decodes)", err)
	}
	err = sp.replay(ctx, func(s *trace.Span) error { return sink.enqueue(ctx, s) })
	if ferr := sink.flush(ctx); err == nil {
		err = ferr
	}
	finish(sum)
	return sum, err
}

func newImportCmd(a *app) *cobra.Command {
	var format, storeDir, configPath string
	var keepGoing, dryRun bool
	var batch int
	cmd := &cobra.Command{
		Use:   "import [--format auto|zorka|wtf|dial9|atf|json] PATH...",
		Short: "Decode trace files of other formats and store them (through the daemon, or into a stopped data directory with --store)",
		Long: `import decodes each PATH on the client side and submits the traces through the socket.
Formats: zorka (request-dump files of the Zorka agent protocol, or raw agent-data and
trace-data bodies: give the agent-data file first, the trace-data files after it), wtf (Web Tracing
Framework: legacy binary, chunked binary, JSON), dial9 (TRC streams, gzip or not),
atf (ADA Trace Format v2 session or thread directory), json (Trace JSON lines, as
written by export --format json). It prints one JSON summary per PATH:
{"format","source","events","traces","records","stored","warnings","details"}: traces counts
distinct trace ids, stored the spans stored. An input that fails to decode stores nothing
(its spans are staged in a temporary file until it decoded whole); with --keep-going what
decoded before the error is stored and the error becomes a warning.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("import needs at least one PATH")
			}
			if format != "auto" {
				if _, ok := importers[format]; !ok {
					return usageErr("--format %q: want auto, zorka, wtf, dial9, atf or json", format)
				}
			}
			if batch < 1 {
				return usageErr("--batch must be at least 1")
			}
			ctx := cmd.Context()
			cfg := config.Default()
			if configPath != "" {
				var err error
				if cfg, err = config.Load(configPath); err != nil {
					return usageErr("--config: %v", err)
				}
			}
			sink := &spanSink{batch: batch, limits: trace.IngestLimits{MaxAttrs: cfg.Limits.MaxAttrs,
				MaxStringSize: int(cfg.Limits.MaxStringSize), MaxRecordsPerSpan: cfg.Limits.MaxRecordsPerSpan, MaxDepth: cfg.Limits.MaxDepth}}
			switch {
			case dryRun:
				sink.put = nil // decode and count only
			case storeDir != "":
				opt := storedir.DefaultOptions()
				opt.Sync = storedir.SyncNone
				db, err := storedir.Open(ctx, storeDir, opt)
				if err != nil {
					return err
				}
				defer func() {
					if err := db.Close(); err != nil {
						fmt.Fprintln(a.stderr, "ztsctl: closing", storeDir+":", err)
					}
				}()
				sink.put = db.Append
			default:
				c := a.client()
				defer c.Close()
				sink.put = func(ctx context.Context, spans []*trace.Span) error { return c.PutCBOR(ctx, spans...) }
			}
			enc := json.NewEncoder(a.stdout)
			for i := 0; i < len(args); {
				path := args[i]
				f := format
				imp := importers[f]
				if (f == "auto" || f == "zorka") && isZorkaBody(path) {
					// Raw agent-protocol bodies replay together: the
					// agent data defines what the trace data after it uses.
					j := i + 1
					for j < len(args) && isZorkaBody(args[j]) {
						j++
					}
					bodies := args[i:j]
					path, f = strings.Join(bodies, " "), "zorka"
					imp = func(ctx context.Context, _ string, opts ingest.Options, emit ingest.Emit) (*ingest.Summary, error) {
						return zorka.ImportBodies(ctx, bodies, opts, emit)
					}
					i = j
				} else {
					i++
					if f == "auto" {
						var err error
						if f, err = detectFormat(path); err != nil {
							return usageErr("%v", err)
						}
						imp = importers[f]
					}
				}
				sink.bar = newCountBar(a.stderr, "import "+filepath.Base(path), "spans")
				sum, err := importOne(ctx, imp, path, keepGoing, sink)
				sink.bar.finish()
				if sum != nil {
					if sum.Warnings == nil {
						sum.Warnings = []string{}
					}
					enc.Encode(sum)
				}
				if err != nil {
					return fmt.Errorf("import %s (%s): %w", path, f, err)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "auto", "auto, zorka, wtf, dial9, atf or json")
	f.StringVar(&storeDir, "store", "", "write into this stopped data directory instead of the daemon")
	f.StringVar(&configPath, "config", "", "the daemon's ztsd.toml: its [limits] apply to every span before it is submitted (default: the built-in limits)")
	f.BoolVar(&keepGoing, "keep-going", false, "store what decoded before a decode error (reported as a warning; \"stored\" counts the spans kept); without it a failed input stores nothing")
	f.BoolVar(&dryRun, "dry-run", false, "decode and summarise only; store nothing")
	f.IntVar(&batch, "batch", 2000, "spans per request")
	return cmd
}
