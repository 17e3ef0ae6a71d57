package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/internal/daemontest"
)

// dataFileBytes sums the sizes of every store's traces.zts.
func dataFileBytes(t *testing.T, dataDir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "*", "traces.zts"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestReimportAddsNothing: importing the same dial9 file twice through the
// socket leaves the span counts of /v1/stores and the data files as the
// first import left them (writes are idempotent). It imports the small
// demo file; ZTSD_REIMPORT_FILE names another (demo-2026-05-15.bin: 95k
// spans, about 30 s).
func TestReimportAddsNothing(t *testing.T) {
	file := filepath.Join("..", "..", "..", "shared", "testdata", "dial9", "demo-2026-03-18-small.bin")
	if f := os.Getenv("ZTSD_REIMPORT_FILE"); f != "" {
		file = f
	}
	if _, err := os.Stat(file); err != nil {
		t.Skipf("sample not available: %v", err)
	}
	d := daemontest.New(t, "")
	d.Start()
	counts := func() (spans int64) {
		stores, err := d.Client.Stores(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stores {
			spans += s.Spans
		}
		return spans
	}
	if out, errOut, code := d.Ctl(nil, "import", file); code != 0 {
		t.Fatalf("first import: exit %d\n%s\n%s", code, out, errOut)
	}
	spans, bytes := counts(), dataFileBytes(t, d.DataDir)
	if spans == 0 {
		t.Fatal("the first import stored no spans")
	}
	if out, errOut, code := d.Ctl(nil, "import", file); code != 0 {
		t.Fatalf("second import: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := counts(); got != spans {
		t.Fatalf("a re-import changed the span count from %d to %d", spans, got)
	}
	if got := dataFileBytes(t, d.DataDir); got != bytes {
		t.Fatalf("a re-import grew the data files from %d to %d bytes", bytes, got)
	}
	t.Logf("%d spans, %d data bytes, unchanged by the second import", spans, bytes)
}
