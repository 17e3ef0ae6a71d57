package wtf

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// binarySample is a sample with WTF-loader reference tables.
type binarySample struct {
	file      string
	ref       string // reference file prefix
	encoding  string
	events    int64 // raw records
	stored    int64
	zones     []string
	scopes    int64
	maxDepth  int
	frames    int64
	uri       string // wtf.context.uri ("" when the file has none)
	timebase  float64
	marks     int64
	timeRange int64
}

var binarySamples = []binarySample{
	{file: "blk-client.wtf-trace", ref: "gh-pages__resources_traces__blk-client", encoding: "legacy-binary",
		events: 458446, stored: 458232, zones: []string{"Script"}, scopes: 224448, maxDepth: 12, frames: 888,
		uri: "http://localhost:9000/client/game.html?host=local://blk-server-0", timebase: 1367885827385, timeRange: 2},
	{file: "blk-server.wtf-trace", ref: "gh-pages__resources_traces__blk-server", encoding: "legacy-binary",
		events: 315569, stored: 315444, zones: []string{"Script"}, scopes: 139306, maxDepth: 10,
		uri: "server/server.js", timebase: 1356985119409},
	{file: "cff-js-node.wtf-trace", ref: "generated__js-node-2017.10.20-1__cff-v10", encoding: "cff-binary",
		events: 61, stored: 36, zones: []string{"Script"}, scopes: 6, maxDepth: 2,
		uri: "/tmp/scratch/jsgen/gen.js", timebase: 386327.424514, marks: 3, timeRange: 3},
	{file: "cff-js-node.wtf-json", ref: "generated__js-node-2017.10.20-1__cff-v10-json", encoding: "cff-json",
		events: 61, stored: 36, zones: []string{"Script"}, scopes: 6, maxDepth: 2,
		uri: "/tmp/scratch/jsgen/genjson.js", timebase: 424264.878809, marks: 3, timeRange: 3},
	{file: "cff-cpp-bindings.wtf-trace", ref: "generated__cpp-bindings-HEAD__cff-v10", encoding: "cff-binary",
		events: 62, stored: 47, zones: []string{"0:Main", "1:Worker"}, scopes: 14, maxDepth: 2, frames: 3},
}

func TestBinarySamplesMatchReference(t *testing.T) {
	for _, tc := range binarySamples {
		t.Run(tc.file, func(t *testing.T) {
			data := readSample(t, tc.file)
			sum, spans := mustCollect(t, samplePath(tc.file), data)
			d := sum.Details
			if sum.Format != "wtf" || sum.Source != samplePath(tc.file) || sum.Warnings == nil {
				t.Errorf("summary header: %+v", sum)
			}
			if sum.Events != tc.events || d["stored_events"] != tc.stored {
				t.Errorf("events %d stored %v, want %d / %d", sum.Events, d["stored_events"], tc.events, tc.stored)
			}
			if d["encoding"] != tc.encoding || d["zones"] != len(tc.zones) || fmt.Sprint(d["zone_names"]) != fmt.Sprint(tc.zones) {
				t.Errorf("encoding %v zones %v %v, want %s %v", d["encoding"], d["zones"], d["zone_names"], tc.encoding, tc.zones)
			}
			if d["scopes"] != tc.scopes || d["max_depth"] != tc.maxDepth || d["frames"] != tc.frames ||
				d["marks"] != tc.marks || d["time_ranges"] != tc.timeRange {
				t.Errorf("scopes %v depth %v frames %v marks %v ranges %v, want %d %d %d %d %d",
					d["scopes"], d["max_depth"], d["frames"], d["marks"], d["time_ranges"], tc.scopes, tc.maxDepth, tc.frames, tc.marks, tc.timeRange)
			}
			checkSummaryConsistency(t, sum, spans)
			checkEventCounts(t, sum, tc.ref+".eventcounts.tsv")
			checkScopeStats(t, spans, tc.ref+".scopestats.tsv")
			for _, s := range spans {
				thread, _ := attr(s.Attrs, "thread")
				zoneName, _ := attr(s.Attrs, "wtf.zone")
				format, _ := attr(s.Attrs, "source.format")
				file, _ := attr(s.Attrs, "source.file")
				uri, hasURI := attr(s.Attrs, "wtf.context.uri")
				tb, _ := attr(s.Attrs, "wtf.timebase_ms")
				if format.Str != "wtf" || file.Str != tc.file || thread.Str != zoneName.Str || s.Source != trace.SourceWTF ||
					tb.Float != tc.timebase || hasURI != (tc.uri != "") || uri.Str != tc.uri {
					t.Fatalf("span attributes %v", s.Attrs)
				}
			}
		})
	}
}

