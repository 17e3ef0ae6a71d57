package kv

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble"
)

// DB is one index's open Pebble database with the lifecycle that both
// kinds of index (meta/ and text/) share:
//
//   - every operation holds the database open (Acquire, Release); Close
//     waits for those running and makes later ones fail with the owning
//     package's closed error;
//   - Close flushes the memtable before closing (the indexes run without a
//     WAL: what was committed but not flushed would otherwise be re-indexed
//     from the data file at the next open);
//   - the format record is the first thing a new index writes and the
//     first thing an existing one is checked by (LoadFormat).
//
// Its Pebble methods (Get, NewIter, Set, ...) are the embedded
// *pebble.DB's; the caller holds the database open around them. Errors of
// the lifecycle methods name the index ("index /data/000001/meta: flush: ...").
type DB struct {
	*pebble.DB
	name     string
	readOnly bool
	errs     Errors

	closeMu sync.RWMutex // shared by every operation, exclusive in Close
	closed  bool
}

// Errors are the owning package's sentinel errors, which DB's methods
// return (wrapped) so that the package's callers can keep testing for
// them with errors.Is.
type Errors struct {
	Closed  error // an operation after Close
	NoIndex error // a read-only open of a missing or empty index
	Corrupt error // a missing or wrong format record
}

// OpenDB opens the database of the index named name (what errors call it,
// e.g. "text index /data/000001/text") in dir with Open. A read-only open
// of a missing or empty directory yields an error wrapping errs.NoIndex.
func OpenDB(name, dir string, o OpenOptions, errs Errors) (*DB, error) {
	db, err := Open(dir, o)
	if errors.Is(err, ErrNoDB) {
		return nil, fmt.Errorf("%s: %w", name, errs.NoIndex)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &DB{DB: db, name: name, readOnly: o.ReadOnly, errs: errs}, nil
}

// ReadOnly says whether the database was opened read-only.
func (d *DB) ReadOnly() bool { return d.readOnly }

// Acquire holds the database open for one operation; it fails with
// errs.Closed once Close has begun. Every successful Acquire is paired
// with a Release.
func (d *DB) Acquire() error {
	d.closeMu.RLock()
	if d.closed {
		d.closeMu.RUnlock()
		return d.errs.Closed
	}
	return nil
}

// Release ends an operation begun by Acquire.
func (d *DB) Release() { d.closeMu.RUnlock() }

// Value returns a copy of key's value (ok false when the key is absent).
// The caller holds the database open.
func (d *DB) Value(key []byte) (value []byte, ok bool, err error) {
	v, closer, err := d.DB.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get %q: %w", key, err)
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, true, nil
}

// LoadFormat returns the index's format record (at key), for the caller to
// check. An index without one is new: LoadFormat writes fresh there and
// returns it, unless the database already holds keys (errs.Corrupt: the
// record was lost) or was opened read-only (errs.NoIndex). The caller
// holds the database open, or has not shared it yet.
func (d *DB) LoadFormat(key, fresh []byte) ([]byte, error) {
	format, ok, err := d.Value(key)
	if err != nil || ok {
		return format, err
	}
	iter, err := d.DB.NewIter(nil)
	if err != nil {
		return nil, err
	}
	nonEmpty := iter.First()
	if err := iter.Close(); err != nil {
		return nil, err
	}
	if nonEmpty {
		return nil, fmt.Errorf("%w: no format record in a non-empty index", d.errs.Corrupt)
	}
	if d.readOnly {
		return nil, fmt.Errorf("%w: no format record", d.errs.NoIndex)
	}
	if err := d.DB.Set(key, fresh, pebble.NoSync); err != nil {
		return nil, fmt.Errorf("write format record: %w", err)
	}
	return fresh, nil
}

// held runs fn with the database held open and names the index and op in
// its error.
func (d *DB) held(op string, fn func() error) error {
	if err := d.Acquire(); err != nil {
		return err
	}
	defer d.Release()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %s: %w", d.name, op, err)
	}
	return nil
}

// FlushMemtable writes the memtable to sstables, so that everything
// committed so far survives a crash.
func (d *DB) FlushMemtable() error {
	return d.held("flush", d.DB.Flush)
}

