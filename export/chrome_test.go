package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// rec builds a record: start and duration in ns from the span start.
func rec(method string, start, dur int64, children ...*trace.Record) *trace.Record {
	return &trace.Record{Method: method, StartNS: start, DurationNS: dur, Calls: 1, Children: children}
}

func tid(b byte) trace.TraceID { return trace.TraceID{15: b} }

// craftedTrace is one trace of two spans on thread "main" plus a child span
// on thread "io", with every record feature the exporters handle.
func craftedTrace() []*trace.Span {
	inner := rec(`<b>&"quoted"</b>`, 200, 300)
	inner.Attrs.Set("k<", trace.String(`v&"'>`))
	boom := rec("Service.fail", 600, 100)
	boom.Exception = &trace.Exception{Class: "java.io.IOException", Message: "disk <full>",
		Stack: []trace.StackFrame{{Class: "Service", Method: "fail", File: "Service.java", Line: 42}},
		Cause: &trace.Exception{Class: "Root", Message: "cause"}}
	mark := rec("mark", 900, 0)
	mark.Attrs.Set("f", trace.Float(math.NaN()))
	mark.Attrs.Set("ztsd.calls", trace.Int(7)) // collides only where ztsd.calls is written
	root := rec("main", 0, 1000, inner, boom, mark)
	root.Calls = 4
	root.Attrs.Set("list", trace.List(trace.Int(1), trace.MapValue(trace.Attrs{{Key: "x", Value: trace.Bool(true)}})))
	root.Attrs.Set("ztsd.calls", trace.String("attr"))
	open := rec("still.running", 0, 50)
	open.Open = true

	parent := &trace.Span{TraceID: tid(1), SpanID: 0x10, StartNS: 1_000_000_000_000, DurationNS: 1000,
		Source: "json", Type: "http", Root: root}
	parent.Attrs.Set("thread", trace.String("main"))
	same := &trace.Span{TraceID: tid(1), SpanID: 0x11, ParentID: 0x10, StartNS: 1_000_000_000_250, DurationNS: 100,
		Source: "json", Root: rec("same.thread", 0, 100)} // inside "<b>…", a new thread: own lane
	io := &trace.Span{TraceID: tid(1), SpanID: 0x12, ParentID: 0x10, StartNS: 1_000_000_000_100, DurationNS: 50,
		Source: "json", Root: open}
	io.Attrs.Set("thread", trace.String("io"))
	noRoot := &trace.Span{TraceID: tid(1), SpanID: 0x13, ParentID: 0x10, StartNS: 1_000_000_000_700, DurationNS: 10,
		Source: "json", Type: "bare"}
	noRoot.Attrs.Set("thread", trace.String("main"))
	return trace.AssembleTree([]*trace.Span{parent, same, io, noRoot})
}

