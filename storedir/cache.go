package storedir

import (
	"container/list"
	"sync"

	"github.com/ztsd/ztsd/trace"
)

// chunkCache keeps views of the decompressed payloads of recently read
// chunks, so that reading the spans of one trace (usually in one chunk)
// reads and decompresses it once, and each later read of a span of the
// chunk decodes only that span (trace.ChunkView remembers where each span
// starts). Bounded by entry count.
type chunkCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[cacheKey]*list.Element
}

type cacheKey struct {
	store uint64 // Store.key: unique among local and remote stores
	off   int64
}

type cacheEntry struct {
	key  cacheKey
	view *trace.ChunkView
}

func newChunkCache(max int) *chunkCache {
	return &chunkCache{max: max, ll: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *chunkCache) get(store uint64, off int64) (*trace.ChunkView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[cacheKey{store, off}]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*cacheEntry).view, true
	}
	return nil, false
}

func (c *chunkCache) put(store uint64, off int64, view *trace.ChunkView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{store, off}
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.items[k] = c.ll.PushFront(&cacheEntry{key: k, view: view})
	for c.ll.Len() > c.max {
		e := c.ll.Back()
		c.ll.Remove(e)
		delete(c.items, e.Value.(*cacheEntry).key)
	}
}

func (c *chunkCache) dropStore(store uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k.store == store {
			c.ll.Remove(e)
			delete(c.items, k)
		}
	}
}