// checkSummaryConsistency checks Traces, Records and the accounting of
// every event against the emitted spans.
func checkSummaryConsistency(t *testing.T, sum *ingest.Summary, spans []*trace.Span) {
	t.Helper()
	var recs int64
	for _, s := range spans {
		recs += s.Recs
		if s.Recs != s.Root.CountRecords() || s.Calls != s.Root.Calls || s.Calls != s.Recs {
			t.Fatalf("span summary recs %d calls %d, tree %d root calls %d", s.Recs, s.Calls, s.Root.CountRecords(), s.Root.Calls)
		}
	}
	if sum.Traces != int64(len(spans)) || sum.Records != recs {
		t.Errorf("summary traces %d records %d, emitted %d / %d", sum.Traces, sum.Records, len(spans), recs)
	}
	acc := sum.Details["accounting"].(map[string]int64)
	total := acc["definitions"] + acc["zone_events"] + acc["scopes"] + acc["leaves"] + acc["unmatched_leaves"] +
		acc["append_data"] + acc["instance_records"] + acc["dropped"]
	if total != sum.Events {
		t.Errorf("accounting %v sums to %d, events %d", acc, total, sum.Events)
	}
	if acc["scopes"]+acc["instance_records"] != recs {
		t.Errorf("scopes %d + instances %d != records %d", acc["scopes"], acc["instance_records"], recs)
	}
	var perName int64
	for _, n := range sum.Details["events_per_name"].(map[string]int64) {
		perName += n
	}
	if perName != sum.Details["stored_events"].(int64)-acc["dropped"] {
		t.Errorf("events_per_name sums to %d, stored %v", perName, sum.Details["stored_events"])
	}
}

// checkEventCounts compares the stored events per zone and name with WTF's
// eventcounts table.
func checkEventCounts(t *testing.T, sum *ingest.Summary, ref string) {
	t.Helper()
	want := map[string]map[string]int64{}
	wantName := map[string]int64{}
	for _, row := range readTSV(t, ref) {
		if want[row[0]] == nil {
			want[row[0]] = map[string]int64{}
		}
		want[row[0]][row[1]] = atoi(t, row[2])
		wantName[row[1]] += atoi(t, row[2])
	}
	got := sum.Details["events_per_zone"].(map[string]any)
	if len(got) != len(want) {
		t.Errorf("zones with events %d, want %d", len(got), len(want))
	}
	for zone, names := range want {
		g, _ := got[zone].(map[string]int64)
		if fmt.Sprint(g) != fmt.Sprint(names) {
			t.Errorf("zone %q event counts:\n got %v\nwant %v", zone, g, names)
		}
	}
	if fmt.Sprint(sum.Details["events_per_name"]) != fmt.Sprint(wantName) {
		t.Errorf("events_per_name %v, want %v", sum.Details["events_per_name"], wantName)
	}
}

// scopeStat is one row of the emitted records' statistics.
type scopeStat struct {
	count             int64
	total, own, child int64 // ns
}

func recordStats(spans []*trace.Span) map[string]*scopeStat {
	stats := map[string]*scopeStat{}
	walkSpans(spans, func(_ *trace.Span, r *trace.Record, _ int) {
		st := stats[r.Method]
		if st == nil {
			st = &scopeStat{}
			stats[r.Method] = st
		}
		st.count++
		st.total += r.DurationNS
		var child int64
		for _, c := range r.Children {
			child += c.DurationNS
		}
		st.child += child
		st.own += r.DurationNS - child
	})
	return stats
}

