// Package faultfs is a chunk.FS that injects faults, for tests of the data
// file's write, sync and read paths: errors (ENOSPC, EIO, anything) and short
// writes on chosen operations of chosen files, a simulated disk that fills
// up, and a crash hook that runs at a chosen mutating operation (the crash
// tests kill their own process there).
//
// Invariants:
//
//   - Without rules, a space limit or a crash point, an FS behaves exactly
//     like the FS it wraps: every call is passed through unchanged.
//   - A fault is decided before the call reaches the wrapped file, except
//     for short writes and a full disk, which first write the bytes that
//     fit (as a real file system does) and then fail with the rule's error.
//   - Every injected fault is counted (Injected), so a test can assert that
//     its faults were actually exercised.
//   - An FS is safe for concurrent use; rules may change while files are open.
package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"syscall"

	"github.com/ztsd/ztsd/chunk"
)

// Op is a kind of file-system operation.
type Op uint8

// The operations a Rule can target.
const (
	OpAny Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSyncDir
	OpStat
	OpClose
	// OpAllocate is a file's preallocation (chunk.Allocator: fallocate).
	OpAllocate
)

func (o Op) String() string {
	switch o {
	case OpAny:
		return "any"
	case OpOpen:
		return "open"
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpTruncate:
		return "truncate"
	case OpSyncDir:
		return "syncdir"
	case OpStat:
		return "stat"
	case OpClose:
		return "close"
	case OpAllocate:
		return "allocate"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// mutating reports whether o changes what is on disk (the operations a
// crash point counts).
func (o Op) mutating() bool {
	switch o {
	case OpOpen, OpWrite, OpSync, OpTruncate, OpSyncDir, OpAllocate:
		return true
	}
	return false
}

// Rule describes a fault. Zero fields match everything.
type Rule struct {
	Op Op
	// PathContains restricts the rule to paths containing it.
	PathContains string
	// After lets this many matching calls through before the rule fires.
	After int
	// Times is how many calls fail once the rule fires; 0 means every call
	// from then on.
	Times int
	// Err is the error returned (wrapped in an *fs.PathError); nil means
	// syscall.EIO.
	Err error
	// ShortWrite makes a failing write store the first half of its bytes
	// before returning the error (a torn write).
	ShortWrite bool
}

type rule struct {
	Rule
	seen, fired int
}

// FS wraps a chunk.FS with fault injection.
type FS struct {
	inner chunk.FS

	mu       sync.Mutex
	rules    []*rule
	injected int
	// free is the simulated free space in bytes while limited; a write
	// that grows files past it stores what fits and fails with ENOSPC.
	free    int64
	limited bool
	// crash support: after crashAt mutating operations, crash is called
	// (before the operation reaches the disk).
	mutations int
	crashAt   int
	crash     func(op Op, path string)
	// observe, when set, sees every mutating operation (before it runs).
	observe func(n int, op Op, path string)
}

// New wraps inner; nil means chunk.OSFS{}.
func New(inner chunk.FS) *FS {
	if inner == nil {
		inner = chunk.OSFS{}
	}
	return &FS{inner: inner}
}

// Inject adds a rule and returns a function that removes it.
func (f *FS) Inject(r Rule) (remove func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rr := &rule{Rule: r}
	f.rules = append(f.rules, rr)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, x := range f.rules {
			if x == rr {
				f.rules = append(f.rules[:i:i], f.rules[i+1:]...)
				return
			}
		}
	}
}

// Clear removes every rule and the space limit.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
	f.limited = false
}

// LimitSpace simulates a disk with free bytes left: writes that grow files
// beyond it fail with ENOSPC after storing what fits; truncation frees
// space again. Only files opened through f are accounted.
func (f *FS) LimitSpace(free int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free, f.limited = max(free, 0), true
}

// AddSpace frees n more bytes of the simulated disk (the operator deleted
// something).
func (f *FS) AddSpace(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.free += n
}

