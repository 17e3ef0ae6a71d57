package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// Issue 7: dial9 telemetry streams and ADA Trace Format v2 sessions
// through the daemon.

// TestDial9Import imports the big demo stream and checks the README's
// counts, what a search for long spans returns, and the four long polls.
func TestDial9Import(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	d.Start()
	sums := ctlImport(t, d, sample("dial9", "demo-2026-05-15.bin"))
	if len(sums) != 1 {
		t.Fatalf("%d summaries", len(sums))
	}
	s := sums[0]
	if s.Format != "dial9" || s.Events != 210_639 || len(s.Warnings) != 0 {
		t.Errorf("summary: format %q events %d warnings %v; want dial9, 210,639, none", s.Format, s.Events, s.Warnings)
	}
	for key, want := range map[string]int64{"streams": 14, "schema_frames": 94, "string_pool_frames": 10_509,
		"stack_pool_frames": 293, "timestamp_resets": 7_678, "decoded_bytes": 4_047_237, "polls": 36_801, "active_periods": 6_304} {
		if got := num(t, detail(t, s.Details, key), key); got != want {
			t.Errorf("details %s = %d, want %d", key, got, want)
		}
	}
	perSchema := map[string]int64{"PollStartEvent": 36_801, "PollEndEvent": 36_801, "WakeEventEvent": 35_552,
		"WorkerParkEvent": 6_304, "WorkerUnparkEvent": 6_304, "QueueSampleEvent": 464, "CpuSampleEvent": 6_949,
		"TaskDumpEvent": 12_952, "TaskSpawnEvent": 262, "TaskTerminateEvent": 359, "SpanCloseEvent": 9_890,
		"SymbolTableEntry": 992, "SegmentMetadataEvent": 1, "ClockSyncEvent": 2}
	got, _ := detail(t, s.Details, "events_per_schema").(map[string]any)
	var total, enters, exits int64
	callsites := map[string]bool{}
	for name, v := range got {
		n := num(t, v, name)
		total += n
		switch {
		case strings.HasPrefix(name, "SpanEnter:"):
			enters += n
			callsites[strings.TrimPrefix(name, "SpanEnter:")] = true
		case strings.HasPrefix(name, "SpanExit:"):
			exits += n
		default:
			if want, ok := perSchema[name]; !ok || n != want {
				t.Errorf("events_per_schema[%s] = %d, the README says %d", name, n, want)
			}
		}
	}
	for name := range perSchema {
		if _, ok := got[name]; !ok {
			t.Errorf("events_per_schema has no %s", name)
		}
	}
	if len(callsites) != 5 || enters != exits || total != 210_639 {
		t.Errorf("%d SpanEnter call sites (want 5), %d enters, %d exits, %d events in all", len(callsites), enters, exits, total)
	}
	if got, want := storedSpans(t, d), num(t, detail(t, s.Details, "spans"), "spans"); got != want || want < 6_304*2+36_801 {
		t.Errorf("the daemon stores %d spans; the import emitted %d (want at least 6,304 unparks + 6,302 parks + 36,801 polls)", got, want)
	}
	if w, _ := detail(t, s.Details, "workers").([]any); len(w) != 2 || num(t, w[0], "workers[0]") != 0 || num(t, w[1], "workers[1]") != 1 {
		t.Errorf("workers %v, want [0 1]", w)
	}

	// The command: the four polls longer than 1 ms, the longest
	// ≈ 50.28 ms, and nothing else (an active period is a trace of
	// zero-length unpark, event and park spans around its polls).
	polls := ctlSearch(t, d, "--attr", "source.format=dial9", "--min-duration", "1ms", "--spans")
	if len(polls) != 4 {
		t.Fatalf("search --attr source.format=dial9 --min-duration 1ms --spans: %d spans, the README says 4 polls", len(polls))
	}
	var longest *trace.Span
	for _, p := range polls {
		if p.Type != "dial9.poll" || attrText(p.Attrs, "dial9.kind") != "poll" || attrText(p.Attrs, "dial9.task_id") == "" {
			t.Errorf("span %s: type %q kind %q task %q", p.SpanID, p.Type, attrText(p.Attrs, "dial9.kind"), attrText(p.Attrs, "dial9.task_id"))
		}
		if w := attrText(p.Attrs, "dial9.worker"); w != "0" && w != "1" {
			t.Errorf("poll %s on worker %q", p.SpanID, w)
		}
		if longest == nil || p.DurationNS > longest.DurationNS {
			longest = p
		}
	}
	if longest.DurationNS/10_000 != 5028 { // 50.28 ms
		t.Errorf("longest poll %d ns, the README says ≈ 50.28 ms", longest.DurationNS)
	}
	// Read back, the longest poll sits in its worker's active period: the
	// trace runs from an unpark before it to a park after it, whose
	// dial9.active_ns covers both.
	roots, err := d.Client.Get(context.Background(), longest.TraceID)
	if err != nil {
		t.Fatal(err)
	}
	var unpark, park, poll *trace.Span
	for _, r := range roots {
		switch {
		case r.Type == "dial9.unpark":
			unpark = r
		case r.Type == "dial9.park":
			park = r
		case r.SpanID == longest.SpanID:
			poll = r
		}
	}
	if unpark == nil || park == nil || poll == nil || poll.Root == nil || !strings.HasPrefix(poll.Root.Method, "poll ") {
		t.Fatalf("trace of the longest poll: %d roots, unpark %v park %v poll %v", len(roots), unpark != nil, park != nil, poll != nil)
	}
	active, _ := park.Attrs.Get("dial9.active_ns")
	if poll.StartNS < unpark.StartNS || poll.StartNS+poll.DurationNS > park.StartNS ||
		active.Int != park.StartNS-unpark.StartNS || attrText(park.Attrs, "dial9.worker") != attrText(poll.Attrs, "dial9.worker") {
		t.Errorf("longest poll [%d, +%d] not inside its period: unpark %d park %d active_ns %v",
			poll.StartNS, poll.DurationNS, unpark.StartNS, park.StartNS, active)
	}
}

