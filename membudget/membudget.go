// Package membudget owns the daemon's memory budget (config
// limits.memory_budget): one count of bytes that in-flight request bodies,
// Zorka session symbol tables and the daemon's baseline (caches and index
// state after start-up) reserve against, so that past it a request is
// refused with 503 + Retry-After instead of growing the process without
// bound.
//
// Invariants:
//   - Used never exceeds Limit through TryReserve; Reserve (for memory
//     already held, such as the baseline) may push it over, after which
//     every TryReserve fails until enough is released.
//   - Every reservation is released exactly once by its owner; Release of
//     more than is reserved is a programming error and panics.
//   - A nil *Budget is unlimited: every reservation succeeds.
package membudget

import (
	"errors"
	"fmt"
	"sync"
)

// ErrExhausted is wrapped by every refused reservation.
var ErrExhausted = errors.New("memory budget exhausted")

// ExhaustedError is a refused reservation: what was asked and the state of
// the budget. Its message names the configuration key.
type ExhaustedError struct {
	What        string // what asked, e.g. "request body"
	Want        int64
	Used, Limit int64
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("%s needs %d bytes: %d of memory_budget (%d bytes) in use; retry later", e.What, e.Want, e.Used, e.Limit)
}

func (e *ExhaustedError) Unwrap() error { return ErrExhausted }

// Budget is a semaphore of bytes. It is safe for concurrent use.
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
	peak  int64
}

// New returns a budget of limit bytes.
func New(limit int64) *Budget {
	return &Budget{limit: limit}
}

// TryReserve reserves n bytes for what, or returns an *ExhaustedError when
// that would pass the limit.
func (b *Budget) TryReserve(what string, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return &ExhaustedError{What: what, Want: n, Used: b.used, Limit: b.limit}
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return nil
}

// Reserve reserves n bytes unconditionally (memory already in use).
func (b *Budget) Reserve(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
}

// Release returns n reserved bytes.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.used {
		panic(fmt.Sprintf("membudget: release of %d bytes with %d reserved", n, b.used))
	}
	b.used -= n
}

// SetLimit changes the limit (SIGHUP); reservations held stay held.
func (b *Budget) SetLimit(limit int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.limit = limit
	b.mu.Unlock()
}

// Stats returns the bytes reserved now, the most ever reserved, and the
// limit.
func (b *Budget) Stats() (used, peak, limit int64) {
	if b == nil {
		return 0, 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.limit
}
