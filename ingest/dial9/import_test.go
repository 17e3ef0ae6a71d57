package dial9

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// collected gathers emitted spans and checks the invariants every import
// must hold.
type collected struct {
	spans []*trace.Span
}

func (c *collected) emit(s *trace.Span) error {
	c.spans = append(c.spans, s)
	return nil
}

func (c *collected) check(t *testing.T, sum *ingest.Summary, file string) {
	t.Helper()
	var traces, records int64
	traceIDs := map[trace.TraceID]bool{}
	ids := map[trace.SpanID]trace.TraceID{}
	for _, s := range c.spans {
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid span: %v", err)
		}
		if s.SpanID == 0 || s.Source != trace.SourceDial9 || s.Root == nil {
			t.Fatalf("span %s/%s: source %q root %v", s.TraceID, s.SpanID, s.Source, s.Root != nil)
		}
		if _, dup := ids[s.SpanID]; dup {
			t.Fatalf("duplicate span id %s", s.SpanID)
		}
		ids[s.SpanID] = s.TraceID
		for key, want := range map[string]string{"source.format": "dial9", "source.file": file} {
			if v, _ := s.Attrs.Get(key); v.Str != want {
				t.Fatalf("span %s: %s = %q, want %q", s.SpanID, key, v.Str, want)
			}
		}
		if v, _ := s.Attrs.Get("thread"); v.Str == "" {
			t.Fatalf("span %s: no thread attribute", s.SpanID)
		}
		if s.Recs != s.Root.CountRecords() || s.Calls != s.Recs {
			t.Fatalf("span %s: recs %d calls %d, tree has %d", s.SpanID, s.Recs, s.Calls, s.Root.CountRecords())
		}
		if !traceIDs[s.TraceID] {
			traceIDs[s.TraceID] = true
			traces++
		}
		records += s.Recs
	}
	for _, s := range c.spans {
		if s.ParentID != 0 && ids[s.ParentID] != s.TraceID {
			t.Fatalf("span %s: parent %s not emitted in trace %s", s.SpanID, s.ParentID, s.TraceID)
		}
	}
	if sum.Traces != traces || sum.Records != records {
		t.Errorf("summary traces/records %d/%d, emitted %d/%d", sum.Traces, sum.Records, traces, records)
	}
	acc := sum.Details["accounting"].(map[string]int64)
	if got := acc["span_boundaries"] + acc["records"] + acc["symbol_rows"]; got != sum.Events {
		t.Errorf("accounting %v sums to %d, want %d events", acc, got, sum.Events)
	}
	if sum.Warnings == nil {
		t.Error("Warnings is nil")
	}
}

func kind(s *trace.Span) string { v, _ := s.Attrs.Get("dial9.kind"); return v.Str }