func TestChromeCrafted(t *testing.T) {
	var out bytes.Buffer
	if err := Chrome(&out, [][]*trace.Span{craftedTrace()}); err != nil {
		t.Fatal(err)
	}
	evs, other := decodeChrome(t, out.Bytes())
	xs := xEvents(evs)
	names := threadNames(evs)

	type want struct {
		name, thread string
		ts, dur      int64
	}
	const base = 1_000_000_000_000
	wants := []want{
		{"main", "main", base, 1000},
		{`<b>&"quoted"</b>`, "main", base + 200, 300},
		{"Service.fail", "main", base + 600, 100},
		{"mark", "main", base + 900, 0},
		{"still.running", "io", base + 100, 50},
		{"same.thread", "span 0000000000000011", base + 250, 100},
		{"bare", "main", base + 700, 10},
	}
	if len(xs) != len(wants) {
		t.Fatalf("%d X events, want %d:\n%s", len(xs), len(wants), out.String())
	}
	for i, w := range wants {
		x := xs[i]
		if x.Name != w.name || x.TS != w.ts || x.Dur != w.dur || names[[2]int{x.Pid, x.Tid}] != w.thread || x.Pid != 1 {
			t.Errorf("event %d = %q ts %d dur %d pid %d thread %q, want %+v", i, x.Name, x.TS, x.Dur, x.Pid,
				names[[2]int{x.Pid, x.Tid}], w)
		}
	}
	checkProperNesting(t, xs)

	// Process metadata: no source file, so one process per trace.
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "process_name" && e.Args["name"] != "trace 00000000000000000000000000000001 (json)" {
			t.Errorf("process_name = %v", e.Args["name"])
		}
	}
	if other["records"] != float64(6) || other["spans"] != float64(4) || other["traces"] != float64(1) {
		t.Errorf("otherData = %v", other)
	}

	// Args: attributes, reserved entries, renamed collisions.
	root := xs[0].Args
	if root["ztsd.calls"] != json.Number("4") || root["ztsd.calls (attribute)"] != "attr" {
		t.Errorf("root args calls: %v", root)
	}
	if l, ok := root["list"].([]any); !ok || len(l) != 2 || l[0] != json.Number("1") || l[1].(map[string]any)["x"] != true {
		t.Errorf("root list arg = %#v", root["list"])
	}
	span, ok := root["ztsd.span"].(map[string]any)
	if !ok || span["span_id"] != "0000000000000010" || span["trace_id"] != "00000000000000000000000000000001" ||
		span["type"] != "http" || span["attrs"].(map[string]any)["thread"] != "main" {
		t.Errorf("root ztsd.span = %#v", root["ztsd.span"])
	}
	if xs[1].Args["k<"] != `v&"'>` || xs[1].Args["ztsd.span"] != nil {
		t.Errorf("inner args = %v", xs[1].Args)
	}
	exc, ok := xs[2].Args["ztsd.exception"].(map[string]any)
	if !ok || exc["class"] != "java.io.IOException" || exc["message"] != "disk <full>" ||
		exc["stack"].([]any)[0] != "Service.fail(Service.java:42)" || exc["cause"].(map[string]any)["class"] != "Root" {
		t.Errorf("exception args = %#v", xs[2].Args)
	}
	if xs[2].Cname != "terrible" || xs[1].Cname != "" {
		t.Errorf("cname: error %q, plain %q", xs[2].Cname, xs[1].Cname)
	}
	if f, _ := xs[3].Args["f"].(map[string]any); f["$float"] != "NaN" || xs[3].Args["ztsd.calls"] != json.Number("7") {
		t.Errorf("mark args = %v", xs[3].Args)
	}
	if xs[4].Args["ztsd.open"] != true {
		t.Errorf("open args = %v", xs[4].Args)
	}
	if xs[6].Args["ztsd.span"].(map[string]any)["type"] != "bare" {
		t.Errorf("root-less span args = %v", xs[6].Args)
	}
}

func TestChromeProcesses(t *testing.T) {
	mk := func(id byte, file string, start int64) []*trace.Span {
		sp := &trace.Span{TraceID: tid(id), SpanID: trace.SpanID(id), StartNS: start, Source: "wtf", Root: rec("m", 0, 10)}
		if file != "" {
			sp.Attrs.Set("source.file", trace.String(file))
			sp.Attrs.Set("source.format", trace.String("wtf"))
		}
		sp.Attrs.Set("thread", trace.String("Script"))
		return []*trace.Span{sp}
	}
	traces := [][]*trace.Span{mk(1, "a.wtf-trace", 100), mk(2, "b.wtf-trace", 0), mk(3, "a.wtf-trace", 200), mk(4, "", 0)}
	var out bytes.Buffer
	if err := Chrome(&out, traces); err != nil {
		t.Fatal(err)
	}
	evs, _ := decodeChrome(t, out.Bytes())
	procs := map[int]string{}
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "process_name" {
			procs[e.Pid] = e.Args["name"].(string)
		}
	}
	want := map[int]string{1: "a.wtf-trace (wtf)", 2: "b.wtf-trace (wtf)", 3: "trace 00000000000000000000000000000004 (wtf)"}
	if len(procs) != len(want) {
		t.Fatalf("processes %v, want %v", procs, want)
	}
	for pid, n := range want {
		if procs[pid] != n {
			t.Errorf("pid %d = %q, want %q", pid, procs[pid], n)
		}
	}
	xs := xEvents(evs)
	if xs[0].Pid != 1 || xs[1].Pid != 2 || xs[2].Pid != 1 || xs[3].Pid != 3 || xs[0].Tid != xs[2].Tid {
		t.Errorf("pids/tids %d/%d %d/%d %d/%d %d/%d", xs[0].Pid, xs[0].Tid, xs[1].Pid, xs[1].Tid, xs[2].Pid, xs[2].Tid, xs[3].Pid, xs[3].Tid)
	}
}

