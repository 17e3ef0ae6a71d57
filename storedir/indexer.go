package storedir

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// indexQueueJobs bounds the index jobs waiting for the indexer: the
// committer blocks once that many group commits are durable and
// acknowledged but not yet indexed, so the spans held for indexing stay
// bounded (at most this many groups, each at most cap(commits) requests)
// and the indexing lag reads wait out stays a few groups long.
const indexQueueJobs = 4

// The indexer gathers small jobs (group commits of unbatched writers: a
// span or two each) before it indexes them: an index batch costs much
// more per span when it is small (IndexChunks of the bench workload's
// spans: 63-76 µs of CPU per span in batches of 2, 39-44 in batches of 8,
// 26-27 in batches of 32). It takes jobs until they hold indexGatherSpans
// spans, indexGatherJobs jobs, or indexGatherDelay passed since the first,
// and at once when a read waits for one of them (waitFor hurries it), when
// the committer rotates or stops. Indexing is off the acknowledgement
// path: the gathering delays only the reads that wait, by the time it
// takes to index what was gathered.
const (
	indexGatherSpans = 64
	indexGatherJobs  = 64
	indexGatherDelay = 20 * time.Millisecond
)

// indexJob is what one hand-off of the committer gives the indexer: the
// chunks it wrote and made durable since its last hand-off (runs of
// consecutive chunks, one per store) and, for the last hand-off of a
// group, the group's requests, whose pending slots are released once the
// job is indexed.
type indexJob struct {
	seq     uint64
	runs    []indexRun
	release []*commitReq
}

// indexRun is consecutive chunks of one store's data file.
type indexRun struct {
	store  *Store
	chunks []ChunkSpans
}

// indexPipeline connects the committer to the indexer goroutine. Jobs are
// numbered in the order the committer queues them and indexed in that
// order. Three marks (job numbers) make read-your-writes hold although a
// write is acknowledged before it is indexed:
//
//   - queued: the last job queued (rotation waits for indexed to reach it
//     before it seals a store);
//   - acked: the last job of the last acknowledged group, stored before
//     any request of the group is answered;
//   - indexed: the last job whose chunks are in the indexes (or were
//     found unindexable and logged), stored after its index batches
//     committed and its requests' pending slots were released.
//
// A read takes acked when it starts and waits until indexed reaches it
// (waitIndexed): whatever was acknowledged before the read started is
// found by it.
type indexPipeline struct {
	queue   chan *indexJob
	done    chan struct{} // closed when the indexer has returned
	queued  atomic.Uint64
	acked   atomic.Uint64
	indexed atomic.Uint64
	// gathered counts the indexer's rounds (jobs indexed together).
	gathered atomic.Uint64

	mu       sync.Mutex
	advanced chan struct{} // closed (and replaced) each time indexed moves
	// hurry tells the indexer that a reader waits: it stops gathering
	// jobs and indexes what it has (a token, buffered: one is enough).
	hurry chan struct{}
}

func newIndexPipeline() *indexPipeline {
	return &indexPipeline{queue: make(chan *indexJob, indexQueueJobs), done: make(chan struct{}),
		advanced: make(chan struct{}), hurry: make(chan struct{}, 1)}
}

// advance records that job seq is indexed and wakes the waiting reads.
func (p *indexPipeline) advance(seq uint64) {
	p.indexed.Store(seq)
	p.mu.Lock()
	close(p.advanced)
	p.advanced = make(chan struct{})
	p.mu.Unlock()
}

// waitFor waits until job seq is indexed, or ctx ends.
func (p *indexPipeline) waitFor(ctx context.Context, seq uint64) error {
	for {
		if p.indexed.Load() >= seq {
			return nil
		}
		p.mu.Lock()
		ch := p.advanced
		p.mu.Unlock()
		if p.indexed.Load() >= seq {
			return nil
		}
		select {
		case p.hurry <- struct{}{}:
		default: // a token is there already
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for acknowledged writes to be indexed: %w", ctx.Err())
		}
	}
}

// waitIndexed waits until every write acknowledged before it was called is
// in the indexes (usually at once: indexing lags the acknowledgement by
// microseconds to a millisecond). Every read of the indexes (get, search,
// listings, the duplicate check when it meets a slot still pending) calls
// it first, so a span acknowledged is found by a read that starts after.
func (db *DB) waitIndexed(ctx context.Context) error {
	return db.idx.waitFor(ctx, db.idx.acked.Load())
}

