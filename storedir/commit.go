package storedir

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// encodedChunk is one chunk ready to append, with the spans it holds.
type encodedChunk struct {
	enc   chunk.EncodedChunk
	spans []*trace.Span
}

// commitReq is one Append call waiting for the committer, with its
// chunks encoded. The committer re-encodes the spans of consecutive small
// (groupable) requests of a group into shared chunks.
type commitReq struct {
	chunks []encodedChunk
	// spans are the request's spans when groupable (chunks is then
	// empty), payload their chunk payload, not yet compressed (the
	// committer compresses it only if the request is written alone), and
	// size its length (an upper bound of what it adds to a shared chunk).
	spans     []*trace.Span
	payload   []byte
	size      int
	groupable bool
	done      chan error
	// pending are the slots of the request's spans (their hashes),
	// registered in db.pending by checkVersions; released by the indexer
	// once the group's chunks are indexed (at once when nothing was
	// written).
	pending []uint64
	// queued is when the request was handed to the committer (the
	// adaptive wait learns from it how late a missing request came).
	queued time.Time
}

// Append stores spans durably (under the sync policy) and indexes them.
// When it returns nil every span is readable and survives a crash (for
// sync=batch|always). A span without a span id gets a random one; the
// caller's values are updated in place. A validation error (ErrInvalid,
// naming the span by its 1-based position in spans) stores nothing. Any
// other error means the request was not acknowledged, not that nothing
// was stored: chunks written before a failure stay in the data file, and
// a request whose caller stopped waiting (ctx) once it was queued is
// still written. Retrying is safe: Append is idempotent (see
// "Versions" in the package doc). Spans already stored identically are
// skipped; a request made only of those returns nil at once.
func (db *DB) Append(ctx context.Context, spans []*trace.Span) error {
	return db.appendSpans(ctx, spans, nil, nil)
}

// AppendPayload is Append for spans that trace.DecodeChunkLayout decoded
// from payload (a write request's CBOR body), unchanged since, with the
// layout it returned (a nil layout: never stored as sent). When the
// payload may be stored as sent (the layout is Storable; every span has a
// span id and is stored, none being already stored identically or
// repeated later in the request; and the payload is at most
// ChunkTargetSize) its bytes are not encoded again from the spans: a
// payload larger than a groupable request becomes the request's chunk,
// cut into zstd frames where the encoder would cut them; a smaller one is
// the chunk when the committer writes the request alone, and is encoded
// with the other small requests of its group into a shared chunk
// otherwise, as Append's are. The stored chunk decodes to the same spans
// either way. Otherwise it does exactly what Append does.
func (db *DB) AppendPayload(ctx context.Context, spans []*trace.Span, payload []byte, layout *trace.PayloadLayout) error {
	return db.appendSpans(ctx, spans, payload, layout)
}

// appendSpans is Append, and AppendPayload when payload is not nil.
func (db *DB) appendSpans(ctx context.Context, spans []*trace.Span, payload []byte, layout *trace.PayloadLayout) error {
	if db.opt.QueryOnly {
		return ErrQueryOnly
	}
	if len(spans) == 0 {
		return nil
	}
	if db.readOnly != "" {
		return db.errReadOnly()
	}
	idsAssigned := false
	for i, sp := range spans {
		if sp.SpanID == 0 {
			sp.SpanID = randomSpanID()
			idsAssigned = true
		}
		if err := sp.Validate(); err != nil {
			return fmt.Errorf("span %d: %w: %w", i+1, ErrInvalid, err)
		}
	}
	vc, err := db.checkVersions(ctx, spans)
	if err != nil {
		return err
	}
	if len(vc.keep) == 0 {
		return nil // every span is stored already, identical: durable and indexed
	}
	var req *commitReq
	if payload != nil && !idsAssigned && len(vc.keep) == len(spans) {
		req, err = db.prepareAsSent(vc.keep, payload, layout)
	}
	if req == nil && err == nil {
		req, err = db.prepare(vc.keep)
	}
	if err != nil {
		db.pending.remove(vc.keys)
		return err
	}
	req.pending = vc.keys
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		db.pending.remove(vc.keys)
		return ErrClosed
	}
	db.groups.enter()
	defer db.groups.leave()
	req.queued = time.Now()
	select {
	case db.commits <- req:
	case <-db.stop:
		db.pending.remove(vc.keys)
		return ErrClosed
	case <-ctx.Done():
		db.pending.remove(vc.keys)
		return ctx.Err()
	}
	// Once queued the request will be written; waiting may be abandoned.
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrInvalid marks a request rejected by validation; nothing was stored.
var ErrInvalid = errors.New("invalid span")

