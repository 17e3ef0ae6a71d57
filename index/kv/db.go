package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
//     first thing an existing one is checked by (LoadFormat);
//   - Reopen closes and opens the database again in place, between
//     operations, to give back the memtable memory a database that has
//     stopped taking writes keeps (see memTableBytes).
//
// Its Pebble methods (Get, NewIter, Set, ...) are the embedded
// *pebble.DB's; the caller holds the database open around them and reads
// the embedded pointer only while it does (Reopen replaces it). Errors of
// the lifecycle methods name the index ("index /data/000001/meta: flush: ...").
type DB struct {
	*pebble.DB // replaced by Reopen, with closeMu held exclusively
	name       string
	dir        string
	opts       OpenOptions // what Reopen opens the database with again
	errs       Errors

	closeMu sync.RWMutex // shared by every operation, exclusive in Close and Reopen
	closed  bool
	// reopenGate, while Reopen waits for the running operations to end,
	// is closed when it stops waiting: new operations wait for that (at
	// most reopenGateWait) instead of keeping the database busy forever.
	reopenGate atomic.Pointer[chan struct{}]
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
	return &DB{DB: db, name: name, dir: dir, opts: o, errs: errs}, nil
}

// ReadOnly says whether the database was opened read-only.
func (d *DB) ReadOnly() bool { return d.opts.ReadOnly }

