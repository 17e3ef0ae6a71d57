package textindex

import "sync"

// lruMap is a bounded map that keeps recently used entries: two generations
// of at most max/2 entries each; a hit in the old generation moves the entry
// to the new one, and when the new one is full the old one is dropped. It is
// safe for concurrent use.
type lruMap[K comparable, V any] struct {
	mu        sync.Mutex
	cur, prev map[K]V
	max       int
}

func newLRUMap[K comparable, V any](max int) *lruMap[K, V] {
	return &lruMap[K, V]{cur: make(map[K]V), max: max}
}

func (m *lruMap[K, V]) get(k K) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	if v, ok := m.prev[k]; ok {
		m.putLocked(k, v)
		return v, true
	}
	var zero V
	return zero, false
}

func (m *lruMap[K, V]) put(k K, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.putLocked(k, v)
}

func (m *lruMap[K, V]) putLocked(k K, v V) {
	if len(m.cur) >= m.max/2+1 {
		m.prev, m.cur = m.cur, make(map[K]V, len(m.cur))
	}
	m.cur[k] = v
}
