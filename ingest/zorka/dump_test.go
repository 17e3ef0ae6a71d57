package zorka

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

func dumpLine(uri string, headers map[string]string, body []byte) string {
	var hs []string
	for k, v := range headers {
		hs = append(hs, fmt.Sprintf("%q:[%q]", k, v))
	}
	return fmt.Sprintf(`{"uri":%q,"headers":{%s},"body":%q}`, uri, strings.Join(hs, ","), base64.StdEncoding.EncodeToString(body))
}

func collect(spans *[]*trace.Span) ingest.Emit {
	return func(s *trace.Span) error {
		*spans = append(*spans, s)
		return nil
	}
}

// A dump with a streamed trace, a trace without trace id, a request that
// fails, a bad line and a foreign uri.
func TestDecodeDumpStreamedAndFaulty(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testDumpStreamedAndFaulty(t, seed) })
	}
}

func testDumpStreamedAndFaulty(t *testing.T, seed int64) {
	g := newEncGen(seed)
	var tops []*encRec
	for len(tops) == 0 || len(g.cuts) < 4 { // g.agd keeps every definition sent
		tops = g.randTrace(30)[:1]
		g.encodeTrace(tops)
	}
	exp := expectedSpans(tops)
	cuts := g.randomCuts(3)
	const tid = "00112233445566778899aabbccddeeff"
	lines := []string{
		dumpLine("/agent/submit/agd", map[string]string{"X-Zorka-Session-ID": "s1", "X-Zorka-Session-Reset": "true"}, g.agd),
		dumpLine("/agent/submit/agd", map[string]string{"x-zorka-session-id": "s2", "x-zorka-session-reset": "TRUE"}, hx(t, testAgd190)),
	}
	prev := 0
	for i, end := range append(cuts, len(g.trc)) {
		lines = append(lines, dumpLine("/agent/submit/trc", map[string]string{"X-Zorka-Session-ID": "s1", "X-Zorka-Trace-ID": tid}, g.trc[prev:end]))
		prev = end
		if i == 0 {
			// Interleaved: another session's trace without a trace id.
			lines = append(lines, dumpLine("/agent/submit/trc?x=1", map[string]string{"X-Zorka-Session-ID": "s2"}, hx(t, recStart+prolog1+begin1+epilog1)), "")
		}
	}
	lines = append(lines,
		dumpLine("/agent/submit/trc", map[string]string{"X-Zorka-Session-ID": "s2"}, hx(t, "c9a0")), // fails
		"not json",
		dumpLine("/api/trace/", nil, nil),
		dumpLine("/agent/submit/trc", map[string]string{"X-Zorka-Session-ID": "s2", "X-Zorka-Trace-ID": tid}, hx(t, recStart+prolog1+begin1)), // left open
	)
	data := []byte(strings.Join(lines, "\n") + "\n")

	var spans []*trace.Span
	sum, err := Decode(context.Background(), "dump.txt", data, ingest.Options{KeepGoing: true}, collect(&spans))
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != len(exp)+2 {
		t.Fatalf("%d spans, want %d", len(spans), len(exp)+2)
	}
	// The streamed trace arrives assembled, equal to the model.
	var streamed []*trace.Span
	var noTraceID, open *trace.Span
	for _, sp := range spans {
		switch {
		case sp.TraceID.String() == tid && sp.Root.Open:
			open = sp
		case sp.TraceID.String() == tid:
			streamed = append(streamed, sp)
		default:
			noTraceID = sp
		}
		if v, _ := sp.Attrs.Get("source.file"); v.Str != "dump.txt" {
			t.Errorf("source.file %v", v)
		}
		sp.Attrs = deleteAttr(sp.Attrs, "source.file")
	}
	// Spans are emitted as they close (nested ones first): match them to
	// the model by their (random, distinct) start times.
	byStart := map[int64]*trace.Span{}
	for _, sp := range streamed {
		byStart[sp.StartNS] = sp
	}
	ids := make([]trace.SpanID, len(exp))
	matched := make([]*trace.Span, len(exp))
	for i, e := range exp {
		matched[i] = byStart[e.span.StartNS]
		if matched[i] == nil {
			t.Fatalf("no decoded span starts at %d", e.span.StartNS)
		}
		ids[i] = matched[i].SpanID
	}
	resolveIDs(exp, ids)
	for i, e := range exp {
		e.span.TraceID = matched[i].TraceID
		if v, ok := e.span.Attrs.Get("thread.name"); ok {
			e.span.Attrs.Set("thread", v) // the importer names the thread
		}
		if d := diffSpan(matched[i], e.span); d != "" {
			t.Fatalf("span %d: %s", i, d)
		}
	}
	if noTraceID == nil || noTraceID.TraceID.String() != dumpTraceID("dump.txt", int64(len(data)), 4) {
		t.Errorf("span without trace id header: %+v", noTraceID)
	}
	if open == nil || !open.Root.Open {
		t.Errorf("open span %+v", open)
	}
	traceIDs := map[trace.TraceID]bool{}
	for _, sp := range spans {
		traceIDs[sp.TraceID] = true
	}
	if sum.Events != int64(2+len(cuts)+1+1+1) || sum.Traces != int64(len(traceIDs)) || len(sum.Warnings) != 4 {
		t.Errorf("summary %+v", sum)
	}
	failLine := 5 + len(cuts) + 1 // 2 agd, chunk 0, the id-less trace, a blank line, the other chunks
	for i, w := range []string{fmt.Sprintf("line %d: trace data", failLine), fmt.Sprintf("line %d: not a JSON", failLine+1),
		fmt.Sprintf("line %d: uri \"/api/trace/\"", failLine+2), "still has open records"} {
		if i >= len(sum.Warnings) || !strings.Contains(sum.Warnings[i], w) {
			t.Errorf("warning %d = %q, want it to contain %q", i, sum.Warnings, w)
		}
	}

	// Without KeepGoing the failing request stops the import, naming its line.
	_, err = Decode(context.Background(), "dump.txt", data, ingest.Options{}, collect(new([]*trace.Span)))
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", failLine)) {
		t.Errorf("without KeepGoing: %v", err)
	}
	// An emit error stops the import and is returned.
	stop := errors.New("stop")
	if _, err := Decode(context.Background(), "dump.txt", data, ingest.Options{KeepGoing: true}, func(*trace.Span) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("emit error: %v", err)
	}
	// A cancelled context stops it too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Decode(ctx, "dump.txt", data, ingest.Options{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func deleteAttr(a trace.Attrs, key string) trace.Attrs {
	out := a[:0]
	for _, x := range a {
		if x.Key != key {
			out = append(out, x)
		}
	}
	return out
}

