package export

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ztsd/ztsd/trace"
)

// SVG picture limits and defaults.
const (
	DefaultSVGWidth      = 1400
	MinSVGWidth          = 400
	MaxSVGWidth          = 20000
	DefaultSVGMaxRecords = 20000
	MaxSVGMaxRecords     = 1000000

	maxTooltipAttrs  = 40  // attributes listed in one tooltip
	maxTooltipValue  = 200 // characters of one attribute value in a tooltip
	maxTooltipFrames = 8   // stack frames per exception in a tooltip
	maxTooltipCauses = 4   // causes listed per exception in a tooltip
	maxTitleChars    = 120 // characters of the header title
)

// ErrNoRecords is returned by SVG for input without any record or span.
var ErrNoRecords = errors.New("svg export: the trace has no records to draw")

// SVGOptions tune SVG. The zero value draws with the defaults.
type SVGOptions struct {
	// Width is the picture's width in pixels (MinSVGWidth..MaxSVGWidth);
	// 0 means DefaultSVGWidth. The height follows from the lanes.
	Width int
	// MaxRecords caps the records drawn (1..MaxSVGMaxRecords); 0 means
	// DefaultSVGMaxRecords. Beyond it the shallowest, longest records are
	// drawn and the picture says how many were left out.
	MaxRecords int
	// Title replaces the derived title (the first root record's method).
	Title string
}

// Geometry, in pixels.
const (
	svgLabelW     = 190.0 // lane label column
	svgPadRight   = 24.0
	svgAxisY      = 84.0 // the axis line; lanes start below it
	svgRowH       = 17.0 // one nesting level
	svgBarH       = 15.0
	svgLanePad    = 5.0 // above the first and below the last row of a lane
	svgLaneGap    = 2.0
	svgCharW      = 6.4 // estimated width of one character of record labels
	svgMinLabelW  = 26.0
	svgDiamondHW  = 3.5 // half width of a zero-length record's diamond
	svgTargetTick = 120.0
	svgLabelChars = 24 // characters of a lane label
)

// palette colours records by method; red is kept for errors.
var palette = [...]string{
	"#8dd3c7", "#f4e285", "#bebada", "#80b1d3", "#fdb462", "#b3de69",
	"#fccde5", "#c9c9c9", "#bc80bd", "#ccebc5", "#9ecae1", "#f2b880",
}

const svgStyle = `text{font-family:"DejaVu Sans","Liberation Sans",Arial,Helvetica,sans-serif;fill:#1d2430}` +
	`.t{font-size:17px;font-weight:bold}.s{font-size:12px;fill:#586170}.k{font-size:11px;fill:#586170}` +
	`.l{font-size:12px;font-weight:bold}.lo{font-size:12px;fill:#8a93a3}.n{font-size:11px}` +
	`.r rect{stroke:#fff;stroke-width:.6}.r:hover rect,.r:hover path{stroke:#000;stroke-width:1.4}` +
	`.e rect{fill:#d62839;stroke:#8c1020}.e text{fill:#fff}.e path{fill:#d62839}` +
	`.o rect{stroke:#333;stroke-dasharray:3 2}.w{font-size:12px;font-weight:bold;fill:#a4161a}`