// checkScopeStats compares per-name record counts and durations with WTF's
// EventStatistics table (count, total, own and user time in ms).
func checkScopeStats(t *testing.T, spans []*trace.Span, ref string) {
	t.Helper()
	stats := recordStats(spans)
	ms := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
	for _, row := range readTSV(t, ref) {
		name, class, flags := row[0], row[1], atoi(t, row[2])
		st := stats[name]
		if st == nil {
			t.Errorf("%s: no records", name)
			continue
		}
		if st.count != atoi(t, row[3]) {
			t.Errorf("%s: %d records, want %s", name, st.count, row[3])
		}
		if class != "1" {
			continue
		}
		// WTF's user time subtracts the children only for SYSTEM_TIME scopes.
		user := st.total
		if flags&flagSystemTime != 0 {
			user = st.total - st.child
		}
		if ms(st.total) != row[4] || ms(st.own) != row[5] || ms(user) != row[6] {
			t.Errorf("%s: total/own/user %s/%s/%s ms, want %s/%s/%s", name, ms(st.total), ms(st.own), ms(user), row[4], row[5], row[6])
		}
	}
}

// TestRenderTickSearch: a search for source.format=wtf with text renderTick
// finds the gf.Game#renderTick_ scopes of blk-client; they and their nested
// calls have WTF's durations.
func TestRenderTickSearch(t *testing.T) {
	_, spans := mustCollect(t, "blk-client.wtf-trace", readSample(t, "blk-client.wtf-trace"))
	var hits []*trace.Span
	for _, s := range spans {
		if v, _ := attr(s.Attrs, "source.format"); v.Str != "wtf" {
			continue
		}
		found := false
		s.Root.Walk(func(r *trace.Record, _ int) bool {
			found = strings.Contains(r.Method, "renderTick")
			return !found
		})
		if found {
			hits = append(hits, s)
		}
	}
	var ticks []*trace.Record
	nested := map[string]*scopeStat{}
	for _, s := range hits {
		s.Root.Walk(func(r *trace.Record, _ int) bool {
			if r.Method == "gf.Game#renderTick_" {
				ticks = append(ticks, r)
				r.Walk(func(c *trace.Record, _ int) bool {
					st := nested[c.Method]
					if st == nil {
						st = &scopeStat{}
						nested[c.Method] = st
					}
					st.count++
					st.total += c.DurationNS
					return true
				})
				return false
			}
			return true
		})
	}
	if len(hits) == 0 || len(ticks) != 889 {
		t.Fatalf("renderTick search: %d traces, %d renderTick_ scopes, want 889 scopes", len(hits), len(ticks))
	}
	// Calls made only under renderTick_ have exactly the reference totals.
	want := map[string][2]string{}
	for _, row := range readTSV(t, "gh-pages__resources_traces__blk-client.scopestats.tsv") {
		if row[1] == "1" {
			want[row[0]] = [2]string{row[3], row[4]}
		}
	}
	checked := 0
	for _, name := range []string{"gf.Game#renderTick_", "gf.Game#render_", "gf.Game#update_", "blk.game.client.ClientController#render",
		"blk.game.fps.FpsClientController#drawWorld", "blk.env.client.ViewRenderer#render"} {
		st := nested[name]
		w, ok := want[name]
		if st == nil || !ok {
			t.Errorf("%s: not found under renderTick_ (%v) or in reference", name, st)
			continue
		}
		if got := [2]string{strconv.FormatInt(st.count, 10), fmt.Sprintf("%.3f", float64(st.total)/1e6)}; got != w {
			t.Errorf("%s under renderTick_: count/total %v, want %v", name, got, w)
		}
		checked++
	}
	if want["gf.Game#renderTick_"] != [2]string{"889", "5032.572"} {
		t.Errorf("reference renderTick_ row %v", want["gf.Game#renderTick_"])
	}
	t.Logf("%d traces contain renderTick; %d nested names checked", len(hits), checked)
}

// legacyJSONRef is a scope line of the 2013 library's summary.
var scopeLineRE = regexp.MustCompile(`^\s+scope (\S+) t=(\S+) end=(\S+) depth=(\d+) total=(\S+) own=(\S+)$`)