// Overlapping siblings and spans of one thread go to overflow lanes; the
// output stays properly nested per thread.
func TestChromeOverflowLanes(t *testing.T) {
	a := rec("a", 0, 100)
	b := rec("b", 50, 100) // overlaps a without nesting
	c := rec("c", 60, 10)  // inside b (and a): stays with its parent b
	b.Children = []*trace.Record{c}
	root := rec("root", 0, 200, a, b)
	sp := &trace.Span{TraceID: tid(1), SpanID: 1, StartNS: 1000, Root: root}
	sp.Attrs.Set("thread", trace.String("T"))
	// A second trace on thread T overlapping the first's root partially:
	// it fits on the overflow lane once b has ended.
	other := &trace.Span{TraceID: tid(2), SpanID: 2, StartNS: 1150, Root: rec("late", 0, 100)}
	other.Attrs.Set("thread", trace.String("T"))
	other.Attrs.Set("source.file", trace.String("f"))
	sp.Attrs.Set("source.file", trace.String("f"))

	var out bytes.Buffer
	if err := Chrome(&out, [][]*trace.Span{{sp}, {other}}); err != nil {
		t.Fatal(err)
	}
	evs, _ := decodeChrome(t, out.Bytes())
	xs := xEvents(evs)
	names := threadNames(evs)
	lane := func(i int) string { return names[[2]int{xs[i].Pid, xs[i].Tid}] }
	got := []string{lane(0), lane(1), lane(2), lane(3), lane(4)}
	want := []string{"T", "T", "T #2", "T #2", "T #2"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lanes %v, want %v", got, want)
		}
	}
	checkProperNesting(t, xs)
}