func TestImportDemo(t *testing.T) {
	path := samplePath("demo-2026-05-15.bin")
	var c collected
	sum, err := Import(context.Background(), path, ingest.Options{}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	c.check(t, sum, "demo-2026-05-15.bin")
	if sum.Format != "dial9" || sum.Source != path || sum.Events != 210639 {
		t.Fatalf("summary %s %s events %d", sum.Format, sum.Source, sum.Events)
	}
	perSchema := sum.Details["events_per_schema"].(map[string]int64)
	if len(perSchema) != len(demoPerSchema) {
		t.Errorf("%d schemas, want %d", len(perSchema), len(demoPerSchema))
	}
	for name, want := range demoPerSchema {
		if perSchema[name] != want {
			t.Errorf("events_per_schema[%s] = %d, want %d", name, perSchema[name], want)
		}
	}
	if sum.Details["streams"] != int64(14) || !slices.Equal(sum.Details["workers"].([]uint64), []uint64{0, 1}) {
		t.Errorf("streams %v workers %v", sum.Details["streams"], sum.Details["workers"])
	}
	if len(sum.Warnings) != 0 {
		t.Errorf("warnings %v", sum.Warnings)
	}

	// Polls: one span each; they are the only spans longer than 1 ms
	// (exactly 4, the longest ≈ 50.28 ms): an active period is a trace of
	// zero-length unpark, event and park spans around its polls.
	var polls, periods, parks int
	var long, longAny []int64
	day := time.Date(2026, 5, 15, 0, 0, 0, 0, time.UTC)
	methods := map[string]int64{}
	var resolvedFrames, hexFrames int
	for _, s := range c.spans {
		if st := time.Unix(0, s.StartNS); st.Before(day) || st.After(day.Add(24*time.Hour)) {
			t.Fatalf("span starts %v, not on the day of the capture", st)
		}
		if s.DurationNS > 1e6 {
			longAny = append(longAny, s.DurationNS)
		}
		if s.ParentID != 0 {
			t.Fatalf("span %s has a parent: dial9 traces are flat", s.SpanID)
		}
		switch kind(s) {
		case "poll":
			polls++
			if s.Type != "dial9.poll" || !strings.HasPrefix(s.Root.Method, "poll ") {
				t.Fatalf("poll span %+v", s)
			}
			if s.DurationNS > 1e6 {
				long = append(long, s.DurationNS)
			}
			for _, k := range []string{"dial9.task_id", "dial9.spawn_location", "dial9.worker"} {
				if _, ok := s.Attrs.Get(k); !ok {
					t.Fatalf("poll span without %s", k)
				}
			}
		case "unpark":
			periods++
			if s.DurationNS != 0 || s.Type != "dial9.unpark" || !strings.HasSuffix(s.Root.Method, " unpark") {
				t.Fatalf("unpark span %+v", s)
			}
		case "park":
			parks++
			active, _ := s.Attrs.Get("dial9.active_ns")
			if s.DurationNS != 0 || active.Int <= 0 {
				t.Fatalf("park span %+v", s)
			}
			for _, k := range []string{"dial9.polls", "dial9.cpu_time_ns", "dial9.worker"} {
				if _, ok := s.Attrs.Get(k); !ok {
					t.Fatalf("park span without %s", k)
				}
			}
		}
		event := kind(s) == "event" || kind(s) == "tracing_span"
		s.Root.Walk(func(r *trace.Record, depth int) bool {
			if depth > 1 || event {
				methods[r.Method]++
			}
			if v, ok := r.Attrs.Get("dial9.callchain"); ok {
				for _, f := range v.List {
					if strings.HasPrefix(f.Str, "0x") {
						hexFrames++
					} else {
						resolvedFrames++
					}
				}
			}
			return true
		})
	}
	if polls != 36801 || periods != 6304 || parks != 6304-2 {
		t.Errorf("%d polls, %d active periods, %d parks; want 36801, 6304, 6302", polls, periods, parks)
	}
	slices.Sort(long)
	if len(long) != 4 || long[3] < 50_270_000 || long[3] > 50_290_000 {
		t.Errorf("polls > 1ms: %v, want 4 with the longest ≈ 50.28 ms", long)
	}
	if !slices.Equal(long, slices.Sorted(slices.Values(longAny))) {
		t.Errorf("spans > 1ms: %v, want only the 4 long polls %v", longAny, long)
	}
	// Every event that is not a span boundary or a symbol row is one record.
	for name, want := range demoPerSchema {
		switch name {
		case "PollStartEvent", "PollEndEvent", "WorkerUnparkEvent", "SymbolTableEntry":
			continue
		case "WorkerParkEvent":
			want = 2 // parks of the two workers already active when the file began
		}
		method := strings.TrimPrefix(name, spanEnterPrefix)
		if strings.HasPrefix(name, spanExitPrefix) {
			continue // an exit closes its enter's record
		}
		if methods[method] != want {
			t.Errorf("%d records %q, want %d", methods[method], method, want)
		}
	}
	// Call chains resolve through the symbol table at the end of the file.
	if resolvedFrames < 100*hexFrames {
		t.Errorf("call chain frames: %d resolved, %d unresolved", resolvedFrames, hexFrames)
	}

	// Ids are deterministic and Decode over the bytes matches Import.
	var again collected
	if _, err := Decode(context.Background(), path, readSample(t, "demo-2026-05-15.bin"), ingest.Options{}, again.emit); err != nil {
		t.Fatal(err)
	}
	if len(again.spans) != len(c.spans) {
		t.Fatalf("second import: %d spans, want %d", len(again.spans), len(c.spans))
	}
	for i := range c.spans {
		a, b := c.spans[i], again.spans[i]
		if a.TraceID != b.TraceID || a.SpanID != b.SpanID || a.StartNS != b.StartNS || a.Recs != b.Recs {
			t.Fatalf("span %d differs between imports", i)
		}
	}
}

func TestImportSamples(t *testing.T) {
	for _, tc := range trcSamples[1:] {
		t.Run(tc.file, func(t *testing.T) {
			if (testing.Short() || raceEnabled) && tc.events > 100000 {
				t.Skip("large sample: skipped in -short and -race runs")
			}
			var c collected
			sum, err := Import(context.Background(), samplePath(tc.file), ingest.Options{}, c.emit)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, sum, tc.file)
			if sum.Events != tc.events {
				t.Errorf("events = %d, want %d", sum.Events, tc.events)
			}
			if !slices.Equal(sum.Details["workers"].([]uint64), []uint64{0, 1}) {
				t.Errorf("workers %v", sum.Details["workers"])
			}
		})
	}
}