// payloadEncoder is a reusable chunk payload encoder with its output
// buffer; encoders are pooled because Append runs in many goroutines.
type payloadEncoder struct {
	enc     trace.ChunkEncoder
	payload []byte
	cuts    []int
}

// payloadFrameBytes is about how many payload bytes each zstd frame of a
// chunk holds after the first (trace.ChunkEncoder.FrameCuts, which cuts
// only at span index marks, so a frame holds at least one 16-span
// stretch): a get decompresses the frame of the string table and the one
// holding its span instead of the whole chunk. On 500-span chunks of the
// bench workload (~210 KB of payload, ~52 KB of it before the first span)
// 16 KiB frames decode in about half the CPU of 32 KiB ones (25 against
// 48 µs a frame) for 1.9% more stored bytes; 8 KiB frames (15 a chunk
// instead of 9) cut a cold DB.GetTrace's CPU by a further ~6% and its
// allocation by 8 KiB, for 2.1% more stored bytes on those chunks and
// 2.7% on 500-span chunks of six-attribute spans (4 KiB frames: 4.5% and
// 6.7% more).
const payloadFrameBytes = 8 << 10

// payloadFramedMin is the payload size above which a zstd chunk is cut
// into frames at all: smaller chunks (the ~33 KiB chunks of OTLP loads, a
// few small requests grouped) are one frame, where cutting would cost
// bytes for little gain.
const payloadFramedMin = 64 << 10

// payloadEncoders pools payloadEncoders: a ChunkEncoder keeps its string
// map and buffers between chunks (several times faster than one-shot
// EncodeChunk on realistic spans), and the payload buffer is only needed
// until chunk.Encode has compressed it.
var payloadEncoders = sync.Pool{New: func() any { return new(payloadEncoder) }}

// maxPooledPayload bounds the payload buffer an encoder keeps in the pool.
const maxPooledPayload = 8 << 20

// groupableSize returns the payload size up to which a request may be
// encoded by the committer together with the other small requests of its
// group: a sixteenth of the chunk target size (64 KiB by default).
func (db *DB) groupableSize() int { return db.opt.ChunkTargetSize / 16 }

// prepare encodes and compresses a request's chunks in the caller's
// goroutine (so that encoding uses every core, and so that an invalid
// request fails before it is grouped with others). A request that fits in
// one small chunk is marked groupable and only encoded here: when its
// group holds other small requests, the committer encodes all of their
// spans into shared chunks instead (one string table, one compression,
// one index location for many requests); alone, the committer compresses
// the payload encoded here. Either way it is compressed once.
func (db *DB) prepare(spans []*trace.Span) (*commitReq, error) {
	chunks, small, err := db.encodeSized(spans, db.groupableSize())
	if err != nil {
		return nil, err
	}
	req := &commitReq{chunks: chunks, done: make(chan error, 1)}
	if small != nil {
		req.spans, req.payload, req.size, req.groupable = spans, small, len(small), true
	}
	return req, nil
}

