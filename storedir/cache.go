package storedir

import (
	"container/list"
	"sync"

	"github.com/ztsd/ztsd/trace"
)

// chunkCache keeps views of the payloads of recently read chunks, so that
// reading the spans of one trace (usually in one chunk) reads the chunk
// once, and each later read of a span of the chunk decodes only that span
// (trace.ChunkView remembers where each span starts). A local store's
// chunk stored as several zstd frames is decompressed frame by frame as
// its spans are read (readView, chunk.Frames): a view holds the payload
// buffer and, until every frame is decoded, the stored bytes. Bounded by
// entry count.
type chunkCache = storeLRU[*trace.ChunkView]

func newChunkCache(max int) *chunkCache { return newStoreLRU[*trace.ChunkView](max) }

// blockCache keeps recently read trace-directory blocks of remote stores
// (remote.go), by (store key, offset in the directory object): a get of a
// trace whose block was read costs no GET for it. Bounded by entry count.
type blockCache = storeLRU[[]byte]

func newBlockCache(max int) *blockCache { return newStoreLRU[[]byte](max) }

// storeLRU is a least-recently-used map from (store, offset) to V, bounded
// by entry count, safe for concurrent use; dropStore forgets a store.
type storeLRU[V any] struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[cacheKey]*list.Element
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
		return e.Value.(*lruEntry[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *storeLRU[V]) put(store uint64, off int64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{store, off}
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&lruEntry[V]{key: k, val: v})
	for c.ll.Len() > c.max {
		e := c.ll.Back()
		c.ll.Remove(e)
		delete(c.items, e.Value.(*lruEntry[V]).key)
	}
}

func (c *storeLRU[V]) dropStore(store uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k.store == store {
			c.ll.Remove(e)
			delete(c.items, k)
		}
	}
}