// SVG draws one trace — its root spans, with child spans in Span.Children —
// as a standalone SVG timeline (package doc, "SVG timeline").
func SVG(w io.Writer, roots []*trace.Span, opt SVGOptions) error {
	width := opt.Width
	if width == 0 {
		width = DefaultSVGWidth
	}
	if width < MinSVGWidth || width > MaxSVGWidth {
		return fmt.Errorf("svg export: width %d outside %d..%d", width, MinSVGWidth, MaxSVGWidth)
	}
	maxRecs := opt.MaxRecords
	if maxRecs == 0 {
		maxRecs = DefaultSVGMaxRecords
	}
	if maxRecs < 1 || maxRecs > MaxSVGMaxRecords {
		return fmt.Errorf("svg export: max records %d outside 1..%d", maxRecs, MaxSVGMaxRecords)
	}
	lay, err := newLayout([][]*trace.Span{roots}, func(int) int32 { return 0 })
	if err != nil {
		return fmt.Errorf("svg export: %w", err)
	}
	if len(lay.items) == 0 {
		return ErrNoRecords
	}
	d := &svgDrawing{lay: lay, width: float64(width), opt: opt}
	d.choose(maxRecs)
	d.measure()
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := d.write(bw); err != nil {
		return fmt.Errorf("svg export: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("svg export: %w", err)
	}
	return nil
}

type svgDrawing struct {
	lay   *layout
	opt   SVGOptions
	width float64

	drawn    []bool  // per item
	nDrawn   int     // items drawn
	records  int     // items that are records (not root-less spans)
	lanes    []int32 // display order
	laneTop  []float64
	laneRows []int32 // rows per lane, from the drawn items
	height   float64
	t0, t1   int64
	scale    float64 // px per ns
}

// choose marks the items to draw: all, or the maxRecs shallowest and
// longest.
func (d *svgDrawing) choose(maxRecs int) {
	items := d.lay.items
	d.drawn = make([]bool, len(items))
	for i := range items {
		if items[i].rec != nil {
			d.records++
		}
	}
	if len(items) <= maxRecs {
		for i := range d.drawn {
			d.drawn[i] = true
		}
		d.nDrawn = len(items)
		return
	}
	order := make([]int32, len(items))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		x, y := &items[a], &items[b]
		if c := cmp.Compare(x.depth, y.depth); c != 0 {
			return c
		}
		if c := cmp.Compare(durSat(y.start, y.end), durSat(x.start, x.end)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, i := range order[:maxRecs] {
		d.drawn[i] = true
	}
	d.nDrawn = maxRecs
}

// measure computes the time scale, the lane order and heights.
func (d *svgDrawing) measure() {
	lay := d.lay
	d.t0, d.t1 = math.MaxInt64, math.MinInt64
	for i := range lay.items {
		d.t0 = min(d.t0, lay.items[i].start)
		d.t1 = max(d.t1, lay.items[i].end)
	}
	span := d.nsSinceT0(d.t1)
	if span <= 0 {
		span = 1
	}
	d.scale = (d.width - svgLabelW - svgPadRight) / span

	d.lanes = lay.laneOrder(0)
	d.laneRows = make([]int32, len(lay.lanes))
	for i := range lay.items {
		if d.drawn[i] {
			it := &lay.items[i]
			d.laneRows[it.lane] = max(d.laneRows[it.lane], it.depth+1)
		}
	}
	d.laneTop = make([]float64, len(lay.lanes))
	y := svgAxisY + 6
	for _, ln := range d.lanes {
		d.laneTop[ln] = y
		y += d.laneHeight(ln) + svgLaneGap
	}
	d.height = y + 56
}

func (d *svgDrawing) laneHeight(ln int32) float64 {
	return 2*svgLanePad + float64(max(d.laneRows[ln], 1))*svgRowH - (svgRowH - svgBarH)
}

func (d *svgDrawing) x(t int64) float64 {
	return svgLabelW + d.nsSinceT0(t)*d.scale
}

// nsSinceT0 is t - t0 as a float. It subtracts in integers first: epoch
// nanoseconds (~1.7e18) are not exact as float64 (they snap to 256 ns),
// the differences are.
func (d *svgDrawing) nsSinceT0(t int64) float64 {
	if t >= d.t0 {
		return float64(uint64(t) - uint64(d.t0)) // exact for any int64 pair
	}
	return -float64(uint64(d.t0) - uint64(t))
}

// svgBuf is an append buffer with SVG helpers.
type svgBuf struct{ b []byte }

func (s *svgBuf) str(v string) { s.b = append(s.b, v...) }
func (s *svgBuf) px(v float64) { s.b = appendPx(s.b, v) }
func (s *svgBuf) esc(v string) { s.b = appendXMLEscaped(s.b, v) }
func (s *svgBuf) attr(name string, v float64) {
	s.b = append(s.b, ' ')
	s.b = append(s.b, name...)
	s.b = append(s.b, '=', '"')
	s.b = appendPx(s.b, v)
	s.b = append(s.b, '"')
}

func appendPx(b []byte, v float64) []byte {
	b = strconv.AppendFloat(b, math.Round(v*100)/100, 'f', -1, 64)
	return b
}

func (d *svgDrawing) write(w *bufio.Writer) error {
	lay := d.lay
	s := &svgBuf{b: make([]byte, 0, 64<<10)}
	flush := func() error {
		_, err := w.Write(s.b)
		s.b = s.b[:0]
		return err
	}
	width, height := d.width, d.height
	s.str(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	s.str(`<svg xmlns="http://www.w3.org/2000/svg" version="1.1"`)
	s.attr("width", width)
	s.attr("height", height)
	s.str(` viewBox="0 0 `)
	s.px(width)
	s.str(" ")
	s.px(height)
	s.str(`">` + "\n<style>" + svgStyle + "</style>\n")
	s.str(`<rect x="0" y="0"`)
	s.attr("width", width)
	s.attr("height", height)
	s.str(` fill="#ffffff"/>` + "\n")

	// Header.
	title, subtitle := d.titles()
	s.str(`<text class="t" x="16" y="28">`)
	s.esc(title)
	s.str("</text>\n")
	s.str(`<text class="s" x="16" y="50">`)
	s.esc(subtitle)
	s.str("</text>\n")

	// Lane backgrounds and labels.
	for k, ln := range d.lanes {
		top := d.laneTop[ln]
		fill := "#f3f5f8"
		if k%2 == 1 {
			fill = "#fafbfc"
		}
		s.str(`<rect x="0"`)
		s.attr("y", top)
		s.attr("width", width)
		s.attr("height", d.laneHeight(ln))
		s.str(` fill="` + fill + `"/>` + "\n")
		cls := "l"
		if lay.lanes[ln].ordinal > 0 {
			cls = "lo"
		}
		s.str(`<text class="` + cls + `" x="14"`)
		s.attr("y", top+svgLanePad+svgBarH-3.5)
		s.str(">")
		s.esc(truncate(lay.laneName(ln), svgLabelChars))
		s.str("</text>\n")
	}
	s.str(`<line x1="`)
	s.px(svgLabelW - 6)
	s.str(`" x2="`)
	s.px(svgLabelW - 6)
	s.str(`"`)
	s.attr("y1", svgAxisY)
	s.attr("y2", height-50)
	s.str(` stroke="#c5cbd3"/>` + "\n")

	// Time axis and grid.
	d.writeAxis(s)
	if err := flush(); err != nil {
		return err
	}

	// Records.
	for i := range lay.items {
		if !d.drawn[i] {
			continue
		}
		d.writeItem(s, int32(i))
		if len(s.b) >= 48<<10 {
			if err := flush(); err != nil {
				return err
			}
		}
	}

	// Footer: legend and the cap note.
	y := height - 34
	s.str(`<g class="k">`)
	s.str(`<rect x="16"`)
	s.attr("y", y-10)
	s.str(` width="22" height="12" fill="#d62839"/><text x="44"`)
	s.attr("y", y)
	s.str(`>exception or failed span</text>`)
	s.str(`<path d="M`)
	s.px(214)
	s.str(",")
	s.px(y - 11)
	s.str(`l3.5,7.5l-3.5,7.5l-3.5,-7.5z" fill="#4f5a70"/><text x="226"`)
	s.attr("y", y)
	s.str(`>zero-length record</text>`)
	s.str(`<rect x="368"`)
	s.attr("y", y-10)
	s.str(` width="22" height="12" fill="#c9c9c9" stroke="#333" stroke-dasharray="3 2"/><text x="396"`)
	s.attr("y", y)
	s.str(`>never ended</text>`)
	s.str(`<text x="500"`)
	s.attr("y", y)
	s.str(`>hover a record for its attributes · drawn by ztsctl export --format svg</text></g>` + "\n")
	if d.nDrawn < len(lay.items) {
		s.str(`<text class="w" x="16"`)
		s.attr("y", y+20)
		s.str(">")
		s.esc(fmt.Sprintf("Showing %s of %s records (the shallowest and longest): %s were left out by the cap of %s drawn records.",
			fmtCount(d.nDrawn), fmtCount(len(lay.items)), fmtCount(len(lay.items)-d.nDrawn), fmtCount(d.nDrawn)))
		s.str("</text>\n")
	}
	s.str("</svg>\n")
	return flush()
}

// titles derives the header lines.
func (d *svgDrawing) titles() (string, string) {
	lay := d.lay
	first := lay.spans[0].span
	title := d.opt.Title
	if title == "" {
		title = first.Type
		if first.Root != nil && first.Root.Method != "" {
			title = first.Root.Method
		}
		if title == "" {
			title = "trace " + first.TraceID.String()
		}
	}
	title = truncate(title, maxTitleChars)

	parts := []string{"trace " + first.TraceID.String()}
	src := first.Source
	if v, ok := first.Attrs.Get("source.file"); ok && scalarText(v) != "" {
		src = strings.TrimSpace(src + " " + scalarText(v))
	}
	if src != "" {
		parts = append(parts, truncate(src, 60))
	}
	threads := 0
	for i := range lay.threads {
		if len(lay.threads[i].lanes) > 0 {
			threads++
		}
	}
	parts = append(parts,
		plural(d.records, "record", "records"),
		plural(len(lay.spans), "span", "spans"),
		plural(threads, "thread", "threads"),
		fmtDuration(durSat(d.t0, d.t1)),
		"starts "+time.Unix(0, d.t0).UTC().Format("2006-01-02 15:04:05.000000 UTC"))
	return title, strings.Join(parts, " · ")
}

// writeAxis draws tick labels above the lanes and grid lines through them.
func (d *svgDrawing) writeAxis(s *svgBuf) {
	spanNS := d.nsSinceT0(d.t1)
	plotW := d.width - svgLabelW - svgPadRight
	step := niceStep(spanNS / max(plotW/svgTargetTick, 1))
	unit, unitName := timeUnit(step)
	bottom := d.height - 50
	s.str(`<g class="k">`)
	s.str(`<line`)
	s.attr("x1", svgLabelW)
	s.attr("x2", d.width-svgPadRight)
	s.attr("y1", svgAxisY)
	s.attr("y2", svgAxisY)
	s.str(` stroke="#5d6675"/>`)
	for k := 0; k <= 1000; k++ {
		off := float64(k) * step
		if off > spanNS*1.0000001 && k > 0 {
			break
		}
		x := svgLabelW + off*d.scale
		s.str(`<line`)
		s.attr("x1", x)
		s.attr("x2", x)
		s.attr("y1", svgAxisY-5)
		s.attr("y2", bottom)
		s.str(` stroke="#dde1e7" stroke-width=".8"/>`)
		s.str(`<line`)
		s.attr("x1", x)
		s.attr("x2", x)
		s.attr("y1", svgAxisY-5)
		s.attr("y2", svgAxisY)
		s.str(` stroke="#5d6675"/>`)
		anchor := "middle"
		switch {
		case k == 0:
			anchor = "start"
		case x > d.width-svgPadRight-20:
			anchor = "end"
		}
		s.str(`<text text-anchor="` + anchor + `"`)
		s.attr("x", x)
		s.attr("y", svgAxisY-9)
		s.str(">")
		label := "0"
		if k > 0 {
			label = "+" + strconv.FormatFloat(off/unit, 'f', -1, 64) + " " + unitName
		}
		s.esc(label)
		s.str("</text>")
	}
	s.str("</g>\n")
}

// niceStep rounds raw up to 1, 2 or 5 times a power of ten (at least 1 ns).
func niceStep(raw float64) float64 {
	if raw <= 1 || math.IsNaN(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

// timeUnit picks the unit to label ticks step ns apart: the largest unit
// of which a step is at least a tenth, so labels read 0.5 ms, 1 ms, 1.5 ms.
func timeUnit(step float64) (float64, string) {
	switch {
	case step >= 1e8:
		return 1e9, "s"
	case step >= 1e5:
		return 1e6, "ms"
	case step >= 1e2:
		return 1e3, "µs"
	}
	return 1, "ns"
}

// writeItem draws one record with its tooltip.
func (d *svgDrawing) writeItem(s *svgBuf, idx int32) {
	lay := d.lay
	it := &lay.items[idx]
	info := &lay.spans[it.span]
	sp := info.span
	isErr := (it.rec != nil && it.rec.Exception != nil) || (idx == info.root && sp.Error)
	isOpen := it.rec != nil && it.rec.Open
	cls := "r"
	if isErr {
		cls += " e"
	}
	if isOpen {
		cls += " o"
	}
	name := sp.Type
	if it.rec != nil {
		name = it.rec.Method
	}
	if name == "" {
		name = "(unnamed)"
	}
	y := d.laneTop[it.lane] + svgLanePad + float64(it.depth)*svgRowH
	x := d.x(it.start)

	s.str(`<g class="` + cls + `"><title>`)
	s.esc(d.tooltip(idx, name))
	s.str("</title>")
	if it.end == it.start {
		s.str(`<path d="M`)
		s.px(x)
		s.str(",")
		s.px(y)
		s.str("l")
		s.px(svgDiamondHW)
		s.str(",")
		s.px(svgBarH / 2)
		s.str("l-")
		s.px(svgDiamondHW)
		s.str(",")
		s.px(svgBarH / 2)
		s.str("l-")
		s.px(svgDiamondHW)
		s.str(",-")
		s.px(svgBarH / 2)
		s.str(`z" fill="#4f5a70"/></g>` + "\n")
		return
	}
	w := max((d.nsSinceT0(it.end)-d.nsSinceT0(it.start))*d.scale, 1)
	s.str("<rect")
	s.attr("x", x)
	s.attr("y", y)
	s.attr("width", w)
	s.attr("height", svgBarH)
	s.str(` fill="` + colorOf(name) + `"/>`)
	if w >= svgMinLabelW {
		if label := truncate(name, int((w-5)/svgCharW)); utf8.RuneCountInString(label) >= 2 {
			// A nested viewport clips the label to its record.
			s.str("<svg")
			s.attr("x", x)
			s.attr("y", y)
			s.attr("width", w)
			s.attr("height", svgBarH)
			s.str(`><text class="n" x="3"`)
			s.attr("y", svgBarH-4)
			s.str(">")
			s.esc(label)
			s.str("</text></svg>")
		}
	}
	s.str("</g>\n")
}

// tooltip is the <title> text of an item.
func (d *svgDrawing) tooltip(idx int32, name string) string {
	lay := d.lay
	it := &lay.items[idx]
	info := &lay.spans[it.span]
	sp := info.span
	var t strings.Builder
	t.WriteString(truncate(name, 400))
	t.WriteString("\n+")
	t.WriteString(fmtDuration(durSat(d.t0, it.start)))
	t.WriteString(" · ")
	t.WriteString(fmtDuration(durSat(it.start, it.end)))
	if r := it.rec; r != nil {
		if r.Calls > 1 {
			t.WriteString(" · " + strconv.FormatInt(r.Calls, 10) + " calls")
		}
		if r.Errors > 0 {
			t.WriteString(" · " + plural(int(min(r.Errors, math.MaxInt32)), "error", "errors"))
		}
		if r.Open {
			t.WriteString(" · never ended")
		}
	}
	if idx == info.root {
		t.WriteString("\nspan " + sp.SpanID.String())
		if sp.Type != "" {
			t.WriteString(" (" + truncate(sp.Type, 60) + ")")
		}
		t.WriteString(" on " + truncate(lay.threads[info.thread].name, 60))
		if sp.Error {
			t.WriteString(" · span failed")
		}
	}
	if it.rec == nil {
		return t.String()
	}
	attrs := it.rec.Attrs
	for i := range attrs {
		if i == maxTooltipAttrs {
			t.WriteString("\n… " + plural(len(attrs)-i, "more attribute", "more attributes"))
			break
		}
		t.WriteString("\n")
		t.WriteString(truncate(attrs[i].Key, 80))
		t.WriteString(" = ")
		t.WriteString(truncate(displayValue(&attrs[i].Value), maxTooltipValue))
	}
	causes := 0
	for x := it.rec.Exception; x != nil && causes <= maxTooltipCauses; x = x.Cause {
		if causes == 0 {
			t.WriteString("\nexception ")
		} else {
			t.WriteString("\ncaused by ")
		}
		causes++
		t.WriteString(truncate(x.Class, 120))
		if x.Message != "" {
			t.WriteString(": " + truncate(x.Message, maxTooltipValue))
		}
		for i, f := range x.Stack {
			if i == maxTooltipFrames {
				t.WriteString("\n    … " + plural(len(x.Stack)-i, "more frame", "more frames"))
				break
			}
			t.WriteString("\n    at " + truncate(frameText(f), 160))
		}
	}
	return t.String()
}

// displayValue renders an attribute value for people: scalars as text,
// lists and maps as JSON.
func displayValue(v *trace.Value) string {
	switch v.Kind {
	case trace.KindList, trace.KindMap:
		b, err := trace.AppendValueJSON(nil, v)
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	return v.Text()
}

// colorOf picks a palette colour by method name.
func colorOf(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return palette[h.Sum32()%uint32(len(palette))]
}

// truncate shortens s to at most n runes, ending in "…" when cut.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) {
		if count == n-1 {
			// Is the rest exactly one rune? Then nothing needs cutting.
			_, size := utf8.DecodeRuneInString(s[i:])
			if i+size == len(s) {
				return s
			}
			return s[:i] + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s
}

// appendXMLEscaped appends s as XML character data: markup characters
// escaped, invalid UTF-8 and characters XML 1.0 cannot carry replaced by
// U+FFFD.
func appendXMLEscaped(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '&':
				b = append(b, "&amp;"...)
			case c == '<':
				b = append(b, "&lt;"...)
			case c == '>':
				b = append(b, "&gt;"...)
			case c == '"':
				b = append(b, "&quot;"...)
			case c == '\'':
				b = append(b, "&#39;"...)
			case c >= 0x20 || c == '\t' || c == '\n' || c == '\r':
				b = append(b, c)
			default:
				b = append(b, "\uFFFD"...)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !xmlChar(r) {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// xmlChar reports whether XML 1.0 allows r in a document.
func xmlChar(r rune) bool {
	return r == 0x9 || r == 0xA || r == 0xD ||
		(r >= 0x20 && r <= 0xD7FF) ||
		(r >= 0xE000 && r <= 0xFFFD) ||
		(r >= 0x10000 && r <= 0x10FFFF)
}

// fmtDuration renders ns with three significant digits and a unit.
func fmtDuration(ns int64) string {
	neg := ns < 0
	v := math.Abs(float64(ns))
	var out string
	switch {
	case v < 1e3:
		out = strconv.FormatFloat(v, 'f', 0, 64) + " ns"
	case v < 1e6:
		out = sig3(v/1e3) + " µs"
	case v < 1e9:
		out = sig3(v/1e6) + " ms"
	default:
		out = sig3(v/1e9) + " s"
	}
	if neg {
		return "-" + out
	}
	return out
}

func sig3(v float64) string {
	dec := 0
	switch {
	case v < 10:
		dec = 2
	case v < 100:
		dec = 1
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// fmtCount writes n with thousands separators.
func fmtCount(n int) string {
	sign := ""
	u := uint64(n)
	if n < 0 {
		sign, u = "-", uint64(-(n+1))+1
	}
	s := strconv.FormatUint(u, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmtCount(n) + " " + many
}
