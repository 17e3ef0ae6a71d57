package storedir

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"sync"

	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/trace"
)

// supersededFile, present in a store directory, says that some span chunk
// stored in that store has a newer version (in the same store or a newer
// one): searches then check each hit from the store against newer entries
// (see DB.isSuperseded). It lives beside the indexes, not in them, so an
// index rebuild keeps it; its content is only a note for operators.
const supersededFile = "superseded"

// versionKey names a stored span chunk's slot: one version of it is the
// current one, the newest in data-file order (stores in id order).
type versionKey struct {
	traceID trace.TraceID
	spanID  trace.SpanID
	chunk   uint32
}

func keyOf(sp *trace.Span) versionKey {
	return versionKey{sp.TraceID, sp.SpanID, uint32(sp.ChunkNum)}
}

// pendingShards is the number of independently locked shards of pendingSet.
const pendingShards = 32

// pendingSet counts, per slot, the requests between their duplicate check
// in Append and their indexing (by the indexer, after the
// acknowledgement): a request that meets a slot another one is still
// writing cannot see that version in the indexes yet, so the store it
// will land in is marked superseded (search then keeps only the newest of
// the two). A slot is released after its index entries are committed and
// before the indexed mark moves (indexer.go).
//
// A slot is counted under a 64-bit hash of its key (seeded per process),
// not the 28-byte key: every span of a request is looked up, added and
// removed once each, and with the key itself those map operations (type
// hash, key compare, scattered buckets) were 2.5% of the daemon's CPU
// under batched ingest. checkVersions hashes each span's key once; the
// request carries the hashes to the indexer, which releases them. Two
// slots that share a hash (about n²/2^65 for n pending slots) count as
// one, which can only cost a needless wait for the indexer in
// checkVersions or a needless superseded mark (searches then check that
// store's hits against newer entries): never a lost span or a wrong
// answer.
type pendingSet struct {
	seed   maphash.Seed
	shards [pendingShards]pendingShard
}

// pendingShard is one independently locked part of a pendingSet, padded
// to a cache line of its own: the request handlers (adding, looking up)
// and the indexer (removing) lock shards from both cores, and shards
// sharing a line made each lock a cache miss for the other core.
type pendingShard struct {
	mu sync.Mutex
	m  map[uint64]int32
	_  [64 - 16]byte
}

func newPendingSet() *pendingSet {
	p := &pendingSet{seed: maphash.MakeSeed()}
	for i := range p.shards {
		p.shards[i].m = make(map[uint64]int32)
	}
	return p
}

// hash returns the 64-bit hash a slot is counted under.
func (p *pendingSet) hash(k versionKey) uint64 { return maphash.Comparable(p.seed, k) }

// shard returns the shard slot hash h is counted in.
func (p *pendingSet) shard(h uint64) *pendingShard { return &p.shards[h%pendingShards] }

// add registers the slot of hash h and reports whether another request
// already had it.
func (p *pendingSet) add(h uint64) bool {
	sh := p.shard(h)
	sh.mu.Lock()
	n := sh.m[h]
	sh.m[h] = n + 1
	sh.mu.Unlock()
	return n > 0
}

// anyOf reports whether any of the slots of hashes hs is registered.
func (p *pendingSet) anyOf(hs []uint64) bool {
	for _, h := range hs {
		sh := p.shard(h)
		sh.mu.Lock()
		n := sh.m[h]
		sh.mu.Unlock()
		if n > 0 {
			return true
		}
	}
	return false
}

// remove releases one registration of each slot of hashes hs.
func (p *pendingSet) remove(hs []uint64) {
	for _, h := range hs {
		sh := p.shard(h)
		sh.mu.Lock()
		if n := sh.m[h]; n <= 1 {
			delete(sh.m, h)
		} else {
			sh.m[h] = n - 1
		}
		sh.mu.Unlock()
	}
}

// markSuperseded records, durably, that store s holds a span chunk that
// has a newer version. It is written before the newer version is
// appended, so no crash can leave a newer version without the mark.
func (s *Store) markSuperseded() error {
	if s.superseded.Load() {
		return nil
	}
	if s.remote != nil {
		// A remote store is immutable: the mark lives in memory for this
		// run (a remote copy's own mark, uploaded with it, is read at
		// ServeRemote).
		s.superseded.Store(true)
		return nil
	}
	s.supersedeMu.Lock()
	defer s.supersedeMu.Unlock()
	if s.superseded.Load() {
		return nil
	}
	path := filepath.Join(s.dir, supersededFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("store %s: marking superseded versions: %w", StoreName(s.id), err)
	}
	_, err = f.WriteString("spans in this store have newer versions; searches list only the newest\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("store %s: marking superseded versions: %w", StoreName(s.id), err)
	}
	s.superseded.Store(true)
	return nil
}

// loadSuperseded reads the mark at open.
func (s *Store) loadSuperseded() {
	if _, err := os.Stat(filepath.Join(s.dir, supersededFile)); err == nil {
		s.superseded.Store(true)
	}
}

// versionCheck is the outcome of Append's look at what is already stored.
type versionCheck struct {
	keep []*trace.Span // spans to write (new, or a different version)
	keys []uint64      // their slots' hashes (pendingSet.hash), registered in db.pending
}