// CompactAll compacts the whole index into as few levels as possible
// (tests, benchmarks and `verify` use it to measure the settled size).
func (d *DB) CompactAll() error {
	return d.held("compact", func() error { return d.DB.Compact([]byte{0}, []byte{0xff}, true) })
}

// Settle compacts the index whole into its last level when it is small
// (its tables hold at most maxBytes), its L0 (flushed tables no compaction
// has merged yet, snappy-compressed in 4 KiB blocks) holds at least minL0
// bytes, and room (free disk bytes) fits a second copy of it; otherwise it
// does nothing. It reports whether it compacted.
//
// A store's owner calls it at close, after the final flush: an index keeps
// up to four memtables' worth of entries in L0 (three flushed tables
// waiting for the L0 → base compaction, and the final flush), which for a
// small store is most of it, at about 2.3 times the bytes of the zstd last
// level (with 64 MiB memtables, tried and dropped, a store of a few hundred
// thousand OTLP-shaped spans rested at 37.7 against 16.4 B per span of the
// metadata index: 73.3 B per 6-attribute span in all, against the budget's
// 60). Compacting an index
// of up to a few hundred MB holds the close for a few seconds (storedir
// sets the bound); a larger one's L0 is a small part of it, and compacting
// it whole would hold the close too long, so it is left as it is; and a
// few tables of a few KB are not worth the compaction's file syncs.
func (d *DB) Settle(minL0, maxBytes, room uint64) (compacted bool, err error) {
	err = d.held("settle", func() error {
		m := d.DB.Metrics()
		var total uint64
		for _, l := range m.Levels {
			total += uint64(l.Size)
		}
		if m.Levels[0].NumFiles == 0 || uint64(m.Levels[0].Size) < minL0 || total > maxBytes || room < total {
			return nil
		}
		compacted = true
		// An automatic compaction that conflicts with the manual one (the
		// final flush may have started one) cancels it; it is safe to ask
		// again.
		var err error
		for range settleAttempts {
			if err = d.DB.Compact([]byte{0}, []byte{0xff}, true); !errors.Is(err, pebble.ErrCancelledCompaction) {
				break
			}
		}
		return err
	})
	return compacted, err
}

// settleAttempts is how many times Settle asks for its compaction when a
// concurrent one cancels it.
const settleAttempts = 3

// L0Tables returns how many tables the index's L0 holds (0 once closed).
func (d *DB) L0Tables() int64 {
	if d.Acquire() != nil {
		return 0
	}
	defer d.Release()
	return d.DB.Metrics().Levels[0].NumFiles
}

// CheckpointTo writes a consistent copy of the index as of now into dir
// (which must not exist): Pebble's checkpoint, its tables hard-linked where
// the file system allows. The copy opens like any index directory; the
// tiering uploader sends it to a bucket while the live index may compact.
func (d *DB) CheckpointTo(dir string) error {
	return d.held("checkpoint to "+dir, func() error { return d.DB.Checkpoint(dir, pebble.WithFlushedWAL()) })
}

// Compaction returns the index's compaction debt and its running flushes
// and compactions (zero once closed).
func (d *DB) Compaction() Compaction {
	if d.Acquire() != nil {
		return Compaction{}
	}
	defer d.Release()
	return CompactionOf(d.DB)
}

// DiskBytes returns the bytes the index occupies on disk (sstables,
// manifests); 0 once closed.
func (d *DB) DiskBytes() uint64 {
	if d.Acquire() != nil {
		return 0
	}
	defer d.Release()
	return d.DB.Metrics().DiskSpaceUsage()
}

// Close waits for running operations, runs beforeFlush (nil: nothing; the
// owner closes its own iterators there, which Pebble would otherwise report
// as leaked), flushes unless read-only, and closes the database. A second
// Close returns errs.Closed.
func (d *DB) Close(beforeFlush func()) error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return d.errs.Closed
	}
	d.closed = true
	if beforeFlush != nil {
		beforeFlush()
	}
	var ferr error
	if !d.readOnly {
		ferr = d.DB.Flush()
	}
	cerr := d.DB.Close()
	if err := errors.Join(ferr, cerr); err != nil {
		return fmt.Errorf("%s: close: %w", d.name, err)
	}
	return nil
}
