package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/ingest/dial9"
	"github.com/ztsd/ztsd/internal/daemontest"
	"github.com/ztsd/ztsd/trace"
)

// nonFiniteFixture holds dial9 F64 fields with NaN, +Inf and -Inf (written
// by ingest/dial9's test writer, TestNonFiniteFixture).
const nonFiniteFixture = "../testdata/nonfinite/f64.dial9"

// flatSpans parses Trace JSON lines and returns every span (child spans
// lifted out of "spans") keyed by span id.
func flatSpans(t testing.TB, out string) map[trace.SpanID]*trace.Span {
	t.Helper()
	m := map[trace.SpanID]*trace.Span{}
	var add func(sp *trace.Span)
	add = func(sp *trace.Span) {
		kids := sp.Children
		sp.Children = nil
		sp.ChunkNum = 0
		m[sp.SpanID] = sp
		for _, c := range kids {
			add(c)
		}
	}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sp := new(trace.Span)
		if err := sp.UnmarshalJSON([]byte(line)); err != nil {
			t.Fatalf("line %d: %v\n%s", i+1, err, line)
		}
		add(sp)
	}
	return m
}

// TestNonFiniteFloatsRoundTrip: NaN and ±Inf attributes go in through an
// importer and come back exactly through get --json, export --format json
// and a re-import of that file into another daemon; chrome export carries
// them too.
func TestNonFiniteFloatsRoundTrip(t *testing.T) {
	t.Parallel()
	want := map[trace.TraceID]map[trace.SpanID]*trace.Span{}
	if _, err := dial9.Import(context.Background(), nonFiniteFixture, ingest.Options{}, func(sp *trace.Span) error {
		if want[sp.TraceID] == nil {
			want[sp.TraceID] = map[trace.SpanID]*trace.Span{}
		}
		want[sp.TraceID][sp.SpanID] = sp
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check := func(d *daemontest.Daemon, label string) {
		t.Helper()
		for id, spans := range want {
			got := flatSpans(t, ctlGet(t, d, id.String(), "--json"))
			if len(got) != len(spans) {
				t.Errorf("%s: trace %s: %d spans, want %d", label, id, len(got), len(spans))
			}
			for sid, w := range spans {
				if diff := trace.Diff(w, got[sid]); diff != "" {
					t.Errorf("%s: span %s: %s", label, sid, diff)
				}
			}
		}
	}
	a := daemontest.New(t, "")
	a.Start()
	ctlImport(t, a, nonFiniteFixture)
	check(a, "imported")

	file := filepath.Join(t.TempDir(), "all.jsonl")
	_, stderr, code := a.Ctl(nil, "export", "--format", "json", "--search", "--attr", "source.format=dial9", "-o", file)
	if code != 0 || !strings.Contains(stderr, "exported 3 traces") {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `{"$float":"NaN"}`) || !strings.Contains(string(body), `{"$float":"-Infinity"}`) ||
		!strings.Contains(string(body), `"dial9.label":"NaN"`) {
		t.Errorf("exported file lacks the non-finite floats or the string \"NaN\":\n%s", body)
	}
	b := daemontest.New(t, "")
	b.Start()
	sums := ctlImport(t, b, file)
	if sums[0].Traces != 3 {
		t.Errorf("re-import: traces = %d, want 3", sums[0].Traces)
	}
	check(b, "re-imported")

	chrome := filepath.Join(t.TempDir(), "chrome.json")
	var ids []string
	for id := range want {
		ids = append(ids, id.String())
	}
	slices.Sort(ids)
	if _, stderr, code := a.Ctl(nil, append([]string{"export", "--format", "chrome", "-o", chrome}, ids...)...); code != 0 {
		t.Fatalf("chrome export: exit %d: %s", code, stderr)
	}
	if cb, _ := os.ReadFile(chrome); !strings.Contains(string(cb), `"dial9.load":{"$float":"Infinity"}`) {
		t.Errorf("chrome export lacks {\"$float\":\"Infinity\"}")
	}
}
