package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/ztsd/ztsd/recovery/indexswap"
	"github.com/ztsd/ztsd/storedir"
)

// The names inside a store directory (the layout storedir defines; see
// DESIGN.md "On-disk layout").
const (
	PropsFile  = "config.props"
	DataFile   = "traces.zts"
	BrokenFile = "traces.zts.broken"
	MetaDir    = "meta"
	TextDir    = "text"
	lockFile   = "LOCK"
	// deletingPrefix marks a store whose deletion (retention) was
	// interrupted.
	deletingPrefix = ".deleting-"
)

// FinishInterruptedSwap completes or discards an index swap that a crash
// interrupted in storeDir. It is indexswap.FinishInterrupted; storedir
// calls that directly (recovery imports storedir, not the other way round).
func FinishInterruptedSwap(storeDir string) error {
	_, err := indexswap.FinishInterrupted(storeDir)
	return err
}

// dataDirEntries lists a data directory: its store directories (ascending
// id) and the leftovers of interrupted deletions.
func dataDirEntries(dir string) (stores []string, deleting []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	var ids []uint32
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, deletingPrefix) {
			deleting = append(deleting, name)
			continue
		}
		if id, ok := storedir.ParseStoreName(name); ok && e.IsDir() {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		stores = append(stores, filepath.Join(dir, storedir.StoreName(id)))
	}
	return stores, deleting, nil
}

// IsStoreDir reports whether dir looks like a store directory (it holds a
// data file or config.props) rather than a data directory.
func IsStoreDir(dir string) bool {
	for _, n := range []string{DataFile, PropsFile} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// Lock is a held data-directory lock.
type Lock struct{ f *os.File }

// LockDataDir takes the data directory's LOCK the way the daemon does (an
// exclusive flock, the holder's pid written into the file), so that no
// daemon can start while an offline repair runs. If a daemon (or another
// tool) holds it, the error wraps storedir.ErrLocked and names the pid.
func LockDataDir(dir string) (*Lock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		_, pid := storedir.LockHolder(dir)
		if pid != "" {
			return nil, fmt.Errorf("%s (held by pid %s; stop the daemon first): %w", dir, pid, storedir.ErrLocked)
		}
		return nil, fmt.Errorf("%s: %w", dir, storedir.ErrLocked)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}

// exists reports whether path exists (errors other than not-exist count as
// existing, so that callers go on to report them).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
