package storedir

import (
	"container/list"
	"sync"

	"github.com/ztsd/ztsd/chunk"
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

// layoutCache keeps the layouts (chunk.Layout: header and frame bounds,
// ~100-200 bytes each) of the local chunks stored as several zstd frames
// that a read has read whole and checked (CRC-32, frame layout), by
// (store key, chunk offset). A chunk never changes once appended, so a
// later read of the same chunk (a get whose chunk left the chunk cache:
// at 10M spans almost every get) reads its header and the frames it
// decodes (chunk.File.ReadFramesKnown), each checked by its content
// checksum, instead of the whole chunk (~95 KB of a 500-span chunk, a
// tenth of it needed); a header that differs from the one kept, or a
// first frame that does not decode, is read whole and checked again.
// Bounded by entry count.
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