func TestImportRejectsLegacy(t *testing.T) {
	var c collected
	sum, err := Import(context.Background(), samplePath("legacy-tokiotrc-v9.bin"), ingest.Options{KeepGoing: true}, c.emit)
	if !errors.Is(err, ErrLegacyFormat) || !strings.Contains(err.Error(), "TOKIOTRC") {
		t.Fatalf("err = %v, want ErrLegacyFormat naming TOKIOTRC", err)
	}
	if sum == nil || sum.Events != 0 || len(c.spans) != 0 {
		t.Errorf("summary %+v, %d spans", sum, len(c.spans))
	}
}

func TestImportErrors(t *testing.T) {
	data := readSample(t, "demo-2026-03-18-small.bin")
	cut := data[:len(data)/2]

	t.Run("truncated", func(t *testing.T) {
		var c collected
		sum, err := Decode(context.Background(), "cut.bin", cut, ingest.Options{}, c.emit)
		var de *DecodeError
		if !errors.As(err, &de) || !errors.Is(err, ErrTruncated) || de.Offset >= int64(len(cut)) {
			t.Fatalf("err = %v, want a truncation *DecodeError", err)
		}
		if sum.Events == 0 || sum.Events >= 4625 || len(c.spans) == 0 {
			t.Fatalf("kept %d events, %d spans", sum.Events, len(c.spans))
		}
		c.check(t, sum, "cut.bin")
	})
	t.Run("keep going", func(t *testing.T) {
		var c collected
		sum, err := Decode(context.Background(), "cut.bin", cut, ingest.Options{KeepGoing: true}, c.emit)
		if err != nil {
			t.Fatal(err)
		}
		if len(sum.Warnings) == 0 || !strings.Contains(strings.Join(sum.Warnings, " "), "offset") {
			t.Errorf("warnings %v", sum.Warnings)
		}
		c.check(t, sum, "cut.bin")
	})
	t.Run("emit error", func(t *testing.T) {
		stop := errors.New("store full")
		n := 0
		_, err := Decode(context.Background(), "x", data, ingest.Options{KeepGoing: true}, func(*trace.Span) error {
			if n++; n == 10 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 10 {
			t.Fatalf("err = %v after %d spans", err, n)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Decode(ctx, "x", data, ingest.Options{}, func(*trace.Span) error { return nil })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := Import(context.Background(), samplePath("nope.bin"), ingest.Options{}, nil); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestSniff(t *testing.T) {
	for _, f := range []string{"demo-2026-05-15.bin", "demo-2026-03-18-small.bin", "demo-2026-05-01-pooled-stacks.bin",
		"legacy-tokiotrc-v9.bin", "demo-2026-04-16-optional-fields.bin"} {
		data := readSample(t, f)
		if !Sniff(data[:64]) {
			t.Errorf("Sniff(%s) = false", f)
		}
	}
	for name, head := range map[string][]byte{
		"empty": nil, "short": []byte("TRC"), "wtf": {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 3}, "zts": []byte("ZTS0...."),
		"cbor": {0xd9, 0xd9, 0xf7, 0x82}, "atf": []byte("ATI2\x01\x01"), "json": []byte(`{"events":[]}`),
		"gzip of other": gzipBytes([]byte("{\"not\": \"dial9\", \"padding\": \"" + strings.Repeat("x", 10) + "\"}")),
	} {
		if Sniff(head) {
			t.Errorf("Sniff(%s) = true", name)
		}
	}
}

// Telemetry schemas as the tokio telemetry writes them (HEAD layouts).
var (
	tClock  = &Schema{TypeID: 0, Name: "ClockSyncEvent", HasTimestamp: true, Fields: []Field{{"realtime_ns", TypeVarint}}}
	tSample = &Schema{TypeID: 1, Name: "CpuSampleEvent", HasTimestamp: true, Fields: []Field{{"worker_id", TypeVarint},
		{"tid", TypeU32}, {"source", TypeU8}, {"thread_name", Optional | TypePooledString},
		{"callchain", TypePooledStackFrames}, {"cpu", Optional | TypeVarint}}}
	tQueue  = &Schema{TypeID: 2, Name: "QueueSampleEvent", HasTimestamp: true, Fields: []Field{{"global_queue", TypeU8}}}
	tUnpark = &Schema{TypeID: 0, Name: "WorkerUnparkEvent", HasTimestamp: true, Fields: []Field{{"worker_id", TypeVarint},
		{"local_queue", TypeU8}, {"cpu_time_ns", TypeVarint}, {"sched_wait_ns", TypeVarint}, {"tid", TypeU32}}}
	tPark = &Schema{TypeID: 1, Name: "WorkerParkEvent", HasTimestamp: true, Fields: []Field{{"worker_id", TypeVarint},
		{"local_queue", TypeU8}, {"cpu_time_ns", TypeVarint}, {"tid", TypeU32}}}
	tPollStart = &Schema{TypeID: 2, Name: "PollStartEvent", HasTimestamp: true, Fields: []Field{{"worker_id", TypeVarint},
		{"local_queue", TypeU8}, {"task_id", TypeVarint}, {"spawn_loc", TypePooledString}}}
	tPollEnd = &Schema{TypeID: 3, Name: "PollEndEvent", HasTimestamp: true, Fields: []Field{{"worker_id", TypeVarint}}}
	tEnter   = &Schema{TypeID: 4, Name: "SpanEnter:app::handler:src/h.rs:3", HasTimestamp: true, Fields: []Field{
		{"worker_id", TypeVarint}, {"span_id", TypeVarint}, {"parent_span_id", Optional | TypeVarint},
		{"span_name", TypePooledString}, {"user", Optional | TypePooledString}}}
	tExit = &Schema{TypeID: 5, Name: "SpanExit:app::handler:src/h.rs:3", HasTimestamp: true, Fields: []Field{
		{"worker_id", TypeVarint}, {"span_id", TypeVarint}, {"span_name", TypePooledString}, {"user", Optional | TypePooledString}}}
	tWake = &Schema{TypeID: 6, Name: "WakeEventEvent", HasTimestamp: true, Fields: []Field{{"waker_task_id", TypeVarint},
		{"woken_task_id", TypeVarint}, {"target_worker", TypeU8}}}
	tSpawn = &Schema{TypeID: 7, Name: "TaskSpawnEvent", HasTimestamp: true, Fields: []Field{{"task_id", TypeVarint},
		{"spawn_loc", TypePooledString}, {"instrumented", TypeBool}}}
	tDump = &Schema{TypeID: 8, Name: "TaskDumpEvent", HasTimestamp: true, Fields: []Field{{"task_id", TypeVarint},
		{"callchain", TypePooledStackFrames}}}
	tSymbol = &Schema{TypeID: 0, Name: "SymbolTableEntry", HasTimestamp: true, Fields: []Field{{"addr", TypeVarint},
		{"size", TypeVarint}, {"symbol_name", TypePooledString}, {"inline_depth", TypeVarint},
		{"source_file", TypePooledString}, {"source_line", TypeVarint}}}
)

func u(x uint64) Value { return Value{Uint: x} }
func absent() Value    { return Value{Absent: true} }
func b(x bool) Value   { return Value{Bool: x} }
func gzipBytes(p []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(p)
	zw.Close()
	return buf.Bytes()
}

const mono0 = 1_000_000_000 // monotonic time of the clock sync anchor
const wall0 = 1_700_000_000_000_000_000

// syntheticTelemetry writes three streams as the telemetry does: a sampler
// thread's buffer, a worker's buffer, and the symbolizer's rows at the end.
func syntheticTelemetry() []byte {
	w := &testWriter{}
	// Stream 0: the sampler thread.
	w.header(Version)
	for _, s := range []*Schema{tClock, tSample, tQueue} {
		w.schema(s)
	}
	w.event(tClock, mono0, []Value{u(wall0)})
	w.stackPool([]uint32{0}, [][]uint64{{0x1000, 0x2000}})
	w.stringPool([]uint32{0}, []string{"tokio-rt-worker"})
	sample := func(ts uint64) {
		w.event(tSample, ts, []Value{u(0), u(42), u(0), u(0), u(0), u(3)})
	}
	sample(mono0 + 150_000) // inside the poll
	w.event(tQueue, mono0+500_000, []Value{u(4)})
	sample(mono0 + 2_500_000) // inside the active period, after the poll
	sample(mono0 + 5_000_000) // outside any active period

	// Stream 1: worker 0's thread.
	w.header(Version)
	for _, s := range []*Schema{tUnpark, tPark, tPollStart, tPollEnd, tEnter, tExit, tWake, tSpawn, tDump} {
		w.schema(s)
	}
	w.stringPool([]uint32{0, 1, 2, 3}, []string{"src/main.rs:10:5", "handler", "bob", "src/x.rs:1:1"})
	w.stackPool([]uint32{0}, [][]uint64{{0x2000}})
	w.event(tUnpark, mono0, []Value{u(0), u(0), u(100), u(5), u(42)})
	w.event(tPollStart, mono0+100_000, []Value{u(0), u(1), u(7), u(0)})
	w.event(tEnter, mono0+110_000, []Value{u(0), u(11), absent(), u(1), u(2)})
	w.event(tWake, mono0+120_000, []Value{u(7), u(8), u(0)})
	w.event(tExit, mono0+200_000, []Value{u(0), u(11), u(1), u(2)})
	w.event(tSpawn, mono0+210_000, []Value{u(9), u(3), b(true)})
	w.event(tPollEnd, mono0+2_100_000, []Value{u(0)})
	w.event(tDump, mono0-1_000_000, []Value{u(8), u(0)}) // stamped when task 8 went idle
	w.event(tPark, mono0+3_000_000, []Value{u(0), u(0), u(900), u(42)})
	w.event(tPollEnd, mono0+4_000_000, []Value{u(0)})                     // no PollStart: a record
	w.event(tPollStart, mono0+4_500_000, []Value{u(0), u(0), u(8), u(0)}) // never ends

	// Stream 2: the symbolizer's rows, stamped 0.
	w.header(Version)
	w.schema(tSymbol)
	w.stringPool([]uint32{0, 1, 2, 3, 4}, []string{"outer", "a.rs", "inlined", "b.rs", "main"})
	w.event(tSymbol, 0, []Value{u(0x1000), u(16), u(0), u(0), u(1), u(1)})
	w.event(tSymbol, 0, []Value{u(0x1000), u(16), u(2), u(1), u(3), u(2)})
	w.event(tSymbol, 0, []Value{u(0x2000), u(8), u(4), u(0), Value{Uint: 99}, u(0)})
	return w.buf.Bytes()
}

// render prints a record tree with the attributes named in keys.
func render(r *trace.Record, keys ...string) string {
	var sb strings.Builder
	var walk func(r *trace.Record, depth int)
	walk = func(r *trace.Record, depth int) {
		fmt.Fprintf(&sb, "%s%s @%d +%d", strings.Repeat("  ", depth), r.Method, r.StartNS, r.DurationNS)
		if r.Open {
			sb.WriteString(" open")
		}
		for _, k := range keys {
			if v, ok := r.Attrs.Get(k); ok {
				if v.Kind == trace.KindList {
					var parts []string
					for _, e := range v.List {
						parts = append(parts, e.Text())
					}
					fmt.Fprintf(&sb, " %s=[%s]", k, strings.Join(parts, "; "))
				} else {
					fmt.Fprintf(&sb, " %s=%s", k, v.Text())
				}
			}
		}
		sb.WriteString("\n")
		for _, c := range r.Children {
			walk(c, depth+1)
		}
	}
	walk(r, 0)
	return sb.String()
}

func TestImportMapping(t *testing.T) {
	var c collected
	sum, err := Decode(context.Background(), "/tmp/synthetic.bin", syntheticTelemetry(), ingest.Options{}, c.emit)
	if err != nil {
		t.Fatal(err)
	}
	c.check(t, sum, "synthetic.bin")
	if sum.Events != 19 || sum.Traces != 4 || sum.Records != 15 || len(c.spans) != 11 {
		t.Fatalf("events %d traces %d records %d spans %d", sum.Events, sum.Traces, sum.Records, len(c.spans))
	}
	acc := sum.Details["accounting"].(map[string]int64)
	if acc["span_boundaries"] != 5 || acc["records"] != 11 || acc["symbol_rows"] != 3 { // exit + enter: 2 events, 1 record
		t.Errorf("accounting %v", acc)
	}
	if !slices.Equal(sum.Details["workers"].([]uint64), []uint64{0}) || sum.Details["clock"] != "ClockSyncEvent" {
		t.Errorf("details %v", sum.Details)
	}
	keys := []string{"dial9.callchain", "dial9.global_queue", "dial9.woken_task_id", "dial9.user", "dial9.task_id",
		"dial9.timestamp_ns"}
	type want struct {
		kind, thread string
		trace        int // index of the first span of the same trace, -1 for a new trace
		start, dur   int64
		tree         string
		attrs        map[string]string
	}
	const off = wall0 - mono0
	chain := "dial9.callchain=[inlined (b.rs:2); outer (a.rs:1); main]"
	wants := []want{
		// Stream 0 (the sampler thread) outside any active period: a trace
		// of zero-length event spans.
		{"event", "stream-0", -1, wall0, 0, "ClockSyncEvent @0 +0\n", map[string]string{"dial9.stream": "0"}},
		{"event", "stream-0", 0, wall0 + 500_000, 0, "QueueSampleEvent @0 +0 dial9.global_queue=4\n", nil},
		{"event", "stream-0", 0, wall0 + 5_000_000, 0, "CpuSampleEvent @0 +0 " + chain + "\n", nil},
		// Worker 0's active period: the poll as it ends, then unpark,
		// the sample outside the poll, and park with the period's totals.
		{"poll", "worker-0", -1, off + mono0 + 100_000, 2_000_000, `poll src/main.rs:10:5 @0 +2000000
  app::handler:src/h.rs:3 @10000 +90000 dial9.user=bob
    WakeEventEvent @20000 +0 dial9.woken_task_id=8
  CpuSampleEvent @50000 +0 ` + chain + `
  TaskSpawnEvent @110000 +0 dial9.task_id=9
`, map[string]string{"dial9.task_id": "7", "dial9.spawn_location": "src/main.rs:10:5", "dial9.local_queue": "1",
			"dial9.worker": "0", "dial9.stream": "1"}},
		{"unpark", "worker-0", 3, wall0, 0, "worker-0 unpark @0 +0\n",
			map[string]string{"dial9.unpark.sched_wait_ns": "5", "dial9.unpark.tid": "42", "dial9.worker": "0"}},
		{"event", "worker-0", 3, wall0 + 2_500_000, 0, "CpuSampleEvent @0 +0 " + chain + "\n", nil},
		{"park", "worker-0", 3, wall0 + 3_000_000, 0, "worker-0 park @0 +0\n",
			map[string]string{"dial9.cpu_time_ns": "800", "dial9.polls": "1", "dial9.park.tid": "42", "dial9.active_ns": "3000000"}},
		// Stream 1 outside its active period: the dump stamped before it
		// and the PollEnd whose PollStart is not in the file.
		{"event", "worker-0", -1, off + mono0 - 1_000_000, 0, "TaskDumpEvent @0 +0 dial9.callchain=[main] dial9.task_id=8\n", nil},
		{"event", "worker-0", 7, wall0 + 4_000_000, 0, "PollEndEvent @0 +0\n", nil},
		// The poll that never ended, closed at the end of the input (before the last stream ends), in
		// stream 1's segment trace.
		{"poll", "worker-0", 7, off + mono0 + 4_500_000, 0, "poll src/main.rs:10:5 @0 +0 open\n",
			map[string]string{"dial9.unterminated": "true", "dial9.task_id": "8"}},
		// Stream 2: the symbolizer's rows, counted.
		{"symbol_table", "stream-2", -1, off, 0, "symbol table @0 +0\n", map[string]string{"dial9.symbol_table_entries": "3"}},
	}
	traceOf := map[trace.TraceID]int{}
	for i, w := range wants {
		s := c.spans[i]
		if kind(s) != w.kind || s.Type != "dial9."+w.kind || s.StartNS != w.start || s.DurationNS != w.dur {
			t.Errorf("span %d: %s %s start %d dur %d, want %s start %d dur %d", i, kind(s), s.Type, s.StartNS, s.DurationNS,
				w.kind, w.start, w.dur)
		}
		if th, _ := s.Attrs.Get("thread"); th.Str != w.thread {
			t.Errorf("span %d: thread %q, want %q", i, th.Str, w.thread)
		}
		first, seen := traceOf[s.TraceID]
		if !seen {
			traceOf[s.TraceID], first = i, -1
		}
		if s.ParentID != 0 || first != w.trace {
			t.Errorf("span %d: parent %s, trace first seen at span %d; want no parent and %d", i, s.ParentID, first, w.trace)
		}
		if got := render(s.Root, keys...); got != w.tree {
			t.Errorf("span %d tree:\n%s\nwant:\n%s", i, got, w.tree)
		}
		for k, v := range w.attrs {
			if got, _ := s.Attrs.Get(k); got.Text() != v {
				t.Errorf("span %d: %s = %q, want %q", i, k, got.Text(), v)
			}
		}
	}
}

// randomTelemetry writes streams of telemetry events for a few workers in
// random order: unmatched starts and ends, spans exited out of order,
// samples anywhere, mid-file headers.
func randomTelemetry(rng *rand.Rand) []byte {
	w := &testWriter{}
	ts := uint64(mono0)
	worker := []*Schema{tUnpark, tPark, tPollStart, tPollEnd, tEnter, tExit, tWake, tSpawn, tDump}
	for streams := 1 + rng.IntN(4); streams > 0; streams-- {
		w.header(Version)
		sampler := rng.IntN(3) == 0
		if sampler {
			for _, s := range []*Schema{tClock, tSample, tQueue} {
				w.schema(s)
			}
		} else {
			for _, s := range worker {
				w.schema(s)
			}
		}
		w.stringPool([]uint32{0, 1, 2, 3}, []string{"loc", "span", "user", "loc2"})
		w.stackPool([]uint32{0}, [][]uint64{{1, 2, 3}})
		wid := u(rng.Uint64N(3))
		for n := rng.IntN(60); n > 0; n-- {
			ts += rng.Uint64N(200_000)
			if rng.IntN(10) == 0 {
				ts -= min(ts, rng.Uint64N(2_000_000))
			}
			if sampler {
				switch rng.IntN(3) {
				case 0:
					w.event(tClock, ts, []Value{u(wall0 + ts)})
				case 1:
					w.event(tSample, ts, []Value{u(rng.Uint64N(3)), u(1), u(0), absent(), u(0), absent()})
				default:
					w.event(tQueue, ts, []Value{u(3)})
				}
				continue
			}
			if rng.IntN(8) == 0 {
				wid = u(rng.Uint64N(3))
			}
			sid := u(rng.Uint64N(3))
			switch rng.IntN(9) {
			case 0:
				w.event(tUnpark, ts, []Value{wid, u(0), u(ts), u(0), u(1)})
			case 1:
				w.event(tPark, ts, []Value{wid, u(0), u(ts + 10), u(1)})
			case 2:
				w.event(tPollStart, ts, []Value{wid, u(0), u(rng.Uint64N(5)), u(0)})
			case 3:
				w.event(tPollEnd, ts, []Value{wid})
			case 4:
				w.event(tEnter, ts, []Value{wid, sid, absent(), u(1), u(2)})
			case 5:
				w.event(tExit, ts, []Value{wid, sid, u(1), absent()})
			case 6:
				w.event(tWake, ts, []Value{u(1), u(2), u(0)})
			case 7:
				w.event(tSpawn, ts, []Value{u(3), u(9), b(false)}) // pool id 9: unresolved
			default:
				w.event(tDump, ts, []Value{u(1), u(0)})
			}
		}
	}
	return w.buf.Bytes()
}

func TestImportRandomTelemetry(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < sweep(300); i++ {
		data := randomTelemetry(rng)
		var c collected
		sum, err := Decode(context.Background(), "random.bin", data, ingest.Options{}, c.emit)
		if err != nil {
			t.Fatalf("iter %d: %v", i, err)
		}
		c.check(t, sum, "random.bin")
		var again collected
		if _, err := Decode(context.Background(), "random.bin", data, ingest.Options{}, again.emit); err != nil {
			t.Fatal(err)
		}
		for j := range c.spans {
			if c.spans[j].SpanID != again.spans[j].SpanID || render(c.spans[j].Root) != render(again.spans[j].Root) {
				t.Fatalf("iter %d: import not deterministic at span %d", i, j)
			}
		}
	}
}

// TestImportRandomFiles maps random files of arbitrary schemas: every
// event is accounted for and every span is valid.
func TestImportRandomFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < sweep(200); i++ {
		data, want := randomFile(rng)
		var c collected
		sum, err := Decode(context.Background(), "random.bin", data, ingest.Options{}, c.emit)
		if err != nil {
			t.Fatalf("iter %d: %v", i, err)
		}
		if sum.Events != int64(len(want)) {
			t.Fatalf("iter %d: %d events, want %d", i, sum.Events, len(want))
		}
		c.check(t, sum, "random.bin")
	}
}

// TestImportGrowingFile: Import reads the file twice; bytes appended
// while it runs (a segment still being written) are not read by either
// pass, so the result is that of the file as it was.
func TestImportGrowingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "growing.bin.active")
	data := syntheticTelemetry()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var before collected
	want, err := Import(context.Background(), path, ingest.Options{}, before.emit)
	if err != nil {
		t.Fatal(err)
	}
	var during collected
	got, err := Import(context.Background(), path, ingest.Options{}, func(s *trace.Span) error {
		if len(during.spans) == 0 {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			f.Write(data) // a whole second copy of every stream
			f.Close()
		}
		return during.emit(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Events != want.Events || len(during.spans) != len(before.spans) {
		t.Fatalf("grown during import: %d events %d spans, want %d, %d", got.Events, len(during.spans),
			want.Events, len(before.spans))
	}
}
