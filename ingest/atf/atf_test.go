package atf

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// samples is the shared ATF test data, read in place.
const samples = "../../../shared/testdata/atf"

var (
	cleanSession   = filepath.Join(samples, "clean/session_20250101_120000/pid_4242")
	crashedSession = filepath.Join(samples, "crashed/session_20250101_130000/pid_4243")
)

func needSamples(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(samples); err != nil {
		t.Skipf("shared samples not available: %v", err)
	}
}

// collect imports path and returns the summary and the emitted spans, each
// of which must validate.
func collect(t testing.TB, path string, opts ingest.Options) (*ingest.Summary, []*trace.Span) {
	t.Helper()
	var spans []*trace.Span
	sum, err := Import(context.Background(), path, opts, func(s *trace.Span) error {
		if err := s.Validate(); err != nil {
			t.Errorf("span %s invalid: %v", s.TraceID, err)
		}
		spans = append(spans, s)
		return nil
	})
	if err != nil {
		t.Fatalf("Import(%s): %v", path, err)
	}
	return sum, spans
}

func attr(t testing.TB, a trace.Attrs, key string) trace.Value {
	t.Helper()
	v, ok := a.Get(key)
	if !ok {
		t.Fatalf("attribute %q missing in %v", key, a)
	}
	return v
}

// shape renders a record tree as "main(0+1000)[parse(100+150),render(300+600)]".
func shape(r *trace.Record) string {
	var sb strings.Builder
	var walk func(r *trace.Record)
	walk = func(r *trace.Record) {
		sb.WriteString(r.Method)
		sb.WriteString("(")
		sb.WriteString(itoa(r.StartNS))
		sb.WriteString("+")
		sb.WriteString(itoa(r.DurationNS))
		sb.WriteString(")")
		if len(r.Children) > 0 {
			sb.WriteString("[")
			for i, c := range r.Children {
				if i > 0 {
					sb.WriteString(",")
				}
				walk(c)
			}
			sb.WriteString("]")
		}
	}
	walk(r)
	return sb.String()
}

func itoa(i int64) string { return trace.Int(i).Text() }

