package wtf

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/trace"
)

// sampleDir holds the real WTF samples, read in place.
const sampleDir = "../../../shared/testdata/wtf"

func samplePath(name string) string { return filepath.Join(sampleDir, name) }

func refPath(name string) string { return filepath.Join(sampleDir, "reference", name) }

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(samplePath(name))
	if err != nil {
		t.Fatalf("sample %s: %v", name, err)
	}
	return data
}

// collect decodes data and returns the summary and every emitted span,
// checking each span's invariants on the way.
func collect(t testing.TB, name string, data []byte, opts ingest.Options) (*ingest.Summary, []*trace.Span, error) {
	t.Helper()
	var spans []*trace.Span
	sum, err := Decode(context.Background(), name, data, opts, func(s *trace.Span) error {
		if err := s.Validate(); err != nil {
			t.Errorf("%s: invalid span: %v", name, err)
		}
		if s.SpanID == 0 || s.ParentID != 0 || s.Root == nil {
			t.Errorf("%s: span ids/root: span %v parent %v root %v", name, s.SpanID, s.ParentID, s.Root != nil)
		}
		spans = append(spans, s)
		return nil
	})
	return sum, spans, err
}

func mustCollect(t testing.TB, name string, data []byte) (*ingest.Summary, []*trace.Span) {
	t.Helper()
	sum, spans, err := collect(t, name, data, ingest.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return sum, spans
}

// readTSV reads a tab-separated reference file without its header line.
func readTSV(t testing.TB, name string) [][]string {
	t.Helper()
	f, err := os.Open(refPath(name))
	if err != nil {
		t.Fatalf("reference %s: %v", name, err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		if sc.Text() == "" {
			continue
		}
		rows = append(rows, strings.Split(sc.Text(), "\t"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func atoi(t testing.TB, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("reference number %q: %v", s, err)
	}
	return n
}

// walkSpans visits every record of every span with its depth and its
// absolute start in ns.
func walkSpans(spans []*trace.Span, fn func(s *trace.Span, r *trace.Record, depth int)) {
	for _, s := range spans {
		s.Root.Walk(func(r *trace.Record, depth int) bool {
			fn(s, r, depth)
			return true
		})
	}
}

func attr(a trace.Attrs, key string) (trace.Value, bool) { return a.Get(key) }
