package migrate

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// withVersion returns a copy of sp carrying the span attribute ver=v: a
// different version of the same piece (same trace, span and chunk ids).
func withVersion(sp *trace.Span, v string) *trace.Span {
	c := *sp
	c.Children = nil
	c.Attrs = append(trace.Attrs(nil), sp.Attrs...)
	c.Attrs.Set("ver", trace.String(v))
	return &c
}

// versionedSourceDir writes spans into a data directory of two stores,
// then stores newer versions of some of them: every 7th span again in
// the second store (ver=2, superseding across a rotation), and of those
// every 2nd once more in the same store (ver=3, superseding within a
// store). It returns the directory, the current version of every span,
// and how many older versions the directory holds.
func versionedSourceDir(t *testing.T, dir string) (cur []*trace.Span, older int) {
	t.Helper()
	spans := workload.Spans(31, 600)
	writeDataDir(t, dir, spans, 2, lz4crc)
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.Chunk = lz4crc
	o.Now = fixedNow
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	cur = append([]*trace.Span(nil), spans...)
	var v2, v3 []*trace.Span
	for i := 0; i < len(spans); i += 7 {
		cur[i] = withVersion(spans[i], "2")
		v2 = append(v2, cur[i])
		if i%14 == 0 {
			cur[i] = withVersion(spans[i], "3")
			v3 = append(v3, cur[i])
		}
	}
	for _, batch := range [][]*trace.Span{v2, v3} {
		if err := db.Append(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return cur, len(v2) + len(v3)
}

// spanVersion reads the ver attribute of span id in the traces read.
func spanVersion(t *testing.T, got map[trace.TraceID][]*trace.Span, sp *trace.Span) string {
	t.Helper()
	var found *trace.Span
	var walk func(s *trace.Span)
	walk = func(s *trace.Span) {
		if s.SpanID == sp.SpanID {
			found = s
		}
		for _, c := range s.Children {
			walk(c)
		}
	}
	for _, r := range got[sp.TraceID] {
		walk(r)
	}
	if found == nil {
		t.Fatalf("span %s of trace %s not read back", sp.SpanID, sp.TraceID)
	}
	v, _ := found.Attrs.Get("ver")
	return v.Str
}

// searchCount counts the spans a search for attr ver=v lists (all pages).
func searchCount(t *testing.T, dir, v string) map[trace.SpanID]int {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[trace.SpanID]int{}
	q := storedir.Query{Attrs: []trace.Attr{{Key: "ver", Value: trace.String(v)}}, Limit: 1000}
	for {
		res, err := db.Search(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range res.Spans {
			out[sp.SpanID]++
		}
		if res.Cursor == "" {
			return out
		}
		q.Cursor = res.Cursor
	}
}

// TestSupersededVersions: a data directory holding superseded spans
// migrates to one that serves exactly what the daemon served — the newest
// version of each piece — with each listed once by search; a directory
// merged with itself still writes identical duplicates once.
func TestSupersededVersions(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	cur, older := versionedSourceDir(t, src)
	ids := traceIDs(cur)
	want := readTraces(t, src, ids)
	n := int64(len(cur))
	for _, sources := range [][]string{{src}, {src, src}} {
		to := filepath.Join(t.TempDir(), "dst")
		rep := migrateOK(t, Options{Sources: sources, Target: to})
		if rep.SpansWritten != n {
			t.Fatalf("%d sources: wrote %d distinct pieces, want %d", len(sources), rep.SpansWritten, n)
		}
		got := readTraces(t, to, ids)
		sameTraces(t, "versions", want, got, ids)
		for i := 0; i < len(cur); i += 7 {
			wantV := "2"
			if i%14 == 0 {
				wantV = "3"
			}
			if v := spanVersion(t, got, cur[i]); v != wantV {
				t.Fatalf("%d sources: span %d: target serves ver=%q, want %q", len(sources), i, v, wantV)
			}
		}
		for _, v := range []string{"2", "3"} {
			srcHits, dstHits := searchCount(t, src, v), searchCount(t, to, v)
			if len(dstHits) != len(srcHits) || len(dstHits) == 0 {
				t.Fatalf("%d sources: search ver=%s lists %d spans in the target, %d in the source", len(sources), v, len(dstHits), len(srcHits))
			}
			for id, c := range dstHits {
				if c != 1 || srcHits[id] != 1 {
					t.Fatalf("%d sources: search ver=%s lists span %s %d times (source %d)", len(sources), v, id, c, srcHits[id])
				}
			}
		}
		if len(sources) == 1 {
			// The source's version sequence is reproduced: no duplicate.
			if rep.Duplicates != 0 || rep.NewerVersions != int64(older) || rep.Verify.TargetPieces != n+int64(older) {
				t.Fatalf("1 source: %d duplicates, %d newer versions, verification %+v; want 0, %d, %d target pieces",
					rep.Duplicates, rep.NewerVersions, rep.Verify, older, n+int64(older))
			}
		} else if rep.Duplicates == 0 || rep.Duplicates+rep.NewerVersions+rep.SpansWritten != rep.SpansRead {
			t.Fatalf("2 sources: read %d, wrote %d, %d duplicates, %d newer versions", rep.SpansRead, rep.SpansWritten, rep.Duplicates, rep.NewerVersions)
		}
		mustVerify(t, to)
	}
}

// TestSupersededVersionsResume interrupts a migration of a directory
// holding superseded spans, merged with itself (so batches carry several
// versions of a piece), right after each batch reached the target and
// before its checkpoint: the resumed run records what the interrupted one
// wrote, writes each version once, and the target serves the newest.
func TestSupersededVersionsResume(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	cur, _ := versionedSourceDir(t, src)
	ids := traceIDs(cur)
	want := readTraces(t, src, ids)
	// The uninterrupted run: its steps and its target's piece count.
	var all []string
	ref := migrateOK(t, Options{Sources: []string{src, src}, Target: filepath.Join(base, "ref"), BatchBytes: 8 << 10,
		Hook: func(s string) error { all = append(all, s); return nil }})
	tried := 0
	for n := 1; n <= len(all); n++ {
		if all[n-1] != StepAppended {
			continue
		}
		tried++
		to := filepath.Join(t.TempDir(), "dst")
		hook, _ := crashAt(n)
		opt := Options{Sources: []string{src, src}, Target: to, BatchBytes: 8 << 10, Hook: hook}
		if _, err := Run(context.Background(), opt); !errors.Is(err, errCrash) {
			t.Fatalf("crash at step %d: %v", n, err)
		}
		opt.Hook = nil
		rep := migrateOK(t, opt)
		if !rep.Resumed || rep.Verify.TargetPieces != ref.Verify.TargetPieces || rep.SpansWritten != int64(len(cur)) ||
			rep.NewerVersions != ref.NewerVersions || rep.Duplicates != ref.Duplicates {
			t.Fatalf("crash at step %d: resumed %v, %d target pieces, %d written, %d newer versions, %d duplicates; uninterrupted: %d, %d, %d, %d",
				n, rep.Resumed, rep.Verify.TargetPieces, rep.SpansWritten, rep.NewerVersions, rep.Duplicates,
				ref.Verify.TargetPieces, ref.SpansWritten, ref.NewerVersions, ref.Duplicates)
		}
		sameTraces(t, "resumed", want, readTraces(t, to, ids), ids)
		mustVerify(t, to)
	}
	if tried == 0 {
		t.Fatalf("no append step to interrupt in %v", all)
	}
}