// storedSpans is the number of spans in all of the daemon's stores.
func storedSpans(t testing.TB, d *daemontest.Daemon) int64 {
	t.Helper()
	var n int64
	for _, st := range storeCount(t, d.Client) {
		n += st.Spans
	}
	return n
}

// TestDial9OtherSamples: every other TRC sample gives the README's event
// total; the legacy TOKIOTRC file is refused, naming its format. The
// smallest sample is stored through the daemon; the three large ones are
// decoded with --dry-run (their counts are the decoder's; storing them
// would add minutes under the race detector and nothing TestDial9Import
// does not cover).
func TestDial9OtherSamples(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	d.Start()
	small := ctlImport(t, d, sample("dial9", "demo-2026-03-18-small.bin"))
	if len(small) != 1 || small[0].Format != "dial9" || small[0].Events != 4_625 {
		t.Fatalf("demo-2026-03-18-small.bin: %+v, the README says 4,625 events", small)
	}
	if got, want := storedSpans(t, d), num(t, detail(t, small[0].Details, "spans"), "spans"); got != want {
		t.Errorf("the daemon stores %d spans, the import emitted %d", got, want)
	}
	want := map[string]int64{
		"demo-2026-03-17-callframes.bin":      140_704,
		"demo-2026-04-16-optional-fields.bin": 145_406,
		"demo-2026-05-01-pooled-stacks.bin":   303_415,
	}
	args := []string{"--dry-run", "--format", "dial9"}
	for name := range want {
		args = append(args, sample("dial9", name))
	}
	for _, s := range ctlImport(t, d, args...) {
		name := filepath.Base(s.Source)
		if s.Events != want[name] {
			t.Errorf("%s: %d events, the README says %d", name, s.Events, want[name])
		}
		if name == "demo-2026-03-17-callframes.bin" {
			if got := num(t, detail(t, s.Details, "events_per_schema", "CallframeDefEvent"), "CallframeDefEvent"); got != 402 {
				t.Errorf("%s: %d CallframeDefEvent, the README says 402", name, got)
			}
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("no summary for %v", want)
	}

	for _, format := range []string{"auto", "dial9"} {
		out, stderr, code := d.Ctl(nil, "import", "--format", format, sample("dial9", "legacy-tokiotrc-v9.bin"))
		if code == 0 || !strings.Contains(stderr, "legacy TOKIOTRC format") || !strings.Contains(stderr, "not supported") {
			t.Errorf("--format %s of the TOKIOTRC file: exit %d\n%s\n%s", format, code, stderr, out)
		}
	}
}

// TestATFSessions imports the clean and the crashed ATF session through the
// daemon and reads the call trees back with ztsctl get.
func TestATFSessions(t *testing.T) {
	t.Parallel()
	d := daemontest.New(t, "")
	d.Start()
	clean := ctlImport(t, d, sample("atf", "clean", "session_20250101_120000"))
	if len(clean) != 1 || clean[0].Format != "atf" || clean[0].Events != 10 || len(clean[0].Warnings) != 0 {
		t.Fatalf("clean session: %+v", clean)
	}
	for file, n := range map[string]int64{
		"session_20250101_120000/pid_4242/thread_0/index.atf":  6,
		"session_20250101_120000/pid_4242/thread_1/index.atf":  4,
		"session_20250101_120000/pid_4242/thread_1/detail.atf": 2,
	} {
		if got := num(t, detail(t, clean[0].Details, "files", file, "events"), file); got != n {
			t.Errorf("%s: %d events, want %d", file, got, n)
		}
	}
	// The call tree main > parse ; render, with the manifest's names.
	roots := ctlSearch(t, d, "--attr", "source.format=atf", "--attr", "thread=thread_0")
	if len(roots) != 1 {
		t.Fatalf("thread_0: %d traces", len(roots))
	}
	out := ctlGet(t, d, roots[0].TraceID.String())
	if !regexp.MustCompile(`(?m)^  \S+ +\S+ +\+0s +main  calls=3\n(.*\n)?    \S+ +\S+ +\+\S+ +parse\n(.*\n)?    \S+ +\S+ +\+\S+ +render\n`).MatchString(out) {
		t.Errorf("ztsctl get of thread_0: want main > parse ; render\n%s", out)
	}
	sp := getOne(t, d.Client, roots[0].TraceID.String())
	if r := sp.Root; r.Method != "main" || len(r.Children) != 2 || r.Children[0].Method != "parse" || r.Children[1].Method != "render" ||
		len(r.Children[0].Children)+len(r.Children[1].Children) != 0 {
		t.Errorf("thread_0 tree: %+v", r)
	}
	// thread_1: one call whose call and return link to the detail records
	// (index seq 2 ↔ detail 0, seq 3 ↔ detail 1): x0..x7 = 10..17, returns 42.
	t1 := ctlSearch(t, d, "--attr", "source.format=atf", "--attr", "thread=thread_1")
	if len(t1) != 1 {
		t.Fatalf("thread_1: %d traces", len(t1))
	}
	r := getOne(t, d.Client, t1[0].TraceID.String()).Root
	wantAttrs(t, "thread_1 call", r.Attrs, map[string]string{"atf.index_seq": "2", "atf.detail_seq": "0", "atf.ret.index_seq": "3",
		"atf.ret.detail_seq": "1", "atf.reg.x0": "10", "atf.reg.x7": "17", "atf.ret.reg.x0": "42"})
	if r.Method != "parse" {
		t.Errorf("thread_1 call %q, want parse", r.Method)
	}

	crashed := ctlImport(t, d, sample("atf", "crashed", "session_20250101_130000"))
	if len(crashed) != 1 || crashed[0].Events != 7 {
		t.Fatalf("crashed session: %+v", crashed)
	}
	for file, n := range map[string]int64{
		"session_20250101_130000/pid_4243/thread_0/index.atf": 4,
		"session_20250101_130000/pid_4243/thread_1/index.atf": 3,
	} {
		if got := num(t, detail(t, crashed[0].Details, "files", file, "events"), file); got != n {
			t.Errorf("%s: %d events, want %d", file, got, n)
		}
	}
	if got := num(t, detail(t, crashed[0].Details, "files", "session_20250101_130000/pid_4243/thread_0/index.atf", "torn_bytes"), "torn"); got != 10 {
		t.Errorf("thread_0 torn tail: %d bytes, want 10", got)
	}
	// Calls cut short by the crash are stored and shown as unfinished.
	cr := ctlSearch(t, d, "--attr", "atf.session=session_20250101_130000", "--spans")
	if len(cr) != 2 {
		t.Fatalf("crashed session: %d spans stored", len(cr))
	}
	for _, sp := range cr {
		if attrText(sp.Attrs, "atf.crashed") != "true" {
			t.Errorf("span %s of the crashed session lacks atf.crashed", sp.SpanID)
		}
		if out := ctlGet(t, d, sp.TraceID.String()); !strings.Contains(out, "(not finished)") {
			t.Errorf("ztsctl get of a crashed call:\n%s", out)
		}
	}
}