func TestLegacyJSONMatchesReference(t *testing.T) {
	for _, tc := range []struct {
		file, ref string
		events    int64
	}{
		{"legacy-json-combined-1.wtf-json", "test_data__combined-1.summary-2013lib.txt", 9},
		{"legacy-json-combined-2.wtf-json", "test_data__combined-2.summary-2013lib.txt", 9},
		{"legacy-json-deeply-nested.wtf-json", "test_data__deeply-nested.summary-2013lib.txt", 193},
		{"legacy-json-out-of-order.wtf-json", "test_data__out-of-order.summary-2013lib.txt", 14},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sum, spans := mustCollect(t, tc.file, readSample(t, tc.file))
			checkSummaryConsistency(t, sum, spans)
			if sum.Events != tc.events || sum.Details["encoding"] != "legacy-json" {
				t.Errorf("events %d encoding %v, want %d", sum.Events, sum.Details["encoding"], tc.events)
			}
			tb := sum.Details["timebase_ms"].(float64)
			// Our scopes per zone, in time order: "name t end depth total own".
			got := map[string][]string{}
			for _, s := range spans {
				zone, _ := attr(s.Attrs, "thread")
				var walk func(r *trace.Record, depth int)
				walk = func(r *trace.Record, depth int) {
					if r.Method == "wtf.zone#create" {
						return
					}
					start := float64(s.StartNS+r.StartNS)/1e6 - tb
					var child int64
					for _, c := range r.Children {
						child += c.DurationNS
					}
					got[zone.Str] = append(got[zone.Str], fmt.Sprintf("%s t=%g end=%g depth=%d total=%g own=%g", r.Method,
						start, start+float64(r.DurationNS)/1e6, depth, float64(r.DurationNS)/1e6, float64(r.DurationNS-child)/1e6))
					for _, c := range r.Children {
						walk(c, depth+1)
					}
				}
				walk(s.Root, 0)
			}
			want := map[string][]string{}
			wantCounts := map[string]map[string]int64{}
			var zone string
			f, err := os.Open(refPath(tc.ref))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			zoneRE := regexp.MustCompile(`^zone\[\d+\] "([^"]*)" count=(\d+) maxDepth=(\d+)`)
			for sc.Scan() {
				line := sc.Text()
				if m := zoneRE.FindStringSubmatch(line); m != nil {
					zone = m[1]
					want[zone] = nil
				} else if m := scopeLineRE.FindStringSubmatch(line); m != nil {
					want[zone] = append(want[zone], fmt.Sprintf("%s t=%s end=%s depth=%s total=%s own=%s", m[1], m[2], m[3], m[4], m[5], m[6]))
				} else if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "counts "); ok {
					var m map[string]int64
					if err := json.Unmarshal([]byte(rest), &m); err != nil {
						t.Fatal(err)
					}
					wantCounts[zone] = m
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("scopes per zone:\n got %v\nwant %v", got, want)
			}
			perZone := sum.Details["events_per_zone"].(map[string]any)
			for z, counts := range wantCounts {
				if fmt.Sprint(perZone[z]) != fmt.Sprint(counts) {
					t.Errorf("zone %s counts %v, want %v", z, perZone[z], counts)
				}
			}
		})
	}
}

// TestFilesKeepTheirOwnTimebases imports two files together: each keeps its
// own timebase (WTF's loader shifted the second onto the first).
func TestFilesKeepTheirOwnTimebases(t *testing.T) {
	starts := map[string][]int64{}
	ids := map[trace.TraceID]bool{}
	for _, f := range []string{"legacy-json-combined-1.wtf-json", "legacy-json-combined-2.wtf-json"} {
		_, spans := mustCollect(t, f, readSample(t, f))
		for _, s := range spans {
			if s.Type == spanTypeScope {
				starts[f] = append(starts[f], s.StartNS/1e6)
			}
			if ids[s.TraceID] {
				t.Errorf("trace id %s repeated across files", s.TraceID)
			}
			ids[s.TraceID] = true
		}
	}
	// combined-1: timebase 10000 ms + 10000/12000/14000; combined-2: 20000 + 20250/...
	if fmt.Sprint(starts["legacy-json-combined-1.wtf-json"]) != "[20000 22000 24000]" ||
		fmt.Sprint(starts["legacy-json-combined-2.wtf-json"]) != "[40250 42250 44250]" {
		t.Errorf("span starts (ms since epoch) %v", starts)
	}
}

