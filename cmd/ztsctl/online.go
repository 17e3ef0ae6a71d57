package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ztsd/ztsd/client"
	"github.com/ztsd/ztsd/queryapi"
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
	var spanHex, minDur string
	var asJSON bool
	var depth int
	cmd := &cobra.Command{
		Use:   "get TRACE_ID",
		Short: "Show a whole trace (or one span) as an indented call tree, or as Trace JSON",
		Long: `get prints a trace as a call tree: per record its duration, its self time (the
duration minus its children's), its start relative to the span, and its method.
On a big trace, --depth N keeps N levels of records under each span and
--min-duration D hides records shorter than D; what is hidden is counted in
place ("[+12 records below]", "... 40 records under 1ms hidden").`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := trace.ParseTraceID(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			spanID, err := trace.ParseSpanID(spanHex)
			if err != nil {
				return usageErr("--span: %v", err)
			}
			if depth < 0 {
				return usageErr("--depth must be 0 (all levels) or more")
			}
			var minNS int64
			if minDur != "" {
				if minNS, err = server.ParseDurationNS(minDur); err != nil {
					return usageErr("--min-duration: %v", err)
				}
			}
			if asJSON && (depth > 0 || minNS > 0) {
				return usageErr("--depth and --min-duration shape the tree view: not with --json")
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
			p := treePrinter{w: a.stdout, color: isTerminal(a.stdout), depth: depth, minNS: minNS}
			for _, sp := range roots {
				p.span(sp, 0)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&spanHex, "span", "", "show only this span (16 hex digits) and its child spans")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print Trace JSON lines, exactly as the daemon sends them")
	cmd.Flags().IntVar(&depth, "depth", 0, "show at most this many levels of records under each span (0: all)")
	cmd.Flags().StringVar(&minDur, "min-duration", "", "hide records shorter than this, e.g. 1ms")
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
	depth int   // record levels shown under a span; 0: all
	minNS int64 // records shorter than this are hidden
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
		fmtWall(sp.StartNS), fmtDur(sp.DurationNS),
		sp.Calls, sp.Recs, orDash(sp.Type), status)
	if len(sp.Attrs) > 0 {
		fmt.Fprintf(p.w, "%s  %s\n", pad, fmtAttrs(sp.Attrs))
	}
	if sp.Root != nil {
		fmt.Fprintf(p.w, "%s  %-10s %-10s %-11s %s\n", pad, "DURATION", "SELF", "START", "METHOD")
		p.record(sp.Root, indent+1, 1)
	}
	for _, c := range sp.Children {
		p.span(c, indent+1)
	}
}

// selfNS is r's duration minus its children's (never negative: children
// of a sampled or merged tree may overlap).
func selfNS(r *trace.Record) int64 {
	self := r.DurationNS
	for _, c := range r.Children {
		self -= c.DurationNS
	}
	return max(self, 0)
}

// plural is "1 record", "2 records".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// countRecords counts the records of the trees under rs.
func countRecords(rs []*trace.Record) int {
	n := 0
	for _, r := range rs {
		n += 1 + countRecords(r.Children)
	}
	return n
}

func (p treePrinter) record(r *trace.Record, indent, level int) {
	pad := strings.Repeat("  ", indent)
	line := fmt.Sprintf("%s%-10s %-10s +%-10s %s", pad, fmtDur(r.DurationNS), fmtDur(selfNS(r)), fmtDur(r.StartNS), r.Method)
	if r.Calls > 1 {
		line += fmt.Sprintf("  calls=%d", r.Calls)
	}
	if r.Exception != nil {
		line = p.red(line + "  !! " + r.Exception.Class + ": " + r.Exception.Message)
	}
	if r.Open {
		line += "  (not finished)"
	}
	below := p.depth > 0 && level >= p.depth && len(r.Children) > 0
	if below {
		line += fmt.Sprintf("  [+%s below]", plural(countRecords(r.Children), "record"))
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
	if below {
		return
	}
	var hidden []*trace.Record
	var hiddenNS int64
	for _, c := range r.Children {
		if c.DurationNS < p.minNS {
			hidden = append(hidden, c)
			hiddenNS += c.DurationNS
			continue
		}
		p.record(c, indent+1, level+1)
	}
	if len(hidden) > 0 {
		fmt.Fprintf(p.w, "%s  ... %s under %s hidden (%s in all)\n", pad, plural(countRecords(hidden), "record"), fmtDur(p.minNS), fmtDur(hiddenNS))
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
		maxDur, operation string
		since, until      string
		cursor            string
		errorsOnly, spans bool
		asJSON            bool
		limit             int
	)
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Search traces (or spans), newest first",
		Long: `search lists matching traces (or, with --spans, spans), newest first, one page of
--limit results. Each row names the result: its service (service.name, else its source:
format and file) and its root record's method or operation. When there are more results,
the last line (on stderr) is the flag that fetches the next page: more: --cursor ...`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := client.Query{Text: text, Operation: operation, Errors: errorsOnly, Spans: spans, Limit: limit}
			for _, kv := range attrs {
				attr, err := parseAttrFlag(kv)
				if err != nil {
					return err
				}
				q.Attrs = append(q.Attrs, attr)
			}
			if minDur != "" {
				ns, err := server.ParseDurationNS(minDur)
				if err != nil {
					return usageErr("--min-duration: %v", err)
				}
				q.MinDuration = time.Duration(ns)
			}
			if maxDur != "" {
				ns, err := server.ParseDurationNS(maxDur)
				if err != nil {
					return usageErr("--max-duration: %v", err)
				}
				if ns == 0 || ns < int64(q.MinDuration) {
					return usageErr("--max-duration %s: want a duration above 0 and not below --min-duration", maxDur)
				}
				q.MaxDuration = time.Duration(ns)
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
			page, err := c.SearchPage(ctx, q, cursor)
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
				printTable(a.stdout, page.Spans, traceHeads(page), spans, terminalWidth(a.stdout, a.getenv))
			}
			if page.Cursor != "" {
				fmt.Fprintf(a.stderr, "more: --cursor %s\n", page.Cursor)
			}
			if len(page.Spans) == 0 {
				return notFound("no results")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&attrs, "attr", nil, "attribute key=value (or key:value) to match (repeatable; all must match)")
	f.StringVar(&text, "text", "", "case-insensitive substring of a method, attribute or exception")
	f.StringVar(&minDur, "min-duration", "", "minimum duration, e.g. 5ms")
	f.StringVar(&maxDur, "max-duration", "", "maximum duration (inclusive), e.g. 2s")
	f.StringVar(&operation, "operation", "", "exact operation: a span's root record method (its OTLP span name)")
	f.BoolVar(&errorsOnly, "errors", false, "only spans with errors")
	f.StringVar(&since, "since", "", "start time from: "+whenHelp)
	f.StringVar(&until, "until", "", "start time before: "+whenHelp)
	f.IntVar(&limit, "limit", 20, "maximum results")
	f.StringVar(&cursor, "cursor", "", "continue after the previous page (the value its \"more:\" line printed)")
	f.BoolVar(&spans, "spans", false, "one result per matching span instead of per trace")
	f.BoolVar(&asJSON, "json", false, "print Trace JSON lines (one object per result)")
	return cmd
}

// whenHelp describes the time forms of --since and --until.
const whenHelp = "RFC 3339 (2026-01-02T15:04:05Z), a UTC date (2026-01-02), ns since the epoch, or a duration ago (90m, 7d)"

// parseWhen accepts what whenHelp lists (server.ParseWhenNS, as the API).
func parseWhen(s string) (int64, error) {
	return server.ParseWhenNS(s, time.Now())
}

// parseAttrFlag parses --attr key=value or key:value (the API's form).
func parseAttrFlag(kv string) (trace.Attr, error) {
	k, v, err := server.ParseAttrFilter(kv)
	if err != nil {
		return trace.Attr{}, usageErr("--attr %v", err)
	}
	return trace.Attr{Key: k, Value: trace.String(v)}, nil
}

// terminalWidth is the width of w when it is a terminal, else $COLUMNS when
// set, else 0 (no limit: piped output is never cut).
func terminalWidth(w io.Writer, getenv func(string) string) int {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}

// serviceOf names where a span comes from, as the Jaeger and Tempo APIs
// and GET /v1/services do: its service.name, else its source format and
// file ("wtf blk-client.wtf-trace") or Zorka component, else its format.
func serviceOf(sp *trace.Span) string { return queryapi.ServiceOf(sp) }

// nameOf is a span's root method or operation ("" without a root record).
func nameOf(sp *trace.Span) string {
	if sp.Root == nil {
		return ""
	}
	return sp.Root.Method
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// printTable prints search results, nothing for none. With width > 0
// every line fits in it: the service and name columns share what the
// fixed columns leave, and the attributes follow on the same line when at
// least minInlineAttrs columns remain, else on their own indented line.
// traceHeads maps each listed trace id to what the answer says of the
// whole trace (trace mode; empty in span mode or from an older daemon).
func traceHeads(p *client.Page) map[string]client.TraceHead {
	heads := make(map[string]client.TraceHead, len(p.Traces))
	for _, h := range p.Traces {
		heads[h.TraceID] = h
	}
	return heads
}

// printTable prints one row per result. In trace mode a row describes the
// trace as a whole when the answer says how (heads): its start, duration
// and span count, named by its root span's service and name; the
// attributes are those of the span that matched.
func printTable(w io.Writer, spans []*trace.Span, heads map[string]client.TraceHead, spanMode bool, width int) {
	if len(spans) == 0 {
		return
	}
	const gap, minInlineAttrs = 2, 40
	withHeads := !spanMode && len(heads) > 0
	head := []string{"START (UTC)", "DURATION", "TRACE ID"}
	if spanMode {
		head = append(head, "SPAN ID")
	}
	if withHeads {
		head = append(head, "SPANS")
	}
	head = append(head, "ERR", "SERVICE", "NAME")
	rows := [][]string{head}
	attrs := []string{"ATTRIBUTES"}
	for _, sp := range spans {
		errMark := ""
		if sp.Error || sp.Errors > 0 {
			errMark = strconv.FormatInt(max(sp.Errors, 1), 10)
		}
		start, dur, named := sp.StartNS, sp.DurationNS, sp
		var row []string
		if h, ok := heads[sp.TraceID.String()]; withHeads && ok {
			start, dur = h.StartNS, h.DurationNS
			if h.Root != nil {
				named = h.Root
			}
			row = []string{fmtWallMillis(start), fmtDur(dur), sp.TraceID.String(), strconv.FormatInt(h.Spans, 10)}
		} else {
			row = []string{fmtWallMillis(start), fmtDur(dur), sp.TraceID.String()}
			if spanMode {
				row = append(row, sp.SpanID.String())
			} else if withHeads {
				row = append(row, "")
			}
		}
		rows = append(rows, append(row, errMark, serviceOf(named), nameOf(named)))
		attrs = append(attrs, fmtAttrs(sp.Attrs))
	}
	ncol := len(head)
	widths := make([]int, ncol)
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	inline, belowHead, attrWidth := true, "", 0 // attrWidth 0: not cut
	if width > 0 {
		fixed := 0
		for _, wd := range widths[:ncol-2] {
			fixed += wd + gap
		}
		avail := max(width-fixed, 0)
		svc, name := widths[ncol-2], widths[ncol-1]
		if rest := avail - svc - name - 2*gap; rest >= minInlineAttrs {
			attrWidth = rest
		} else if avail >= 36 {
			// Service and name share the line (the service at most a
			// third); attributes go below.
			inline, attrWidth = false, max(width-4, 8)
			svc = min(svc, max(8, avail/3))
			name = min(name, avail-svc-gap)
			widths[ncol-2], widths[ncol-1] = svc, name
		} else {
			// Too narrow even for the name: the service (cut) ends the
			// line if 8 columns are left for it, the rest goes below.
			inline, attrWidth = false, max(width-4, 8)
			below := 1
			if avail < 8 {
				below = 2
			}
			widths[ncol-2] = min(svc, avail)
			for range below {
				ncol--
				for r := range rows {
					if r > 0 && rows[r][ncol] != "" {
						attrs[r] = rows[r][ncol] + "  " + attrs[r]
					}
					rows[r] = rows[r][:ncol]
				}
			}
			belowHead = "\n    " + strings.Join(head[ncol:], "  ") + "  ATTRIBUTES"
		}
	}
	for r, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if width > 0 && i >= len(head)-2 {
				cell = cut(cell, widths[i])
			}
			b.WriteString(cell)
			if i < ncol-1 || inline {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+gap))
			}
		}
		a := attrs[r]
		if attrWidth > 0 {
			a = cut(a, attrWidth)
		}
		line := b.String()
		switch {
		case inline:
			line += a
		case r > 0 && a != "":
			line = strings.TrimRight(line, " ") + "\n    " + a
		case r == 0 && belowHead != "":
			line = strings.TrimRight(line, " ") + belowHead
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// wallClockStart: times before it are not wall-clock times (a writer's
// monotonic clock, a timebase of 0), shown as such instead of as 1970.
var wallClockStart = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// fmtWall is a start time to the nanosecond in UTC, or "no wall clock".
func fmtWall(ns int64) string {
	if ns < wallClockStart {
		return fmt.Sprintf("no wall clock (+%s)", fmtDur(ns))
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// fmtWallMillis is a start time to the millisecond in UTC.
func fmtWallMillis(ns int64) string {
	if ns < wallClockStart {
		return "no wall clock"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000")
}

func newStoresCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stores",
		Short: "List the daemon's stores (times in UTC)",
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
			fmt.Fprintln(tw, "STORE\tSTATE\tWHERE\tFIRST (UTC)\tLAST (UTC)\tSPANS\tTRACES\tCHUNKS\tBYTES")
			for _, s := range stores {
				where := "local"
				if s.Location == "remote" {
					where = "bucket"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", s.Name(), s.State, where, fmtTime(s.FirstNS), fmtTime(s.LastNS),
					s.Spans, s.Traces, s.Chunks, fmtBytes(s.Bytes))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, s := range stores {
				if s.Reason != "" { // not served: say why
					fmt.Fprintf(a.stderr, "ztsctl: store %s is %s: %s\n", s.Name(), s.State, s.Reason)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per store")
	return cmd
}

// fmtTime is a store's first or last time, to the second in UTC; "-" for
// an empty store, "no wall clock" before 2000.
func fmtTime(ns int64) string {
	if ns == 0 {
		return "-"
	}
	if ns < wallClockStart {
		return "no wall clock"
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
				fmt.Fprintf(a.stdout, "%-28s %s\n", k, fmtNumber(st[k]))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// fmtNumber prints a count in plain digits: integers as integers, other
// floats without an exponent.
func fmtNumber(v any) string {
	switch x := v.(type) {
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func newServicesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "services",
		Short: "List the services in the store, and the --attr that finds each",
		Long: `services lists what the stored spans come from: every service.name value (OTLP,
or spans that set it), then every imported source file whose spans have none, named
by its format and file ("wtf blk-client.wtf-trace"). The second column is the
search filter that finds a service's spans.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			svcs, err := c.Services(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				for _, s := range svcs {
					enc.Encode(s)
				}
			} else {
				tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SERVICE\tSEARCH WITH")
				for _, s := range svcs {
					keys := make([]string, 0, len(s.Attrs))
					for k := range s.Attrs {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					var flags []string
					for _, k := range keys {
						flags = append(flags, "--attr "+shellQuote(k+"="+s.Attrs[k]))
					}
					fmt.Fprintf(tw, "%s\t%s\n", s.Name, strings.Join(flags, " "))
				}
				tw.Flush()
			}
			if len(svcs) == 0 {
				return notFound("no services: the store holds no spans with service.name or source.file")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per service")
	return cmd
}

func newAttributesCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "attributes [KEY]",
		Short: "List the span attribute keys in the store, or the values of one key",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErr("attributes takes at most one KEY, got %d (usage: %s)", len(args), cmd.UseLine())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			c := a.client()
			defer c.Close()
			var list []string
			var err error
			if len(args) == 0 {
				list, err = c.AttributeKeys(ctx)
			} else {
				list, err = c.AttributeValues(ctx, args[0])
			}
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []string{}
				}
				if err := json.NewEncoder(a.stdout).Encode(list); err != nil {
					return err
				}
			} else {
				for _, v := range list {
					fmt.Fprintln(a.stdout, v)
				}
			}
			if len(list) == 0 {
				if len(args) == 0 {
					return notFound("no attributes: the store holds no spans with attributes")
				}
				return notFound("no values of %q (ztsctl attributes lists the keys)", args[0])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON array")
	return cmd
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-=/:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