// The acceptance test: the Chrome export of imported WTF and dial9 traces
// is valid JSON with one X event per stored record, at the stored times,
// nested as stored.
func TestChromeSamples(t *testing.T) {
	cases := []struct {
		format, file string
		threads      []string // thread names expected in the first process
		spans        int
	}{
		{"wtf", "wtf/cff-cpp-bindings.wtf-trace", []string{"0:Main", "1:Worker"}, 6},
		{"wtf", "wtf/cff-js-node.wtf-trace", []string{"Script"}, 6},
		{"wtf", "wtf/legacy-json-deeply-nested.wtf-json", nil, 6},
		{"dial9", "dial9/demo-2026-03-18-small.bin", nil, 3125},
		{"atf", "atf/clean", []string{"thread_0", "thread_1"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			traces, nrec := loadSample(t, tc.format, tc.file)
			var out bytes.Buffer
			if err := Chrome(&out, traces); err != nil {
				t.Fatal(err)
			}
			evs, other := decodeChrome(t, out.Bytes())
			xs := xEvents(evs)
			stored := flattenRecords(traces)
			if len(xs) != nrec || len(stored) != nrec {
				t.Fatalf("%d X events, %d records walked, %d records imported", len(xs), len(stored), nrec)
			}
			if other["records"] != float64(nrec) {
				t.Errorf("otherData.records = %v, want %d", other["records"], nrec)
			}
			if tc.spans > 0 && other["spans"] != float64(tc.spans) {
				t.Errorf("otherData.spans = %v, want %d", other["spans"], tc.spans)
			}
			names := threadNames(evs)
			spanRoots := 0
			for i, x := range xs {
				s := stored[i]
				if x.Name != s.rec.Method || x.TS != s.start || x.Dur != s.rec.DurationNS {
					t.Fatalf("event %d = %q at %d for %d ns, stored record %q at %d for %d ns",
						i, x.Name, x.TS, x.Dur, s.rec.Method, s.start, s.rec.DurationNS)
				}
				if s.parent < 0 {
					spanRoots++
					if sa, _ := x.Args["ztsd.span"].(map[string]any); sa["span_id"] != s.span.SpanID.String() {
						t.Fatalf("event %d: ztsd.span %v, want span %s", i, x.Args["ztsd.span"], s.span.SpanID)
					}
					want, _ := threadKey(s.span)
					if got := names[[2]int{x.Pid, x.Tid}]; got != want {
						t.Fatalf("span %s on thread %q, want %q", s.span.SpanID, got, want)
					}
					continue
				}
				p := xs[s.parent]
				if p.Pid != x.Pid || p.Tid != x.Tid {
					t.Fatalf("event %d %q on %d/%d, its parent %q on %d/%d", i, x.Name, x.Pid, x.Tid, p.Name, p.Pid, p.Tid)
				}
				if x.TS < p.TS || x.TS+x.Dur > p.TS+p.Dur {
					t.Fatalf("event %d %q [%d,+%d] outside its parent %q [%d,+%d]", i, x.Name, x.TS, x.Dur, p.Name, p.TS, p.Dur)
				}
			}
			checkProperNesting(t, xs)
			for key, n := range names {
				if strings.Contains(n, " #") {
					t.Errorf("overflow lane %q (pid %d tid %d): the sample's threads should nest", n, key[0], key[1])
				}
			}
			if tc.threads != nil {
				var got []string
				for _, e := range evs {
					if e.Ph == "M" && e.Name == "thread_name" && e.Pid == 1 {
						got = append(got, e.Args["name"].(string))
					}
				}
				if strings.Join(got, ",") != strings.Join(tc.threads, ",") {
					t.Errorf("threads %v, want %v", got, tc.threads)
				}
			}
			t.Logf("%d traces, %d spans, %d records, %d threads, %d bytes", len(traces), spanRoots, nrec, len(names), out.Len())
		})
	}
}

func TestAppendMicros(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{
		{0, "0"}, {1, "0.001"}, {10, "0.01"}, {999, "0.999"}, {1000, "1"}, {1500, "1.5"},
		{1367885827905943123, "1367885827905943.123"}, {-1500, "-1.5"},
		{math.MaxInt64, "9223372036854775.807"}, {math.MinInt64, "-9223372036854775.808"},
	} {
		if got := string(appendMicros(nil, tc.ns)); got != tc.want {
			t.Errorf("appendMicros(%d) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	in := "a\"b\\c\n\t\x01\x7f\xff é\u2028😀"
	got := appendJSONString(nil, in)
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	want := "a\"b\\c\n\t\x01\x7f\ufffd é\u2028😀"
	if back != want {
		t.Errorf("round trip %q, want %q", back, want)
	}
}

type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errDiskFull
	}
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	traces, _ := loadSample(t, "dial9", "dial9/demo-2026-03-18-small.bin")
	if err := Chrome(&failWriter{n: 100 << 10}, traces); !errors.Is(err, errDiskFull) {
		t.Errorf("Chrome on a failing writer: %v", err)
	}
	if err := SVG(&failWriter{n: 1000}, traces[0], SVGOptions{}); !errors.Is(err, errDiskFull) {
		t.Errorf("SVG on a failing writer: %v", err)
	}
}

func TestChromeDeepTree(t *testing.T) {
	root := rec("r0", 0, 1<<20)
	r := root
	for i := 1; i <= trace.MaxDepth; i++ {
		c := rec("r", int64(i), int64(1<<20-2*i))
		r.Children = []*trace.Record{c}
		r = c
	}
	sp := &trace.Span{TraceID: tid(1), SpanID: 1, Root: root}
	if err := Chrome(&bytes.Buffer{}, [][]*trace.Span{{sp}}); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("tree deeper than MaxDepth: %v", err)
	}
}
