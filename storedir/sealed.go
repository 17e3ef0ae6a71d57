package storedir

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// What the tiering uploader (package tiering) needs from the DB: the sealed
// local stores, a consistent copy of one to upload while the store keeps
// serving (and its indexes may compact), and the deletion of one that
// [retention] drops when it applies to the bucket.

// ErrIndexBehind is returned by CopySealed while a sealed store's indexes
// do not cover its data file yet: a group commit that rotation split wrote
// the store's last chunks before the seal and indexes them after it. It
// passes in moments; try again.
var ErrIndexBehind = errors.New("the store's indexes do not cover its data file yet")

// ErrNoSealedStore is returned for an id that is not a sealed store served
// from the data directory (or is one still catching up: its indexes do not
// cover its data file yet).
var ErrNoSealedStore = errors.New("no sealed local store")

// SealedStores lists the ids of the sealed stores served from the data
// directory, oldest first.
func (db *DB) SealedStores() []uint32 {
	db.mu.RLock()
	stores := append([]*Store(nil), db.stores...)
	db.mu.RUnlock()
	var ids []uint32
	for _, s := range stores {
		// A store still catching up (startCatchUp) is listed once its
		// indexes cover its data file: a copy would carry partial ones.
		if s.Sealed() && !s.catching.Load() {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// LocalStores describes the stores served from the data directory (not
// those read from a bucket, nor those out of service), oldest first.
func (db *DB) LocalStores() []Info {
	db.mu.RLock()
	stores := append([]*Store(nil), db.stores...)
	db.mu.RUnlock()
	out := make([]Info, 0, len(stores))
	for _, s := range stores {
		out = append(out, s.info())
	}
	return out
}

// SealedCopy is a consistent copy of a sealed store, made by CopySealed.
type SealedCopy struct {
	ID uint32
	// Dir holds the copy: the store's files at the same relative paths.
	Dir string
	// StoreDir is the live store directory.
	StoreDir string
	// Files are the copy's files, slash-separated paths relative to Dir,
	// sorted: traces.zts, config.props, superseded (when present),
	// tracefilter, tracedir, and every file of meta/ and text/.
	Files []string
	// From the store's config.props and metadata index.
	FirstNS, LastNS int64
	Spans, Chunks   int64
	MasterChecksum  string
}

// DataFile and PropsFile are the names of a store's data file and
// config.props inside its directory.
const (
	DataFile  = dataFile
	PropsFile = propsFile
)

// CopySealed writes a consistent copy of sealed store id into dest (which
// must not exist, on the data directory's file system): the data file and
// config.props hard-linked (both are immutable once sealed: config.props is
// only ever replaced by rename), the superseded mark copied, a Pebble
// checkpoint of each index, and the TraceFilterFile and TraceDirFile
// objects (see remotefilter.go) made from the index and the data file. The store keeps
// serving meanwhile; it cannot be closed or deleted until the copy is made.
func (db *DB) CopySealed(id uint32, dest string) (*SealedCopy, error) {
	db.mu.RLock()
	var s *Store
	for _, x := range db.stores {
		if x.id == id {
			s = x
		}
	}
	if s != nil {
		s.refs.RLock() // before mu is released: retention cannot close it now
	}
	db.mu.RUnlock()
	if s == nil {
		return nil, fmt.Errorf("store %s: %w", StoreName(id), ErrNoSealedStore)
	}
	defer s.refs.RUnlock()
	if !s.Sealed() || s.data == nil || s.catching.Load() {
		return nil, fmt.Errorf("store %s: %w", StoreName(id), ErrNoSealedStore)
	}
	// The indexes run without a WAL: a checkpoint holds only what was
	// flushed. Once they cover the data file nothing more is committed to
	// a sealed store, so a flush now makes the checkpoint complete.
	if !s.indexesCover(s.data.Size()) {
		return nil, fmt.Errorf("store %s: %w", StoreName(id), ErrIndexBehind)
	}
	if err := s.flushIndexes(); err != nil {
		return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
	}
	if err := os.Mkdir(dest, 0o750); err != nil {
		return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dest)
		}
	}()
	for _, name := range []string{dataFile, propsFile} {
		if err := linkOrCopy(filepath.Join(s.dir, name), filepath.Join(dest, name)); err != nil {
			return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
		}
	}
	if s.superseded.Load() {
		if err := linkOrCopy(filepath.Join(s.dir, supersededFile), filepath.Join(dest, supersededFile)); err != nil {
			return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
		}
	}
	if err := s.meta.Checkpoint(filepath.Join(dest, metaDir)); err != nil {
		return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
	}
	if err := s.text.Checkpoint(filepath.Join(dest, textDir)); err != nil {
		return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
	}
	// The trace filter, chunk bounds and trace directory that let a remote
	// reader answer a get-by-id with a few ranged GETs.
	if !s.catching.Load() {
		tf, td, err := buildTraceFilter(context.Background(), s.meta, s.data.Path(), s.data.Size(), s.data.Options())
		if err != nil {
			return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
		}
		if err := os.WriteFile(filepath.Join(dest, TraceFilterFile), tf, 0o640); err != nil {
			return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
		}
		if err := os.WriteFile(filepath.Join(dest, TraceDirFile), td, 0o640); err != nil {
			return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
		}
	}
	c := &SealedCopy{ID: id, Dir: dest, StoreDir: s.dir, Spans: int64(s.meta.Stats().Spans)}
	s.mu.Lock()
	c.FirstNS, c.LastNS, c.Chunks = s.firstNS, s.lastNS, s.chunks
	c.MasterChecksum = fmt.Sprintf("%08x", s.props.MasterChecksum)
	s.mu.Unlock()
	err := filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dest, p)
		if err != nil {
			return err
		}
		c.Files = append(c.Files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("copy of store %s: %w", StoreName(id), err)
	}
	sort.Strings(c.Files)
	ok = true
	return c, nil
}

// linkOrCopy hard-links src to dst, copying when the file system cannot.
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil || !(errors.Is(err, syscall.EXDEV) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EMLINK)) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// DeleteSealed removes sealed store id from the data directory, the way
// retention does (out of the served set, closed once its readers finish,
// renamed to .deleting-NNNNNN, removed): [retention] applied to the bucket
// by the tiering uploader, which deletes the store's objects first.
func (db *DB) DeleteSealed(id uint32) error {
	db.retMu.Lock()
	defer db.retMu.Unlock()
	db.mu.RLock()
	var s *Store
	for _, x := range db.stores {
		if x.id == id && x.Sealed() {
			s = x
		}
	}
	db.mu.RUnlock()
	if s == nil {
		return fmt.Errorf("store %s: %w", StoreName(id), ErrNoSealedStore)
	}
	return db.deleteStore(s)
}
