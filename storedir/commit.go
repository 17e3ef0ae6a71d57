package storedir

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
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

// commitReq is one Append call waiting for the committer.
type commitReq struct {
	chunks []encodedChunk
	done   chan error
}

// Append stores spans durably (under the sync policy) and indexes them.
// When it returns nil every span is readable and survives a crash (for
// sync=batch|always). A span without a span id gets a random one; the
// caller's values are updated in place. On error nothing of the request
// was acknowledged; chunks already written before a failure stay in the
// data file and are indexed on the next open (at-least-once).
func (db *DB) Append(ctx context.Context, spans []*trace.Span) error {
	if len(spans) == 0 {
		return nil
	}
	for i, sp := range spans {
		if sp.SpanID == 0 {
			sp.SpanID = randomSpanID()
		}
		if err := sp.Validate(); err != nil {
			return fmt.Errorf("span %d: %w: %w", i, ErrInvalid, err)
		}
	}
	chunks, err := db.encode(spans)
	if err != nil {
		return err
	}
	req := &commitReq{chunks: chunks, done: make(chan error, 1)}
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	select {
	case db.commits <- req:
	case <-db.stop:
		return ErrClosed
	case <-ctx.Done():
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
}

// payloadEncoders pools payloadEncoders: a ChunkEncoder keeps its string
// map and buffers between chunks (several times faster than one-shot
// EncodeChunk on realistic spans), and the payload buffer is only needed
// until chunk.Encode has compressed it.
var payloadEncoders = sync.Pool{New: func() any { return new(payloadEncoder) }}

// maxPooledPayload bounds the payload buffer an encoder keeps in the pool.
const maxPooledPayload = 8 << 20

// encode splits spans into chunks of about ChunkTargetSize payload bytes
// and compresses them, in the caller's goroutine.
func (db *DB) encode(spans []*trace.Span) ([]encodedChunk, error) {
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
				return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			if len(payload) <= db.opt.ChunkTargetSize || end-start == 1 {
				break
			}
			end = start + (end-start+1)/2
		}
		if len(payload) > chunk.MaxChunkSize {
			return nil, fmt.Errorf("%w: span %s/%s encodes to %d bytes, more than the %d a chunk holds",
				ErrInvalid, spans[start].TraceID, spans[start].SpanID, len(payload), chunk.MaxChunkSize)
		}
		enc, err := chunk.Encode(payload, db.opt.Chunk, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		out = append(out, encodedChunk{enc: enc, spans: spans[start:end]})
		start = end
	}
	return out, nil
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
// indexes, and acknowledges.
func (db *DB) committer() {
	defer close(db.done)
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
		db.commitGroup(batch)
	}
}

func (db *DB) commitGroup(batch []*commitReq) {
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

// commitRequests writes, syncs, indexes and acknowledges reqs as a group.
func (db *DB) commitRequests(reqs []*commitReq) {
	var ws []written
	var errs = make([]error, len(reqs))
	bytes, nchunks := 0, 0
	stores := map[*Store]bool{}
	var need int64
	for _, r := range reqs {
		for _, c := range r.chunks {
			need += int64(c.enc.Len())
		}
	}
	if err := db.checkSpace(need); err != nil {
		for _, r := range reqs {
			r.done <- err
		}
		return
	}
	for i, r := range reqs {
		for _, c := range r.chunks {
			s, err := db.writable()
			if err != nil {
				errs[i] = err
				break
			}
			off, err := s.data.AppendEncoded(c.enc)
			if err != nil {
				errs[i] = fmt.Errorf("store %s: append: %w", StoreName(s.id), err)
				break
			}
			stores[s] = true
			ws = append(ws, written{store: s, off: off, next: s.data.Size(), spans: c.spans})
			bytes += int(c.enc.Len())
			nchunks++
		}
	}
	syncs := 0
	var syncDur time.Duration
	if db.opt.Sync != SyncNone {
		t0 := time.Now()
		for s := range stores {
			if err := s.data.Sync(); err != nil {
				// The bytes may or may not be durable: fail every request
				// of the group, and stop writing to this data file (after
				// a failed fsync the kernel may have dropped dirty pages
				// and a later fsync would report success).
				s.mu.Lock()
				s.syncFailed = true
				s.mu.Unlock()
				err = fmt.Errorf("store %s: fsync: %w", StoreName(s.id), err)
				for i := range errs {
					if errs[i] == nil {
						errs[i] = err
					}
				}
			}
			syncs++
		}
		syncDur = time.Since(t0)
	}
	// Index the group's chunks with one batch per store and index (they
	// are consecutive in each data file; a rotation mid-group starts a new
	// run).
	var run []ChunkSpans
	for i, w := range ws {
		run = append(run, ChunkSpans{Off: w.off, Next: w.next, Spans: w.spans})
		if i+1 < len(ws) && ws[i+1].store == w.store && ws[i+1].off == w.next {
			continue
		}
		if err := w.store.indexChunks(run); err != nil {
			// The data is durable; the index catches up from its
			// watermark on the next open. Reads may miss it until then.
			db.log.Error("indexing written chunks failed", "store", StoreName(w.store.id), "offset", run[0].Off, "chunks", len(run), "err", err)
		}
		run = run[:0]
	}
	for i, r := range reqs {
		r.done <- errs[i]
	}
	db.mu.RLock()
	obs := db.opt.Observer
	db.mu.RUnlock()
	if obs != nil {
		obs.Committed(len(reqs), nchunks, bytes, syncs, syncDur)
	}
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
