package storedir

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// slowSyncFS is the real file system whose file fsyncs take at least
// delay longer: an fsync then costs far more than a writer's round trip,
// as on a disk under load, whatever the machine running the test.
type slowSyncFS struct {
	chunk.OSFS
	delay time.Duration
}

type slowSyncFile struct {
	chunk.OSFile
	delay time.Duration
}

func (f slowSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (chunk.OSFile, error) {
	osf, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{osf, f.delay}, nil
}

func (f slowSyncFile) Sync() error {
	time.Sleep(f.delay)
	return f.OSFile.Sync()
}

// syncCounter counts the group commits' requests and fsyncs.
type syncCounter struct {
	mu              sync.Mutex
	requests, syncs int
}

func (c *syncCounter) Committed(requests, chunks, bytes int, syncs int, syncDur time.Duration) {
	c.mu.Lock()
	c.requests += requests
	c.syncs += syncs
	c.mu.Unlock()
}

func (c *syncCounter) get() (requests, syncs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, c.syncs
}

// settled returns the counts once the observer has seen want requests:
// the committer tells it about a group after answering the group's
// requests, so the last group's report may trail the writers' return.
func (c *syncCounter) settled(t *testing.T, want int) (requests, syncs int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		requests, syncs = c.get()
		if requests >= want || time.Now().After(deadline) {
			return requests, syncs
		}
		time.Sleep(time.Millisecond)
	}
}

// openGroupWaitDB opens a sync=batch DB whose fsyncs take 3 ms more.
func openGroupWaitDB(t *testing.T, delay time.Duration) (*DB, *syncCounter) {
	t.Helper()
	c := &syncCounter{}
	o := DefaultOptions()
	o.Sync = SyncBatch
	o.BatchMaxDelay = delay
	o.Observer = c
	o.FS = slowSyncFS{delay: 3 * time.Millisecond}
	db, err := Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, c
}

// closedLoop runs one writer per element of spans, each appending its
// spans one per request, the next request sent when the last is
// answered, as unbatched clients do.
func closedLoop(t *testing.T, db *DB, spans [][]*trace.Span) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(spans))
	for _, ws := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ws {
				if err := db.Append(context.Background(), ws[i:i+1]); err != nil {
					errs <- err
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

// TestAdaptiveGroupCommitSharesFsyncs: two closed-loop writers of 1-span
// requests share fsyncs. Without the adaptive wait each group holds one
// request (one writer's next request arrives during the other's fsync),
// so there are as many fsyncs as requests; with it about half as many.
// Every span reads back.
func TestAdaptiveGroupCommitSharesFsyncs(t *testing.T) {
	db, c := openGroupWaitDB(t, 0)
	const perWriter = 40
	all := genWorkload(21, 2*perWriter)
	closedLoop(t, db, [][]*trace.Span{all[:perWriter], all[perWriter:]})
	requests, syncs := c.settled(t, 2*perWriter)
	if requests != 2*perWriter {
		t.Fatalf("observer saw %d requests, want %d", requests, 2*perWriter)
	}
	// Warming up (the first fsync measured, the first peak of two seen)
	// costs a few groups of one; the rest share.
	if syncs > requests*7/10 {
		t.Fatalf("%d fsyncs for %d requests of two writers (adaptive waits %d, requests joined %d); want them to share",
			syncs, requests, db.groups.waits.Load(), db.groups.joined.Load())
	}
	if db.groups.joined.Load() == 0 {
		t.Fatal("no request joined a group during an adaptive wait")
	}
	checkGets(t, db, all, 1)
}

// TestAdaptiveGroupCommitLoneWriter: a lone writer never waits, before or
// after a period with two writers (once a wait finds nobody coming, the
// history of two writers is forgotten).
func TestAdaptiveGroupCommitLoneWriter(t *testing.T) {
	db, c := openGroupWaitDB(t, 0)
	spans := genWorkload(22, 90)
	closedLoop(t, db, [][]*trace.Span{spans[:30]})
	if w := db.groups.waits.Load(); w != 0 {
		t.Fatalf("a lone writer waited %d times", w)
	}
	if requests, syncs := c.settled(t, 30); syncs != requests {
		t.Fatalf("a lone writer: %d fsyncs for %d requests, want one each", syncs, requests)
	}
	closedLoop(t, db, [][]*trace.Span{spans[30:50], spans[50:70]})
	waits := db.groups.waits.Load()
	if waits == 0 {
		t.Fatal("two writers: no adaptive wait")
	}
	closedLoop(t, db, [][]*trace.Span{spans[70:]})
	if extra := db.groups.waits.Load() - waits; extra > 1 {
		t.Fatalf("a lone writer after two writers waited %d times, want at most once", extra)
	}
	checkGets(t, db, spans, 1)
}

// TestAdaptiveGroupCommitOffWithBatchMaxDelay: a configured
// batch_max_delay replaces the adaptive wait.
func TestAdaptiveGroupCommitOffWithBatchMaxDelay(t *testing.T) {
	db, _ := openGroupWaitDB(t, time.Millisecond)
	spans := genWorkload(23, 40)
	closedLoop(t, db, [][]*trace.Span{spans[:20], spans[20:]})
	if w := db.groups.waits.Load(); w != 0 {
		t.Fatalf("with batch_max_delay set the committer made %d adaptive waits", w)
	}
}

// TestIndexerGathersSmallJobs: the indexer indexes the group commits of
// 1-span writes together (fewer rounds than jobs) instead of one batch
// each; a read after the acknowledgement does not wait for the gathering
// (here an hour): it hurries the indexer and finds every span; Close
// does not wait for it either, and what was gathered is indexed.
func TestIndexerGathersSmallJobs(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.Sync = SyncBatch
	o.indexGather = time.Hour
	db := openTestDB(t, dir, o)
	spans := genWorkload(24, 12)
	for i := range 10 {
		if err := db.Append(context.Background(), spans[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, sp := range spans[:10] {
		got, err := db.GetSpan(ctx, sp.TraceID, sp.SpanID)
		if err != nil {
			t.Fatalf("span %s/%s right after its acknowledgement: %v", sp.TraceID, sp.SpanID, err)
		}
		w, g := *sp, *got
		w.Children, g.Children = nil, nil
		if !g.Equal(&w) {
			t.Fatalf("span %s/%s: %s", sp.TraceID, sp.SpanID, trace.Diff(&w, &g))
		}
	}
	jobs, rounds := db.idx.indexed.Load(), db.idx.gathered.Load()
	if jobs != 10 || rounds >= jobs {
		t.Fatalf("%d jobs indexed in %d rounds; want 10 jobs in fewer rounds", jobs, rounds)
	}
	// Two more, then Close with them gathered: Close indexes them.
	for i := 10; i < 12; i++ {
		if err := db.Append(context.Background(), spans[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := db.idx.indexed.Load(); got != 12 {
		t.Fatalf("after Close %d of 12 jobs indexed", got)
	}
	db = openTestDB(t, dir, o)
	defer db.Close()
	checkGets(t, db, spans, 1)
}
