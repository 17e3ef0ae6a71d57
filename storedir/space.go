package storedir

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// A full disk must turn writes into errors, never into a hang or damage.
// The data file itself handles ENOSPC (a short append is truncated back),
// but Pebble does not: a memtable flush or compaction that fails with
// ENOSPC is retried forever while holding the index, and sealing a store
// on rotation flushes both indexes. So writes are refused while the data
// directory's file system has less than a reserve free; the reserve keeps
// room for the index flushes and the seal that follow the last accepted
// write.

// reserveBytes is the free space kept back on a file system of size
// total: a tenth of it, at least 4 MiB and at most 256 MiB.
func reserveBytes(total uint64) uint64 {
	r := total / 10
	r = max(r, 4<<20)
	r = min(r, 256<<20)
	return r
}

// checkSpace returns an error wrapping syscall.ENOSPC when writing need
// more bytes would eat into the reserve.
func (db *DB) checkSpace(need int64) error {
	if db.opt.MinFreeBytes < 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(db.dir, &st); err != nil {
		// Not knowing is not a reason to refuse writes; the write path
		// still reports a real ENOSPC.
		return nil
	}
	free := st.Bavail * uint64(st.Bsize)
	reserve := uint64(db.opt.MinFreeBytes)
	if reserve == 0 {
		reserve = reserveBytes(st.Blocks * uint64(st.Bsize))
	}
	if free < reserve+uint64(max(need, 0)) {
		return fmt.Errorf("data directory %s: %d bytes free, %d needed with the %d kept in reserve for index flushes: %w",
			db.dir, free, need+int64(reserve), reserve, syscall.ENOSPC)
	}
	return nil
}
