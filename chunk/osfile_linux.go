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
	err := f.control("fallocate", func(fd int) error { return syscall.Fallocate(fd, 0, off, n) })
	var perr *os.PathError
	if errors.As(err, &perr) && (perr.Err == syscall.EOPNOTSUPP || perr.Err == syscall.ENOSYS) {
		return errors.Join(errors.ErrUnsupported, err)
	}
	return err
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
