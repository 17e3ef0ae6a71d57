package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// TestImportChecksLimits: ztsctl import applies the daemon's [limits] to
// every span before submitting it (here with --store into a stopped data
// directory, where no daemon checks): a 70,000-attribute span is refused
// naming max_attrs and nothing is stored; --config with a looser limit
// lets it through.
func TestImportChecksLimits(t *testing.T) {
	dir := t.TempDir()
	sp := &trace.Span{TraceID: trace.TraceID{0xcd, 1}, SpanID: 9, StartNS: 1_700_000_000_000_000_000, DurationNS: 5,
		Root: &trace.Record{Method: "wide", DurationNS: 5}}
	for i := 0; i < 70000; i++ {
		sp.Attrs = append(sp.Attrs, trace.Attr{Key: fmt.Sprintf("k%07d", i), Value: trace.Int(int64(i))})
	}
	b, err := sp.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "wide.jsonl")
	if err := os.WriteFile(in, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "data")
	_, errOut, code := ctl(t, "import", "--format", "json", "--store", store, in)
	if code == 0 || !strings.Contains(errOut, "span 1 (trace cd01") || !strings.Contains(errOut, "70000 attributes exceeds max_attrs (1024)") {
		t.Fatalf("import of a 70000-attribute span: exit %d, stderr %q", code, errOut)
	}
	db, err := storedir.Open(context.Background(), store, storedir.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range db.Stores() {
		if st.Spans != 0 {
			t.Fatalf("store %s holds %d spans after a refused import", st.ID, st.Spans)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := filepath.Join(dir, "ztsd.toml")
	if err := os.WriteFile(cfg, []byte("[limits]\nmax_attrs = 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := ctl(t, "import", "--format", "json", "--config", cfg, "--store", store, in)
	if code != 0 || !strings.Contains(out, `"events":1`) {
		t.Fatalf("import with max_attrs = 100000: exit %d\n%s%s", code, out, errOut)
	}
}