// TestJSSampleArgumentValues checks the decoded value of every argument type
// in the JS CFF sample, binary and JSON, against WTF's dump.
func TestJSSampleArgumentValues(t *testing.T) {
	want := map[string]string{
		"my.app#instant": `{"a":"ascii-text","b":true,"f":1.5,"i16":-30000,"i32":-123456,"i8":-5,"j":{"k":[1,2,3]},"s":"utf8 é中😀","u16":60000,"u32":4276993775,"u8":250}`,
		"my.app#arrays":  `{"a16":[-1,2,-3],"a32":null,"a8":[1,2,3],"af":[0.25],"c":"Z","cs":"chars","fl":0,"t":12.5,"w":"⁂","ws":"⇱⇲"}`,
		"my.app#inner":   `{}`,
	}
	for _, f := range []string{"cff-js-node.wtf-trace", "cff-js-node.wtf-json"} {
		_, spans := mustCollect(t, f, readSample(t, f))
		seen := map[string]int{}
		var ordered []string
		walkSpans(spans, func(s *trace.Span, r *trace.Record, _ int) {
			got := attrsJSON(r.Attrs)
			seen[r.Method]++
			if w, ok := want[r.Method]; ok && got != w {
				t.Errorf("%s %s: args %s\nwant %s", f, r.Method, got, w)
			}
			n := seen[r.Method] - 1
			switch r.Method {
			case "my.app#work":
				if w := fmt.Sprintf(`{"iteration":{"even":%t,"i":%d},"n":%d}`, n%2 == 0, n, n); got != w {
					t.Errorf("%s work: %s, want %s", f, got, w)
				}
				if len(r.Children) != 5 || r.DurationNS <= 0 {
					t.Errorf("%s work: %d children, duration %d", f, len(r.Children), r.DurationNS)
				}
			case "wtf.trace#mark":
				if w := fmt.Sprintf(`{"name":"mark%d","value":{"m":%d}}`, n, n); got != w {
					t.Errorf("%s mark: %s, want %s", f, got, w)
				}
			case "my.app#stamp":
				// WTF drops a timeStamp's value when it renames the event; kept here.
				if w := fmt.Sprintf(`{"value":%d}`, n); got != w {
					t.Errorf("%s stamp: %s, want %s", f, got, w)
				}
			case "wtf.timeRange#begin":
				// The file's ids (WTF's dump shows them renumbered from 1).
				if w := fmt.Sprintf(`{"id":%d,"name":"range%d","value":"v%d"}`, n, n, n); got != w {
					t.Errorf("%s range: %s, want %s", f, got, w)
				}
			case "wtf.flow#branch":
				if w := `{"id":1,"name":"flowA","parentId":0,"value":"fv"}`; got != w {
					t.Errorf("%s branch: %s", f, got)
				}
			case "wtf.flow#extend":
				if w := `{"id":1,"name":"step","value":1}`; got != w {
					t.Errorf("%s extend: %s", f, got)
				}
			case "wtf.flow#terminate":
				if w := `{"id":1,"value":"done"}`; got != w {
					t.Errorf("%s terminate: %s", f, got)
				}
			}
			if r != s.Root {
				return
			}
			ordered = append(ordered, r.Method)
		})
		wantOrder := "[my.app#work my.app#work my.app#work wtf.flow#branch wtf.flow#extend wtf.flow#terminate]"
		if fmt.Sprint(ordered) != wantOrder {
			t.Errorf("%s: top-level %v, want %s", f, ordered, wantOrder)
		}
		if seen["my.app#instant"] != 3 || seen["my.app#arrays"] != 3 || seen["wtf.scope#appendData"] != 0 {
			t.Errorf("%s: records %v", f, seen)
		}
	}
}

// attrsJSON renders attributes as JSON with sorted keys.
func attrsJSON(a trace.Attrs) string {
	var b strings.Builder
	writeAttrsJSON(&b, a)
	return b.String()
}

