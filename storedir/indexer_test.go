package storedir

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ztsd/ztsd/config"

	"github.com/ztsd/ztsd/trace"
)

// heldIndexer returns options whose indexer waits at every job until the
// returned release is called (and from then on runs freely).
func heldIndexer(o Options) (Options, func()) {
	gate := make(chan struct{})
	var once sync.Once
	o.beforeIndexJob = func() { <-gate }
	return o, func() { once.Do(func() { close(gate) }) }
}

// TestAcknowledgedBeforeIndexedReadsWait: a write is acknowledged once it
// is durable, before the indexer has indexed it; every kind of read that
// starts after the acknowledgement waits for the indexer (here held back,
// so a read with a deadline fails with it rather than answer without the
// span), and finds the span once the indexer runs.
func TestAcknowledgedBeforeIndexedReadsWait(t *testing.T) {
	o, release := heldIndexer(testOptions())
	o.Sync = SyncBatch
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	defer release()
	sp := genWorkload(31, 1)[0]
	if err := db.Append(context.Background(), []*trace.Span{sp}); err != nil {
		t.Fatalf("append with the indexer held: %v", err)
	}
	if got, want := db.idx.acked.Load(), uint64(1); got != want {
		t.Fatalf("acked mark %d, want %d", got, want)
	}
	if got := db.idx.indexed.Load(); got != 0 {
		t.Fatalf("indexed mark %d with the indexer held", got)
	}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 50*time.Millisecond)
	}
	key := sp.Attrs[0].Key
	reads := map[string]func(context.Context) error{
		"get span": func(ctx context.Context) error { _, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID); return err },
		"get trace": func(ctx context.Context) error {
			_, err := db.GetTrace(ctx, sp.TraceID)
			return err
		},
		"search": func(ctx context.Context) error {
			_, err := db.Search(ctx, Query{Spans: true, Limit: 10})
			return err
		},
		"attribute keys":   func(ctx context.Context) error { _, err := db.AttributeKeys(ctx, 0); return err },
		"attribute values": func(ctx context.Context) error { _, err := db.AttributeValues(ctx, key, 0); return err },
		"trace head": func(ctx context.Context) error {
			_, _, _, _, err := db.TraceHead(ctx, sp.TraceID)
			return err
		},
	}
	for name, read := range reads {
		ctx, cancel := short()
		err := read(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s with the acknowledged span not indexed yet: want the deadline, got %v", name, err)
		}
	}
	release()
	got, err := db.GetSpan(context.Background(), sp.TraceID, sp.SpanID)
	if err != nil {
		t.Fatalf("get after the indexer ran: %v", err)
	}
	if got.StartNS != sp.StartNS || got.Attrs[0].Key != key || got.Attrs[0].Value.Text() != sp.Attrs[0].Value.Text() {
		t.Fatalf("read back %+v, want %+v", got, sp)
	}
	res, err := db.Search(context.Background(), Query{Spans: true, Attrs: sp.Attrs[:1], Limit: 10})
	if err != nil || len(res.Spans) != 1 || res.Spans[0].SpanID != sp.SpanID {
		t.Fatalf("search after the indexer ran: %v %+v", err, res)
	}
	vals, err := db.AttributeValues(context.Background(), key, 0)
	if err != nil || len(vals) != 1 || vals[0] != sp.Attrs[0].Value.Text() {
		t.Fatalf("attribute values after the indexer ran: %v %q", err, vals)
	}
}

// TestIndexQueueBackpressure: with the indexer held, the committer
// acknowledges small groups until they make a full gathering
// (indexGatherSpans spans), and large ones until indexQueueJobs of them
// wait; the next request waits until the indexer moves.
func TestIndexQueueBackpressure(t *testing.T) {
	for _, tc := range []struct {
		name       string
		per, count int // spans per request, requests acknowledged
	}{
		{"small", 1, indexGatherSpans},
		{"large", indexGatherSpans, indexQueueJobs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, release := heldIndexer(testOptions())
			o.Sync = SyncBatch
			db := openTestDB(t, t.TempDir(), o)
			defer db.Close()
			defer release()
			spans := genWorkload(32, tc.per*(tc.count+1))
			for i := 0; i < tc.count; i++ {
				if err := db.Append(context.Background(), spans[i*tc.per:(i+1)*tc.per]); err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
			}
			last := make(chan error, 1)
			go func() { last <- db.Append(context.Background(), spans[tc.count*tc.per:]) }()
			select {
			case err := <-last:
				t.Fatalf("append past a full index queue returned (%v) while the indexer was held", err)
			case <-time.After(200 * time.Millisecond):
			}
			release()
			if err := <-last; err != nil {
				t.Fatalf("append after the indexer moved: %v", err)
			}
			checkGets(t, db, spans, 1)
		})
	}
}

