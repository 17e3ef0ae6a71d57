package migrate

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/recovery"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// fixedNow is the clock of generated stores, so that they are byte for
// byte reproducible.
var fixedNow = func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }

// writeDataDir stores spans into a fresh data directory at dir, split
// evenly into nstores stores, with the given chunk options, and closes it.
func writeDataDir(t testing.TB, dir string, spans []*trace.Span, nstores int, copt chunk.Options) {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.Chunk = copt
	o.ChunkTargetSize = 16 << 10
	o.Now = fixedNow
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	per := (len(spans) + nstores - 1) / nstores
	for s := 0; s < nstores; s++ {
		if s > 0 {
			if err := db.Rotate(); err != nil {
				t.Fatal(err)
			}
		}
		part := spans[min(s*per, len(spans)):min((s+1)*per, len(spans))]
		for i := 0; i < len(part); i += 100 {
			if err := db.Append(context.Background(), part[i:min(i+100, len(part))]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

var lz4crc = chunk.Options{Compression: chunk.LZ4, Checksums: true}

// sourceDir writes n workload spans from seed into a new data directory.
func sourceDir(t testing.TB, seed uint64, n, nstores int) (string, []*trace.Span) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	spans := workload.Spans(seed, n)
	writeDataDir(t, dir, spans, nstores, lz4crc)
	return dir, spans
}

// traceIDs returns the distinct trace ids of spans, sorted.
func traceIDs(spans []*trace.Span) []trace.TraceID {
	set := map[trace.TraceID]bool{}
	for _, sp := range spans {
		set[sp.TraceID] = true
	}
	out := make([]trace.TraceID, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i][:], out[j][:]) < 0 })
	return out
}

// readTraces opens a data directory and reads the given traces (nil for
// an unknown one).
func readTraces(t testing.TB, dir string, ids []trace.TraceID) map[trace.TraceID][]*trace.Span {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[trace.TraceID][]*trace.Span{}
	for _, id := range ids {
		roots, err := db.GetTrace(context.Background(), id)
		if err == nil {
			out[id] = roots
		}
	}
	return out
}

// countPieces sums the spans the stores of dir index.
func countPieces(t testing.TB, dir string) int64 {
	t.Helper()
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	db, err := storedir.Open(context.Background(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	for _, in := range db.Stores() {
		n += in.Spans
	}
	return n
}

// sameTraces fails unless a and b hold equal traces for every id.
func sameTraces(t testing.TB, what string, a, b map[trace.TraceID][]*trace.Span, ids []trace.TraceID) {
	t.Helper()
	for _, id := range ids {
		x, y := a[id], b[id]
		if len(x) != len(y) {
			t.Fatalf("%s: trace %s: %d roots vs %d", what, id, len(x), len(y))
		}
		for i := range x {
			if d := trace.Diff(x[i], y[i]); d != "" {
				t.Fatalf("%s: trace %s root %d: %s", what, id, i, d)
			}
		}
	}
}

// mustVerify runs what `ztsctl verify` runs and fails on any problem.
func mustVerify(t testing.TB, dir string) *recovery.VerifyReport {
	t.Helper()
	rep, err := recovery.VerifyDataDir(context.Background(), dir, recovery.Options{})
	if err != nil {
		t.Fatalf("verify %s: %v", dir, err)
	}
	if !rep.OK {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Fatalf("verify %s:\n%s", dir, b.String())
	}
	return rep
}

// dataHeader reads the options of every store's data file in dir.
func dataHeaders(t testing.TB, dir string) []chunk.Options {
	t.Helper()
	ids, err := listStores(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []chunk.Options
	for _, id := range ids {
		p := filepath.Join(dir, storedir.StoreName(id), dataFileName)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		opt, err := readDataHeader(p, fi.Size())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, opt)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// migrateOK runs a migration and fails unless it verified.
func migrateOK(t testing.TB, opt Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), opt)
	if err != nil {
		if rep != nil {
			var b bytes.Buffer
			rep.WriteText(&b)
			t.Fatalf("migrate: %v\n%s", err, b.String())
		}
		t.Fatalf("migrate: %v", err)
	}
	if !rep.Verify.OK {
		t.Fatalf("migrate: not verified: %v", rep.Verify.Problems)
	}
	return rep
}
