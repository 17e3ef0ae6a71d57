package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/server"
	"github.com/ztsd/ztsd/trace"
)

func newPutCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "put FILE|-",
		Short: "Store spans given as Trace JSON lines",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r io.Reader = a.stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				r = f
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			// Send in requests of at most batchLines lines so that a big
			// file does not hit the daemon's body limit.
			const batchLines = 5000
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			var buf bytes.Buffer
			total, lines, lineNo := 0, 0, 0
			flush := func() error {
				if lines == 0 {
					return nil
				}
				n, err := c.PutJSONLines(ctx, bytes.NewReader(buf.Bytes()))
				if err != nil {
					return fmt.Errorf("lines %d–%d: %w", lineNo-lines+1, lineNo, err)
				}
				total += n
				buf.Reset()
				lines = 0
				return nil
			}
			for sc.Scan() {
				lineNo++
				if len(bytes.TrimSpace(sc.Bytes())) == 0 {
					continue
				}
				buf.Write(sc.Bytes())
				buf.WriteByte('\n')
				lines++
				if lines == batchLines {
					if err := flush(); err != nil {
						return err
					}
				}
			}
			if err := sc.Err(); err != nil {
				return fmt.Errorf("reading line %d: %w", lineNo+1, err)
			}
			if err := flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "stored %d spans\n", total)
			return nil
		},
	}
}

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("%s takes %d argument(s), got %d (usage: %s)", cmd.Name(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

func newGetCmd(a *app) *cobra.Command {
	var spanHex string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get TRACE_ID",
		Short: "Show a whole trace (or one span) as an indented call tree, or as Trace JSON",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := trace.ParseTraceID(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			spanID, err := trace.ParseSpanID(spanHex)
			if err != nil {
				return usageErr("--span: %v", err)
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			if asJSON {
				raw, err := c.GetRaw(ctx, id, spanID)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(raw)
				return err
			}
			var roots []*trace.Span
			if spanID != 0 {
				sp, err := c.GetSpan(ctx, id, spanID)
				if err != nil {
					return err
				}
				roots = []*trace.Span{sp}
			} else if roots, err = c.Get(ctx, id); err != nil {
				return err
			}
			p := treePrinter{w: a.stdout, color: isTerminal(a.stdout)}
			for _, sp := range roots {
				p.span(sp, 0)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&spanHex, "span", "", "show only this span (16 hex digits) and its child spans")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print Trace JSON lines, exactly as the daemon sends them")
	return cmd
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// treePrinter renders spans and their record trees for people.
type treePrinter struct {
	w     io.Writer
	color bool
}

func (p treePrinter) red(s string) string {
	if p.color {
		return "\x1b[31m" + s + "\x1b[0m"
	}
	return s
}

func (p treePrinter) span(sp *trace.Span, indent int) {
	pad := strings.Repeat("  ", indent)
	status := ""
	if sp.Error || sp.Errors > 0 {
		status = p.red(fmt.Sprintf("  ERROR (%d errors)", sp.Errors))
	}
	fmt.Fprintf(p.w, "%sspan %s  trace %s  parent %s  %s  %s  calls=%d recs=%d  %s%s\n",
		pad, sp.SpanID, sp.TraceID, orDash(sp.ParentID.String()),
		time.Unix(0, sp.StartNS).UTC().Format(time.RFC3339Nano), fmtDur(sp.DurationNS),
		sp.Calls, sp.Recs, orDash(sp.Type), status)
	if len(sp.Attrs) > 0 {
		fmt.Fprintf(p.w, "%s  %s\n", pad, fmtAttrs(sp.Attrs))
	}
	if sp.Root != nil {
		p.record(sp.Root, indent+1)
	}
	for _, c := range sp.Children {
		p.span(c, indent+1)
	}
}

func (p treePrinter) record(r *trace.Record, indent int) {
	pad := strings.Repeat("  ", indent)
	line := fmt.Sprintf("%s%-10s +%-10s %s", pad, fmtDur(r.DurationNS), fmtDur(r.StartNS), r.Method)
	if r.Calls > 1 {
		line += fmt.Sprintf("  calls=%d", r.Calls)
	}
	if r.Exception != nil {
		line = p.red(line + "  !! " + r.Exception.Class + ": " + r.Exception.Message)
	}
	if r.Open {
		line += "  (not finished)"
	}
	fmt.Fprintln(p.w, line)
	if len(r.Attrs) > 0 {
		fmt.Fprintf(p.w, "%s    %s\n", pad, fmtAttrs(r.Attrs))
	}
	for e := r.Exception; e != nil; e = e.Cause {
		if e != r.Exception {
			fmt.Fprintln(p.w, p.red(fmt.Sprintf("%s    caused by %s: %s", pad, e.Class, e.Message)))
		}
		for _, f := range e.Stack {
			fmt.Fprintf(p.w, "%s      at %s.%s(%s:%d)\n", pad, f.Class, f.Method, f.File, f.Line)
		}
	}
	for _, c := range r.Children {
		p.record(c, indent+1)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(time.Microsecond).String()
	}
	return d.String()
}

func fmtAttrs(a trace.Attrs) string {
	parts := make([]string, 0, len(a))
	for _, kv := range a {
		v := kv.Value.Text()
		if kv.Value.Kind == trace.KindList || kv.Value.Kind == trace.KindMap {
			b, _ := json.Marshal(valueForDisplay(kv.Value))
			v = string(b)
		}
		parts = append(parts, kv.Key+"="+v)
	}
	return strings.Join(parts, " ")
}

func valueForDisplay(v trace.Value) any {
	switch v.Kind {
	case trace.KindList:
		out := make([]any, len(v.List))
		for i, e := range v.List {
			out[i] = valueForDisplay(e)
		}
		return out
	case trace.KindMap:
		out := map[string]any{}
		for _, kv := range v.Map {
			out[kv.Key] = valueForDisplay(kv.Value)
		}
		return out
	}
	return v.Text()
}

func newSearchCmd(a *app) *cobra.Command {
	var (
		attrs             []string
		text, minDur      string
		since, until      string
		errorsOnly, spans bool
		asJSON            bool
		limit             int
	)
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Search traces (or spans), newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := client.Query{Text: text, Errors: errorsOnly, Spans: spans, Limit: limit}
			for _, kv := range attrs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErr("--attr %q: want key=value", kv)
				}
				q.Attrs = append(q.Attrs, trace.Attr{Key: k, Value: trace.String(v)})
			}
			if minDur != "" {
				ns, err := server.ParseDurationNS(minDur)
				if err != nil {
					return usageErr("--min-duration: %v", err)
				}
				q.MinDuration = time.Duration(ns)
			}
			for _, t := range []struct {
				flag string
				s    string
				dst  *time.Time
			}{{"--since", since, &q.Since}, {"--until", until, &q.Until}} {
				if t.s == "" {
					continue
				}
				ns, err := parseWhen(t.s)
				if err != nil {
					return usageErr("%s: %v", t.flag, err)
				}
				*t.dst = time.Unix(0, ns)
			}
			if limit < 1 {
				return usageErr("--limit must be at least 1")
			}
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			page, err := c.SearchPage(ctx, q, "")
			if err != nil {
				return err
			}
			if asJSON {
				for _, sp := range page.Spans {
					b, err := trace.MarshalSummaryJSON(sp)
					if err != nil {
						return err
					}
					a.stdout.Write(append(b, '\n'))
				}
			} else {
				printTable(a.stdout, page.Spans)
			}
			if len(page.Spans) == 0 {
				return notFound("no results")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&attrs, "attr", nil, "attribute key=value to match (repeatable; all must match)")
	f.StringVar(&text, "text", "", "case-insensitive substring of a method, attribute or exception")
	f.StringVar(&minDur, "min-duration", "", "minimum duration, e.g. 5ms")
	f.BoolVar(&errorsOnly, "errors", false, "only spans with errors")
	f.StringVar(&since, "since", "", "start time from: RFC 3339, ns since the epoch, or a duration ago like 1h")
	f.StringVar(&until, "until", "", "start time before: RFC 3339, ns since the epoch, or a duration ago")
	f.IntVar(&limit, "limit", 20, "maximum results")
	f.BoolVar(&spans, "spans", false, "one result per matching span instead of per trace")
	f.BoolVar(&asJSON, "json", false, "print Trace JSON lines (one object per result)")
	return cmd
}

// parseWhen accepts RFC 3339, ns since the epoch, or a duration meaning
// that long ago.
func parseWhen(s string) (int64, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d).UnixNano(), nil
	}
	return server.ParseTimeNS(s)
}

func printTable(w io.Writer, spans []*trace.Span) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "START\tDURATION\tTRACE ID\tSPAN ID\tERR\tSOURCE\tATTRIBUTES")
	for _, sp := range spans {
		errMark := ""
		if sp.Error || sp.Errors > 0 {
			errMark = fmt.Sprintf("%d", max(sp.Errors, 1))
		}
		attrs := fmtAttrs(sp.Attrs)
		if len(attrs) > 80 {
			attrs = attrs[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", time.Unix(0, sp.StartNS).UTC().Format("2006-01-02 15:04:05.000"),
			fmtDur(sp.DurationNS), sp.TraceID, sp.SpanID, errMark, sp.Source, attrs)
	}
	tw.Flush()
}

func newStoresCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stores",
		Short: "List the daemon's stores",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			stores, err := c.Stores(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				for _, s := range stores {
					enc.Encode(s)
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STORE\tSTATE\tFIRST\tLAST\tSPANS\tTRACES\tCHUNKS\tBYTES")
			for _, s := range stores {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.ID, s.State, fmtTime(s.FirstNS), fmtTime(s.LastNS),
					s.Spans, s.Traces, s.Chunks, fmtBytes(s.Bytes))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per store")
	return cmd
}

func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05")
}

func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func newStatsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show totals: stores, spans, traces, bytes, and the daemon's write counters",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			stores, err := c.Stores(ctx)
			if err != nil {
				return err
			}
			text, err := c.Metrics(ctx)
			if err != nil {
				return err
			}
			st := map[string]any{"stores": len(stores)}
			var spans, traces, bytes, chunks int64
			for _, s := range stores {
				spans += s.Spans
				traces += s.Traces
				bytes += s.Bytes
				chunks += s.Chunks
			}
			st["spans"], st["traces"], st["bytes"], st["chunks"] = spans, traces, bytes, chunks
			for _, name := range []string{"ztsd_ingest_spans_total", "ztsd_ingest_requests_total", "ztsd_fsyncs_total",
				"ztsd_chunks_written_total", "ztsd_data_bytes_written_total"} {
				if v, ok := metricValue(text, name); ok {
					st[strings.TrimPrefix(name, "ztsd_")] = v
				}
			}
			if asJSON {
				return json.NewEncoder(a.stdout).Encode(st)
			}
			keys := make([]string, 0, len(st))
			for k := range st {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(a.stdout, "%-28s %v\n", k, st[k])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// metricValue reads an unlabelled sample from Prometheus text format.
func metricValue(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