// waitIndexedBounded is waitIndexed for callers without a context (store
// listings): it gives up after limit, leaving the answer a little behind.
func (db *DB) waitIndexedBounded(limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := db.waitIndexed(ctx); err != nil {
		db.log.Warn("store listing: acknowledged writes not indexed yet; counters may lag", "waited", limit)
	}
}

// waitDrained waits until every job queued so far is indexed: rotation
// calls it (the committer's lock held) before it seals a store, so that a
// sealed store's indexes and counters cover its whole data file.
func (db *DB) waitDrained() {
	db.idx.waitFor(context.Background(), db.idx.queued.Load())
}

// indexer indexes the committer's jobs in order until the queue is closed
// (the committer closes it when it stops), then returns. Small jobs are
// gathered first (see indexGatherSpans) and indexed together, runs of
// consecutive chunks of a store in one batch per index (mergeRuns).
func (db *DB) indexer() {
	defer close(db.idx.done)
	delay := db.opt.indexGather
	if delay == 0 {
		delay = indexGatherDelay
	}
	timer := time.NewTimer(delay)
	timer.Stop()
	var jobs []*indexJob
	open := true
	for open {
		job, ok := <-db.idx.queue
		if !ok {
			return
		}
		if db.opt.beforeIndexJob != nil {
			db.opt.beforeIndexJob()
		}
		jobs = append(jobs[:0], job)
		spans := job.spans()
		if spans < indexGatherSpans {
			timer.Reset(delay)
		gather:
			for spans < indexGatherSpans && len(jobs) < indexGatherJobs {
				select {
				case j, ok := <-db.idx.queue:
					if !ok {
						open = false // stopping: index what is here, then return
						break gather
					}
					jobs = append(jobs, j)
					spans += j.spans()
				case <-db.idx.hurry:
					break gather
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		for _, r := range mergeRuns(jobs) {
			db.indexRun(r)
		}
		for _, j := range jobs {
			for _, r := range j.release {
				db.pending.remove(r.pending)
			}
		}
		db.idx.gathered.Add(1)
		db.idx.advance(jobs[len(jobs)-1].seq)
		clear(jobs)
	}
}

// spans counts the spans of the job's chunks.
func (j *indexJob) spans() int {
	n := 0
	for _, r := range j.runs {
		for _, c := range r.chunks {
			n += len(c.Spans)
		}
	}
	return n
}

// mergeRuns returns the runs of jobs in order, a run that continues the
// previous one (the same store, its first chunk where the previous run's
// last ends) merged into it.
func mergeRuns(jobs []*indexJob) []indexRun {
	if len(jobs) == 1 {
		return jobs[0].runs
	}
	var out []indexRun
	for _, j := range jobs {
		for _, r := range j.runs {
			if n := len(out); n > 0 && out[n-1].store == r.store &&
				out[n-1].chunks[len(out[n-1].chunks)-1].Next == r.chunks[0].Off {
				out[n-1].chunks = append(out[n-1].chunks, r.chunks...)
				continue
			}
			// A copy: appending must not write into a job's own slice.
			out = append(out, indexRun{store: r.store, chunks: append([]ChunkSpans(nil), r.chunks...)})
		}
	}
	return out
}

// indexRun adds one run of durable chunks to its store's indexes. A
// failure is logged, not returned: the chunks are durable in the data
// file. The store is then marked indexFailed: nothing more of it is
// indexed (a later run would move the watermarks past the chunks missed),
// the committer rotates away from it, and its next open re-indexes the
// data file from the watermarks; reads miss those chunks until then. A
// store closed meanwhile (taken out of service for a damaged index, to be
// rebuilt from its data file) is skipped.
func (db *DB) indexRun(r indexRun) {
	s := r.store
	s.refs.RLock()
	defer s.refs.RUnlock()
	if s.closed {
		db.log.Warn("store closed before its written chunks were indexed; its rebuild or next open indexes them",
			"store", StoreName(s.id), "offset", r.chunks[0].Off, "chunks", len(r.chunks))
		return
	}
	if s.indexFailed.Load() {
		return // logged at the failure; re-indexed at the next open
	}
	var err error
	if db.opt.indexRunFault != nil {
		err = db.opt.indexRunFault(s.id)
	}
	if err == nil {
		err = s.indexChunks(r.chunks)
	}
	if err != nil {
		s.indexFailed.Store(true)
		db.log.Error("indexing written chunks failed; the data is durable, the store takes no more writes and is re-indexed from this offset at the next start",
			"store", StoreName(s.id), "offset", r.chunks[0].Off, "chunks", len(r.chunks), "err", err)
	}
}
