package chunk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// fiemap mirrors struct fiemap with room for fiemapExtents extents
// (linux/fiemap.h).
type fiemap struct {
	start, length                        uint64
	flags, mappedExtents, extentCount, _ uint32
	extents                              [fiemapExtents]fiemapExtent
}

type fiemapExtent struct {
	logical, physical, length uint64
	_                         [2]uint64
	flags                     uint32
	_                         [3]uint32
}

const (
	fiemapExtents         = 64
	fsIOCFiemap           = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync        = 0x1
	fiemapExtentUnwritten = 0x800
)

// unwrittenBytes returns how many bytes of [off, off+n) of path lie in
// extents the file system marks unwritten (allocated, never written), from
// FIEMAP after a sync; ok is false when the file system does not map
// extents.
func unwrittenBytes(t *testing.T, path string, off, n int64) (unwritten int64, ok bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for at := off; at < off+n; {
		fm := fiemap{start: uint64(at), length: uint64(off + n - at), flags: fiemapFlagSync, extentCount: fiemapExtents}
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), fsIOCFiemap, uintptr(unsafe.Pointer(&fm))); errno != 0 {
			if errors.Is(errno, syscall.EOPNOTSUPP) || errors.Is(errno, syscall.ENOTTY) {
				return 0, false
			}
			t.Fatalf("FIEMAP %s: %v", path, errno)
		}
		if fm.mappedExtents == 0 {
			t.Fatalf("FIEMAP %s: no extent at %d (a hole in the preallocated tail)", path, at)
		}
		next := at
		for _, e := range fm.extents[:fm.mappedExtents] {
			lo, hi := max(int64(e.logical), at), min(int64(e.logical+e.length), off+n)
			if hi > lo && e.flags&fiemapExtentUnwritten != 0 {
				unwritten += hi - lo
			}
			next = max(next, int64(e.logical+e.length))
		}
		at = next
	}
	return unwritten, true
}

// TestPreallocatedTailIsWritten: the zero tail a File preallocates is
// written zeros, not unwritten extents, so an append into it changes no
// extent and its fdatasync flushes data only.
func TestPreallocatedTailIsWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "traces.zts")
	f, err := Create(path, Options{Compression: Zstd, Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	payloads := testPayloads(t, 3, 5)
	for _, p := range payloads {
		if _, err := f.Append(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() <= f.Size() {
		t.Fatalf("file %d bytes, data %d: no zero tail", st.Size(), f.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !allZero(b[f.Size():]) {
		t.Fatal("the preallocated tail is not zeros")
	}
	unwritten, ok := unwrittenBytes(t, path, 0, st.Size())
	if !ok {
		t.Skip("the file system does not map extents (FIEMAP)")
	}
	if unwritten != 0 {
		t.Fatalf("%d bytes of the %d-byte file (data %d) are in unwritten extents, want 0", unwritten, st.Size(), f.Size())
	}
}
