package export

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/trace"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite ../docs/timeline.svg from the blk-client sample")

// svgNode is an element of a parsed SVG document.
type svgNode struct {
	name     string
	attrs    map[string]string
	text     string
	children []*svgNode
}

// parseSVG parses data with the strict XML decoder: a malformed document
// fails the test.
func parseSVG(t testing.TB, data []byte) *svgNode {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := &svgNode{name: "#document"}
	stack := []*svgNode{root}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &svgNode{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top := stack[len(stack)-1]
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			stack[len(stack)-1].text += string(tok)
		}
	}
	if len(root.children) != 1 || root.children[0].name != "svg" {
		t.Fatalf("document root is not <svg>")
	}
	return root.children[0]
}

// recordGroups returns the <g class="r …"> elements: one per drawn record.
func recordGroups(svg *svgNode) []*svgNode {
	var out []*svgNode
	var walk func(n *svgNode)
	walk = func(n *svgNode) {
		if n.name == "g" && strings.HasPrefix(n.attrs["class"], "r") {
			out = append(out, n)
			return
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(svg)
	return out
}

func (n *svgNode) child(name string) *svgNode {
	for _, c := range n.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// allText concatenates the text of every <text> element.
func allText(n *svgNode) string {
	var b strings.Builder
	var walk func(n *svgNode)
	walk = func(n *svgNode) {
		if n.name == "text" {
			b.WriteString(n.text)
			b.WriteString("\n")
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

func TestSVGCrafted(t *testing.T) {
	roots := craftedTrace()
	roots[0].Children[2].Error = true // the root-less span failed
	var out bytes.Buffer
	if err := SVG(&out, roots, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out.Bytes(), []byte("<b>")) {
		t.Errorf("method name written unescaped")
	}
	svg := parseSVG(t, out.Bytes())
	if svg.attrs["width"] != "1400" {
		t.Errorf("width = %q", svg.attrs["width"])
	}
	groups := recordGroups(svg)
	if len(groups) != 7 {
		t.Fatalf("%d record groups, want 7 (6 records and 1 span without records)", len(groups))
	}
	byName := map[string]*svgNode{}
	for _, g := range groups {
		title := g.child("title")
		if title == nil {
			t.Fatalf("record group without <title>")
		}
		name, _, _ := strings.Cut(title.text, "\n")
		byName[name] = g
	}
	for _, tc := range []struct {
		name, class, shape string
		tooltip            []string
	}{
		{"main", "r", "rect", []string{"+0 ns · 1 µs · 4 calls", "span 0000000000000010 (http) on main",
			`list = [1,{"x":true}]`, "ztsd.calls = attr"}},
		{`<b>&"quoted"</b>`, "r", "rect", []string{"+200 ns · 300 ns", `k< = v&"'>`}},
		{"Service.fail", "r e", "rect", []string{"exception java.io.IOException: disk <full>",
			"    at Service.fail(Service.java:42)", "caused by Root: cause"}},
		{"mark", "r", "path", []string{"+900 ns · 0 ns", "f = NaN"}},
		{"still.running", "r o", "rect", []string{"never ended", "on io"}},
		{"same.thread", "r", "rect", []string{"on span 0000000000000011"}},
		{"bare", "r e", "rect", []string{"span 0000000000000013 (bare) on main · span failed"}},
	} {
		g := byName[tc.name]
		if g == nil {
			t.Errorf("no record %q", tc.name)
			continue
		}
		if g.attrs["class"] != tc.class {
			t.Errorf("%q: class %q, want %q", tc.name, g.attrs["class"], tc.class)
		}
		if g.child(tc.shape) == nil {
			t.Errorf("%q: no <%s>", tc.name, tc.shape)
		}
		tip := g.child("title").text
		for _, want := range tc.tooltip {
			if !strings.Contains(tip, want) {
				t.Errorf("%q: tooltip %q lacks %q", tc.name, tip, want)
			}
		}
	}
	text := allText(svg)
	for _, want := range []string{"main\n", "io\n", "span 0000000000000011\n", "trace 00000000000000000000000000000001",
		"6 records · 4 spans · 3 threads · 1 µs"} {
		if !strings.Contains(text, want) {
			t.Errorf("picture text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Showing") {
		t.Errorf("cap note without a cap")
	}
}

func TestSVGCap(t *testing.T) {
	root := rec("root", 0, 1_000_000)
	for i := range 99 {
		root.Children = append(root.Children, rec(fmt.Sprintf("c%02d", i), int64(i)*10_000, int64(i+1)*100))
	}
	sp := &trace.Span{TraceID: tid(1), SpanID: 1, StartNS: 1e18, Root: root}
	var out bytes.Buffer
	if err := SVG(&out, []*trace.Span{sp}, SVGOptions{MaxRecords: 10, Width: 800}); err != nil {
		t.Fatal(err)
	}
	svg := parseSVG(t, out.Bytes())
	if svg.attrs["width"] != "800" {
		t.Errorf("width = %q", svg.attrs["width"])
	}
	groups := recordGroups(svg)
	if len(groups) != 10 {
		t.Fatalf("%d records drawn, want 10", len(groups))
	}
	var drawn []string
	for _, g := range groups {
		name, _, _ := strings.Cut(g.child("title").text, "\n")
		drawn = append(drawn, name)
	}
	// The root, then the nine longest children (c90..c98), in input order.
	if want := "root c90 c91 c92 c93 c94 c95 c96 c97 c98"; strings.Join(drawn, " ") != want {
		t.Errorf("drawn %v, want %s", drawn, want)
	}
	if !strings.Contains(allText(svg), "Showing 10 of 100 records (the shallowest and longest): 90 were left out") {
		t.Errorf("no cap note:\n%s", allText(svg))
	}
}

func TestSVGOptionErrors(t *testing.T) {
	sp := []*trace.Span{{TraceID: tid(1), SpanID: 1, Root: rec("m", 0, 1)}}
	for _, opt := range []SVGOptions{{Width: 100}, {Width: MaxSVGWidth + 1}, {MaxRecords: -1}, {MaxRecords: MaxSVGMaxRecords + 1}} {
		if err := SVG(io.Discard, sp, opt); err == nil {
			t.Errorf("SVG with %+v: no error", opt)
		}
	}
	if err := SVG(io.Discard, nil, SVGOptions{}); !errors.Is(err, ErrNoRecords) {
		t.Errorf("SVG of nothing: %v", err)
	}
}

// Text XML cannot carry still yields a well-formed document.
func TestSVGHostileText(t *testing.T) {
	r := rec("a\x00b\x01\xff\uFFFE<![CDATA[]]>&amp;\u2028", 0, 10)
	r.Attrs.Set("\x1b[31m", trace.String("\x00</title><script>alert(1)</script>"))
	r.Exception = &trace.Exception{Class: "\x7f", Message: "\ud7ff"}
	sp := &trace.Span{TraceID: tid(1), SpanID: 1, Root: r, Type: "\x02"}
	sp.Attrs.Set("thread", trace.String("<lane>\x03"))
	var out bytes.Buffer
	if err := SVG(&out, []*trace.Span{sp}, SVGOptions{Title: "</text>\x04"}); err != nil {
		t.Fatal(err)
	}
	svg := parseSVG(t, out.Bytes())
	if bytes.Contains(out.Bytes(), []byte("<script")) {
		t.Errorf("script element written")
	}
	g := recordGroups(svg)
	if len(g) != 1 || !strings.Contains(g[0].child("title").text, "</title><script>") {
		t.Errorf("tooltip lost the escaped text")
	}
	if !strings.Contains(allText(svg), "<lane>\uFFFD") {
		t.Errorf("lane label not escaped and replaced:\n%s", allText(svg))
	}
}

func TestNiceStepAndDurations(t *testing.T) {
	for _, tc := range []struct{ raw, want float64 }{{0.5, 1}, {1, 1}, {1.5, 2}, {3, 5}, {7, 10}, {120, 200}, {1e6, 1e6}, {2.1e6, 5e6}} {
		if got := niceStep(tc.raw); got != tc.want {
			t.Errorf("niceStep(%g) = %g, want %g", tc.raw, got, tc.want)
		}
	}
	for _, tc := range []struct {
		ns   int64
		want string
	}{{0, "0 ns"}, {999, "999 ns"}, {1000, "1 µs"}, {1234, "1.23 µs"}, {12345, "12.3 µs"}, {123456, "123 µs"},
		{8_860_000, "8.86 ms"}, {2_500_000_000, "2.5 s"}, {-1500, "-1.5 µs"}} {
		if got := fmtDuration(tc.ns); got != tc.want {
			t.Errorf("fmtDuration(%d) = %q, want %q", tc.ns, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {224448, "224,448"}, {-1234567, "-1,234,567"}} {
		if got := fmtCount(tc.n); got != tc.want {
			t.Errorf("fmtCount(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := truncate("abcdef", 4); got != "abc…" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("ab😀", 3); got != "ab😀" {
		t.Errorf("truncate kept = %q", got)
	}
}

// The README's picture: one requestAnimationFrame callback of the BLK
// client (a WTF legacy binary trace), 685 records, depth 11.
const (
	docsSample  = "wtf/blk-client.wtf-trace"
	docsTraceID = "4146e2a4b71cf124f4a50e366484298f"
	docsSVG     = "../docs/timeline.svg"
)

func docsTrace(t testing.TB) ([]*trace.Span, int) {
	traces, _ := loadCached(t, "wtf", docsSample)
	for _, roots := range traces {
		if roots[0].TraceID.String() == docsTraceID {
			n := 0
			for _, sp := range roots {
				n += int(sp.Root.CountRecords())
			}
			return roots, n
		}
	}
	t.Fatalf("trace %s not in %s", docsTraceID, docsSample)
	return nil, 0
}

// TestDocsTimeline checks docs/timeline.svg is a rendering of the docs
// trace; with -update-docs (go generate ./export) it rewrites it.
func TestDocsTimeline(t *testing.T) {
	roots, nrec := docsTrace(t)
	var fresh bytes.Buffer
	if err := SVG(&fresh, roots, SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := os.WriteFile(docsSVG, fresh.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d bytes, %d records", docsSVG, fresh.Len(), nrec)
	}
	data, err := os.ReadFile(docsSVG)
	if err != nil {
		t.Fatalf("%v (run go generate ./export)", err)
	}
	svg := parseSVG(t, data)
	if got := len(recordGroups(svg)); got != nrec || nrec != 685 {
		t.Errorf("%s draws %d records; the trace has %d, want 685", docsSVG, got, nrec)
	}
	if !strings.Contains(allText(svg), "trace "+docsTraceID) {
		t.Errorf("%s does not name trace %s", docsSVG, docsTraceID)
	}
	if !bytes.Equal(data, fresh.Bytes()) {
		t.Logf("note: %s differs from a fresh rendering; run go generate ./export to refresh it", docsSVG)
	}
}

// chromiumPath finds Debian's headless-capable chromium.
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	return ""
}

// screenshot renders an SVG file with headless Chromium and decodes the PNG.
// A Chromium that dies by a signal before it writes the PNG (CI saw one
// segfault 1.6 s into a start, under the load of the race-built test
// binaries beside it) is started again, with a new profile, up to three
// times in all: the test is of the SVG, and a browser crash says nothing
// of it. Any other failure, and every check of the picture, fails at once.
func screenshot(t *testing.T, chromium, svgPath string) image.Image {
	t.Helper()
	abs, err := filepath.Abs(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	const starts = 3
	var pngPath string
	var outErr []byte
	for start := 1; ; start++ {
		dir := t.TempDir()
		pngPath = filepath.Join(dir, "out.png")
		outErr, err = runChromium(chromium, dir, pngPath, "file://"+abs)
		if err == nil {
			break
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && !exit.Exited() && start < starts {
			t.Logf("chromium start %d of %d died (%v), starting it again:\n%s", start, starts, err, outErr)
			continue
		}
		t.Fatalf("chromium (start %d of %d): %v\n%s", start, starts, err, outErr)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatalf("chromium wrote no PNG: %v\n%s", err, outErr)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("chromium's PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 900 {
		t.Errorf("screenshot is %dx%d, want 1400x900", b.Dx(), b.Dy())
	}
	return img
}

// runChromium has Chromium render url into pngPath, with its profile and
// HOME in dir, and returns what it printed.
func runChromium(chromium, dir, pngPath, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+pngPath,
		"--window-size=1400,900", url)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	return cmd.CombinedOutput()
}

// countColor counts pixels of exactly the colour hex ("#rrggbb").
func countColor(img image.Image, hex string) int {
	var r0, g0, b0 uint32
	fmt.Sscanf(hex, "#%02x%02x%02x", &r0, &g0, &b0)
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r>>8 == r0 && g>>8 == g0 && bb>>8 == b0 {
				n++
			}
		}
	}
	return n
}

// TestSVGChromium renders docs/timeline.svg and the crafted trace with
// headless Chromium: both must render (an XML error would show Chromium's
// error page instead), with the records' colours, errors in red.
func TestSVGChromium(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		t.Skip("chromium not installed (apt-get install chromium)")
	}
	roots, _ := docsTrace(t)
	img := screenshot(t, chromium, docsSVG)
	rootColor := colorOf(roots[0].Root.Method)
	if n := countColor(img, rootColor); n < 5000 {
		t.Errorf("docs timeline: %d pixels of the root record's colour %s, want a drawn bar", n, rootColor)
	}
	if n := countColor(img, "#d62839"); n > 300 {
		t.Errorf("docs timeline: %d red pixels in a trace without errors (only the legend's swatch is red)", n)
	}

	crafted := filepath.Join(t.TempDir(), "crafted.svg")
	var buf bytes.Buffer
	if err := SVG(&buf, craftedTrace(), SVGOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crafted, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	img = screenshot(t, chromium, crafted)
	// Service.fail lasts 100 of the trace's 1000 ns: about 120 px × 15 px of red.
	if n := countColor(img, "#d62839"); n < 1000+264 {
		t.Errorf("crafted trace: %d red pixels, want the error record drawn red", n)
	}
}

// TestSVGExactNanoseconds: times are subtracted in integers before they
// become floats, so a record at +100 ns for 150 ns of a span that starts
// at an epoch time (~1.7e18, where float64 steps are 256 ns) is drawn at
// +100..250 ns, not snapped to 0..256.
func TestSVGExactNanoseconds(t *testing.T) {
	const start = 1_700_000_000_123_456_789
	sp := &trace.Span{TraceID: trace.TraceID{1}, SpanID: 1, StartNS: start, DurationNS: 1000, Calls: 1, Recs: 2,
		Attrs: trace.Attrs{{Key: "thread", Value: trace.String("main")}},
		Root: &trace.Record{Method: "root", DurationNS: 1000, Calls: 1,
			Children: []*trace.Record{{Method: "call", StartNS: 100, DurationNS: 150, Calls: 1}}}}
	var out bytes.Buffer
	if err := SVG(&out, []*trace.Span{sp}, SVGOptions{Width: 1214}); err != nil {
		t.Fatal(err)
	}
	scale := (1214 - svgLabelW - svgPadRight) / 1000 // px per ns: exactly 1
	rects := map[string][2]float64{}
	for _, g := range recordGroups(parseSVG(t, out.Bytes())) {
		name, _, _ := strings.Cut(g.child("title").text, "\n")
		r := g.child("rect")
		if r == nil {
			t.Fatalf("%s: no rect", name)
		}
		x, _ := strconv.ParseFloat(r.attrs["x"], 64)
		w, _ := strconv.ParseFloat(r.attrs["width"], 64)
		rects[name] = [2]float64{x, w}
	}
	for name, want := range map[string][2]float64{"root": {svgLabelW, 1000 * scale}, "call": {svgLabelW + 100*scale, 150 * scale}} {
		if got := rects[name]; math.Abs(got[0]-want[0]) > 0.01 || math.Abs(got[1]-want[1]) > 0.01 {
			t.Errorf("%s drawn at x=%.2f width %.2f, want x=%.2f width %.2f", name, got[0], got[1], want[0], want[1])
		}
	}
}
