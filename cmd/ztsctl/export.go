package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/export"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/trace"
)

func init() { extraCommands = append(extraCommands, newExportCmd) }

// exportFormats are the formats of `ztsctl export`.
var exportFormats = []string{"json", "chrome", "svg"}

// searchFlags are the query flags of `export --search`: the filters of
// `ztsctl search`, minus --spans (export works per trace), with --limit
// counting traces (0: every match).
type searchFlags struct {
	attrs        []string
	text, minDur string
	since, until string
	errorsOnly   bool
	limit        int
}

func (f *searchFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.attrs, "attr", nil, "with --search: attribute key=value (or key:value) to match (repeatable; all must match)")
	fs.StringVar(&f.text, "text", "", "with --search: case-insensitive substring of a method, attribute or exception")
	fs.StringVar(&f.minDur, "min-duration", "", "with --search: minimum duration, e.g. 5ms")
	fs.BoolVar(&f.errorsOnly, "errors", false, "with --search: only traces with errors")
	fs.StringVar(&f.since, "since", "", "with --search: start time from: "+whenHelp)
	fs.StringVar(&f.until, "until", "", "with --search: start time before: "+whenHelp)
	fs.IntVar(&f.limit, "limit", 0, "with --search: export at most this many traces, newest first (0: all matches)")
}

// searchFlagNames lists the query flags.
var searchFlagNames = []string{"attr", "text", "min-duration", "errors", "since", "until", "limit"}

// query turns the flags into a client query; errors are usage errors.
func (f *searchFlags) query() (client.Query, error) {
	q := client.Query{Text: f.text, Errors: f.errorsOnly, Limit: 100}
	if f.limit < 0 {
		return q, usageErr("--limit must be 0 (all) or more")
	}
	if f.limit > 0 {
		q.Limit = min(f.limit, 100)
	}
	for _, kv := range f.attrs {
		a, err := parseAttrFlag(kv)
		if err != nil {
			return q, err
		}
		q.Attrs = append(q.Attrs, a)
	}
	if f.minDur != "" {
		ns, err := server.ParseDurationNS(f.minDur)
		if err != nil {
			return q, usageErr("--min-duration: %v", err)
		}
		q.MinDuration = time.Duration(ns)
	}
	for _, t := range []struct {
		flag, s string
		dst     *time.Time
	}{{"--since", f.since, &q.Since}, {"--until", f.until, &q.Until}} {
		if t.s == "" {
			continue
		}
		ns, err := parseWhen(t.s)
		if err != nil {
			return q, usageErr("%s: %v", t.flag, err)
		}
		*t.dst = time.Unix(0, ns)
	}
	return q, nil
}

// exportRequest is a validated `ztsctl export` command line.
type exportRequest struct {
	format string
	ids    []trace.TraceID // by id; nil with search
	search *client.Query   // nil without --search
	limit  int             // with search: most traces, 0 for all
	svg    export.SVGOptions
	output string // "-" for stdout
}

