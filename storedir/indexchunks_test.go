package storedir

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ztsd/ztsd/bench"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

type testIndexes struct {
	meta *index.Index
	text *textindex.Index
}

func openTestIndexes(t testing.TB) testIndexes {
	t.Helper()
	dir := t.TempDir()
	meta, err := index.Open(filepath.Join(dir, metaDir), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	text, err := textindex.Open(filepath.Join(dir, textDir), textindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close(); text.Close() })
	return testIndexes{meta, text}
}

// TestIndexChunksMatchesIndexChunk: indexing a group of chunks in one
// batch (the write path's group commit) yields exactly the text ids,
// entries, counts and watermarks of indexing them one by one (what the
// catch-up on open does), so either may rebuild what the other wrote.
func TestIndexChunksMatchesIndexChunk(t *testing.T) {
	g := bench.NewGenerator(bench.Workload{Seed: 9})
	var chunks []ChunkSpans
	off := int64(16)
	var all []*trace.Span
	for range 6 {
		var spans []*trace.Span
		for len(spans) < 300 {
			spans = append(spans, g.Trace()...)
		}
		all = append(all, spans...)
		chunks = append(chunks, ChunkSpans{Off: off, Next: off + 1000 + int64(len(spans)), Spans: spans})
		off = chunks[len(chunks)-1].Next
	}
	one, group := openTestIndexes(t), openTestIndexes(t)
	for _, c := range chunks {
		if err := IndexChunk(one.meta, one.text, c.Off, c.Next, c.Spans, true, true); err != nil {
			t.Fatal(err)
		}
	}
	// Two groups, as two group commits would.
	if err := IndexChunks(group.meta, group.text, chunks[:4], true, true); err != nil {
		t.Fatal(err)
	}
	if err := IndexChunks(group.meta, group.text, chunks[4:], true, true); err != nil {
		t.Fatal(err)
	}
	if a, b := one.text.Count(), group.text.Count(); a != b || a == 0 {
		t.Fatalf("text index holds %d strings chunk by chunk, %d grouped", a, b)
	}
	for i := uint64(1); i <= one.text.Count(); i++ {
		a, err1 := one.text.String(i)
		b, err2 := group.text.String(i)
		if err1 != nil || err2 != nil || a != b {
			t.Fatalf("text id %d: %q (%v) chunk by chunk, %q (%v) grouped", i, a, err1, b, err2)
		}
	}
	if a, b := one.meta.Stats(), group.meta.Stats(); a != b || a.Spans != uint64(len(all)) {
		t.Fatalf("metadata stats %+v chunk by chunk, %+v grouped (%d spans)", a, b, len(all))
	}
	for _, ix := range []testIndexes{one, group} {
		mw, _ := ix.meta.Watermark()
		tw, _ := ix.text.Watermark()
		if mw != off || tw != off {
			t.Fatalf("watermarks %d/%d, want %d", mw, tw, off)
		}
	}
	// Every attribute search finds the same entries in both.
	k, _, _ := one.text.Lookup("service.name")
	for _, svc := range bench.Services {
		v, ok, _ := one.text.Lookup(svc)
		if !ok {
			continue
		}
		q := index.Query{Attrs: []index.KV{{Key: k, Value: v}}}
		var hits [2][]index.SpanRef
		for i, ix := range []testIndexes{one, group} {
			if err := ix.meta.Search(context.Background(), q, func(h index.Hit) bool {
				hits[i] = append(hits[i], h.SpanRef)
				return true
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(hits[0]) == 0 || !slices.Equal(hits[0], hits[1]) {
			t.Fatalf("service.name:%s: %d hits chunk by chunk, %d grouped (or they differ)", svc, len(hits[0]), len(hits[1]))
		}
	}
}

func TestIndexChunksRefusesGaps(t *testing.T) {
	ix := openTestIndexes(t)
	spans := bench.NewGenerator(bench.Workload{Seed: 1}).Trace()
	err := IndexChunks(ix.meta, ix.text, []ChunkSpans{{Off: 16, Next: 100, Spans: spans}, {Off: 200, Next: 300, Spans: spans}}, true, true)
	if err == nil || !strings.Contains(err.Error(), "offset 200") {
		t.Fatalf("a gap between chunks: err = %v", err)
	}
	if wm, _ := ix.meta.Watermark(); wm != 0 {
		t.Fatalf("watermark moved to %d over a gap", wm)
	}
	if err := IndexChunks(ix.meta, ix.text, nil, true, true); err != nil {
		t.Fatalf("no chunks: %v", err)
	}
}

// TestConcurrentReadsShareChunkViews reads traces and searches from many
// goroutines at once (run with -race): they share the cached chunk views,
// which learn span offsets under their own lock.
func TestConcurrentReadsShareChunkViews(t *testing.T) {
	g := bench.NewGenerator(bench.Workload{Seed: 4})
	var spans []*trace.Span
	for len(spans) < 3000 {
		spans = append(spans, g.Trace()...)
	}
	o := testOptions()
	o.MaxStoreSize = 1 << 30
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	appendAll(t, db, spans, 500)
	byTrace := map[trace.TraceID]int{}
	for _, sp := range spans {
		byTrace[sp.TraceID]++
	}
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := w; i < len(spans); i += 37 {
				id := spans[i].TraceID
				roots, err := db.GetTrace(context.Background(), id)
				if err != nil {
					errs <- err
					return
				}
				n := 0
				var count func(*trace.Span)
				count = func(sp *trace.Span) {
					n++
					for _, c := range sp.Children {
						count(c)
					}
				}
				for _, r := range roots {
					count(r)
				}
				if n != byTrace[id] {
					errs <- fmt.Errorf("trace %s: %d spans, want %d", id, n, byTrace[id])
					return
				}
				user, _ := spans[i].Attrs.Get("user.id")
				res, err := db.Search(context.Background(), Query{Attrs: []trace.Attr{{Key: "user.id", Value: user}}, Spans: true})
				if err != nil || len(res.Spans) == 0 {
					errs <- fmt.Errorf("search user.id of trace %s: %d results, %v", id, len(res.Spans), err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
