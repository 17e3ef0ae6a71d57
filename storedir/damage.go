package storedir

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/ztsd/ztsd/chunk"
)

// CorruptChunkError is a chunk of a store's data file that cannot be read:
// its checksum, framing or payload is damaged. Reads (search, get) skip
// such a chunk and report it as a Warning instead of failing; only the
// spans stored in it are lost to them.
type CorruptChunkError struct {
	Store  string // store name (six hex digits; node/six hex digits for a remote store)
	Offset int64  // data-file offset of the chunk
	Err    error
}

func (e *CorruptChunkError) Error() string {
	return fmt.Sprintf("store %s chunk at offset %d: %v", e.Store, e.Offset, e.Err)
}

func (e *CorruptChunkError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, chunk.ErrCorrupt) hold for every CorruptChunkError.
func (e *CorruptChunkError) Is(target error) bool { return target == chunk.ErrCorrupt }

// Warning is a damaged chunk a read skipped: the answer is complete except
// for the spans stored in that chunk. The API returns warnings with the
// results (DESIGN.md "Damaged chunks").
type Warning struct {
	Store  string `json:"store"`
	Offset int64  `json:"offset"`
	Error  string `json:"error"`
}

// Warning returns the warning that reports e.
func (e *CorruptChunkError) Warning() Warning {
	return Warning{Store: e.Store, Offset: e.Offset, Error: e.Err.Error()}
}

// isChunkDamage reports whether err from File.ReadChunk means the stored
// bytes are bad (or the index points where no chunk can be), as opposed to
// an I/O error or a closed file, which must still fail the request.
func isChunkDamage(err error) bool {
	return errors.Is(err, chunk.ErrCorrupt) || errors.Is(err, chunk.ErrOutOfRange)
}

// damageLog remembers the damaged chunks this DB has met, so that each is
// logged once and counted once however often reads reach it, and later
// reads skip it without reading it again. Bounded: beyond maxDamaged
// distinct chunks the oldest entries are forgotten (they are then logged
// and counted again when met).
type damageLog struct {
	log   *slog.Logger
	mu    sync.Mutex
	seen  map[damageKey]*CorruptChunkError
	order []damageKey
	count atomic.Int64
}

type damageKey struct {
	store uint64 // Store.key
	off   int64
}

const maxDamaged = 4096

func newDamageLog(log *slog.Logger) *damageLog {
	return &damageLog{log: log, seen: map[damageKey]*CorruptChunkError{}}
}

// note records the damaged chunk at off of the store with key key, named
// name, logging it the first time, and returns the error that reports it.
func (d *damageLog) note(key uint64, name string, off int64, err error) *CorruptChunkError {
	k := damageKey{key, off}
	d.mu.Lock()
	defer d.mu.Unlock()
	if ce, ok := d.seen[k]; ok {
		return ce
	}
	ce := &CorruptChunkError{Store: name, Offset: off, Err: err}
	if len(d.order) >= maxDamaged {
		delete(d.seen, d.order[0])
		d.order = d.order[1:]
	}
	d.seen[k] = ce
	d.order = append(d.order, k)
	d.count.Add(1)
	d.log.Error("damaged chunk skipped by reads; its spans are left out of answers (run `ztsctl verify`, then `ztsctl recover`)",
		"store", ce.Store, "offset", off, "err", err)
	return ce
}

// known returns the recorded damage of the chunk, if any.
func (d *damageLog) known(key uint64, off int64) (*CorruptChunkError, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ce, ok := d.seen[damageKey{key, off}]
	return ce, ok
}

// forgetStore drops the entries of a store that is deleted or rebuilt.
func (d *damageLog) forgetStore(key uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kept := d.order[:0]
	for _, k := range d.order {
		if k.store == key {
			delete(d.seen, k)
			continue
		}
		kept = append(kept, k)
	}
	d.order = kept
}

// DamagedChunks is how many distinct damaged chunks reads and re-indexing
// have met since Open (the ztsd_damaged_chunks_total metric).
func (db *DB) DamagedChunks() int64 { return db.damage.count.Load() }

// warnings collects the warnings of one answer, each chunk once.
type warnings struct {
	list []Warning
	seen map[warningKey]bool
}

// warningKey is a warning's (store name, offset).
type warningKey struct {
	store string
	off   int64
}

// add records err if it is a damaged chunk and reports whether it was
// (the caller then skips the chunk's spans instead of failing).
func (w *warnings) add(err error) bool {
	var ce *CorruptChunkError
	if !errors.As(err, &ce) {
		return false
	}
	w.addWarning(ce.Warning())
	return true
}

// addWarning records a warning, each (store, offset) once.
func (w *warnings) addWarning(x Warning) {
	k := warningKey{x.Store, x.Offset}
	if w.seen == nil {
		w.seen = map[warningKey]bool{}
	}
	if !w.seen[k] {
		w.seen[k] = true
		w.list = append(w.list, x)
	}
}