// Unlimit ends the space simulation.
func (f *FS) Unlimit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limited = false
}

// Free returns the simulated free space (meaningful while limited).
func (f *FS) Free() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.free
}

// CrashAt arranges for crash to be called just before the n-th (1-based)
// mutating operation (open, write, sync, truncate, directory sync,
// allocate) reaches
// the disk. Crash tests pass a function that kills the process, so the
// disk holds exactly the effects of the first n-1 operations. n ≤ 0
// disables it.
func (f *FS) CrashAt(n int, crash func(op Op, path string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mutations, f.crashAt, f.crash = 0, n, crash
}

// Observe calls fn (when not nil) with the sequence number, kind and path
// of every mutating operation before it runs, so that a test can pick
// crash points from a probe run. fn runs with the FS locked: it must not
// call the FS.
func (f *FS) Observe(fn func(n int, op Op, path string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observe = fn
}

// Mutations returns how many mutating operations have been performed.
func (f *FS) Mutations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mutations
}

// Injected returns how many faults have been injected so far.
func (f *FS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// ErrInjected is the default error of a rule without Err: syscall.EIO.
var ErrInjected = syscall.EIO

// check runs the crash point and the rules for one call. It returns the
// matching rule's error and whether the write should be torn.
func (f *FS) check(op Op, path string) (error, bool) {
	f.mu.Lock()
	if op.mutating() {
		f.mutations++
		if f.observe != nil {
			f.observe(f.mutations, op, path)
		}
		if f.crashAt > 0 && f.mutations == f.crashAt && f.crash != nil {
			crash := f.crash
			f.mu.Unlock()
			crash(op, path)
			f.mu.Lock()
		}
	}
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.Op != OpAny && r.Op != op {
			continue
		}
		if r.PathContains != "" && !strings.Contains(path, r.PathContains) {
			continue
		}
		r.seen++
		if r.seen <= r.After {
			continue
		}
		if r.Times > 0 && r.fired >= r.Times {
			continue
		}
		r.fired++
		f.injected++
		err := r.Err
		if err == nil {
			err = ErrInjected
		}
		return &fs.PathError{Op: op.String(), Path: path, Err: err}, r.ShortWrite && op == OpWrite
	}
	return nil, false
}

// OpenFile opens name through the wrapped FS.
func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (chunk.OSFile, error) {
	if err, _ := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	osf, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &file{fs: f, path: name, inner: osf}, nil
}

// SyncDir syncs dir through the wrapped FS.
func (f *FS) SyncDir(dir string) error {
	if err, _ := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	return f.inner.SyncDir(dir)
}

// file is an OSFile whose calls go through the FS's faults.
type file struct {
	fs    *FS
	path  string
	inner chunk.OSFile
}

func (h *file) ReadAt(b []byte, off int64) (int, error) {
	if err, _ := h.fs.check(OpRead, h.path); err != nil {
		return 0, err
	}
	return h.inner.ReadAt(b, off)
}

func (h *file) WriteAt(b []byte, off int64) (int, error) {
	err, torn := h.fs.check(OpWrite, h.path)
	if err != nil && !torn {
		return 0, err
	}
	if err != nil {
		n, werr := h.inner.WriteAt(b[:len(b)/2], off)
		return n, errors.Join(err, werr)
	}
	fits, size, serr := h.reserve(b, off)
	if serr != nil {
		n := 0
		if fits > 0 {
			n, _ = h.inner.WriteAt(b[:fits], off)
		}
		return n, serr
	}
	n, werr := h.inner.WriteAt(b, off)
	if n < len(b) && size >= 0 {
		// Give back the space reserved for bytes that were not written.
		reserved := max(0, off+int64(len(b))-size)
		used := max(0, off+int64(n)-size)
		h.fs.release(reserved - used)
	}
	return n, werr
}

// reserve accounts the growth of a write against the simulated free space
// and returns the file size before the write (-1 when not limited). On
// ENOSPC it returns how many leading bytes of b still fit (already
// accounted).
func (h *file) reserve(b []byte, off int64) (fits int, size int64, err error) {
	h.fs.mu.Lock()
	limited := h.fs.limited
	h.fs.mu.Unlock()
	if !limited {
		return len(b), -1, nil
	}
	st, serr := h.inner.Stat()
	if serr != nil {
		return 0, -1, serr
	}
	size = st.Size()
	grow := off + int64(len(b)) - size
	if grow <= 0 {
		return len(b), size, nil
	}
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if grow <= h.fs.free {
		h.fs.free -= grow
		return len(b), size, nil
	}
	// What fits: the bytes below the current end plus the free space.
	fits = int(min(max(0, size-off)+h.fs.free, int64(len(b))))
	h.fs.free -= max(0, off+int64(fits)-size)
	h.fs.injected++
	return fits, size, &fs.PathError{Op: "write", Path: h.path, Err: syscall.ENOSPC}
}

// release gives n bytes back to the simulated free space.
func (f *FS) release(n int64) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limited {
		f.free += n
	}
}

