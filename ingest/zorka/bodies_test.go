package zorka

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

func TestSniffBody(t *testing.T) {
	for _, tc := range []struct {
		file string
		want BodyKind
	}{
		{"traces1-0-agd.cbor", AgentDataBody},
		{"traces1-1-trc.cbor", TraceDataBody},
		{"zico2-traces1-0-agd.cbor", AgentDataBody},
		{"zico2-traces1-1-trc.cbor", TraceDataBody},
		{"zorka-tdb-sampled-tomcat-agd.cbor", AgentDataBody},
		{"zorka-tdb-sampled-tomcat-trc.cbor", TraceDataBody},
		{"zico-testdata-traces1.txt", NotABody},
	} {
		if got := SniffBody(readSample(t, tc.file)[:8]); got != tc.want {
			t.Errorf("SniffBody(%s) = %d, want %d", tc.file, got, tc.want)
		}
	}
	for _, head := range []string{"", "\xc1", "\xc1\x9f", "\xc8\x01", "TRC\x00", "{\"uri\"", "\xc9\x9f"} {
		if got := SniffBody([]byte(head)); got != NotABody {
			t.Errorf("SniffBody(%q) = %d", head, got)
		}
	}
}

// TestImportBodies replays the raw captures of the testdata as an agent
// sent them: the agent data first, then the trace data.
func TestImportBodies(t *testing.T) {
	collect := func(paths ...string) (*ingest.Summary, []*trace.Span, error) {
		var spans []*trace.Span
		for i, p := range paths {
			if !filepath.IsAbs(p) {
				paths[i] = filepath.Join(samplesDir, p)
			}
		}
		sum, err := ImportBodies(context.Background(), paths, ingest.Options{}, func(s *trace.Span) error {
			spans = append(spans, s)
			return nil
		})
		return sum, spans, err
	}

	sum, spans, err := collect("traces1-0-agd.cbor", "traces1-1-trc.cbor")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Format != "zorka" || sum.Events != 2 || sum.Traces != 1 || sum.Records != 1 || len(sum.Warnings) != 0 ||
		sum.Details["bodies"] != int64(2) || sum.Details["string_defs"] != int64(9) || sum.Details["method_defs"] != int64(1) {
		t.Errorf("summary %+v", sum)
	}
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	const method = "void org.apache.catalina.core.StandardEngineValve.invoke(Request, Response)"
	if sp.StartNS != 1556820267280*1e6 || sp.DurationNS != 6225920 || sp.Calls != 1 || sp.Recs != 1 || sp.Root.Method != method {
		t.Errorf("span: start %d duration %d calls %d recs %d method %q", sp.StartNS, sp.DurationNS, sp.Calls, sp.Recs, sp.Root.Method)
	}
	wantAttrs(t, "span", sp.Attrs, map[string]trace.Value{
		"component": str("http"), "http.url": str("/index.jsp"), "http.status_code": str("200"), "http.method": str("GET"),
		"http.header.in.x-some-header.0": str("xxx"), "http.header.out.x-other-header.0": str("yyy"),
		"source.file": str("traces1-1-trc.cbor"), "source.format": str("zorka"), "call.method": str(method),
	})
	_, again, err := collect("traces1-0-agd.cbor", "traces1-1-trc.cbor")
	if err != nil || len(again) != 1 || again[0].TraceID != sp.TraceID || again[0].SpanID != sp.SpanID {
		t.Errorf("a second import gives other ids (%v)", err)
	}

	// Two captures in one run: the second agent data starts a new session
	// (its ids overlap the first's), each trace keeps its own file name.
	sum, spans, err = collect("zorka-tdb-sampled-tomcat-agd.cbor", "zorka-tdb-sampled-tomcat-trc.cbor",
		"zico2-traces1-0-agd.cbor", "zico2-traces1-1-trc.cbor")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Traces != 2 || sum.Records != 8 || len(spans) != 2 {
		t.Fatalf("summary %+v, %d spans", sum, len(spans))
	}
	depth := 0
	spans[0].Root.Walk(func(_ *trace.Record, d int) bool { depth = max(depth, d); return true })
	if spans[0].Recs != 7 || depth != 4 {
		t.Errorf("tomcat trace: %d records, depth %d; want 7, 4", spans[0].Recs, depth)
	}
	if v, _ := spans[1].Attrs.Get("db.statement"); v.Str != "CALL SCHEMA()" {
		t.Errorf("2.x trace: db.statement %q", v.Str)
	}
	for i, want := range []string{"zorka-tdb-sampled-tomcat-trc.cbor", "zico2-traces1-1-trc.cbor"} {
		if v, _ := spans[i].Attrs.Get("source.file"); v.Str != want {
			t.Errorf("span %d: source.file %q, want %q", i, v.Str, want)
		}
	}

	// Errors name the file and what is wrong; nothing is emitted.
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte("not a body"), 0o644)
	truncated := filepath.Join(dir, "cut-trc.cbor")
	os.WriteFile(truncated, readSample(t, "traces1-1-trc.cbor")[:20], 0o644)
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{"traces1-1-trc.cbor"}, "needs the agent data"},
		{[]string{"traces1-0-agd.cbor", junk}, "not a raw Zorka agent-protocol body"},
		{[]string{"traces1-0-agd.cbor", truncated}, "line 2"},
		{[]string{filepath.Join(dir, "missing")}, "no such file"},
	} {
		_, spans, err := collect(tc.paths...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(spans) != 0 {
			t.Errorf("%v: err %v, %d spans; want an error with %q", tc.paths, err, len(spans), tc.want)
		}
	}
}