func TestCleanSession(t *testing.T) {
	needSamples(t)
	sum, spans := collect(t, cleanSession, ingest.Options{})
	if sum.Format != "atf" || sum.Source != cleanSession {
		t.Errorf("format/source = %q/%q", sum.Format, sum.Source)
	}
	if sum.Events != 10 || sum.Traces != 2 || sum.Records != 4 {
		t.Errorf("events/traces/records = %d/%d/%d, want 10/2/4", sum.Events, sum.Traces, sum.Records)
	}
	d := sum.Details
	for k, want := range map[string]int64{"threads": 2, "detail_events": 2, "duplicates_removed": 2,
		"crashed_calls": 0, "orphan_events": 0, "link_errors": 0, "unlinked_details": 0, "manifests": 1} {
		if got := d[k].(int64); got != want {
			t.Errorf("details[%s] = %d, want %d", k, got, want)
		}
	}
	files := d["files"].(map[string]FileReport)
	wantFiles := map[string]FileReport{
		"session_20250101_120000/pid_4242/thread_0/index.atf":  {Recovery: RecoveryFooter, Events: 6},
		"session_20250101_120000/pid_4242/thread_1/index.atf":  {Recovery: RecoveryFooter, Events: 4},
		"session_20250101_120000/pid_4242/thread_1/detail.atf": {Recovery: RecoveryFooter, Events: 2},
	}
	if len(files) != len(wantFiles) {
		t.Errorf("files = %v", files)
	}
	for k, w := range wantFiles {
		if files[k] != w {
			t.Errorf("files[%s] = %+v, want %+v", k, files[k], w)
		}
	}
	if len(sum.Warnings) != 0 {
		t.Errorf("warnings: %q", sum.Warnings)
	}
	if _, err := json.Marshal(sum); err != nil {
		t.Errorf("summary does not marshal: %v", err)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	base := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano()

	main := spans[0]
	if got := shape(main.Root); got != "main(0+1000)[parse(100+150),render(300+600)]" {
		t.Errorf("thread_0 tree = %s", got)
	}
	if main.StartNS != base || main.DurationNS != 1000 || main.Calls != 3 || main.Recs != 3 || main.Errors != 0 {
		t.Errorf("thread_0 span start/dur/calls/recs/errors = %d/%d/%d/%d/%d", main.StartNS-base, main.DurationNS, main.Calls, main.Recs, main.Errors)
	}
	for k, want := range map[string]string{"source.format": "atf", "thread": "thread_0", "atf.function_id": "0x0000001c00000001",
		"source.file": "session_20250101_120000/pid_4242/thread_0/index.atf", "atf.arch": "arm64", "atf.os": "macos",
		"atf.module": "/tmp/synthetic/demo_app", "atf.session": "session_20250101_120000"} {
		if got := attr(t, main.Attrs, k).Text(); got != want {
			t.Errorf("span attr %s = %q, want %q", k, got, want)
		}
	}
	if attr(t, main.Attrs, "atf.pid").Int != 4242 || attr(t, main.Attrs, "atf.timestamp_ns").Int != 1_000_000_000 {
		t.Errorf("atf.pid / atf.timestamp_ns wrong: %v", main.Attrs)
	}
	if main.Source != trace.SourceATF || main.Type != SpanType || main.ParentID != 0 || main.SpanID == 0 {
		t.Errorf("span identity: %+v", main)
	}
	if got := attr(t, main.Root.Children[1].Attrs, "atf.function_id").Str; got != "0x0000001c00000003" {
		t.Errorf("render function id %s", got)
	}
	if _, ok := main.Attrs.Get("atf.crashed"); ok {
		t.Errorf("clean span flagged crashed")
	}

	// thread_1: four index events, two of them lane copies; the kept copies
	// carry the detail links and registers.
	parse := spans[1]
	if got := shape(parse.Root); got != "parse(0+350)" {
		t.Errorf("thread_1 tree = %s", got)
	}
	if parse.StartNS != base+50 {
		t.Errorf("thread_1 start = base%+d", parse.StartNS-base)
	}
	a := parse.Root.Attrs
	for i := 0; i < 8; i++ {
		if got := attr(t, a, "atf.reg.x"+itoa(int64(i))).Int; got != int64(10+i) {
			t.Errorf("x%d = %d, want %d", i, got, 10+i)
		}
	}
	for k, want := range map[string]int64{"atf.reg.lr": 0x100003f00, "atf.reg.fp": 0x16fdff000, "atf.reg.sp": 0x16fdfef00,
		"atf.detail_seq": 0, "atf.index_seq": 2, "atf.ret.detail_seq": 1, "atf.ret.index_seq": 3,
		"atf.ret.reg.x0": 42, "atf.ret.reg.sp": 0x16fdfef00, "atf.os_thread_id": 0x1234} {
		if got := attr(t, a, k).Int; got != want {
			t.Errorf("%s = %#x, want %#x", k, got, want)
		}
	}
	if got := attr(t, a, "atf.stack").Str; got != strings.Repeat("aa", 16) {
		t.Errorf("stack = %s", got)
	}
	if _, ok := a.Get("atf.ret.reg.x1"); ok {
		t.Errorf("return detail should carry only x0 and sp")
	}
	if parse.TraceID == main.TraceID || parse.SpanID == main.SpanID {
		t.Errorf("ids collide")
	}
}

func TestCleanSessionLinks(t *testing.T) {
	needSamples(t)
	dir := filepath.Join(cleanSession, "thread_1")
	idxData, err := os.ReadFile(filepath.Join(dir, IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	detData, err := os.ReadFile(filepath.Join(dir, DetailFileName))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := ParseIndex("index.atf", idxData)
	if err != nil {
		t.Fatal(err)
	}
	det, err := ParseDetail("detail.atf", detData)
	if err != nil {
		t.Fatal(err)
	}
	opened, err := OpenThread(context.Background(), filepath.Join(dir, IndexFileName))
	if err != nil || opened.Name != "thread_1" || opened.Detail == nil || opened.Detail.Len() != 2 || len(opened.Index.Events) != 4 {
		t.Fatalf("OpenThread: %v %+v", err, opened)
	}
	if det.Len() != 2 || det.Recovery != RecoveryFooter || det.TornBytes != 0 {
		t.Fatalf("detail: %d records, %s, torn %d", det.Len(), det.Recovery, det.TornBytes)
	}
	th := &Thread{Name: "thread_1", Index: idx, Detail: det}
	for _, link := range []struct{ seq, det uint32 }{{2, 0}, {3, 1}} {
		r, ok := th.DetailOf(link.seq)
		if !ok || r.IndexSeq != link.seq || r.Length != 540 || r.Offset != 64+540*int64(link.det) {
			t.Errorf("forward seq%d: %+v %v", link.seq, r, ok)
		}
		e, ok := th.IndexOf(link.det)
		if !ok || e.DetailSeq != link.det || e != idx.Events[link.seq] {
			t.Errorf("backward detail%d: %+v %v", link.det, e, ok)
		}
	}
	for _, seq := range []uint32{0, 1, 4, 1 << 31} {
		if _, ok := th.DetailOf(seq); ok {
			t.Errorf("seq%d should have no detail", seq)
		}
	}
	if _, ok := th.IndexOf(2); ok {
		t.Errorf("detail 2 does not exist")
	}
	call, _ := det.Record(0)
	p := DecodePayload(call.Payload)
	if p.Layout != LayoutDrain || p.Regs != [8]uint64{10, 11, 12, 13, 14, 15, 16, 17} || len(p.Stack) != 16 ||
		p.FunctionID != 0x1c00000002 || p.EventKind != KindCall || call.EventType != DetailFunctionCall {
		t.Errorf("call payload %+v", p)
	}
	ret, _ := det.Record(1)
	if p := DecodePayload(ret.Payload); p.Regs[0] != 42 || ret.EventType != DetailFunctionReturn || len(p.Stack) != 0 {
		t.Errorf("return payload %+v", p)
	}
}

func TestCrashedSession(t *testing.T) {
	needSamples(t)
	sum, spans := collect(t, crashedSession, ingest.Options{})
	if sum.Events != 7 || sum.Traces != 2 || sum.Records != 5 {
		t.Errorf("events/traces/records = %d/%d/%d, want 7/2/5", sum.Events, sum.Traces, sum.Records)
	}
	files := sum.Details["files"].(map[string]FileReport)
	if got := files["session_20250101_130000/pid_4243/thread_0/index.atf"]; got != (FileReport{Recovery: RecoverySize, Events: 4, TornBytes: 10}) {
		t.Errorf("thread_0: %+v", got)
	}
	// The upstream reader counts the footer as two garbage events (5).
	if got := files["session_20250101_130000/pid_4243/thread_1/index.atf"]; got != (FileReport{Recovery: RecoveryEOFFooter, Events: 3}) {
		t.Errorf("thread_1: %+v", got)
	}
	if got := sum.Details["crashed_calls"].(int64); got != 3 {
		t.Errorf("crashed_calls = %d, want 3", got)
	}
	if got := sum.Details["manifests"].(int64); got != 0 {
		t.Errorf("manifests = %d", got)
	}
	var noManifest bool
	for _, w := range sum.Warnings {
		noManifest = noManifest || strings.Contains(w, "no manifest.json")
	}
	if !noManifest || len(sum.Warnings) != 3 {
		t.Errorf("warnings: %q", sum.Warnings)
	}
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	// Without a manifest, functions are named by id. Unmatched calls are
	// closed at the thread's last timestamp and flagged.
	const mainID, parseID, renderID = "0x0000001c00000001", "0x0000001c00000002", "0x0000001c00000003"
	if got := shape(spans[0].Root); got != mainID+"(0+300)["+parseID+"(100+150),"+renderID+"(300+0)]" {
		t.Errorf("thread_0 tree = %s", got)
	}
	if got := shape(spans[1].Root); got != mainID+"(0+250)["+parseID+"(100+150)]" {
		t.Errorf("thread_1 tree = %s", got)
	}
	for i, s := range spans {
		if !attr(t, s.Attrs, "atf.crashed").Bool || !attr(t, s.Root.Attrs, "atf.crashed").Bool || !s.Root.Open {
			t.Errorf("span %d root not flagged crashed", i)
		}
		if _, ok := s.Root.Children[0].Attrs.Get("atf.crashed"); ok || s.Root.Children[0].Open {
			t.Errorf("span %d: the returned parse is flagged crashed", i)
		}
	}
	if !attr(t, spans[0].Root.Children[1].Attrs, "atf.crashed").Bool {
		t.Errorf("render not flagged crashed")
	}
}

func TestImportThreadDirAndFile(t *testing.T) {
	needSamples(t)
	_, whole := collect(t, cleanSession, ingest.Options{})
	for _, p := range []string{
		filepath.Join(cleanSession, "thread_1"),
		filepath.Join(cleanSession, "thread_1", IndexFileName),
	} {
		sum, spans := collect(t, p, ingest.Options{})
		if sum.Events != 4 || sum.Traces != 1 || sum.Details["detail_events"].(int64) != 2 {
			t.Errorf("%s: events %d traces %d details %v", p, sum.Events, sum.Traces, sum.Details)
		}
		// Same ids, names (manifest found one level up) and attributes as
		// the whole-session import.
		if len(spans) != 1 || spans[0].TraceID != whole[1].TraceID || !spans[0].Attrs.Equal(whole[1].Attrs) ||
			spans[0].Root.Method != "parse" || spans[0].StartNS != whole[1].StartNS {
			t.Errorf("%s: span differs from the session import", p)
		}
	}
	// The whole sample tree: both sessions.
	sum, spans := collect(t, samples, ingest.Options{})
	if sum.Events != 17 || len(spans) != 4 || sum.Details["threads"].(int64) != 4 {
		t.Errorf("all samples: events %d spans %d", sum.Events, len(spans))
	}
}

func TestDeterministicIDs(t *testing.T) {
	needSamples(t)
	_, a := collect(t, cleanSession, ingest.Options{})
	abs, _ := filepath.Abs(cleanSession)
	_, b := collect(t, abs, ingest.Options{})
	for i := range a {
		if a[i].TraceID != b[i].TraceID || a[i].SpanID != b[i].SpanID {
			t.Errorf("span %d: ids differ between imports", i)
		}
	}
}

func TestSniff(t *testing.T) {
	needSamples(t)
	for _, c := range []struct {
		head string
		want bool
	}{{"ATI2\x01\x01", true}, {"ATI2", true}, {"ATD2\x01", false}, {"ATI", false}, {"", false}, {"2ITA", false}} {
		if got := Sniff([]byte(c.head)); got != c.want {
			t.Errorf("Sniff(%q) = %v", c.head, got)
		}
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{cleanSession, true},
		{filepath.Dir(cleanSession), true},
		{filepath.Join(crashedSession, "thread_0"), true},
		{filepath.Join(crashedSession, "thread_0", IndexFileName), true},
		{filepath.Join(cleanSession, "thread_1", DetailFileName), false},
		{filepath.Join(cleanSession, ManifestFileName), false},
		{filepath.Join(samples, "../zorka"), false},
		{filepath.Join(samples, "does-not-exist"), false},
	} {
		if got := SniffPath(c.path); got != c.want {
			t.Errorf("SniffPath(%s) = %v", c.path, got)
		}
	}
}

func TestEmitErrorIsReturnedUnchanged(t *testing.T) {
	needSamples(t)
	stop := errors.New("stop")
	n := 0
	sum, err := Import(context.Background(), cleanSession, ingest.Options{}, func(*trace.Span) error {
		n++
		return stop
	})
	if err != stop || n != 1 || sum == nil || sum.Traces != 1 {
		t.Errorf("err %v, %d emits, summary %+v", err, n, sum)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Import(ctx, cleanSession, ingest.Options{}, func(*trace.Span) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled import: %v", err)
	}
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Import(context.Background(), dir, ingest.Options{}, nil); err == nil || !strings.Contains(err.Error(), "no index.atf") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := Import(context.Background(), filepath.Join(dir, "missing"), ingest.Options{}, nil); err == nil {
		t.Errorf("missing path: no error")
	}
	// A session with one corrupt thread: an error naming the file, or with
	// KeepGoing a warning and the other thread imported.
	sess := filepath.Join(dir, "session_20250102_030405", "pid_7")
	good := buildIndex(indexOpts{}, []IndexEvent{
		{TimestampNS: 10, FunctionID: 1, Kind: KindCall, Depth: 1, DetailSeq: NoDetail},
		{TimestampNS: 20, FunctionID: 1, Kind: KindReturn, Depth: 1, DetailSeq: NoDetail},
	})
	bad := append([]byte("XXXX"), good[4:]...)
	writeFile(t, filepath.Join(sess, "thread_0", IndexFileName), bad)
	writeFile(t, filepath.Join(sess, "thread_1", IndexFileName), good)
	_, err := Import(context.Background(), sess, ingest.Options{}, func(*trace.Span) error { return nil })
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrNotATF) || fe.Offset != 0 || !strings.Contains(err.Error(), "thread_0/index.atf") {
		t.Errorf("corrupt thread: %v", err)
	}
	sum, err := Import(context.Background(), sess, ingest.Options{KeepGoing: true}, func(*trace.Span) error { return nil })
	if err != nil || sum.Traces != 1 || sum.Details["threads"].(int64) != 1 || len(sum.Warnings) == 0 {
		t.Errorf("keep going: %v %+v", err, sum)
	}
}

func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