// prepareAsSent is prepare for a request whose payload, as its client
// sent it, holds exactly its spans (AppendPayload): it compresses the
// payload as the request's one chunk, without encoding the spans again. A
// payload small enough to be grouped with other requests is not encoded
// again either: the request is groupable with a copy of the payload as
// what prepare would have encoded (the chunk if it is written alone; the
// committer encodes a run of several from their spans, as always). It
// returns a nil request when the payload is not to be stored as sent: not
// Storable, or more than a chunk.
func (db *DB) prepareAsSent(spans []*trace.Span, payload []byte, layout *trace.PayloadLayout) (*commitReq, error) {
	if ok, _ := layout.Storable(); !ok || len(payload) > db.opt.ChunkTargetSize || len(payload) > chunk.MaxChunkSize {
		return nil, nil
	}
	if len(payload) <= db.groupableSize() {
		return &commitReq{spans: spans, payload: append([]byte(nil), payload...), size: len(payload), groupable: true,
			done: make(chan error, 1)}, nil
	}
	var cutsBuf [64]int
	cuts := cutsBuf[:0]
	if len(payload) > payloadFramedMin {
		cuts = layout.FrameCuts(cuts, payloadFrameBytes)
	}
	enc, err := chunk.EncodeFrames(payload, cuts, db.opt.Chunk, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &commitReq{chunks: []encodedChunk{{enc: enc, spans: spans}}, done: make(chan error, 1)}, nil
}

// encode splits spans into chunks of about ChunkTargetSize payload bytes
// and compresses them, in the caller's goroutine.
func (db *DB) encode(spans []*trace.Span) ([]encodedChunk, error) {
	chunks, _, err := db.encodeSized(spans, -1)
	return chunks, err
}

// aloneChunk compresses a groupable request's payload into its own chunk,
// for a request the committer writes alone.
func (db *DB) aloneChunk(r *commitReq) (encodedChunk, error) {
	enc, err := chunk.Encode(r.payload, db.opt.Chunk, nil)
	if err != nil {
		return encodedChunk{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return encodedChunk{enc: enc, spans: r.spans}, nil
}

// encodeSized is encode, except that when all spans encode into one
// payload of at most smallMax bytes it returns a copy of that payload,
// uncompressed, and no chunks.
func (db *DB) encodeSized(spans []*trace.Span, smallMax int) ([]encodedChunk, []byte, error) {
	pe := payloadEncoders.Get().(*payloadEncoder)
	payload := pe.payload[:0]
	defer func() {
		if cap(payload) <= maxPooledPayload {
			pe.payload = payload[:0]
			payloadEncoders.Put(pe)
		}
	}()
	var out []encodedChunk
	start := 0
	for start < len(spans) {
		end := len(spans)
		var err error
		for {
			payload, err = pe.enc.Encode(payload[:0], spans[start:end])
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if len(payload) <= db.opt.ChunkTargetSize || end-start == 1 {
				break
			}
			end = start + (end-start+1)/2
		}
		if start == 0 && end == len(spans) && len(payload) <= smallMax {
			return nil, append([]byte(nil), payload...), nil
		}
		if len(payload) > chunk.MaxChunkSize {
			return nil, nil, fmt.Errorf("%w: span %s/%s encodes to %d bytes, more than the %d a chunk holds",
				ErrInvalid, spans[start].TraceID, spans[start].SpanID, len(payload), chunk.MaxChunkSize)
		}
		pe.cuts = pe.cuts[:0]
		if len(payload) > payloadFramedMin {
			pe.cuts = pe.enc.FrameCuts(pe.cuts, payloadFrameBytes)
		}
		enc, err := chunk.EncodeFrames(payload, pe.cuts, db.opt.Chunk, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		out = append(out, encodedChunk{enc: enc, spans: spans[start:end]})
		start = end
	}
	return out, nil, nil
}

func randomSpanID() trace.SpanID {
	var b [8]byte
	for {
		rand.Read(b[:])
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return trace.SpanID(v)
		}
	}
}

// committer is the single writer: it takes every request that is waiting,
// appends their chunks, syncs once (batch) or per request (always),
// queues them for the indexer and acknowledges. When it stops it closes
// the indexer's queue: the indexer indexes what is queued and returns.
func (db *DB) committer() {
	defer close(db.done)
	defer db.idx.stop()
	var batch []*commitReq
	for {
		batch = batch[:0]
		select {
		case r := <-db.commits:
			batch = append(batch, r)
		case <-db.stop:
			// Drain what was queued before the stop.
			for {
				select {
				case r := <-db.commits:
					db.commitGroup([]*commitReq{r})
				default:
					return
				}
			}
		}
	drain:
		for len(batch) < cap(db.commits) {
			select {
			case r := <-db.commits:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		if db.opt.Sync == SyncBatch {
			if db.opt.BatchMaxDelay > 0 {
				batch = db.gather(batch)
			} else {
				batch = db.waitForWriters(batch)
			}
		}
		db.commitGroup(batch)
	}
}

// gather waits up to BatchMaxDelay after a group's first request for more
// requests to join its fsync (group commit with a delay); a full group or
// a stopping DB ends the wait early.
func (db *DB) gather(batch []*commitReq) []*commitReq {
	t := time.NewTimer(db.opt.BatchMaxDelay)
	defer t.Stop()
	for len(batch) < cap(db.commits) {
		select {
		case r := <-db.commits:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-db.stop:
			return batch
		}
	}
	return batch
}

// waitForWriters is the adaptive group commit (groupwait.go): when
// recently more requests were in flight at once than batch holds, it
// waits for the missing ones to join the group, at most about one recent
// fsync or twice the recent spread of arrivals; as many as were in
// flight, a full group or a stopping DB end the wait early.
func (db *DB) waitForWriters(batch []*commitReq) []*commitReq {
	db.groups.arrived(batch[0].queued)
	n, wait := db.groups.want()
	n = min(n, cap(db.commits))
	if len(batch) >= n || wait <= 0 {
		return batch
	}
	db.groups.waits.Add(1)
	had := len(batch)
	start := time.Now()
	t := time.NewTimer(wait)
	defer t.Stop()
	for len(batch) < n {
		select {
		case r := <-db.commits:
			batch = append(batch, r)
			db.groups.joinedAfter(time.Since(start))
			continue
		case <-t.C:
		case <-db.stop:
		}
		break
	}
	if len(batch) == had {
		db.groups.missed(start) // the writers are fewer than they were, or later
	}
	db.groups.joined.Add(int64(len(batch) - had))
	return batch
}

// commitGroup commits a group holding commitMu: an outside Rotate waits
// until the committer is between groups.
func (db *DB) commitGroup(batch []*commitReq) {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	if db.opt.Sync == SyncAlways {
		for _, r := range batch {
			db.commitRequests([]*commitReq{r})
		}
		return
	}
	db.commitRequests(batch)
}

type written struct {
	store *Store
	off   int64
	next  int64
	spans []*trace.Span
}

// unit is one chunk to write and the requests (indexes into the group,
// first..last) whose spans it holds: a failure to write it fails them all.
type unit struct {
	c           encodedChunk
	first, last int
}

// groupUnits turns a group's requests, in order, into the chunks to write.
// Large requests bring their own chunks; each run of consecutive small
// requests is encoded into shared chunks of up to ChunkTargetSize payload
// bytes (split like a single large request). A run of one request, or one
// that does not encode as one (a per-chunk limit such as the number of
// distinct strings), is written as its requests' own chunks, compressed
// here. A request whose chunk cannot be built gets its error in errs
// and no unit.
func (db *DB) groupUnits(reqs []*commitReq, errs []error) []unit {
	var units []unit
	var run []*trace.Span
	runFirst, runSize := 0, 0
	flush := func(end int) {
		if len(run) == 0 {
			return
		}
		own := func() {
			for i := runFirst; i < end; i++ {
				c, err := db.aloneChunk(reqs[i])
				if err != nil {
					errs[i] = err
					continue
				}
				units = append(units, unit{c: c, first: i, last: i})
			}
			run, runSize = nil, 0
		}
		if end-runFirst == 1 {
			own() // alone: compressed as encoded by prepare
			return
		}
		chunks, err := db.encode(run)
		if err != nil {
			db.log.Debug("small requests do not encode together; one chunk each", "requests", end-runFirst, "err", err)
			own()
			return
		}
		// The chunks hold the run's spans in order: map each to the
		// requests whose spans it holds.
		req, used := runFirst, 0 // used: spans of reqs[req] in earlier chunks
		for _, c := range chunks {
			u := unit{c: c, first: req}
			n := len(c.spans)
			for n > 0 {
				left := len(reqs[req].spans) - used
				if n < left {
					used += n
					break
				}
				n -= left
				u.last = req
				req, used = req+1, 0
			}
			if used > 0 {
				u.last = req
			}
			units = append(units, u)
		}
		run, runSize = nil, 0
	}
	for i, r := range reqs {
		if !r.groupable {
			flush(i)
			for _, c := range r.chunks {
				units = append(units, unit{c: c, first: i, last: i})
			}
			continue
		}
		if len(run) > 0 && runSize+r.size > db.opt.ChunkTargetSize {
			flush(i)
		}
		if len(run) == 0 {
			runFirst = i
		}
		run = append(run, r.spans...)
		runSize += r.size
	}
	flush(len(reqs))
	return units
}

// groupPart is what the committer wrote of a group since its last
// hand-off to the indexer: the chunks in data-file order and the stores
// they went to.
type groupPart struct {
	ws     []written
	stores []*Store
}

// syncResult sums the fsyncs of one group's hand-offs.
type syncResult struct {
	syncs int
	dur   time.Duration
	err   error
}

// commitRequests writes, syncs and acknowledges reqs as a group, and
// queues the group's chunks for the indexer (indexer.go). The acked mark
// moves to the group's last job before any request is answered, so a read
// started after an acknowledgement waits for that job to be indexed.
func (db *DB) commitRequests(reqs []*commitReq) {
	errs := make([]error, len(reqs))
	units := db.groupUnits(reqs, errs)
	var need int64
	for _, u := range units {
		need += int64(u.c.enc.Len())
	}
	if err := db.checkSpace(need); err != nil {
		for _, r := range reqs {
			db.pending.remove(r.pending) // nothing written, nothing to index
			r.done <- err
		}
		return
	}
	var part groupPart
	var res syncResult
	bytes, nchunks := 0, 0
	for _, u := range units {
		if errs[u.first] != nil && u.first == u.last {
			continue // the rest of a request whose earlier chunk failed
		}
		// Before a rotation seals the store, what the group wrote to it
		// is made durable and handed to the indexer (rotate waits for it).
		s, err := db.writable(func() { db.handOff(&part, &res, nil) })
		if err == nil {
			var off int64
			off, err = s.data.AppendEncoded(u.c.enc)
			if err == nil {
				if l := u.c.enc.Layout(); l != nil {
					db.layouts.put(s.key(), off, l) // its first get reads only what it decodes (layoutCache)
				}
				if len(part.stores) == 0 || part.stores[len(part.stores)-1] != s {
					part.stores = append(part.stores, s)
				}
				part.ws = append(part.ws, written{store: s, off: off, next: s.data.Size(), spans: u.c.spans})
				bytes += int(u.c.enc.Len())
				nchunks++
				continue
			}
			err = fmt.Errorf("store %s: append: %w", StoreName(s.id), err)
		}
		for i := u.first; i <= u.last; i++ {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	// The group's last hand-off is made durable, then numbered and
	// acknowledged once the indexer's queue has room for it, and only then
	// queued: the acked mark moves to it before any request is answered (a
	// read that starts from here on waits for it to be indexed), and the
	// writers are woken before the indexer may be.
	job := db.syncPart(&part, &res, reqs)
	last := db.idx.queued.Load()
	if job != nil {
		db.idx.waitRoom()
		last++
		job.seq = last
	}
	if res.syncs > 0 {
		db.groups.synced(res.dur)
	}
	// Acknowledge: the chunks are durable (under the sync policy) and
	// about to be queued for indexing; reads that start from here on wait
	// for them.
	db.idx.acked.Store(last)
	for i, r := range reqs {
		if errs[i] == nil {
			errs[i] = res.err
		}
		r.done <- errs[i]
	}
	if job != nil {
		db.idx.put(job)
	}
	db.mu.RLock()
	obs := db.opt.Observer
	db.mu.RUnlock()
	if obs != nil {
		obs.Committed(len(reqs), nchunks, bytes, res.syncs, res.dur)
	}
}

// handOff makes the chunks of part durable (one fsync per store written,
// unless sync=none) and queues them for the indexer as one job, with
// release (the group's requests, on its last hand-off) to have their
// pending slots released once indexed; it returns the job's number. The
// queue is bounded: when the indexer is that far behind, the committer
// waits here (backpressure). The last hand-off of a group is syncPart,
// then its acknowledgement, then the queueing (commitRequests).
//
// fsync before indexing: the index databases run without a WAL and Pebble
// may flush a memtable at any moment, so an index entry can become durable
// as soon as it is committed. Indexing only what an fsync made durable
// keeps "a durable index entry names durable data" (catchUp re-scans only
// past the watermarks). The chunks of a store whose fsync failed are not
// indexed: their bytes may not be on disk, the store takes no more writes,
// and the next open fsyncs and re-indexes what its data file holds.
func (db *DB) handOff(part *groupPart, res *syncResult, release []*commitReq) uint64 {
	job := db.syncPart(part, res, release)
	if job == nil {
		return db.idx.queued.Load()
	}
	job.seq = db.idx.queued.Load() + 1
	db.idx.put(job)
	return job.seq
}

// syncPart makes the chunks of part durable and returns the index job of
// what was made durable, not yet numbered nor queued; nil when nothing
// was written since the last hand-off and there is nothing to release.
func (db *DB) syncPart(part *groupPart, res *syncResult, release []*commitReq) *indexJob {
	if len(part.ws) == 0 && len(release) == 0 {
		return nil // nothing written since the last hand-off
	}
	var failed map[*Store]bool
	if db.opt.Sync != SyncNone && len(part.stores) > 0 {
		t0 := time.Now()
		for _, s := range part.stores {
			if err := s.data.Sync(); err != nil {
				// The bytes may or may not be durable: fail every request
				// of the group, and stop writing to this data file (after
				// a failed fsync the kernel may have dropped dirty pages
				// and a later fsync would report success).
				s.mu.Lock()
				s.syncFailed = true
				s.mu.Unlock()
				res.err = errors.Join(res.err, fmt.Errorf("store %s: fsync: %w", StoreName(s.id), err))
				if failed == nil {
					failed = map[*Store]bool{}
				}
				failed[s] = true
			}
			res.syncs++
		}
		res.dur += time.Since(t0)
	}
	// One run per store and stretch of consecutive chunks: one batch per
	// index (a rotation mid-group starts a new run).
	// The committer reuses its group slice: the job keeps its own copy.
	job := &indexJob{release: slices.Clone(release)}
	for i, w := range part.ws {
		if failed[w.store] {
			continue
		}
		n := len(job.runs)
		if n == 0 || job.runs[n-1].store != w.store || part.ws[i-1].next != w.off {
			job.runs = append(job.runs, indexRun{store: w.store})
			n++
		}
		job.runs[n-1].chunks = append(job.runs[n-1].chunks, ChunkSpans{Off: w.off, Next: w.next, Spans: w.spans})
	}
	part.ws, part.stores = part.ws[:0], part.stores[:0]
	return job
}

// SetObserver replaces the write-path observer (metrics). Call it before
// the first Append.
func (db *DB) SetObserver(o Observer) {
	db.mu.Lock()
	db.opt.Observer = o
	db.mu.Unlock()
}

// Sync makes everything appended so far durable, whatever the policy.
func (db *DB) Sync() error {
	stores, release := db.snapshot()
	defer release()
	for _, s := range stores {
		if !s.Sealed() {
			if err := s.data.Sync(); err != nil {
				return err
			}
		}
	}
	return nil
}
