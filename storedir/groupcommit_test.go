package storedir

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/ztsd/ztsd/trace"
)

// scanChunks decodes every chunk of every store's data file, oldest store
// first, and returns each chunk's spans.
func scanChunks(t *testing.T, db *DB) [][]*trace.Span {
	t.Helper()
	stores, release := db.snapshot()
	defer release()
	var out [][]*trace.Span
	for i := len(stores) - 1; i >= 0; i-- {
		sc := stores[i].data.Scanner()
		for sc.Next() {
			_, payload := sc.Chunk()
			spans, err := trace.DecodeChunk(payload, trace.DefaultLimits())
			if err != nil {
				t.Fatalf("decode chunk: %v", err)
			}
			out = append(out, spans)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if bad := sc.BadRegions(); len(bad) > 0 {
			t.Fatalf("bad regions: %+v", bad)
		}
	}
	return out
}

// checkStoredOnce checks that every span of want is in exactly one chunk
// and nothing else is, and that each reads back exactly.
func checkStoredOnce(t *testing.T, db *DB, chunks [][]*trace.Span, want []*trace.Span) {
	t.Helper()
	type key struct {
		tr trace.TraceID
		sp trace.SpanID
	}
	seen := map[key]int{}
	for _, c := range chunks {
		for _, sp := range c {
			seen[key{sp.TraceID, sp.SpanID}]++
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("data file holds %d distinct spans, want %d", len(seen), len(want))
	}
	for _, sp := range want {
		if n := seen[key{sp.TraceID, sp.SpanID}]; n != 1 {
			t.Fatalf("span %s/%s stored %d times, want once", sp.TraceID, sp.SpanID, n)
		}
	}
	checkGets(t, db, want, 1)
}

// TestConcurrentSmallRequestsShareChunks: with sync=batch, concurrent
// 1-span requests are group-committed into shared chunks, and each
// request's span reads back exactly, before and after a reopen.
func TestConcurrentSmallRequestsShareChunks(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	o := testOptions()
	o.Sync = SyncBatch
	o.MaxStoreSize = 1 << 30
	db := openTestDB(t, dir, o)
	spans := genWorkload(11, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = db.Append(context.Background(), spans[i:i+1])
			if errs[i] == nil {
				// Read-your-writes: readable once acknowledged.
				if _, err := db.GetSpan(context.Background(), spans[i].TraceID, spans[i].SpanID); err != nil {
					errs[i] = err
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	chunks := scanChunks(t, db)
	t.Logf("%d concurrent 1-span requests in %d chunks", n, len(chunks))
	if len(chunks) >= n {
		t.Fatalf("%d concurrent 1-span requests took %d chunks: requests do not share chunks", n, len(chunks))
	}
	checkStoredOnce(t, db, chunks, spans)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	checkStoredOnce(t, db, scanChunks(t, db), spans)
}

// TestGroupCommitSplitsSharedChunks commits one group of small requests of
// 1–5 spans with a large request among them and a small chunk target:
// the small requests' spans share chunks that respect the target, the
// large one keeps its own chunks, every chunk maps to the requests whose
// spans it holds, and every span reads back exactly.
func TestGroupCommitSplitsSharedChunks(t *testing.T) {
	o := testOptions()
	o.ChunkTargetSize = 48 << 10 // small requests: payload ≤ 3 KiB
	o.MaxStoreSize = 1 << 30
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	spans := genWorkload(12, 600)
	var reqs []*commitReq
	large := -1
	for i, r := 0, 0; i < len(spans); r++ {
		k := 1 + r%5
		if r == 20 {
			k = 200
		}
		req, err := db.prepare(spans[i:min(i+k, len(spans))])
		if err != nil {
			t.Fatal(err)
		}
		if r == 20 {
			if req.groupable {
				t.Fatal("a 200-span request is groupable")
			}
			large = len(reqs)
		}
		reqs = append(reqs, req)
		i += k
	}
	groupable := 0
	for _, r := range reqs {
		if r.groupable {
			groupable++
		}
	}
	if groupable < len(reqs)/2 {
		t.Fatalf("only %d of %d small requests are groupable", groupable, len(reqs))
	}
	// Each unit's spans are, in order, the spans of requests first..last.
	units := db.groupUnits(reqs, make([]error, len(reqs)))
	var got []*trace.Span
	for _, u := range units {
		if u.first > u.last {
			t.Fatalf("unit maps to requests %d..%d", u.first, u.last)
		}
		var want []*trace.Span
		for i := u.first; i <= u.last; i++ {
			want = append(want, reqs[i].spansOf()...)
		}
		for _, sp := range u.c.spans {
			found := false
			for _, w := range want {
				found = found || w == sp
			}
			if !found {
				t.Fatalf("unit for requests %d..%d holds span %s/%s of another request", u.first, u.last, sp.TraceID, sp.SpanID)
			}
		}
		if (u.first <= large && large <= u.last) && u.first != u.last {
			t.Fatalf("the large request shares a chunk (requests %d..%d)", u.first, u.last)
		}
		got = append(got, u.c.spans...)
	}
	if len(got) != len(spans) {
		t.Fatalf("units hold %d spans, want %d", len(got), len(spans))
	}
	for i := range got {
		if got[i] != spans[i] {
			t.Fatalf("unit span %d is not request span %d", i, i)
		}
	}

	db.commitRequests(reqs)
	for i, r := range reqs {
		if err := <-r.done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	chunks := scanChunks(t, db)
	if len(chunks) >= len(reqs) {
		t.Fatalf("%d requests in %d chunks", len(reqs), len(chunks))
	}
	t.Logf("%d requests (%d groupable) in %d chunks", len(reqs), groupable, len(chunks))
	if len(chunks) < 3 {
		t.Fatalf("%d requests in %d chunks: the shared chunks did not split at the target size", len(reqs), len(chunks))
	}
	stores, release := db.snapshot()
	sc := stores[0].data.Scanner()
	for sc.Next() {
		if _, p := sc.Chunk(); len(p) > o.ChunkTargetSize {
			t.Errorf("chunk payload of %d bytes, more than the %d target", len(p), o.ChunkTargetSize)
		}
	}
	release()
	checkStoredOnce(t, db, chunks, spans)
}

// spansOf returns the spans a request carries (its chunks' spans).
func (r *commitReq) spansOf() []*trace.Span {
	if r.groupable {
		return r.spans
	}
	var out []*trace.Span
	for _, c := range r.chunks {
		out = append(out, c.spans...)
	}
	return out
}

// TestInvalidRequestDoesNotFailItsGroup: an invalid span fails its own
// request before grouping; the concurrent valid requests are stored.
func TestInvalidRequestDoesNotFailItsGroup(t *testing.T) {
	o := testOptions()
	o.Sync = SyncBatch
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	spans := genWorkload(13, 32)
	bad := *spans[5]
	bad.TraceID = trace.TraceID{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(spans))
	for i := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := spans[i : i+1]
			if i == 5 {
				req = []*trace.Span{&bad}
			}
			errs[i] = db.Append(context.Background(), req)
		}()
	}
	close(start)
	wg.Wait()
	var stored []*trace.Span
	for i, err := range errs {
		switch {
		case i == 5 && !errors.Is(err, ErrInvalid):
			t.Fatalf("invalid request: got %v, want ErrInvalid", err)
		case i != 5 && err != nil:
			t.Fatalf("request %d: %v", i, err)
		case i != 5:
			stored = append(stored, spans[i])
		}
	}
	checkStoredOnce(t, db, scanChunks(t, db), stored)
}
