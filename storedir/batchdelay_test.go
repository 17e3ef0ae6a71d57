package storedir

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ztsd/ztsd/internal/workload"
)

// groupRecorder records each group commit's requests and syncs.
type groupRecorder struct {
	mu     sync.Mutex
	groups [][2]int // requests, syncs
}

func (g *groupRecorder) Committed(requests, chunks, bytes int, syncs int, syncDur time.Duration) {
	g.mu.Lock()
	g.groups = append(g.groups, [2]int{requests, syncs})
	g.mu.Unlock()
}

// TestBatchMaxDelayGroupsWriters: with sync=batch and batch_max_delay =
// 50ms, two writers that start together share one group commit and one
// fsync: the committer waits for the second. (It had no effect before.)
// With 0 the committer does not wait, so a lone write is committed at once.
func TestBatchMaxDelayGroupsWriters(t *testing.T) {
	spans := workload.Spans(11, 2)
	open := func(delay time.Duration) (*DB, *groupRecorder) {
		rec := &groupRecorder{}
		o := DefaultOptions()
		o.Sync = SyncBatch
		o.BatchMaxDelay = delay
		o.Observer = rec
		db, err := Open(context.Background(), t.TempDir(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db, rec
	}

	db, rec := open(50 * time.Millisecond)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- db.Append(context.Background(), spans[i:i+1])
		}()
	}
	close(start)
	wg.Wait()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The committer tells the observer after answering the writers.
	var groups [][2]int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		rec.mu.Lock()
		groups = rec.groups
		rec.mu.Unlock()
		if len(groups) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(groups) != 1 || groups[0] != [2]int{2, 1} {
		t.Fatalf("50ms delay: groups (requests, syncs) %v, want one group of 2 requests and 1 sync", groups)
	}

	db0, _ := open(0)
	t0 := time.Now()
	if err := db0.Append(context.Background(), spans[:1]); err != nil {
		t.Fatal(err)
	}
	db50, _ := open(50 * time.Millisecond)
	t1 := time.Now()
	if err := db50.Append(context.Background(), spans[:1]); err != nil {
		t.Fatal(err)
	}
	// Not a timing assertion on the fast path: only that the delay acts.
	if took := time.Since(t1); took < 50*time.Millisecond {
		t.Fatalf("a lone write under a 50ms delay took %v (0s delay: %v)", took, t1.Sub(t0))
	}
}
