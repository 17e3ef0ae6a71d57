package storedir

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// indexQueueJobs bounds the index jobs waiting for the indexer beyond a
// gathering (below): the committer blocks once that many group commits
// are durable and acknowledged but not yet taken by the indexer, unless
// they are small enough to be gathered, so the spans held for indexing
// stay bounded (at most this many groups, each at most cap(commits)
// requests, or one gathering) and the indexing lag reads wait out stays a
// few groups long.
const indexQueueJobs = 4

// The indexer gathers small jobs (group commits of unbatched writers: a
// span or two each) before it indexes them: an index batch costs much
// more per span when it is small (IndexChunks of the bench workload's
// spans: 63-76 µs of CPU per span in batches of 2, 39-44 in batches of 8,
// 26-27 in batches of 32; BenchmarkIndexChunksGathered, 2-span chunks:
// 12.0 µs per span gathered by 64, 9.3 by 128, 8.8 by 256). It takes jobs
// until they hold indexGatherSpans spans, indexGatherJobs jobs, or
// indexGatherDelay passed since the first (2 unbatched writers at 3-4k
// spans/s fill a gathering in about that time), and at once when a read
// waits for one of them (waitFor hurries it), when the committer rotates
// or stops. Indexing is off the acknowledgement path: the gathering
// delays only the reads that wait, by the time it takes to index what was
// gathered (a few milliseconds at most).
//
// While it gathers the indexer sleeps: the committer queues the jobs of a
// gathering without waking it (a wake-up costs a futex call and a thread
// switch per group commit, on the committer's path to the next one), and
// wakes it only for the first job of a gathering and when the gathering
// is full.
const (
	indexGatherSpans = 128
	indexGatherJobs  = 128
	indexGatherDelay = 40 * time.Millisecond
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

	// The queue: jobs handed off and not yet taken by the indexer, in
	// order, the spans they hold, and whether the committer has stopped
	// (no more jobs). Guarded by qmu; room is signalled when the indexer
	// takes the jobs, wake (a token) when the indexer should look at the
	// queue: its first job, a full gathering, the stop.
	qmu       sync.Mutex
	jobs      []*indexJob
	jobsSpans int
	stopped   bool
	room      *sync.Cond
	wake      chan struct{}
}

func newIndexPipeline() *indexPipeline {
	p := &indexPipeline{done: make(chan struct{}), advanced: make(chan struct{}),
		hurry: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	p.room = sync.NewCond(&p.qmu)
	return p
}

// gatherFull reports whether queued jobs holding spans spans are a full
// gathering: the indexer indexes them without waiting for more.
func gatherFull(jobs, spans int) bool {
	return spans >= indexGatherSpans || jobs >= indexGatherJobs
}

// waitRoom waits while the queue is full: more than indexQueueJobs jobs
// not yet taken, unless they are a gathering not yet full (backpressure).
// Committer only: once it returns, the committer's next put does not wait.
func (p *indexPipeline) waitRoom() {
	p.qmu.Lock()
	for len(p.jobs) >= indexQueueJobs && gatherFull(len(p.jobs), p.jobsSpans) {
		p.room.Wait()
	}
	p.qmu.Unlock()
}

// put queues job for the indexer (committer only), after waitRoom. It
// wakes the indexer only for the first job it may be waiting for and for
// a full gathering.
func (p *indexPipeline) put(job *indexJob) {
	p.waitRoom()
	n := job.spans()
	p.qmu.Lock()
	p.jobs = append(p.jobs, job)
	p.jobsSpans += n
	notify := len(p.jobs) == 1 || gatherFull(len(p.jobs), p.jobsSpans)
	p.qmu.Unlock()
	p.queued.Store(job.seq)
	if notify {
		p.poke()
	}
}

// poke leaves the indexer a wake token (one is enough).
func (p *indexPipeline) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// stop tells the indexer that no more jobs come: it indexes what is queued
// and returns (committer only, when it stops).
func (p *indexPipeline) stop() {
	p.qmu.Lock()
	p.stopped = true
	p.qmu.Unlock()
	p.poke()
}

// peek returns how many jobs are queued, the spans they hold and whether
// the committer has stopped.
func (p *indexPipeline) peek() (jobs, spans int, stopped bool) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	return len(p.jobs), p.jobsSpans, p.stopped
}

// take moves the queued jobs into dst (emptied first) and makes room for
// the committer.
func (p *indexPipeline) take(dst []*indexJob) []*indexJob {
	p.qmu.Lock()
	dst = append(dst[:0], p.jobs...)
	clear(p.jobs)
	p.jobs, p.jobsSpans = p.jobs[:0], 0
	p.room.Broadcast()
	p.qmu.Unlock()
	return dst
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

// indexer indexes the committer's jobs in order until the committer has
// stopped and every job is indexed, then returns. Small jobs are gathered
// first (see indexGatherSpans) and indexed together, runs of consecutive
// chunks of a store in one batch per index (mergeRuns).
func (db *DB) indexer() {
	defer close(db.idx.done)
	p := db.idx
	delay := db.opt.indexGather
	if delay == 0 {
		delay = indexGatherDelay
	}
	timer := time.NewTimer(delay)
	timer.Stop()
	var jobs []*indexJob
	for {
		n, spans, stopped := p.peek()
		if n == 0 {
			if stopped {
				return
			}
			<-p.wake
			continue
		}
		if db.opt.beforeIndexJob != nil {
			db.opt.beforeIndexJob()
		}
		if !gatherFull(n, spans) && !stopped {
			timer.Reset(delay)
		gather:
			for {
				select {
				case <-p.wake: // a full gathering, or the stop
					if n, spans, stopped = p.peek(); gatherFull(n, spans) || stopped {
						break gather
					}
				case <-p.hurry:
					break gather
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		jobs = p.take(jobs)
		for _, r := range mergeRuns(jobs) {
			db.indexRun(r)
		}
		for _, j := range jobs {
			for _, r := range j.release {
				db.pending.remove(r.pending)
			}
		}
		p.gathered.Add(1)
		p.advance(jobs[len(jobs)-1].seq)
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