// Acquire holds the database open for one operation; it fails with
// errs.Closed once Close has begun. Every successful Acquire is paired
// with a Release. While Reopen waits for the operations running to end,
// a new one waits for it first, at most reopenGateWait.
func (d *DB) Acquire() error {
	if g := d.reopenGate.Load(); g != nil {
		t := time.NewTimer(reopenGateWait)
		select {
		case <-*g:
		case <-t.C:
		}
		t.Stop()
	}
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
	if d.opts.ReadOnly {
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
	// A closure, not the method value d.DB.Flush: that would read d.DB
	// before held acquires the database, and Reopen may replace (and
	// close) it in between.
	return d.held("flush", func() error { return d.DB.Flush() })
}

// CompactAll compacts the whole index into as few levels as possible: the
// end of a bulk load (`ztsctl recover`'s rebuild), and tests and
// benchmarks that measure the settled size. It rewrites every table, so
// that the index rests in its last level's format (zstd, 32 KiB blocks):
// Pebble would move a lone flushed table down as it is (a bulk load of a
// small store flushes once), in L0's format, uncompressed for a bulk load
// (see Open), snappy in 4 KiB blocks otherwise. So when the index is one
// table in L0 and nothing else, its first key is set again to its value
// and flushed as a second table, which overlaps the first: the compaction
// then merges the two.
func (d *DB) CompactAll() error {
	return d.held("compact", func() error {
		if err := d.DB.Flush(); err != nil {
			return err
		}
		if err := d.splitLoneTable(); err != nil {
			return err
		}
		return d.DB.Compact([]byte{0}, []byte{0xff}, true)
	})
}

// splitLoneTable adds a second table to an index that is one table in L0
// and nothing else (see CompactAll).
func (d *DB) splitLoneTable() error {
	m := d.DB.Metrics()
	for i, l := range m.Levels {
		if n := l.NumFiles; (i == 0 && n != 1) || (i > 0 && n != 0) {
			return nil
		}
	}
	it, err := d.DB.NewIter(nil)
	if err != nil {
		return err
	}
	var key, val []byte
	if it.First() {
		key = bytes.Clone(it.Key())
		val = bytes.Clone(it.Value())
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	if key == nil {
		return nil
	}
	// The value read is the key's merged value (its operands as the merge
	// operator finishes them): set, it reads back the same.
	if err := d.DB.Set(key, val, pebble.NoSync); err != nil {
		return err
	}
	return d.DB.Flush()
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
	if !d.opts.ReadOnly {
		ferr = d.DB.Flush()
	}
	cerr := d.DB.Close()
	if err := errors.Join(ferr, cerr); err != nil {
		return fmt.Errorf("%s: close: %w", d.name, err)
	}
	return nil
}

// MemTableBytes returns the bytes of block cache the database's memtables
// reserve: the memtables in use and the one Pebble keeps to recycle (0
// once closed).
func (d *DB) MemTableBytes() uint64 {
	if d.Acquire() != nil {
		return 0
	}
	defer d.Release()
	m := d.DB.Metrics()
	return m.MemTable.Size + m.MemTable.ZombieSize
}

// Reopen closes the database and opens it again with the same options,
// Settled (its L0 tables compacted into the base level in the
// background), in place: operations before it used the old database, operations after
// it use the new one, and none sees it closed. It is how a database that
// no longer takes many writes (a sealed store's index) gives back its
// memtables: Pebble grows a database's memtable size up to MemTableSize
// and never shrinks it, keeps a flushed memtable to recycle, and reserves
// both from the block cache, while a fresh open starts with one memtable
// of 256 KiB (see memTableBytes).
//
// Reopen first flushes under a shared hold and waits until no flush or
// compaction runs (Pebble's close waits for them, and operations would
// wait for the close). It then needs the database to itself. It never
// waits in line for it (a blocked sync.RWMutex.Lock stops every new
// operation, and an operation that holds the database across calls and
// acquires it again inside — a search whose callback looks up the same
// index, an index.Matcher kept for a page — would wait on itself for
// good): new operations wait at most reopenGateWait each while Reopen
// tries (TryLock) for up to reopenTryFor to find no operation running;
// if it does not, it lets them run and tries again reopenRetryAfter
// later, until ctx ends. Holding the database, Reopen runs beforeFlush
// (the owner closes its own iterators there), flushes what was committed
// since, closes the database and opens it again: operations wait for
// that (a few milliseconds), and a fresh open's cache is cold for what
// the database reads next.
//
// It reports whether it reopened: a database in memory (whose contents
// the close would lose) or read-only (whose memtable never grows) is left
// as it is. A failed flush leaves the database open as it was; a failed
// open leaves it closed (operations fail with the owner's closed error),
// and its error wraps that one too.
func (d *DB) Reopen(ctx context.Context, beforeFlush func()) (reopened bool, err error) {
	if d.opts.InMemory || d.opts.ReadOnly {
		return false, nil
	}
	if err := d.FlushMemtable(); err != nil {
		return false, err
	}
	for {
		if err := d.waitIdle(ctx); err != nil {
			return false, err
		}
		got, err := d.lockForReopen(ctx)
		if err != nil {
			return false, err
		}
		if got {
			break
		}
		if err := sleepCtx(ctx, reopenRetryAfter); err != nil {
			return false, fmt.Errorf("%s: reopen: %w", d.name, err)
		}
	}
	defer d.closeMu.Unlock()
	if beforeFlush != nil {
		beforeFlush()
	}
	if err := d.DB.Flush(); err != nil {
		return false, fmt.Errorf("%s: reopen: flush: %w", d.name, err)
	}
	cerr := d.DB.Close()
	// Reopened, the index takes few writes: what it left in L0 is
	// compacted into the base level (OpenOptions.Settled).
	d.opts.Settled = true
	db, err := Open(d.dir, d.opts)
	if err != nil {
		d.closed = true
		return false, fmt.Errorf("%s: reopen: %w; %w", d.name, errors.Join(cerr, err), d.errs.Closed)
	}
	d.DB = db
	if cerr != nil {
		return true, fmt.Errorf("%s: reopen: close: %w", d.name, cerr)
	}
	return true, nil
}

// How Reopen waits for the database to itself: new operations wait up to
// reopenGateWait for it while it tries for up to reopenTryFor, every
// reopenPoll; after a try that did not find the database idle, it lets
// operations run for reopenRetryAfter.
const (
	reopenGateWait   = 20 * time.Millisecond
	reopenTryFor     = 100 * time.Millisecond
	reopenPoll       = time.Millisecond
	reopenRetryAfter = 500 * time.Millisecond
)

// lockForReopen takes closeMu exclusively if, within reopenTryFor (new
// operations held at the gate meanwhile), no operation holds it and no
// flush or compaction runs. It fails with errs.Closed after Close.
func (d *DB) lockForReopen(ctx context.Context) (bool, error) {
	gate := make(chan struct{})
	d.reopenGate.Store(&gate)
	defer func() {
		d.reopenGate.Store(nil)
		close(gate)
	}()
	deadline := time.Now().Add(reopenTryFor)
	for {
		if d.closeMu.TryLock() {
			if d.closed {
				d.closeMu.Unlock()
				return false, d.errs.Closed
			}
			// A commit may have started a flush since waitIdle looked:
			// the close would wait for it, holding every operation.
			if CompactionOf(d.DB).Running == 0 {
				return true, nil
			}
			d.closeMu.Unlock()
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := sleepCtx(ctx, reopenPoll); err != nil {
			return false, fmt.Errorf("%s: reopen: %w", d.name, err)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waitIdle waits, holding the database only for each look, until no
// flush or compaction runs.
func (d *DB) waitIdle(ctx context.Context) error {
	for {
		if err := d.Acquire(); err != nil {
			return err
		}
		running := CompactionOf(d.DB).Running
		d.Release()
		if running == 0 {
			return nil
		}
		if err := sleepCtx(ctx, 10*reopenPoll); err != nil {
			return fmt.Errorf("%s: reopen: %w", d.name, err)
		}
	}
}