func writeAttrsJSON(b *strings.Builder, a trace.Attrs) {
	b.WriteByte('{')
	for i, kv := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		b.Write(k)
		b.WriteByte(':')
		writeValueJSON(b, kv.Value)
	}
	b.WriteByte('}')
}

func writeValueJSON(b *strings.Builder, v trace.Value) {
	switch v.Kind {
	case trace.KindNull:
		b.WriteString("null")
	case trace.KindString:
		s, _ := json.Marshal(v.Str)
		b.Write(s)
	case trace.KindInt:
		b.WriteString(strconv.FormatInt(v.Int, 10))
	case trace.KindFloat:
		if v.Float == math.Trunc(v.Float) && math.Abs(v.Float) < 1e15 {
			b.WriteString(strconv.FormatInt(int64(v.Float), 10))
		} else {
			b.WriteString(strconv.FormatFloat(v.Float, 'g', -1, 64))
		}
	case trace.KindBool:
		b.WriteString(strconv.FormatBool(v.Bool))
	case trace.KindList:
		b.WriteByte('[')
		for i, e := range v.List {
			if i > 0 {
				b.WriteByte(',')
			}
			writeValueJSON(b, e)
		}
		b.WriteByte(']')
	case trace.KindMap:
		writeAttrsJSON(b, v.Map)
	}
}

// TestCPPSample checks the C++ bindings sample's zones and arguments.
func TestCPPSample(t *testing.T) {
	_, spans := mustCollect(t, "cff-cpp-bindings.wtf-trace", readSample(t, "cff-cpp-bindings.wtf-trace"))
	var lines []string
	walkSpans(spans, func(s *trace.Span, r *trace.Record, depth int) {
		zone, _ := attr(s.Attrs, "thread")
		if _, ok := attr(s.Attrs, "wtf.zone.type"); ok {
			t.Errorf("zone type is null in the C++ sample, got an attribute")
		}
		loc, _ := attr(s.Attrs, "wtf.zone.location")
		title, _ := attr(s.Attrs, "wtf.context.title")
		if loc.Str != "gen.cc" || title.Str != "C++ Trace" {
			t.Errorf("zone location %v title %v", loc, title)
		}
		lines = append(lines, fmt.Sprintf("%s %d %s %s", zone.Str, depth, r.Method, attrsJSON(r.Attrs)))
	})
	want := []string{
		`0:Main 1 app#Main {}`,
		`0:Main 2 wtf.timing#frameStart {"number":1}`,
		`0:Main 2 app#Leaf {"index":1,"ratio":0.5}`,
		`0:Main 2 app#Instant {}`,
		`0:Main 2 wtf.timing#frameEnd {"number":1}`,
	}
	if len(lines) < 28 || fmt.Sprint(lines[:5]) != fmt.Sprint(want) {
		t.Errorf("records:\n%s", strings.Join(lines, "\n"))
	}
	worker := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "1:Worker 1 app#WorkerLoop ") {
			// __wtf_append_scope_17 (INTERNAL|APPEND_SCOPE_DATA) merged into the scope.
			if !strings.Contains(l, `"big":200`) || !strings.Contains(l, `"iter":`) {
				t.Errorf("append scope data not merged: %s", l)
			}
			worker++
		}
		if strings.Contains(l, "__wtf_append_scope") {
			t.Errorf("append-data event kept as a record: %s", l)
		}
	}
	if worker != 5 {
		t.Errorf("%d WorkerLoop traces, want 5", worker)
	}
}

