// Package indexswap replaces a store's index directories (meta/ and text/)
// with freshly built ones so that a crash at any moment leaves either all
// the old indexes or all the new ones, never a mix.
//
// It is a separate package from recovery because storedir must call
// FinishInterrupted when it opens a store, while recovery itself builds on
// storedir.
//
// # Protocol
//
// The new indexes are built next to the old ones, in "<name>.rebuild"
// directories (meta.rebuild/, text.rebuild/). Then Commit:
//
//  1. fsyncs every file and directory of each "<name>.rebuild" tree;
//  2. writes the marker file REBUILD-COMMIT, listing the names, atomically
//     (temp file, fsync, rename, fsync of the store directory). This is the
//     commit point: from here on the swap is rolled forward;
//  3. for each name: renames "<name>" to "<name>.old" and "<name>.rebuild"
//     to "<name>", then fsyncs the store directory;
//  4. removes the marker, fsyncs the directory, removes the "<name>.old"
//     directories.
//
// FinishInterrupted, run before a store's indexes are opened (by storedir
// and by recovery), completes an interrupted swap: with the marker present
// it redoes steps 3–4 (each rename is skipped when already done); without it
// the swap never committed, and it removes every "<name>.rebuild" and
// "<name>.old" directory, keeping the old indexes. Both are idempotent, so a
// crash during FinishInterrupted is handled by running it again.
package indexswap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Marker is the name of the commit marker file in the store directory.
const Marker = "REBUILD-COMMIT"

// markerHeader is the first line of the marker; a marker without it is
// not ours and is refused.
const markerHeader = "ztsd index swap v1"

// Suffixes of the directories the protocol uses.
const (
	RebuildSuffix = ".rebuild"
	OldSuffix     = ".old"
)

// IndexDirs are the index directory names the protocol may swap.
var indexDirs = []string{"meta", "text"}

// IndexDirs returns the names of the index directories that can be
// swapped: "meta" and "text".
func IndexDirs() []string { return slices.Clone(indexDirs) }

// Outcome says what FinishInterrupted found.
type Outcome uint8

const (
	// Clean: no swap was in progress.
	Clean Outcome = iota
	// RolledForward: a committed swap was completed; the new indexes are in place.
	RolledForward
	// RolledBack: an uncommitted rebuild was discarded; the old indexes stay.
	RolledBack
)

func (o Outcome) String() string {
	switch o {
	case RolledForward:
		return "rolled forward"
	case RolledBack:
		return "rolled back"
	}
	return "clean"
}

// Steps a test hook can interrupt (see Commit's hook argument).
const (
	StepSynced        = "synced rebuild dirs"
	StepMarkerWritten = "marker written"
	StepRenamedOld    = "renamed old"     // after "<name>" → "<name>.old" (per name)
	StepRenamedNew    = "renamed rebuild" // after "<name>.rebuild" → "<name>" (per name)
	StepMarkerRemoved = "marker removed"
)

// Commit swaps in the "<name>.rebuild" directories of storeDir for the
// given index names, following the protocol in the package comment. hook,
// when not nil, is called after each durable step with the step's name and
// the index name concerned ("" for whole-swap steps); a non-nil error
// stops Commit there, as a crash would (tests use it).
func Commit(storeDir string, names []string, hook func(step, name string) error) error {
	if len(names) == 0 {
		return errors.New("indexswap: nothing to swap")
	}
	for _, n := range names {
		if !slices.Contains(indexDirs, n) {
			return fmt.Errorf("indexswap: %q is not an index directory", n)
		}
		dir := filepath.Join(storeDir, n+RebuildSuffix)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("indexswap: %s: rebuilt index missing: %v", dir, err)
		}
		if err := syncTree(dir); err != nil {
			return fmt.Errorf("indexswap: %w", err)
		}
	}
	if err := call(hook, StepSynced, ""); err != nil {
		return err
	}
	if err := writeMarker(storeDir, names); err != nil {
		return err
	}
	if err := call(hook, StepMarkerWritten, ""); err != nil {
		return err
	}
	return rollForward(storeDir, names, hook)
}

func call(hook func(step, name string) error, step, name string) error {
	if hook == nil {
		return nil
	}
	return hook(step, name)
}

