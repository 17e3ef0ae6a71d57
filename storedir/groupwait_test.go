package storedir

import (
	"context"
	"io/fs"
	"math/rand/v2"
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

// TestGroupWaitSpread: the adaptive wait is one recent fsync, or twice the
// recent spread of the arrivals that joined a wait when that is longer,
// never more than maxGroupWait; a request that came after a wait nobody
// joined widens the next one; the spread is forgotten over the groups
// that follow.
func TestGroupWaitSpread(t *testing.T) {
	var g groupWaiter
	g.peak.Store(2)
	if _, w := g.want(); w != 0 {
		t.Fatalf("wait %v before any fsync was measured, want none", w)
	}
	g.synced(100 * time.Microsecond)
	if n, w := g.want(); n != 2 || w != 100*time.Microsecond {
		t.Fatalf("want() = %d, %v; want 2 requests, one fsync (100µs)", n, w)
	}
	g.joinedAfter(300 * time.Microsecond)
	_, w := g.want()
	if lo, hi := 550*time.Microsecond, 600*time.Microsecond; w < lo || w > hi {
		t.Fatalf("after a request joined 300µs into a wait: wait %v, want about twice that", w)
	}
	g.joinedAfter(5 * time.Millisecond)
	if _, w := g.want(); w != maxGroupWait {
		t.Fatalf("wait %v, want the cap %v", w, maxGroupWait)
	}
	for range 40 * spreadDecay {
		g.want()
	}
	if _, w := g.want(); w != 100*time.Microsecond {
		t.Fatalf("wait %v long after the last late arrival, want one fsync again", w)
	}

	// A wait nobody joined, then a request queued 400µs after it began:
	// the next wait covers it. One queued later than maxGroupWait (a
	// writer that went away and came back) teaches nothing.
	start := time.Now()
	g.missed(start)
	g.arrived(start.Add(400 * time.Microsecond))
	g.peak.Store(2)
	if _, w := g.want(); w < 750*time.Microsecond {
		t.Fatalf("after a request came 400µs into a wait nobody joined: wait %v, want about 800µs", w)
	}
	for range 40 * spreadDecay {
		g.want()
	}
	g.missed(start)
	g.arrived(start.Add(3 * maxGroupWait))
	g.arrived(start.Add(400 * time.Microsecond)) // only the first request after a miss counts
	if _, w := g.want(); w != 100*time.Microsecond {
		t.Fatalf("wait %v after a request came long after the missed wait, want one fsync", w)
	}
}

// sleepSyncFS is the real file system whose fsyncs only sleep delay: a
// disk whose group commits take a steady, known time, whatever the disk
// of the machine running the test (the durability of the test's files
// does not matter).
type sleepSyncFS struct {
	chunk.OSFS
	delay time.Duration
}

type sleepSyncFile struct {
	chunk.OSFile
	delay time.Duration
}

func (f sleepSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (chunk.OSFile, error) {
	osf, err := f.OSFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return sleepSyncFile{osf, f.delay}, nil
}

func (f sleepSyncFile) Sync() error {
	time.Sleep(f.delay)
	return nil
}

// TestAdaptiveGroupCommitSpreadWriters: two closed-loop writers whose next
// requests come up to 1.2 ms after their answers, several fsyncs apart
// (their round trips differ, as HTTP clients' do): once the committer has
// seen how far apart they come, it waits for the later one, and the two
// share fsyncs (61-62 fsyncs for 120 requests in 5 runs; waiting one
// fsync at most, as before, 69-79).
func TestAdaptiveGroupCommitSpreadWriters(t *testing.T) {
	c := &syncCounter{}
	o := DefaultOptions()
	o.Sync = SyncBatch
	o.Observer = c
	o.FS = sleepSyncFS{delay: 100 * time.Microsecond}
	db, err := Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const perWriter = 60
	all := genWorkload(25, 2*perWriter)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			ws := all[w*perWriter : (w+1)*perWriter]
			for i := range ws {
				if err := db.Append(context.Background(), ws[i:i+1]); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Duration(r.Int64N(int64(1200 * time.Microsecond))))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	requests, syncs := c.settled(t, 2*perWriter)
	t.Logf("%d fsyncs for %d requests (spread %v, fsync %v)", syncs, requests, db.groups.spread, db.groups.sync)
	if syncs > requests*9/16 {
		t.Fatalf("%d fsyncs for %d requests of two writers (spread %v, fsync %v); want them to share",
			syncs, requests, db.groups.spread, db.groups.sync)
	}
	checkGets(t, db, all, 1)
}