// TestReadYourWritesWithLaggingIndexer: concurrent writers each read their
// span back (get and search) as soon as it is acknowledged, while the
// indexer lags behind the acknowledgements.
func TestReadYourWritesWithLaggingIndexer(t *testing.T) {
	o := testOptions()
	o.Sync = SyncBatch
	o.beforeIndexJob = func() { time.Sleep(300 * time.Microsecond) }
	db := openTestDB(t, t.TempDir(), o)
	defer db.Close()
	const writers, each = 4, 40
	spans := genWorkload(33, writers*each)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, sp := range spans[w*each : (w+1)*each] {
				ctx := context.Background()
				if err := db.Append(ctx, []*trace.Span{sp}); err != nil {
					errs <- err
					return
				}
				if _, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID); err != nil {
					errs <- err
					return
				}
				res, err := db.Search(ctx, Query{Spans: true, SinceNS: sp.StartNS, UntilNS: sp.StartNS + 1, Limit: 100})
				if err != nil {
					errs <- err
					return
				}
				found := false
				for _, r := range res.Spans {
					found = found || r.SpanID == sp.SpanID
				}
				if !found {
					errs <- errors.New("an acknowledged span is missing from a search right after")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestRotationSealsIndexedStores: rotations in the middle of groups, with
// the indexer held back (then slow): every sealed store's indexes cover
// its whole data file and the counters its config.props got at sealing
// count every chunk in it, and nothing is re-indexed at the next open.
func TestRotationSealsIndexedStores(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.Sync = SyncBatch
	o.MaxStoreSize = 16 << 10
	o.ChunkTargetSize = 8 << 10
	gate := make(chan struct{})
	o.beforeIndexJob = func() { <-gate; time.Sleep(time.Millisecond) }
	db := openTestDB(t, dir, o)
	spans := genWorkload(34, 1600)
	// One request of many chunks: rotations in its middle while the
	// indexer is held (a rotation waits for it).
	go func() { time.Sleep(500 * time.Millisecond); close(gate) }()
	if err := db.Append(context.Background(), spans[:400]); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 400 + w*20; i < len(spans); i += 80 {
				if err := db.Append(context.Background(), spans[i:i+20]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stores, releaseSnap := db.snapshot()
	sealed := 0
	for _, s := range stores {
		if !s.Sealed() {
			continue
		}
		sealed++
		wm, err := s.meta.Watermark()
		if err != nil || wm != s.data.Size() {
			t.Fatalf("sealed store %s: metadata watermark %d, data file %d bytes (%v)", StoreName(s.id), wm, s.data.Size(), err)
		}
		n := int64(0)
		sc := s.data.Scanner()
		for sc.Next() {
			n++
		}
		p, err := config.ReadPropsFile(filepath.Join(s.dir, propsFile))
		if err != nil {
			t.Fatal(err)
		}
		props, err := config.StorePropsFrom(p)
		if err != nil {
			t.Fatal(err)
		}
		if props.Chunks != n {
			t.Fatalf("sealed store %s: config.props written at sealing counts %d chunks, its data file holds %d", StoreName(s.id), props.Chunks, n)
		}
	}
	releaseSnap()
	if sealed < 2 {
		t.Fatalf("%d stores sealed, want rotations", sealed)
	}
	checkGets(t, db, spans, 7)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waited for the indexer: the next open re-indexes nothing.
	reindexed := 0
	o.beforeIndexJob = nil
	o.replayed = func(int64) { reindexed++ }
	db = openTestDB(t, dir, o)
	defer db.Close()
	if reindexed != 0 {
		t.Fatalf("the open after Close re-indexed %d chunks", reindexed)
	}
	checkGets(t, db, spans, 5)
}

// TestIndexFailureReindexedAtOpen: when indexing a run of written chunks
// fails, the writes stay acknowledged (the data is durable), nothing more
// of that store is indexed (later runs would move its watermarks past the
// chunks missed), the committer moves to a new store, and the next open
// re-indexes the store so that every acknowledged span is found.
func TestIndexFailureReindexedAtOpen(t *testing.T) {
	dir := t.TempDir()
	o, release := heldIndexer(testOptions())
	o.Sync = SyncBatch
	o.MaxStoreSize = 1 << 30
	var runs int
	o.indexRunFault = func(store uint32) error {
		runs++
		if runs == 1 {
			return errors.New("injected index failure")
		}
		return nil
	}
	db := openTestDB(t, dir, o)
	spans := genWorkload(35, 10)
	// Five requests while the indexer is held: five jobs of store 0 queued.
	// The indexer takes the first before it is held and may gather the
	// others into the same run (indexGatherSpans) or not, depending on
	// when the waitIndexed below hurries it; so the first run fails,
	// whichever chunks it holds, and any later run of store 0 must be
	// skipped.
	for i := 0; i < 5; i++ {
		if err := db.Append(context.Background(), spans[i:i+1]); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	release()
	if err := db.waitIndexed(context.Background()); err != nil {
		t.Fatal(err)
	}
	stores, releaseSnap := db.snapshot()
	first := stores[len(stores)-1]
	releaseSnap()
	if !first.indexFailed.Load() {
		t.Fatal("the store whose indexing failed is not marked")
	}
	if runs != 1 {
		t.Fatalf("%d runs of the store reached its indexes after the failed one", runs-1)
	}
	if wm, _ := first.meta.Watermark(); wm >= first.data.Size() {
		t.Fatalf("metadata watermark %d covers the data file (%d bytes) although a run was not indexed", wm, first.data.Size())
	}
	for i := 5; i < len(spans); i++ {
		if err := db.Append(context.Background(), spans[i:i+1]); err != nil {
			t.Fatalf("append %d after the failure: %v", i, err)
		}
	}
	if got := len(db.Stores()); got < 2 {
		t.Fatalf("%d stores: the committer kept writing to the store whose indexing failed", got)
	}
	checkGets(t, db, spans[5:], 1) // the new store serves
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o.beforeIndexJob, o.indexRunFault = nil, nil
	db = openTestDB(t, dir, o)
	defer db.Close()
	checkGets(t, db, spans, 1)
}
