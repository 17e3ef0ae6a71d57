package storedir

import (
	"fmt"
	"sync"
	"syscall"
	"time"

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

// spaceCheckTTL bounds how long a statfs result is trusted: other
// processes (and the indexes) use the file system too.
const spaceCheckTTL = 100 * time.Millisecond

// spaceCache lets checkSpace skip the statfs of most group commits: after
// a check that found headroom bytes above the reserve, writes are let
// through without a new statfs while they add up to less than a quarter of
// the headroom and the check is younger than spaceCheckTTL.
type spaceCache struct {
	mu       sync.Mutex
	at       time.Time // zero: no trusted result
	headroom uint64
	used     uint64 // bytes let through since at
}

// allow reports whether need bytes fit in the trusted headroom, and
// counts them when they do.
func (c *spaceCache) allow(need int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := uint64(max(need, 0))
	if c.at.IsZero() || time.Since(c.at) > spaceCheckTTL || c.used+n > c.headroom/4 {
		return false
	}
	c.used += n
	return true
}

func (c *spaceCache) set(headroom uint64) {
	c.mu.Lock()
	c.at, c.headroom, c.used = time.Now(), headroom, 0
	c.mu.Unlock()
}

// checkSpace returns an error wrapping syscall.ENOSPC when writing need
// more bytes would eat into the reserve.
func (db *DB) checkSpace(need int64) error {
	if db.opt.MinFreeBytes < 0 {
		return nil
	}
	if db.space.allow(need) {
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
	db.space.set(free - reserve - uint64(max(need, 0)))
	return nil
}
