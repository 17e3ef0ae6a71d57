package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// FuzzExport feeds arbitrary names, attribute text, thread names and times
// (overlapping, negative, extreme) to both exporters: Chrome must write
// valid JSON with one X event per record and properly nested threads, SVG
// a well-formed document drawing every record.
func FuzzExport(f *testing.F) {
	f.Add("main", "k", "v", "T", int64(1e18), int64(0), int64(100), int64(10), int64(50), int64(40), int64(80))
	f.Add(`<b>&"x"</b>`, "k<", `v&"'>`, "", int64(0), int64(-5), int64(-1), int64(0), int64(0), int64(0), int64(0))
	f.Add("\x00\xff\uFFFE", "\x1b", "\u2028</title>", "<t>", int64(-1<<62), int64(1<<62), int64(1<<62), int64(-1<<62), int64(1<<62), int64(9), int64(9))
	f.Add("a", "b", "c", "d", int64(9223372036854775807), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, method, key, val, thread string, spanStart, rootStart, rootDur, aStart, aDur, bStart, bDur int64) {
		a := rec(method+"/a", aStart, aDur)
		a.Attrs.Set(key, trace.String(val))
		b := rec(val, bStart, bDur)
		b.Exception = &trace.Exception{Class: key, Message: val, Stack: []trace.StackFrame{{Class: method, Method: val, File: key, Line: 1}}}
		root := rec(method, rootStart, rootDur, a, b)
		root.Attrs.Set(val, trace.List(trace.Float(float64(aDur)/float64(bDur|1)), trace.String(key)))
		sp := &trace.Span{TraceID: tid(1), SpanID: 1, StartNS: spanStart, Type: key, Source: val, Root: root}
		sp.Attrs.Set("thread", trace.String(thread))
		child := &trace.Span{TraceID: tid(1), SpanID: 2, ParentID: 1, StartNS: spanStart, Root: rec(key, bStart, aDur)}
		child.Attrs.Set("thread", trace.String(thread))
		sp.Children = []*trace.Span{child}
		roots := []*trace.Span{sp}

		var out bytes.Buffer
		if err := Chrome(&out, [][]*trace.Span{roots}); err != nil {
			t.Fatalf("Chrome: %v", err)
		}
		if !json.Valid(out.Bytes()) {
			t.Fatalf("Chrome wrote invalid JSON:\n%s", out.Bytes())
		}
		evs, _ := decodeChrome(t, out.Bytes())
		xs := xEvents(evs)
		if len(xs) != 4 {
			t.Fatalf("%d X events, want 4", len(xs))
		}
		checkProperNesting(t, xs)

		out.Reset()
		if err := SVG(&out, roots, SVGOptions{Title: method}); err != nil {
			t.Fatalf("SVG: %v", err)
		}
		if n := len(recordGroups(parseSVG(t, out.Bytes()))); n != 4 {
			t.Fatalf("SVG draws %d records, want 4", n)
		}
	})
}
