package chunk

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// osFile is the *os.File OSFS opens, with fallocate and fdatasync.
type osFile struct{ *os.File }

// zeroFill is what Allocate writes over the blocks it allocated, a piece
// at a time.
var zeroFill [64 << 10]byte

// Allocate extends the file to at least off+n bytes whose blocks are
// allocated (fallocate mode 0: the file size grows, the new bytes read as
// zeros) and written: it then writes zeros over [off, off+n) and starts
// their writeback (sync_file_range). fallocate alone leaves the blocks in
// unwritten extents: the first data written into each block converts its
// extent, a metadata change that the next fdatasync commits to the
// journal. Over written zeros an append changes no metadata at all and the
// group commit's fdatasync flushes only its data (ext4 on virtio, appends
// of 1,200 bytes each followed by fdatasync, 8 alternated rounds of 3,000:
// mean 145 -> 117 µs, p90 248 -> 144 µs; BenchmarkAppendSync's ~400-byte
// chunks, which enter a new block less often: 120.6 -> 113.9 µs, n=20).
// The zeros cost one write of the step and its writeback per step. They
// are an optimisation only: the range is allocated and reads as zeros
// whether or not they were written, so an error writing them is ignored.
// Allocate fails with an error wrapping ENOSPC when the disk has no room
// and errors.ErrUnsupported when the file system cannot preallocate.
func (f osFile) Allocate(off, n int64) error {
	err := f.control("fallocate", func(fd int) error { return syscall.Fallocate(fd, 0, off, n) })
	var perr *os.PathError
	if errors.As(err, &perr) && (perr.Err == syscall.EOPNOTSUPP || perr.Err == syscall.ENOSYS) {
		return errors.Join(errors.ErrUnsupported, err)
	}
	if err != nil {
		return err
	}
	for at := off; at < off+n; {
		w, werr := f.WriteAt(zeroFill[:min(int64(len(zeroFill)), off+n-at)], at)
		if werr != nil {
			return nil
		}
		at += int64(w)
	}
	f.control("sync_file_range", func(fd int) error {
		return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
	})
	return nil
}

// Datasync flushes the file's data and the metadata needed to read it back
// (its size, its allocation) with fdatasync.
func (f osFile) Datasync() error {
	return f.control("fdatasync", syscall.Fdatasync)
}

// control runs the system call op on the file's descriptor, again while
// it is interrupted (EINTR), and names op and the file in its error.
func (f osFile) control(op string, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if cerr = call(int(fd)); cerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if cerr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: cerr}
	}
	return nil
}
