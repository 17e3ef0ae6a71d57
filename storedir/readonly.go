package storedir

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A full disk at start-up, or at shutdown, must cost neither a panic nor a
// hang. Pebble writes a new MANIFEST and OPTIONS file when it opens an
// index (and panics when that fails), re-indexing writes, and a flush that
// fails with ENOSPC is retried forever. So:
//
//   - Open checks the free space first. Below startMinFree the DB opens
//     read-only: nothing is written to the data directory. Indexes on disk
//     that cover their data file open in Pebble's read-only mode; a store
//     whose indexes lag (not flushed when the daemon stopped on the full
//     disk) is indexed in memory from its data file for the run (memory
//     about that of its indexes; usually only the newest store). No
//     sealing, no new store, no tail cut; writes fail with ENOSPC ("disk
//     full: read-only since start") and ReadOnly says why. A restart with
//     free space leaves the mode.
//   - Close flushes the indexes only when there is room, and gives up on a
//     flush (and a Pebble close) still running at its deadline: the
//     indexes run without a WAL and are rebuilt from the data file past
//     their watermarks at the next start, so nothing is lost.

// startMinFree is the free space below which Open is read-only, for a
// file system whose write reserve (Options.MinFreeBytes) is reserve.
func startMinFree(reserve uint64) uint64 {
	return min(max(reserve/2, 1<<20), 16<<20)
}

// closeMinFree is the free space below which Close does not try to flush
// the indexes.
const closeMinFree = 1 << 20

// CloseTimeout bounds the index flushes and Pebble closes of DB.Close on
// a failing disk (well inside systemd's default 90 s stop timeout).
const CloseTimeout = 15 * time.Second

// freeBytes is the space available to this process on dir's file system.
func freeBytes(dir string) (free, total uint64, ok bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), true
}

// readOnlyAtStart returns why the DB must open read-only, or "".
func (db *DB) readOnlyAtStart() string {
	free, total, ok := freeBytes(db.dir)
	if !ok {
		return ""
	}
	reserve := uint64(1 << 20)
	switch {
	case db.opt.MinFreeBytes > 0:
		reserve = uint64(db.opt.MinFreeBytes)
	case db.opt.MinFreeBytes == 0:
		reserve = reserveBytes(total)
	}
	if need := startMinFree(reserve); free < need {
		return fmt.Sprintf("%d bytes free on the data directory's file system at start, less than the %d opening the indexes for writing needs; free space and restart ztsd", free, need)
	}
	return ""
}

// ReadOnly says why the DB takes no writes since it was opened (a full
// disk), or "" when it takes writes.
func (db *DB) ReadOnly() string { return db.readOnly }

// errReadOnly is what writes get from a read-only DB.
func (db *DB) errReadOnly() error {
	return fmt.Errorf("disk full: read-only since start (%s): %w", db.readOnly, syscall.ENOSPC)
}

// errCloseTimeout marks a close step abandoned at the deadline.
var errCloseTimeout = errors.New("did not finish before the close deadline (disk full or failing?)")

// within runs f, waiting until deadline at most; f keeps running in the
// background when it is late.
func within(deadline time.Time, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errCloseTimeout
	}
}

// closeAll closes stores in parallel by deadline.
func closeAll(stores []*Store, deadline time.Time) error {
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.closeBy(deadline)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
