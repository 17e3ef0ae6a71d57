package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/ingest/atf"
	"github.com/ztsd/ztsd/ingest/dial9"
	"github.com/ztsd/ztsd/ingest/wtf"
	"github.com/ztsd/ztsd/trace"
)

// testdata is the shared sample directory, relative to this package.
const testdata = "../../shared/testdata"

type importFunc func(context.Context, string, ingest.Options, ingest.Emit) (*ingest.Summary, error)

var importers = map[string]importFunc{"wtf": wtf.Import, "dial9": dial9.Import, "atf": atf.Import}

// loadSample imports a sample and returns its traces, each assembled into
// root spans with child spans, in the order their first span was emitted,
// and the number of records.
func loadSample(tb testing.TB, format, rel string) ([][]*trace.Span, int) {
	tb.Helper()
	path := filepath.Join(testdata, rel)
	var byTrace = map[trace.TraceID][]*trace.Span{}
	var order []trace.TraceID
	records := 0
	_, err := importers[format](context.Background(), path, ingest.Options{}, func(sp *trace.Span) error {
		if _, ok := byTrace[sp.TraceID]; !ok {
			order = append(order, sp.TraceID)
		}
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], sp)
		records += int(sp.Root.CountRecords())
		return nil
	})
	if err != nil {
		tb.Fatalf("import %s: %v", path, err)
	}
	traces := make([][]*trace.Span, 0, len(order))
	for _, id := range order {
		traces = append(traces, trace.AssembleTree(byTrace[id]))
	}
	return traces, records
}

// cachedSample loads a sample once per test binary (benchmarks and the
// docs picture share blk-client).
var cachedSample = struct {
	sync.Mutex
	m map[string]cached
}{m: map[string]cached{}}

type cached struct {
	traces  [][]*trace.Span
	records int
}

func loadCached(tb testing.TB, format, rel string) ([][]*trace.Span, int) {
	cachedSample.Lock()
	defer cachedSample.Unlock()
	if c, ok := cachedSample.m[rel]; ok {
		return c.traces, c.records
	}
	traces, n := loadSample(tb, format, rel)
	cachedSample.m[rel] = cached{traces, n}
	return traces, n
}

// chromeEvent is one decoded Chrome trace event, times in exact ns.
type chromeEvent struct {
	Name  string
	Cat   string
	Ph    string
	TS    int64
	Dur   int64
	Pid   int
	Tid   int
	Cname string
	Args  map[string]any
}

