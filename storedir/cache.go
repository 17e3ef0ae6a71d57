package storedir

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/trace"
)

// chunkCache keeps views of the payloads of recently read chunks, so that
// reading the spans of one trace (usually in one chunk) reads the chunk
// once, and each later read of a span of the chunk decodes only that span
// (trace.ChunkView remembers where each span starts). A local store's
// chunk stored as several zstd frames is decompressed frame by frame as
// its spans are read (readView, chunk.Frames): a view holds the payload
// buffers of the frames decoded so far. Bounded by entry count.
//
// The cache holds each view it keeps (cachedView.hold) and lets go of it
// when it leaves (evicted, or its store dropped), so that a view's
// buffers are reused once neither the cache nor a read holds it.
type chunkCache = storeLRU[*cachedView]

func newChunkCache(max int) *chunkCache {
	c := newStoreLRU[*cachedView](max)
	c.hold, c.drop = (*cachedView).hold, (*cachedView).drop
	return c
}

// cachedView is a chunk view shared by the chunk cache and the reads that
// use it, with the count of its holders: the cache while the view is in
// it, and each read while it uses the view or the spans it read from it.
// When the last holder lets go, the view's payload buffers go back to
// their pool (trace.ChunkView.Release: the frames a later read decodes
// reuse them), unless a read pinned the view: a read whose spans leave
// the DB (GetTrace, Search: the caller may keep them as long as it likes)
// pins it, because every string of those spans points into the view's
// string table, and the garbage collector then frees the buffers when
// nothing points into them any more. Only a scoped read (DB.ReadTrace),
// whose spans are dead when it ends, leaves a view unpinned.
type cachedView struct {
	view   *trace.ChunkView
	refs   atomic.Int32
	pinned atomic.Bool
}

// newCachedView wraps view, held once (by the read that made it).
func newCachedView(view *trace.ChunkView) *cachedView {
	v := &cachedView{view: view}
	v.refs.Store(1)
	return v
}

func (v *cachedView) hold() { v.refs.Add(1) }

// drop lets go of a hold; the last one releases the view's buffers unless
// it is pinned. A pin always comes before the pinning read's drop, so the
// last drop sees it.
func (v *cachedView) drop() {
	if n := v.refs.Add(-1); n == 0 && !v.pinned.Load() {
		v.view.Release()
	} else if n < 0 {
		panic("storedir: chunk view dropped more often than held")
	}
}

// readScope is the views a scoped read (DB.ReadTrace) read spans from,
// each held until release, when the read's spans are no longer used.
type readScope struct{ views []*cachedView }

func (sc *readScope) release() {
	for _, v := range sc.views {
		v.drop()
	}
	sc.views = nil
}

// layoutCache keeps the layouts (chunk.Layout: header and frame bounds,
// ~100-200 bytes each) of the local chunks stored as several zstd frames
// with a zstd first frame (written before LZ4 lead frames) that a read has
// read whole and checked (CRC-32, frame layout), or that the committer
// appended (the encoder's layout, chunk.EncodedChunk.Layout, kept for the
// offset the append returned; a chunk written now has an LZ4 lead frame,
// which lists its frames, and no layout, unless LZ4 could not shrink its
// first piece), by (store key, chunk offset).
// A chunk never changes once appended, so a later read of the same chunk
// (a get whose chunk left the chunk cache: at 10M spans almost every get)
// reads its header and the frames it decodes (chunk.File.ReadFramesKnown),
// each checked by its content checksum, instead of the whole chunk (~95
// KB of a 500-span chunk, a tenth of it needed); a header that differs
// from the one kept, or a first frame that does not decode, is read whole
// and checked again. Bounded by entry count.
type layoutCache = storeLRU[*chunk.Layout]

// layoutCacheEntries bounds the layout cache: about 10 MB of layouts,
// every chunk of a store of ~16M spans in 500-span chunks.
const layoutCacheEntries = 32768

func newLayoutCache(max int) *layoutCache { return newStoreLRU[*chunk.Layout](max) }

// blockCache keeps recently read trace-directory blocks of remote stores
// (remote.go), by (store key, offset in the directory object): a get of a
// trace whose block was read costs no GET for it. Bounded by entry count.
type blockCache = storeLRU[[]byte]

func newBlockCache(max int) *blockCache { return newStoreLRU[[]byte](max) }

// storeLRU is a least-recently-used map from (store, offset) to V, bounded
// by entry count, safe for concurrent use; dropStore forgets a store.
// hold and drop, when set, count the holders of a value (the chunk cache's
// views): hold is called for the cache itself when a value enters and for
// the caller of a get that finds it, drop when a value leaves (evicted,
// its store dropped), each under the cache's lock.
type storeLRU[V any] struct {
	mu         sync.Mutex
	max        int
	ll         *list.List
	items      map[cacheKey]*list.Element
	hold, drop func(V)
}

type cacheKey struct {
	store uint64 // Store.key: unique among local and remote stores
	off   int64
}

type lruEntry[V any] struct {
	key cacheKey
	val V
}

func newStoreLRU[V any](max int) *storeLRU[V] {
	return &storeLRU[V]{max: max, ll: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *storeLRU[V]) get(store uint64, off int64) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[cacheKey{store, off}]; ok {
		c.ll.MoveToFront(e)
		v := e.Value.(*lruEntry[V]).val
		if c.hold != nil {
			c.hold(v)
		}
		return v, true
	}
	var zero V
	return zero, false
}

// put keeps v for (store, off) unless a value is kept for it already
// (then only that value moves to the front).
func (c *storeLRU[V]) put(store uint64, off int64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{store, off}
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return
	}
	if c.hold != nil {
		c.hold(v)
	}
	c.items[k] = c.ll.PushFront(&lruEntry[V]{key: k, val: v})
	for c.ll.Len() > c.max {
		c.remove(c.ll.Back())
	}
}

// remove forgets entry e; c.mu is held.
func (c *storeLRU[V]) remove(e *list.Element) {
	ent := e.Value.(*lruEntry[V])
	c.ll.Remove(e)
	delete(c.items, ent.key)
	if c.drop != nil {
		c.drop(ent.val)
	}
}

func (c *storeLRU[V]) dropStore(store uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k.store == store {
			c.remove(e)
		}
	}
}