// checkVersions decides what of a request is new. A span whose slot
// (trace id, span id, chunk number) holds an identical span already (the
// same chunk payload when encoded alone) is dropped: it is durable and
// indexed, so storing it again would add nothing. A span whose slot holds
// a different version is kept and the store holding the old one is marked
// superseded first. The kept spans' slots are registered in db.pending
// until they are indexed (commitReq.pending).
func (db *DB) checkVersions(ctx context.Context, spans []*trace.Span) (versionCheck, error) {
	// A slot still pending may be an acknowledged write the indexer has
	// not reached yet (a client's retry): wait for what was acknowledged,
	// so that the retry finds it and adds nothing. A slot not pending is
	// indexed already, or was never written, or is being written now.
	// Each span's slot and its hash, once: the pending set, the
	// in-request duplicates and the stored versions all look slots up.
	keys := make([]versionKey, len(spans))
	hashes := make([]uint64, len(spans))
	for i, sp := range spans {
		keys[i] = keyOf(sp)
		hashes[i] = db.pending.hash(keys[i])
	}
	if db.pending.anyOf(hashes) {
		if err := db.waitIndexed(ctx); err != nil {
			return versionCheck{}, err
		}
	}
	stores, release := db.snapshot() // newest first
	defer release()
	byTrace := make(map[trace.TraceID][]int, 4)
	var order []trace.TraceID
	for i, sp := range spans {
		if _, ok := byTrace[sp.TraceID]; !ok {
			order = append(order, sp.TraceID)
		}
		byTrace[sp.TraceID] = append(byTrace[sp.TraceID], i)
	}
	drop := make([]bool, len(spans))
	// In-request duplicates: the later one is the newer version, and the
	// request's last copy of a slot is what it leaves current. Earlier
	// copies would be superseded by it at once, so they are not written:
	// comparing them with the stored version could otherwise drop the last
	// copy as identical to it and leave an earlier, different copy current.
	last := make(map[versionKey]int, len(spans))
	for i, k := range keys {
		last[k] = i
	}
	for i, k := range keys {
		if last[k] != i {
			drop[i] = true
		}
	}
	type found struct {
		store *Store
		ref   index.SpanRef
	}
	var enc1, enc2 []byte
	for _, tid := range order {
		idx := byTrace[tid]
		var current map[versionKey]found // made when a store holds the trace
		for _, s := range stores {
			if err := ctx.Err(); err != nil {
				return versionCheck{}, err
			}
			if !s.mayHoldTrace(tid) || !db.remoteReadyForWrite(ctx, s, tid) {
				continue
			}
			refs, err := db.storeTraceRefs(ctx, s, tid, func(s *Store) ([]index.SpanRef, error) { return s.meta.TraceSpans(tid) }, nil)
			if err != nil {
				// An unreadable index entry: the span is stored again
				// (at worst a duplicate version, listed once by search
				// after the mark).
				db.log.Warn("duplicate check: reading the index failed", "store", StoreName(s.id), "trace", tid, "err", err)
				if err := s.markSuperseded(); err != nil {
					return versionCheck{}, err
				}
				continue
			}
			if len(refs) > 0 && current == nil {
				current = make(map[versionKey]found, len(idx))
			}
			for _, r := range refs {
				k := versionKey{tid, trace.SpanID(r.SpanID), r.ChunkNum}
				if _, ok := current[k]; !ok {
					current[k] = found{s, r}
				}
			}
		}
		for _, i := range idx {
			if drop[i] {
				continue
			}
			sp := spans[i]
			f, ok := current[keys[i]]
			if !ok {
				continue
			}
			stored, err := db.readSpan(f.store, f.ref)
			if err == nil {
				enc1, err = trace.EncodeChunk(enc1[:0], []*trace.Span{sp})
			}
			if err == nil {
				enc2, err = trace.EncodeChunk(enc2[:0], []*trace.Span{stored})
			}
			if err == nil && bytes.Equal(enc1, enc2) {
				drop[i] = true
				continue
			}
			// A different version (or an unreadable old one).
			if err := f.store.markSuperseded(); err != nil {
				return versionCheck{}, err
			}
		}
	}
	// What is left holds each slot once: a request's earlier copies of a
	// slot were dropped above, in favour of its last.
	kept := 0
	for _, d := range drop {
		if !d {
			kept++
		}
	}
	vc := versionCheck{keep: make([]*trace.Span, 0, kept), keys: make([]uint64, 0, kept)}
	for i, sp := range spans {
		if drop[i] {
			continue
		}
		vc.keep = append(vc.keep, sp)
		vc.keys = append(vc.keys, hashes[i])
	}
	// A slot another request is still writing: neither saw the other.
	// Both land in the writable store (newest), which gets the mark.
	marked := false
	for j, h := range vc.keys {
		if db.pending.add(h) && !marked && len(stores) > 0 {
			if err := stores[0].markSuperseded(); err != nil {
				db.pending.remove(vc.keys[:j+1]) // the slots registered so far
				return versionCheck{}, err
			}
			marked = true
		}
	}
	return vc, nil
}

// isSuperseded reports whether the hit ref from store s (stores is the
// search's snapshot, newest first, and holds s) has a newer version: a
// later entry for the same (span, chunk) in s, or any entry for it in a
// newer store. Only stores marked superseded can hold such hits.
func isSuperseded(stores []*Store, s *Store, ref index.SpanRef) (bool, error) {
	if !s.superseded.Load() {
		return false, nil
	}
	refs, err := s.meta.Span(ref.TraceID, ref.SpanID)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", StoreName(s.id), err)
	}
	for _, r := range refs {
		if r.ChunkNum == ref.ChunkNum && r.Loc != ref.Loc {
			return true, nil // Span keeps the latest entry per chunk
		}
	}
	for _, t := range stores {
		if t == s {
			break
		}
		if !t.mayHoldTrace(ref.TraceID) {
			continue
		}
		refs, err := t.meta.Span(ref.TraceID, ref.SpanID)
		if err != nil {
			return false, fmt.Errorf("store %s: %w", StoreName(t.id), err)
		}
		for _, r := range refs {
			if r.ChunkNum == ref.ChunkNum {
				return true, nil
			}
		}
	}
	return false, nil
}