// decodeChrome parses Chrome Trace Event JSON strictly enough for tests:
// the document must be valid JSON with the expected top-level members, and
// ts/dur are converted from their decimal text exactly.
func decodeChrome(t *testing.T, data []byte) (events []chromeEvent, other map[string]any) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("chrome export is not valid JSON")
	}
	var doc struct {
		TraceEvents     []map[string]json.RawMessage `json:"traceEvents"`
		DisplayTimeUnit string                       `json:"displayTimeUnit"`
		OtherData       map[string]any               `json:"otherData"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode chrome export: %v", err)
	}
	if doc.DisplayTimeUnit != "ns" {
		t.Errorf("displayTimeUnit = %q", doc.DisplayTimeUnit)
	}
	for i, raw := range doc.TraceEvents {
		var ev chromeEvent
		str := func(k string) string {
			var s string
			if m, ok := raw[k]; ok {
				if err := json.Unmarshal(m, &s); err != nil {
					t.Fatalf("event %d: %s: %v", i, k, err)
				}
			}
			return s
		}
		num := func(k string) int64 {
			m, ok := raw[k]
			if !ok {
				return 0
			}
			ns, err := parseMicrosNS(string(m))
			if err != nil {
				t.Fatalf("event %d: %s=%s: %v", i, k, m, err)
			}
			return ns
		}
		integer := func(k string) int {
			var n int
			if err := json.Unmarshal(raw[k], &n); err != nil {
				t.Fatalf("event %d: %s: %v", i, k, err)
			}
			return n
		}
		ev.Name, ev.Cat, ev.Ph, ev.Cname = str("name"), str("cat"), str("ph"), str("cname")
		ev.TS, ev.Dur = num("ts"), num("dur")
		ev.Pid, ev.Tid = integer("pid"), integer("tid")
		if a, ok := raw["args"]; ok {
			d := json.NewDecoder(bytes.NewReader(a))
			d.UseNumber()
			if err := d.Decode(&ev.Args); err != nil {
				t.Fatalf("event %d: args: %v", i, err)
			}
		}
		events = append(events, ev)
	}
	return events, doc.OtherData
}

// parseMicrosNS converts a JSON number of microseconds with at most three
// decimals to nanoseconds exactly.
func parseMicrosNS(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 {
		return 0, fmt.Errorf("more than three decimals")
	}
	neg := strings.HasPrefix(whole, "-")
	w, err := strconv.ParseInt(strings.TrimPrefix(whole, "-"), 10, 64)
	if err != nil {
		return 0, err
	}
	f := int64(0)
	if frac != "" {
		f, err = strconv.ParseInt((frac + "00")[:3], 10, 64)
		if err != nil {
			return 0, err
		}
	}
	if neg {
		return -(w * 1000) - f, nil
	}
	return w*1000 + f, nil
}

// xEvents returns the X events.
func xEvents(evs []chromeEvent) []chromeEvent {
	var out []chromeEvent
	for _, e := range evs {
		if e.Ph == "X" {
			out = append(out, e)
		}
	}
	return out
}

// threadNames maps (pid, tid) to its thread_name.
func threadNames(evs []chromeEvent) map[[2]int]string {
	m := map[[2]int]string{}
	for _, e := range evs {
		if e.Ph == "M" && e.Name == "thread_name" {
			m[[2]int{e.Pid, e.Tid}] = e.Args["name"].(string)
		}
	}
	return m
}

// checkProperNesting fails when two X events of one thread overlap
// without one containing the other.
func checkProperNesting(t *testing.T, xs []chromeEvent) {
	t.Helper()
	byThread := map[[2]int][]chromeEvent{}
	for _, e := range xs {
		k := [2]int{e.Pid, e.Tid}
		byThread[k] = append(byThread[k], e)
	}
	for k, evs := range byThread {
		slices.SortStableFunc(evs, func(a, b chromeEvent) int {
			if a.TS != b.TS {
				return cmpInt(a.TS, b.TS)
			}
			return cmpInt(b.Dur, a.Dur)
		})
		var open []chromeEvent
		for _, e := range evs {
			for len(open) > 0 {
				top := open[len(open)-1]
				end := addSat(top.TS, top.Dur)
				if end < e.TS || (end == e.TS && e.Dur > 0) {
					open = open[:len(open)-1]
					continue
				}
				break
			}
			if len(open) > 0 {
				top := open[len(open)-1]
				if addSat(e.TS, e.Dur) > addSat(top.TS, top.Dur) {
					t.Fatalf("pid %d tid %d: %q [%d,+%d] overlaps %q [%d,+%d] without nesting",
						k[0], k[1], e.Name, e.TS, e.Dur, top.Name, top.TS, top.Dur)
				}
			}
			open = append(open, e)
		}
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// storedRecord is a record of the input in the order Chrome writes events.
type storedRecord struct {
	rec    *trace.Record
	span   *trace.Span
	parent int // index of the parent record, -1 for a span root
	start  int64
}

// flattenRecords lists the records of traces in Chrome's event order:
// traces as given, spans depth first, each span's records depth first.
func flattenRecords(traces [][]*trace.Span) []storedRecord {
	var out []storedRecord
	var walkRec func(sp *trace.Span, r *trace.Record, parent int)
	walkRec = func(sp *trace.Span, r *trace.Record, parent int) {
		idx := len(out)
		out = append(out, storedRecord{rec: r, span: sp, parent: parent, start: sp.StartNS + r.StartNS})
		for _, c := range r.Children {
			walkRec(sp, c, idx)
		}
	}
	var walkSpan func(sp *trace.Span)
	walkSpan = func(sp *trace.Span) {
		if sp.Root != nil {
			walkRec(sp, sp.Root, -1)
		}
		for _, c := range sp.Children {
			walkSpan(c)
		}
	}
	for _, roots := range traces {
		for _, r := range roots {
			walkSpan(r)
		}
	}
	return out
}