func countNested(spans []*trace.Span) int {
	n := 0
	for _, s := range spans {
		if s.ParentID != 0 {
			n++
		}
	}
	return n
}

func TestDecodeDumpNothingDecodable(t *testing.T) {
	for _, keep := range []bool{false, true} {
		sum, err := Decode(context.Background(), "x", []byte("garbage\n{\"uri\":\"/agent/submit/trc\",\"body\":\"!!\"}\n"), ingest.Options{KeepGoing: keep}, nil)
		if err == nil || !strings.Contains(err.Error(), "line 1: not a JSON request object") {
			t.Errorf("keepGoing=%v: %v", keep, err)
		}
		if sum == nil || sum.Warnings == nil || sum.Events != 0 {
			t.Errorf("summary %+v", sum)
		}
	}
	// A line longer than the file (impossible) or than the bound fails cleanly.
	long := strings.Repeat("x", 100)
	if _, err := DecodeReader(context.Background(), "x", 10, strings.NewReader(long), ingest.Options{}, nil); err == nil || !strings.Contains(err.Error(), "longer than 11 bytes") {
		t.Errorf("long line: %v", err)
	}
	// Empty input: nothing, no error.
	sum, err := Decode(context.Background(), "x", nil, ingest.Options{}, nil)
	if err != nil || sum.Events != 0 || sum.Warnings == nil {
		t.Errorf("empty: %+v %v", sum, err)
	}
}

func TestImportMissingFile(t *testing.T) {
	_, err := Import(context.Background(), filepath.Join(t.TempDir(), "nope.txt"), ingest.Options{}, nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
