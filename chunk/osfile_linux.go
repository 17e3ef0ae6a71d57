package chunk

import (
	"errors"
	"os"
	"syscall"
)

// osFile is the *os.File OSFS opens, with fallocate and fdatasync.
type osFile struct{ *os.File }

// Allocate extends the file to at least off+n bytes whose blocks are
// allocated (fallocate mode 0: the file size grows, the new bytes read as
// zeros). It fails with an error wrapping ENOSPC when the disk has no room
// and errors.ErrUnsupported when the file system cannot preallocate.
func (f osFile) Allocate(off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), 0, off, n)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if ferr == syscall.EOPNOTSUPP || ferr == syscall.ENOSYS {
		ferr = errors.Join(errors.ErrUnsupported, ferr)
	}
	if ferr != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: ferr}
	}
	return nil
}

// Datasync flushes the file's data and the metadata needed to read it back
// (its size, its allocation) with fdatasync.
func (f osFile) Datasync() error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
