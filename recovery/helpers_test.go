package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/internal/workload"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/trace"
)

// spanKey names one stored span.
type spanKey struct {
	trace trace.TraceID
	span  trace.SpanID
}

// fixtureChunk is one chunk of a fixture's data file and the spans it holds.
type fixtureChunk struct {
	off, next int64
	spans     []spanKey
}

// fixture is a closed data directory with one store of known contents.
type fixture struct {
	dir    string // data directory
	store  string // its store 000000
	size   int64  // data file size
	chunks []fixtureChunk
	spans  []*trace.Span
}

func (f *fixture) dataPath() string { return filepath.Join(f.store, DataFile) }

func testStoreOptions() storedir.Options {
	o := storedir.DefaultOptions()
	o.Sync = storedir.SyncNone
	o.MaxStoreSize = 1 << 30
	o.ChunkTargetSize = 4 << 10
	return o
}

// buildFixture writes n workload spans (seed) into a fresh data directory
// through storedir, in requests of batch spans, and records which chunk
// holds which span by scanning the data file.
func buildFixture(t testing.TB, seed uint64, n, batch int) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := storedir.Open(context.Background(), dir, testStoreOptions())
	if err != nil {
		t.Fatal(err)
	}
	spans := workload.Spans(seed, n)
	for i := 0; i < len(spans); i += batch {
		if err := db.Append(context.Background(), spans[i:min(i+batch, len(spans))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, store: filepath.Join(dir, storedir.StoreName(0)), spans: spans}
	f.chunks, f.size = scanFixture(t, f.dataPath())
	return f
}

// scanFixture lists the chunks of a data file that must be intact.
func scanFixture(t testing.TB, path string) ([]fixtureChunk, int64) {
	t.Helper()
	df, err := chunk.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	sc := df.Scanner()
	var out []fixtureChunk
	for sc.Next() {
		off, payload := sc.Chunk()
		spans, err := trace.DecodeChunk(payload, trace.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		c := fixtureChunk{off: off, next: sc.Offset()}
		for _, sp := range spans {
			c.spans = append(c.spans, spanKey{sp.TraceID, sp.SpanID})
		}
		out = append(out, c)
	}
	if sc.Err() != nil || len(sc.BadRegions()) != 0 {
		t.Fatalf("fixture data file not clean: %v %v", sc.Err(), sc.BadRegions())
	}
	return out, df.Size()
}

// clone copies the fixture's data directory.
func (f *fixture) clone(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	copyTree(t, f.dir, dir)
	c := *f
	c.dir, c.store = dir, filepath.Join(dir, storedir.StoreName(0))
	return &c
}

func copyTree(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o640)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// chunksOverlapping returns the indexes of the fixture chunks that overlap
// [from, to).
func (f *fixture) chunksOverlapping(from, to int64) []int {
	var out []int
	for i, c := range f.chunks {
		if c.off < to && c.next > from {
			out = append(out, i)
		}
	}
	return out
}

// readable opens the data directory with storedir and returns which of the
// fixture's spans can be read (trace by trace), checking that each readable
// span is exactly the one written and that no other span appears.
func (f *fixture) readable(t testing.TB) map[spanKey]bool {
	t.Helper()
	db, err := storedir.Open(context.Background(), f.dir, testStoreOptions())
	if err != nil {
		t.Fatalf("open after recovery: %v", err)
	}
	defer db.Close()
	written := map[spanKey]*trace.Span{}
	var traces []trace.TraceID
	for _, sp := range f.spans {
		if _, ok := written[spanKey{sp.TraceID, 0}]; !ok {
			written[spanKey{sp.TraceID, 0}] = nil
			traces = append(traces, sp.TraceID)
		}
		written[spanKey{sp.TraceID, sp.SpanID}] = sp
	}
	out := map[spanKey]bool{}
	for _, id := range traces {
		roots, err := db.GetTrace(context.Background(), id)
		if errors.Is(err, storedir.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("trace %s: %v", id, err)
		}
		var walk func(sps []*trace.Span)
		walk = func(sps []*trace.Span) {
			for _, got := range sps {
				k := spanKey{got.TraceID, got.SpanID}
				want := written[k]
				if want == nil {
					t.Fatalf("trace %s: span %s was never written", id, got.SpanID)
				}
				if out[k] {
					t.Fatalf("trace %s: span %s returned twice", id, got.SpanID)
				}
				w, g := *want, *got
				w.Children, g.Children = nil, nil
				if !g.Equal(&w) {
					t.Fatalf("span %s/%s differs after recovery: %s", id, got.SpanID, trace.Diff(&w, &g))
				}
				out[k] = true
				walk(got.Children)
			}
		}
		walk(roots)
	}
	return out
}

// expectReadable checks that exactly the spans outside the lost chunks
// are readable.
func (f *fixture) expectReadable(t testing.TB, lost []int) {
	t.Helper()
	got := f.readable(t)
	lostSpan := map[spanKey]bool{}
	for _, i := range lost {
		for _, k := range f.chunks[i].spans {
			lostSpan[k] = true
		}
	}
	missing, extra := 0, 0
	for _, sp := range f.spans {
		k := spanKey{sp.TraceID, sp.SpanID}
		switch {
		case lostSpan[k] && got[k]:
			extra++
		case !lostSpan[k] && !got[k]:
			missing++
		}
	}
	if missing > 0 || extra > 0 {
		t.Fatalf("readable spans: %d of the intact chunks' spans missing, %d of the lost chunks' spans readable (lost chunks %v)", missing, extra, lost)
	}
	t.Logf("%d of %d spans readable, %d chunks lost", len(got), len(f.spans), len(lost))
}

func problemKinds(ps []Problem) []string {
	var kinds []string
	for _, p := range ps {
		if !slices.Contains(kinds, p.Kind) {
			kinds = append(kinds, p.Kind)
		}
	}
	sort.Strings(kinds)
	return kinds
}

func flipBit(t testing.TB, path string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

func writeBytes(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readBytes(t testing.TB, path string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

func appendBytes(t testing.TB, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// largestFile returns the largest file in dir whose name ends in suffix.
func largestFile(t testing.TB, dir, suffix string) string {
	t.Helper()
	var best string
	var bestSize int64 = -1
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != suffix {
			continue
		}
		fi, err := e.Info()
		if err == nil && fi.Size() > bestSize {
			best, bestSize = filepath.Join(dir, e.Name()), fi.Size()
		}
	}
	if best == "" {
		t.Fatalf("no %s file in %s", suffix, dir)
	}
	return best
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedFix != nil {
		os.RemoveAll(sharedFix.dir)
	}
	os.Exit(code)
}