// parseExportArgs validates the command line without touching the daemon.
func parseExportArgs(cmd *cobra.Command, format string, search bool, sf *searchFlags, args []string) (*exportRequest, error) {
	req := &exportRequest{format: format}
	if !slices.Contains(exportFormats, format) {
		return nil, usageErr("--format %q: want %s", format, strings.Join(exportFormats, ", "))
	}
	var queryFlags []string
	for _, name := range searchFlagNames {
		if cmd.Flags().Changed(name) {
			queryFlags = append(queryFlags, "--"+name)
		}
	}
	switch {
	case search && len(args) > 0:
		return nil, usageErr("give TRACE_IDs or --search, not both")
	case !search && len(args) == 0:
		return nil, usageErr("export needs TRACE_IDs or --search (usage: %s)", cmd.UseLine())
	case !search && len(queryFlags) > 0:
		return nil, usageErr("%s only apply with --search", strings.Join(queryFlags, ", "))
	}
	if search {
		q, err := sf.query()
		if err != nil {
			return nil, err
		}
		req.search, req.limit = &q, sf.limit
		return req, nil
	}
	seen := make(map[trace.TraceID]bool, len(args))
	for _, a := range args {
		id, err := trace.ParseTraceID(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if !seen[id] {
			seen[id] = true
			req.ids = append(req.ids, id)
		}
	}
	if format == "svg" && len(req.ids) > 1 {
		return nil, usageErr("--format svg draws one trace; got %d trace ids", len(req.ids))
	}
	return req, nil
}

func newExportCmd(a *app) *cobra.Command {
	var (
		format, output string
		search         bool
		sf             searchFlags
		svgOpt         export.SVGOptions
	)
	cmd := &cobra.Command{
		Use:   "export [--format json|chrome|svg] [-o FILE] (TRACE_ID... | --search [QUERY FLAGS])",
		Short: "Write stored traces as Trace JSON lines, Chrome Trace Event JSON (Perfetto, chrome://tracing) or an SVG timeline",
		Long: `export writes traces given by id, or every trace a search matches (newest first).

  --format json    Trace JSON lines exactly as the daemon sends them; import --format json
                   reads them back unchanged, so stores move between machines and versions.
  --format chrome  the Chrome Trace Event format: one process per source file (or trace),
                   one thread per source thread, one complete event per record with its
                   attributes as args. Open it in https://ui.perfetto.dev or chrome://tracing.
  --format svg     one trace as a self-contained SVG timeline: a lane per thread, nested
                   calls stacked, errors in red, a tooltip per record. Needs exactly one
                   trace (with --search, add --limit 1 to draw the newest match).`,
		Example: `  ztsctl export --format json --search --attr source.format=wtf -o wtf.jsonl
  ztsctl export --format chrome 7f128efec83c68ec733c1116ad0c9105 -o trace.json
  ztsctl export --format svg --search --errors --limit 1 -o newest-error.svg`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseExportArgs(cmd, format, search, &sf, args)
			if err != nil {
				return err
			}
			if svgOpt.Width < export.MinSVGWidth || svgOpt.Width > export.MaxSVGWidth {
				return usageErr("--width %d: want %d..%d", svgOpt.Width, export.MinSVGWidth, export.MaxSVGWidth)
			}
			if svgOpt.MaxRecords < 1 || svgOpt.MaxRecords > export.MaxSVGMaxRecords {
				return usageErr("--max-records %d: want 1..%d", svgOpt.MaxRecords, export.MaxSVGMaxRecords)
			}
			req.svg, req.output = svgOpt, output
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			return runExport(ctx, c, req, a.stdout, a.stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "json", "json, chrome or svg")
	f.StringVarP(&output, "output", "o", "-", "write to this file instead of stdout")
	f.BoolVar(&search, "search", false, "export the traces matching the query flags instead of TRACE_IDs")
	sf.register(cmd)
	f.IntVar(&svgOpt.Width, "width", export.DefaultSVGWidth, fmt.Sprintf("svg: picture width in pixels (%d..%d)", export.MinSVGWidth, export.MaxSVGWidth))
	f.IntVar(&svgOpt.MaxRecords, "max-records", export.DefaultSVGMaxRecords, "svg: draw at most this many records (the shallowest and longest)")
	f.StringVar(&svgOpt.Title, "title", "", "svg: picture title (default: the root record's method)")
	return cmd
}

// traceSource yields the trace ids to export.
type traceSource func(ctx context.Context) (trace.TraceID, bool, error)

func (req *exportRequest) source(c *client.Client) traceSource {
	if req.search == nil {
		i := 0
		return func(context.Context) (trace.TraceID, bool, error) {
			if i == len(req.ids) {
				return trace.TraceID{}, false, nil
			}
			i++
			return req.ids[i-1], true, nil
		}
	}
	it := c.Search(*req.search)
	seen := make(map[trace.TraceID]bool)
	return func(ctx context.Context) (trace.TraceID, bool, error) {
		if req.limit > 0 && len(seen) >= req.limit {
			return trace.TraceID{}, false, nil
		}
		for it.Next(ctx) {
			id := it.Span().TraceID
			if !seen[id] {
				seen[id] = true
				return id, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return trace.TraceID{}, false, fmt.Errorf("search: %w", err)
		}
		return trace.TraceID{}, false, nil
	}
}

// runExport fetches the traces and writes them to req.output (or stdout).
// An output file appears whole or not at all.
func runExport(ctx context.Context, c *client.Client, req *exportRequest, stdout, stderr io.Writer) error {
	next := req.source(c)
	if req.format == "svg" {
		return exportSVG(ctx, c, req, next, stdout, stderr)
	}
	out, err := openOutput(req.output, stdout)
	if err != nil {
		return err
	}
	defer out.abort()
	var traces [][]*trace.Span
	n := 0
	bar := newCountBar(stderr, "export "+req.format, "traces")
	defer bar.finish()
	for {
		id, ok, err := next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		n++
		bar.add(1)
		switch req.format {
		case "json":
			// Streamed: a whole store may be exported this way.
			raw, err := c.GetRaw(ctx, id, 0)
			if err != nil {
				return fmt.Errorf("trace %s: %w", id, err)
			}
			if len(raw) > 0 && raw[len(raw)-1] != '\n' {
				raw = append(raw, '\n')
			}
			if _, err := out.Write(raw); err != nil {
				return err
			}
		case "chrome":
			roots, err := c.Get(ctx, id)
			if err != nil {
				return fmt.Errorf("trace %s: %w", id, err)
			}
			traces = append(traces, roots)
		}
	}
	bar.finish()
	if n == 0 {
		return notFound("no traces match the search")
	}
	if req.format == "chrome" {
		if err := export.Chrome(out, traces); err != nil {
			return err
		}
	}
	if err := out.commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d traces as %s (%d bytes)\n", n, req.format, out.n)
	return nil
}

// exportSVG draws the one trace req names.
func exportSVG(ctx context.Context, c *client.Client, req *exportRequest, next traceSource, stdout, stderr io.Writer) error {
	id, ok, err := next(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("no traces match the search")
	}
	if req.search != nil && req.limit != 1 {
		_, more, err := next(ctx)
		if err != nil {
			return err
		}
		if more {
			return usageErr("--format svg draws one trace and the search matched several: add --limit 1 to draw the newest")
		}
	}
	roots, err := c.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("trace %s: %w", id, err)
	}
	var buf bytes.Buffer
	if err := export.SVG(&buf, roots, req.svg); err != nil {
		return fmt.Errorf("trace %s: %w", id, err)
	}
	out, err := openOutput(req.output, stdout)
	if err != nil {
		return err
	}
	defer out.abort()
	if _, err := out.Write(buf.Bytes()); err != nil {
		return err
	}
	if err := out.commit(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported trace %s as svg (%d bytes)\n", id, out.n)
	return nil
}

// outputSink is stdout ("-") or a temporary file next to the output path
// that commit renames into place and abort removes.
type outputSink struct {
	path string
	tmp  *os.File
	w    *bufio.Writer
	n    int64
	done bool
}

func openOutput(path string, stdout io.Writer) (*outputSink, error) {
	if path == "-" || path == "" {
		return &outputSink{w: bufio.NewWriterSize(stdout, 256<<10)}, nil
	}
	base := filepath.Base(path)
	if base == "." || base == string(filepath.Separator) {
		return nil, usageErr("--output %q: not a file name", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+base+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("--output: %w", err)
	}
	return &outputSink{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 256<<10)}, nil
}

func (s *outputSink) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("writing %s: %w", s.name(), err)
	}
	return n, nil
}

func (s *outputSink) name() string {
	if s.tmp == nil {
		return "stdout"
	}
	return s.path
}

// commit flushes and, for a file, moves it into place.
func (s *outputSink) commit() error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", s.name(), err)
	}
	if s.tmp == nil {
		s.done = true
		return nil
	}
	err := s.tmp.Chmod(0o644)
	if err == nil {
		err = s.tmp.Close()
	} else {
		s.tmp.Close()
	}
	if err == nil {
		err = os.Rename(s.tmp.Name(), s.path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.done = true
	return nil
}

// abort removes an uncommitted temporary file; after commit it does
// nothing.
func (s *outputSink) abort() {
	if s.done || s.tmp == nil {
		return
	}
	s.tmp.Close()
	os.Remove(s.tmp.Name())
	s.done = true
}
