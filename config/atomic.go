package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// atomicStep names a step of writeFileAtomic, so that tests can make each one
// fail and check that the target is left intact.
type atomicStep int

const (
	stepWrite atomicStep = iota
	stepSyncFile
	stepClose
	stepRename
	stepSyncDir
)

func (s atomicStep) String() string {
	switch s {
	case stepWrite:
		return "write"
	case stepSyncFile:
		return "fsync file"
	case stepClose:
		return "close"
	case stepRename:
		return "rename"
	case stepSyncDir:
		return "fsync directory"
	}
	return fmt.Sprintf("step(%d)", int(s))
}

// tempPrefix is the name prefix of the temporary files writeFileAtomic
// creates next to path: a dot file, so that directory listings of store ids
// ignore it.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// writeFileAtomic writes data to a temporary file next to path, fsyncs it,
// renames it to path and fsyncs the directory. before, if not nil, is called
// before each step; an error from it aborts the write as if the step failed.
func writeFileAtomic(path string, data []byte, perm os.FileMode, before func(atomicStep) error) (err error) {
	step := func(s atomicStep, do func() error) error {
		if before != nil {
			if err := before(s); err != nil {
				return err
			}
		}
		return do()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	closed, renamed := false, false
	defer func() {
		if err == nil {
			return
		}
		if !closed {
			f.Close()
		}
		if !renamed {
			os.Remove(tmp)
		}
	}()
	if err := step(stepWrite, func() error {
		if err := f.Chmod(perm); err != nil {
			return err
		}
		_, err := f.Write(data)
		return err
	}); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := step(stepSyncFile, f.Sync); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := step(stepClose, f.Close); err != nil {
		return fmt.Errorf("closing %s: %w", tmp, err)
	}
	closed = true
	if err := step(stepRename, func() error { return os.Rename(tmp, path) }); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	renamed = true
	if err := step(stepSyncDir, func() error { return syncDir(dir) }); err != nil {
		return fmt.Errorf("fsync directory of %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that a rename inside it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// RemoveStaleTemps removes the temporary files that an interrupted
// WritePropsFileAtomic(path, ...) left next to path, and returns their names.
// Call it when opening a store, before anything writes path; it must not run
// concurrently with a write of the same path.
func RemoveStaleTemps(path string) ([]string, error) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	prefix := tempPrefix(path)
	var removed []string
	var errs []error
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if err := os.Remove(name); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}