func (h *file) Sync() error {
	if err, _ := h.fs.check(OpSync, h.path); err != nil {
		return err
	}
	return h.inner.Sync()
}

// Datasync is Sync (OpSync) through the wrapped file's fdatasync when it
// has one.
func (h *file) Datasync() error {
	if err, _ := h.fs.check(OpSync, h.path); err != nil {
		return err
	}
	if ds, ok := h.inner.(chunk.DataSyncer); ok {
		return ds.Datasync()
	}
	return h.inner.Sync()
}

// Allocate preallocates through the wrapped file (errors.ErrUnsupported
// when it cannot). On a limited disk the growth is accounted like a
// write's, except that an allocation that does not fit fails whole with
// ENOSPC and allocates nothing.
func (h *file) Allocate(off, n int64) error {
	if err, _ := h.fs.check(OpAllocate, h.path); err != nil {
		return err
	}
	a, ok := h.inner.(chunk.Allocator)
	if !ok {
		return errors.ErrUnsupported
	}
	h.fs.mu.Lock()
	limited := h.fs.limited
	h.fs.mu.Unlock()
	var grow int64
	if limited {
		st, err := h.inner.Stat()
		if err != nil {
			return err
		}
		grow = max(0, off+n-st.Size())
		h.fs.mu.Lock()
		if grow > h.fs.free {
			h.fs.injected++
			h.fs.mu.Unlock()
			return &fs.PathError{Op: "allocate", Path: h.path, Err: syscall.ENOSPC}
		}
		h.fs.free -= grow
		h.fs.mu.Unlock()
	}
	if err := a.Allocate(off, n); err != nil {
		h.fs.release(grow)
		return err
	}
	return nil
}

func (h *file) Truncate(size int64) error {
	if err, _ := h.fs.check(OpTruncate, h.path); err != nil {
		return err
	}
	var before int64 = -1
	if st, err := h.inner.Stat(); err == nil {
		before = st.Size()
	}
	if err := h.inner.Truncate(size); err != nil {
		return err
	}
	if before > size {
		h.fs.release(before - size)
	}
	return nil
}

func (h *file) Stat() (fs.FileInfo, error) {
	if err, _ := h.fs.check(OpStat, h.path); err != nil {
		return nil, err
	}
	return h.inner.Stat()
}

func (h *file) Close() error {
	if err, _ := h.fs.check(OpClose, h.path); err != nil {
		h.inner.Close()
		return err
	}
	return h.inner.Close()
}

var _ chunk.FS = (*FS)(nil)
var _ chunk.Allocator = (*file)(nil)
var _ chunk.DataSyncer = (*file)(nil)
var _ io.ReaderAt = (*file)(nil)
