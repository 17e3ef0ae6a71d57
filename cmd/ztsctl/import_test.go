package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/ingest"
	"github.com/ztsd/ztsd/storedir"
)

// storedSpans opens the stopped data directory dir and counts its spans.
func storedSpans(t *testing.T, dir string) int64 {
	t.Helper()
	db, err := storedir.Open(context.Background(), dir, storedir.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	for _, st := range db.Stores() {
		n += st.Spans
	}
	return n
}

// truncated writes the first half of a sample to a temporary file.
func truncated(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(samples, rel))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "half-"+filepath.Base(rel))
	if err := os.WriteFile(p, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportFailureStoresNothing: one rule for every importer. Without
// --keep-going a truncated input fails (exit 3) and stores nothing, though
// its decoder emitted spans before the error; with it, what decoded is
// stored, the error is a warning and "stored" says how many spans.
func TestImportFailureStoresNothing(t *testing.T) {
	for _, rel := range []string{"dial9/demo-2026-03-18-small.bin", "wtf/blk-client.wtf-trace"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			path := truncated(t, rel)
			dir := filepath.Join(t.TempDir(), "data")
			var out, errb bytes.Buffer
			code := run([]string{"import", "--store", dir, "--batch", "50", path}, strings.NewReader(""), &out, &errb)
			if code != exitFailure || !strings.Contains(errb.String(), "nothing stored") {
				t.Fatalf("without --keep-going: exit %d, stderr %q; want %d, nothing stored", code, errb.String(), exitFailure)
			}
			var sum ingest.Summary // some importers give no summary on failure
			if out.Len() > 0 && (json.Unmarshal(out.Bytes(), &sum) != nil || sum.Stored != 0) {
				t.Errorf("summary %s: want stored 0", out.String())
			}
			if n := storedSpans(t, dir); n != 0 {
				t.Errorf("a failed import stored %d spans", n)
			}

			out.Reset()
			errb.Reset()
			code = run([]string{"import", "--store", dir, "--keep-going", path}, strings.NewReader(""), &out, &errb)
			if code != 0 {
				t.Fatalf("--keep-going: exit %d: %s", code, errb.String())
			}
			sum = ingest.Summary{}
			if err := json.Unmarshal(out.Bytes(), &sum); err != nil || len(sum.Warnings) == 0 || sum.Stored == 0 {
				t.Fatalf("--keep-going summary %s (%v): want a warning and stored > 0", out.String(), err)
			}
			if n := storedSpans(t, dir); n != sum.Stored {
				t.Errorf("--keep-going: %d spans stored, summary says %d", n, sum.Stored)
			}
			t.Logf("%s: kept %d spans of %d traces; warning %q", rel, sum.Stored, sum.Traces, sum.Warnings[0])
		})
	}
}

// TestImportCountsTraceIDs: the summary's traces counts distinct trace
// ids, also when a trace arrives as several parentless spans (a dial9
// active period's polls, parks and unparks, re-imported as Trace JSON
// lines).
func TestImportCountsTraceIDs(t *testing.T) {
	spans := importSample(t, "dial9", "dial9/demo-2026-03-18-small.bin")
	ids := map[[16]byte]bool{}
	roots := 0
	var lines bytes.Buffer
	for _, sp := range spans {
		ids[sp.TraceID] = true
		if sp.ParentID == 0 {
			roots++
		}
		b, err := sp.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		lines.Write(append(b, '\n'))
	}
	path := filepath.Join(t.TempDir(), "spans.jsonl")
	if err := os.WriteFile(path, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"dial9", "json"} {
		src := path
		if format == "dial9" {
			src = filepath.Join(samples, "dial9/demo-2026-03-18-small.bin")
		}
		var out, errb bytes.Buffer
		if code := run([]string{"import", "--dry-run", "--format", format, src}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, errb.String())
		}
		var sum ingest.Summary
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Traces != int64(len(ids)) || roots == len(ids) {
			t.Errorf("%s: traces = %d, want %d distinct trace ids (%d parentless spans)", format, sum.Traces, len(ids), roots)
		}
	}
	t.Logf("%d trace ids, %d parentless spans", len(ids), roots)
}
