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
	"time"

	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/textindex"
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

// releaseMemTables gives back, in the background, the block cache a
// store's indexes keep for their memtables once it has stopped taking
// writes (sealed, or caught up as a sealed store). Pebble grows an index's
// memtables to full size while it takes writes and never shrinks them, and
// reserves them from the block cache all stores share: without this, every
// store sealed while the daemon runs would keep its indexes' full-size
// memtables (and the flushed one Pebble keeps to recycle) reserved until
// the daemon restarts, and after a few rotations the cache would hold no
// more blocks. Each index is flushed and reopened in place
// (ReleaseMemTables), between the operations using it, which never see it
// closed; it then holds a fresh open's one 256 KiB memtable, and Pebble
// compacts the tables left in L0 into the base level in the background
// (kv.OpenOptions.Settled). The store's
// close stops it; DB.Close waits for it. An index that does not open
// again is handled as a damaged one (taken out of service and rebuilt
// from the data file); a failed flush leaves the index open as it was.
// Nothing is done on a disk without room for Pebble's new MANIFEST and
// OPTIONS files.
func (db *DB) releaseMemTables(s *Store) {
	if !db.opt.keepSealedMemTables {
		db.startRelease(s)
	}
}

// startRelease is releaseMemTables whatever the test options say.
func (db *DB) startRelease(s *Store) {
	if s.readOnly || s.remote != nil {
		return
	}
	ctx, cancel := context.WithCancel(db.bg.ctx)
	s.mu.Lock()
	if s.memCancel != nil {
		s.memCancel()
	}
	s.memCancel = cancel
	s.mu.Unlock()
	db.bg.wg.Add(1)
	go func() {
		defer db.bg.wg.Done()
		defer cancel()
		s.refs.RLock() // the store stays open meanwhile; close cancels ctx first
		defer s.refs.RUnlock()
		if s.closed || ctx.Err() != nil {
			return
		}
		if free, _, ok := freeBytes(s.dir); ok && free < closeMinFree {
			s.log.Warn("disk full: a sealed store keeps its indexes' memtables until the next start", "free_bytes", free)
			return
		}
		t0 := time.Now()
		before := s.meta.MemTableBytes() + s.text.MemTableBytes()
		for _, ix := range []struct {
			name    string
			release func(context.Context) (bool, error)
		}{{"metadata", s.meta.ReleaseMemTables}, {"text", s.text.ReleaseMemTables}} {
			_, err := ix.release(ctx)
			switch {
			case err == nil:
			case ctx.Err() != nil:
				return
			case errors.Is(err, index.ErrClosed) || errors.Is(err, textindex.ErrClosed):
				db.indexDamaged(s, fmt.Errorf("reopening the %s index after the seal: %w", ix.name, err))
				return
			default:
				s.log.Warn("a sealed store keeps its indexes' memtables until it is closed", "index", ix.name, "err", err)
				return
			}
		}
		s.log.Debug("released a sealed store's index memtables", "reserved_before", before,
			"reserved_after", s.meta.MemTableBytes()+s.text.MemTableBytes(), "took", time.Since(t0).Round(time.Millisecond))
	}()
}
