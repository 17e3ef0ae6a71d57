//go:build !linux

package chunk

import (
	"errors"
	"os"
)

// osFile is the *os.File OSFS opens. Outside Linux it cannot preallocate
// and syncs with fsync.
type osFile struct{ *os.File }

// Allocate is not supported here: appends grow the file.
func (f osFile) Allocate(off, n int64) error { return errors.ErrUnsupported }

// Datasync is fsync.
func (f osFile) Datasync() error { return f.Sync() }