// FinishInterrupted completes or discards an index swap that a crash
// interrupted in storeDir (see the package comment). Call it before
// opening the store's indexes.
func FinishInterrupted(storeDir string) (Outcome, error) {
	if err := removeMarkerTemps(storeDir); err != nil {
		return Clean, err
	}
	names, err := readMarker(storeDir)
	switch {
	case err == nil:
		if err := rollForward(storeDir, names, nil); err != nil {
			return RolledForward, err
		}
		return RolledForward, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Clean, err
	}
	// No marker: a rebuild that never committed (its .rebuild directories
	// are discarded) or a finished swap whose replaced indexes were not yet
	// removed (.old directories).
	rolledBack, removed := false, false
	for _, n := range indexDirs {
		for _, suffix := range []string{RebuildSuffix, OldSuffix} {
			p := filepath.Join(storeDir, n+suffix)
			if _, err := os.Lstat(p); err != nil {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				return Clean, fmt.Errorf("indexswap: discard %s: %w", p, err)
			}
			removed = true
			rolledBack = rolledBack || suffix == RebuildSuffix
		}
	}
	if removed {
		if err := syncDir(storeDir); err != nil {
			return Clean, err
		}
	}
	if rolledBack {
		return RolledBack, nil
	}
	return Clean, nil
}

// Pending reports whether storeDir holds traces of an unfinished swap (a
// marker, a marker temp file, or a .rebuild or .old index directory), for
// verify.
func Pending(storeDir string) ([]string, error) {
	var found []string
	entries, err := os.ReadDir(storeDir)
	if err != nil {
		return nil, fmt.Errorf("indexswap: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == Marker || strings.HasPrefix(name, Marker+".tmp") {
			found = append(found, name)
			continue
		}
		for _, n := range indexDirs {
			if name == n+RebuildSuffix || name == n+OldSuffix {
				found = append(found, name)
			}
		}
	}
	return found, nil
}

// rollForward performs steps 3 and 4 of the protocol; every step is
// skipped when it is already done.
func rollForward(storeDir string, names []string, hook func(step, name string) error) error {
	for _, n := range names {
		cur := filepath.Join(storeDir, n)
		rebuilt := cur + RebuildSuffix
		old := cur + OldSuffix
		if _, err := os.Lstat(rebuilt); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // already renamed into place
			}
			return fmt.Errorf("indexswap: %w", err)
		}
		if _, err := os.Lstat(cur); err == nil {
			if err := os.RemoveAll(old); err != nil {
				return fmt.Errorf("indexswap: remove stale %s: %w", old, err)
			}
			if err := os.Rename(cur, old); err != nil {
				return fmt.Errorf("indexswap: move old index aside: %w", err)
			}
			if err := syncDir(storeDir); err != nil {
				return err
			}
			if err := call(hook, StepRenamedOld, n); err != nil {
				return err
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("indexswap: %w", err)
		}
		if err := os.Rename(rebuilt, cur); err != nil {
			return fmt.Errorf("indexswap: move rebuilt index into place: %w", err)
		}
		if err := syncDir(storeDir); err != nil {
			return err
		}
		if err := call(hook, StepRenamedNew, n); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(storeDir, Marker)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("indexswap: remove marker: %w", err)
	}
	if err := syncDir(storeDir); err != nil {
		return err
	}
	if err := call(hook, StepMarkerRemoved, ""); err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(storeDir, n+OldSuffix)); err != nil {
			return fmt.Errorf("indexswap: remove replaced index: %w", err)
		}
	}
	return nil
}

func writeMarker(storeDir string, names []string) error {
	var b bytes.Buffer
	b.WriteString(markerHeader + "\n")
	for _, n := range names {
		b.WriteString(n + "\n")
	}
	final := filepath.Join(storeDir, Marker)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("indexswap: write marker: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("indexswap: write marker: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("indexswap: sync marker: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("indexswap: close marker: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("indexswap: commit marker: %w", err)
	}
	return syncDir(storeDir)
}

// maxMarkerSize bounds the marker file that is read.
const maxMarkerSize = 4 << 10

// readMarker returns the index names of the committed swap in storeDir;
// an error wrapping fs.ErrNotExist when there is none.
func readMarker(storeDir string) ([]string, error) {
	path := filepath.Join(storeDir, Marker)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("indexswap: %w", err)
	}
	if fi.Size() > maxMarkerSize {
		return nil, fmt.Errorf("indexswap: %s: %d bytes, not a marker (at most %d)", path, fi.Size(), maxMarkerSize)
	}
	sc := bufio.NewScanner(f)
	var names []string
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if line == 1 {
			if t != markerHeader {
				return nil, fmt.Errorf("indexswap: %s line 1: %q is not %q", path, t, markerHeader)
			}
			continue
		}
		if !slices.Contains(indexDirs, t) || slices.Contains(names, t) {
			return nil, fmt.Errorf("indexswap: %s line %d: %q is not an index directory", path, line, t)
		}
		names = append(names, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("indexswap: read %s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("indexswap: %s names no index", path)
	}
	return names, nil
}

func removeMarkerTemps(storeDir string) error {
	tmp := filepath.Join(storeDir, Marker+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("indexswap: remove %s: %w", tmp, err)
	}
	return nil
}

// syncTree fsyncs every regular file and directory under root, the
// directories after their contents.
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return syncFile(p)
	})
	if err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("indexswap: sync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("indexswap: sync dir %s: %w", dir, err)
	}
	return nil
}
