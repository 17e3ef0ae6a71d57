package index

import (
	"container/list"
	"sync"
)

// columnCache keeps the decoded time columns of recently searched sealed
// blocks (a sealed block's column never changes), so that repeated
// newest-first searches do not decode the same columns again.
type columnCache struct {
	mu      sync.Mutex
	max     int
	byBlock map[uint64]*list.Element
	lru     list.List // of *cachedColumn, most recent first
}

type cachedColumn struct {
	block uint64
	col   *column
}

func newColumnCache(max int) *columnCache {
	return &columnCache{max: max, byBlock: make(map[uint64]*list.Element)}
}

func (c *columnCache) get(block uint64) *column {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byBlock[block]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cachedColumn).col
	}
	return nil
}

func (c *columnCache) put(block uint64, col *column) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byBlock[block]; ok {
		return
	}
	c.byBlock[block] = c.lru.PushFront(&cachedColumn{block: block, col: col})
	for c.lru.Len() > c.max {
		e := c.lru.Back()
		c.lru.Remove(e)
		delete(c.byBlock, e.Value.(*cachedColumn).block)
	}
}