// cffBinaryToJSON re-expresses a binary CFF file in the JSON form, chunk by
// chunk and part by part (string tables as arrays, buffers as base64).
func cffBinaryToJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	type chunk struct {
		typ   string
		parts []string
	}
	var chunks []*chunk
	last := -1
	for _, p := range cffPartsOf(data) {
		if p.chunk != last {
			ctype := binary.LittleEndian.Uint32(data[p.chunkOff+4:])
			chunks = append(chunks, &chunk{typ: map[uint32]string{chunkFileHeader: "file_header", chunkEventData: "event_data"}[ctype]})
			last = p.chunk
		}
		c := chunks[len(chunks)-1]
		body := data[p.bodyOff : p.bodyOff+p.bodySize]
		switch p.typ {
		case partFileHeader:
			var h map[string]any
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatal(err)
			}
			h["type"] = "file_header"
			b, _ := json.Marshal(h)
			c.parts = append(c.parts, string(b))
		case partStringTable:
			entries := strings.Split(strings.TrimSuffix(string(body), "\x00"), "\x00")
			b, _ := json.Marshal(map[string]any{"type": "string_table", "value": entries})
			c.parts = append(c.parts, string(b))
		case partBinaryEventBuffer:
			b, _ := json.Marshal(map[string]any{"type": "binary_event_buffer", "mode": "base64", "byteLength": len(body), "value": base64.StdEncoding.EncodeToString(body)})
			c.parts = append(c.parts, string(b))
		}
	}
	var out []string
	for i, c := range chunks {
		out = append(out, fmt.Sprintf(`{"id":%d,"type":%q,"parts":[%s]}`, i+1, c.typ, strings.Join(c.parts, ",")))
	}
	return []byte(`{"wtfVersion":1508486400000,"formatVersion":10,"chunks":[` + strings.Join(out, ",\n") + "]}")
}

// TestCFFBinaryAndJSONGiveIdenticalTraces: the JSON form of a binary CFF
// file gives the same traces (ids aside, which hash the file name and
// size); and the two JS samples (separate runs of the same program, binary
// and JSON) give the same traces but for times and the script path.
func TestCFFBinaryAndJSONGiveIdenticalTraces(t *testing.T) {
	strip := func(spans []*trace.Span, keepTimes bool) []string {
		var out []string
		for _, s := range spans {
			c := *s
			c.TraceID, c.SpanID = trace.TraceID{}, 0
			c.Attrs = nil
			for _, a := range s.Attrs {
				if a.Key == "source.file" || a.Key == "wtf.encoding" || (!keepTimes && (strings.HasPrefix(a.Key, "wtf.context.") ||
					strings.HasPrefix(a.Key, "wtf.metadata.") || a.Key == "wtf.timebase_ms" || a.Key == "wtf.zone.location")) {
					continue
				}
				c.Attrs = append(c.Attrs, a)
			}
			var recs []string
			s.Root.Walk(func(r *trace.Record, depth int) bool {
				if keepTimes {
					recs = append(recs, fmt.Sprintf("%d %s %d+%d %s", depth, r.Method, r.StartNS, r.DurationNS, attrsJSON(r.Attrs)))
				} else {
					recs = append(recs, fmt.Sprintf("%d %s %s", depth, r.Method, attrsJSON(r.Attrs)))
				}
				return true
			})
			if !keepTimes {
				c.StartNS, c.DurationNS = 0, 0
			}
			c.Root = nil
			out = append(out, fmt.Sprintf("%+v %s", c, strings.Join(recs, "; ")))
		}
		return out
	}
	for _, f := range []string{"cff-js-node.wtf-trace", "cff-cpp-bindings.wtf-trace"} {
		bin := readSample(t, f)
		_, a := mustCollect(t, f, bin)
		sum, b := mustCollect(t, f+".json", cffBinaryToJSON(t, bin))
		if sum.Details["encoding"] != "cff-json" || len(a) == 0 {
			t.Fatalf("%s: converted file decoded as %v", f, sum.Details["encoding"])
		}
		if x, y := strings.Join(strip(a, true), "\n"), strings.Join(strip(b, true), "\n"); x != y {
			t.Errorf("%s: binary and JSON forms differ:\n%s\n---\n%s", f, x, y)
		}
	}
	_, bin := mustCollect(t, "bin", readSample(t, "cff-js-node.wtf-trace"))
	_, js := mustCollect(t, "json", readSample(t, "cff-js-node.wtf-json"))
	if x, y := strings.Join(strip(bin, false), "\n"), strings.Join(strip(js, false), "\n"); x != y {
		t.Errorf("JS samples differ:\n%s\n---\n%s", x, y)
	}
}
