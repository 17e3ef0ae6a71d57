package storedir

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/index/kv"
	"github.com/ztsd/ztsd/trace"
)

// SyncPolicy says when a write is durable enough to acknowledge.
type SyncPolicy uint8

const (
	// SyncBatch group-commits: concurrent requests share one fsync.
	SyncBatch SyncPolicy = iota
	// SyncAlways fsyncs once per request.
	SyncAlways
	// SyncNone never fsyncs on the write path (tests, bulk import).
	SyncNone
)

// ParseSyncPolicy parses "batch", "always" or "none".
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch s {
	case "batch", "":
		return SyncBatch, nil
	case "always":
		return SyncAlways, nil
	case "none":
		return SyncNone, nil
	}
	return 0, fmt.Errorf("sync policy %q: want always, batch or none", s)
}

func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncNone:
		return "none"
	}
	return "batch"
}

// Retention limits which sealed stores are kept; zero fields are unlimited.
type Retention struct {
	MaxStores    int
	MaxTotalSize int64
	MaxAge       time.Duration
}

// Options configure a DB.
type Options struct {
	Chunk chunk.Options
	Sync  SyncPolicy
	// MaxStoreSize and MaxStoreAge trigger rotation to a new store.
	MaxStoreSize int64
	MaxStoreAge  time.Duration
	// ChunkTargetSize bounds the encoded payload of one chunk; a larger
	// request is split into several chunks.
	ChunkTargetSize int
	Retention       Retention
	Limits          trace.Limits
	Logger          *slog.Logger
	// Now is the clock (tests inject one).
	Now func() time.Time
	// BatchMaxDelay is, under SyncBatch, how long the committer waits
	// after a group's first request for others to join its fsync (config
	// batch_max_delay). 0 sets no fixed delay: the requests that arrived
	// during the previous fsync form the group, and the committer waits
	// for more only when recently more requests were in flight at once
	// than the group holds, at most about one recent fsync or twice the
	// recent spread of the writers' arrivals (2 ms at most; the adaptive
	// group commit of groupwait.go). A lone writer never waits.
	BatchMaxDelay time.Duration
	// Observer receives write-path measurements (metrics); may be nil.
	Observer Observer
	// FS is the file system the data files are written through; nil is
	// the real one. Tests inject faults (ENOSPC, EIO, short writes) here.
	FS chunk.FS
	// MinFreeBytes is the free space kept in reserve on the data
	// directory's file system: writes are refused with ENOSPC (503 disk
	// full) below it, so that index flushes and seals always have room.
	// 0 means a tenth of the file system, between 4 and 256 MiB; a
	// negative value turns the check off.
	MinFreeBytes int64
	// OnSealed, if set, is called (from the committer's goroutine: it
	// must not block) after a store was sealed by rotation; the tiering
	// uploader wakes up on it.
	OnSealed func(id uint32)
	// Remote configures the stores read from a bucket (remote.go).
	Remote RemoteOptions
	// QueryOnly opens no local store and takes no writes: the DB serves
	// the remote stores it is given (ServeRemote); Append fails with
	// ErrQueryOnly.
	QueryOnly bool
	// IndexCacheBytes is the one Pebble block cache all local stores'
	// indexes (meta/ and text/) share (config index_cache_size), besides
	// the memtables of the store taking writes; 0 means
	// DefaultIndexCacheBytes.
	IndexCacheBytes int64
	// ChunkCacheViews bounds the chunk cache: the views of recently read
	// chunks kept for later reads of their spans (see chunkCache); 0
	// means DefaultChunkCacheViews.
	ChunkCacheViews int

	// replayCheckpoint and replayed: see storeOptions (tests only).
	replayCheckpoint int64
	replayed         func(next int64)
	// syncCatchUp, catchUpBatch, settleMinL0: see storeOptions (tests only).
	syncCatchUp  int64
	catchUpBatch int
	settleMinL0  uint64
	// beforeIndexJob, if set, is called by the indexer when it takes a job
	// to start a round (tests only: they hold the indexer back).
	beforeIndexJob func()
	// indexGather, if set, replaces indexGatherDelay (tests only).
	indexGather time.Duration
	// indexRunFault, if set, is asked before each run the indexer indexes
	// and fails it with the error it returns (tests only).
	indexRunFault func(store uint32) error
	// keepSealedMemTables leaves sealed stores' index memtables as they
	// are (tests only: they show what releaseMemTables gives back).
	keepSealedMemTables bool
}

// DefaultIndexCacheBytes is the index block cache of a DB by default: at
// 10M spans of the bench workload (two stores) the bloom filters of all
// four indexes are ~56 MB and their index blocks ~2 MB, so this keeps
// those and the data blocks of recent lookups cached.
const DefaultIndexCacheBytes = 256 << 20

// DefaultChunkCacheViews bounds the chunk cache by default: 256 views of
// chunks, each holding the frames of its chunk that reads decoded (at
// least its string table: ~52 KB for a 500-span chunk of the bench
// workload).
const DefaultChunkCacheViews = 256

// Observer is told about each group commit (for metrics), after the
// group's requests are answered: a writer may see its acknowledgement
// before the observer sees the group.
type Observer interface {
	Committed(requests, chunks, bytes int, syncs int, syncDur time.Duration)
}

// DefaultOptions are the embedded defaults.
func DefaultOptions() Options {
	return Options{
		Chunk:           chunk.Options{Compression: chunk.Zstd, Checksums: true},
		Sync:            SyncBatch,
		MaxStoreSize:    1 << 30,
		MaxStoreAge:     24 * time.Hour,
		ChunkTargetSize: 1 << 20,
		Limits:          trace.DefaultLimits(),
	}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.MaxStoreSize <= 0 {
		o.MaxStoreSize = d.MaxStoreSize
	}
	if o.ChunkTargetSize <= 0 {
		o.ChunkTargetSize = d.ChunkTargetSize
	}
	if o.IndexCacheBytes <= 0 {
		o.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if o.Limits == (trace.Limits{}) {
		o.Limits = d.Limits
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FS == nil {
		o.FS = chunk.OSFS{}
	}
}

// ErrLocked is returned by Open when another process holds the data
// directory's LOCK.
var ErrLocked = errors.New("data directory is locked by another process")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("store is closed")

// DB is the set of stores under one data directory.
type DB struct {
	dir  string
	opt  Options
	log  *slog.Logger
	lock *os.File

	mu      sync.RWMutex // guards stores, current, closed, retention
	stores  []*Store     // ascending id; the last is current
	current *Store
	closed  bool

	commits chan *commitReq
	stop    chan struct{}
	done    chan struct{} // closed when the committer has returned
	// commitMu is held by the committer while it commits a group, and by
	// an outside Rotate.
	commitMu sync.Mutex
	// groups holds what the committer's adaptive group-commit wait is
	// decided from (groupwait.go).
	groups groupWaiter
	// idx carries durable, acknowledged chunks from the committer to the
	// indexer goroutine, and the marks reads wait on (indexer.go).
	idx      *indexPipeline
	cache    *chunkCache
	layouts  *layoutCache
	pending  *pendingSet // slots of spans between their duplicate check and their indexing
	retMu    sync.Mutex  // serialises rotation and retention
	storeSeq uint32
	space    spaceCache // recent free-space checks (checkSpace)
	damage   *damageLog // damaged chunks met by reads
	// out lists the store directories not served (quarantined, being
	// rebuilt, set aside), by directory name; guarded by mu.
	out map[string]*outOfService
	bg  *background // repairs running in the background
	// readOnly says why the DB takes no writes (a full disk at Open), or "".
	readOnly string
	// remote holds the stores served from a bucket and their index cache.
	remote *remoteSet
	// indexCache is the block cache of every local store's indexes.
	indexCache *pebble.Cache
}

// Open takes the data directory's lock, removes leftovers of interrupted
// deletions, opens every store (re-indexing each from its watermarks; a
// store whose indexes lag by more than a moment's work serves at once and
// is re-indexed in the background, see startCatchUp) and starts the
// committer.
func Open(ctx context.Context, dir string, opt Options) (*DB, error) {
	opt.fill()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opt: opt, log: opt.Logger, lock: lock,
		commits: make(chan *commitReq, 1024), stop: make(chan struct{}), done: make(chan struct{}),
		cache: newChunkCache(cmp.Or(opt.ChunkCacheViews, DefaultChunkCacheViews)), layouts: newLayoutCache(layoutCacheEntries), damage: newDamageLog(opt.Logger), bg: newBackground(), pending: newPendingSet(),
		idx: newIndexPipeline()}
	if db.readOnly = db.readOnlyAtStart(); db.readOnly != "" {
		db.log.Error("disk full: opening the data directory read-only; reads serve what the indexes hold, writes are refused", "reason", db.readOnly)
	}
	if db.remote, err = newRemoteSet(dir, opt.Remote, db.log); err != nil {
		unlockDir(lock)
		return nil, err
	}
	// Every local store's indexes share one block cache; each open
	// database holds its own reference, the DB this one until Close.
	db.indexCache = kv.NewSharedCache(opt.IndexCacheBytes)
	if opt.QueryOnly {
		db.noteLocalStoresIgnored()
	} else if err := db.openStores(ctx); err != nil {
		db.bg.stop()
		db.closeStores()
		db.indexCache.Unref()
		unlockDir(lock)
		return nil, err
	}
	for _, s := range db.stores {
		if s.catching.Load() {
			db.startCatchUp(s)
		} else {
			s.fillFilter(db.bg)
		}
	}
	go db.committer()
	go db.indexer()
	return db, nil
}

// LockHolder reports whether dir's LOCK is held by a running process, for
// offline tools that must refuse to run next to a daemon.
func LockHolder(dir string) (held bool, pid string) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR, 0)
	if err != nil {
		return false, ""
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "LOCK"))
		return true, strings.TrimSpace(string(b))
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, ""
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		holder := strings.TrimSpace(string(b))
		if holder != "" {
			holder = " (pid " + holder + ")"
		}
		return nil, fmt.Errorf("%s%s: %w", dir, holder, ErrLocked)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

func unlockDir(f *os.File) {
	if f != nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

func (db *DB) storeOptions() storeOptions {
	return storeOptions{fs: db.opt.FS, chunk: db.opt.Chunk, limits: db.opt.Limits, log: db.log, now: db.opt.Now,
		checkpoint: db.opt.replayCheckpoint, replayed: db.opt.replayed, readOnly: db.readOnly != "",
		maxStoreSize: db.opt.MaxStoreSize, syncCatchUp: db.opt.syncCatchUp, catchUpBatch: db.opt.catchUpBatch, settleMinL0: db.opt.settleMinL0,
		indexCache: db.indexCache}
}

func (db *DB) openStores(ctx context.Context) error {
	entries, err := os.ReadDir(db.dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", db.dir, err)
	}
	var ids []uint32
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".deleting-") {
			db.log.Info("removing the leftover of an interrupted store deletion", "dir", name)
			if err := os.RemoveAll(filepath.Join(db.dir, name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			continue
		}
		if id, ok := ParseStoreName(name); ok && e.IsDir() {
			ids = append(ids, id)
		}
		if len(name) > storeDigits && strings.HasPrefix(name[storeDigits:], orphanMark) && e.IsDir() {
			if _, ok := ParseStoreName(name[:storeDigits]); ok {
				db.noteOrphan(name)
			}
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		dir := filepath.Join(db.dir, StoreName(id))
		// New stores are numbered past every directory, served or not.
		db.storeSeq = id + 1
		if _, err := os.Stat(filepath.Join(dir, dataFile)); errors.Is(err, fs.ErrNotExist) {
			if err := db.handleMissingData(id, dir); err != nil {
				return err
			}
			continue
		}
		s, err := openStore(ctx, dir, id, db.storeOptions())
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// One damaged store must not keep the others from serving.
			db.quarantine(id, dir, err)
			continue
		}
		db.stores = append(db.stores, s)
	}
	// Only the newest store takes writes; any other that is still open (a
	// crash between creating a new store and sealing the old one) is
	// sealed. A newer store that is out of service counts as newer.
	if db.readOnly != "" {
		return nil // no sealing, no new store, no retention: nothing written
	}
	// A store catching up in the background is sealed (or made current)
	// when it is done: sealing needs its torn tail cut first.
	for i, s := range db.stores {
		newest := i == len(db.stores)-1 && s.id+1 == db.storeSeq
		if !newest && !s.Sealed() && !s.catching.Load() {
			if err := s.seal(); err != nil {
				return err
			}
		}
	}
	if n := len(db.stores); n > 0 && !db.stores[n-1].Sealed() && !db.stores[n-1].catching.Load() {
		db.current = db.stores[n-1]
	}
	// Retention otherwise runs at rotation only; a daemon killed
	// repeatedly right after rotating would keep more stores than allowed.
	return db.applyRetentionLocked()
}

// Dir is the data directory.
func (db *DB) Dir() string { return db.dir }

// Stores describes every store, oldest first, including those not served
// (Degraded). Its counters include every write acknowledged before the
// call (it waits up to storesIndexWait for the indexer).
func (db *DB) Stores() []Info {
	db.waitIndexedBounded(storesIndexWait)
	// The local, out-of-service and remote stores are read under one
	// lock: a rebuild (out of service → local) and DropLocalCopy (local →
	// remote) move a store from one set to another under it, so a listing
	// taken across several acquisitions could miss the store or list it
	// twice.
	db.mu.RLock()
	stores := append([]*Store(nil), db.stores...)
	degraded := db.degradedLocked()
	remote := make([]*Store, 0, len(db.remote.byID))
	for _, s := range db.remote.byID {
		remote = append(remote, s)
	}
	db.mu.RUnlock()
	out := make([]Info, 0, len(stores)+len(degraded))
	for _, s := range stores {
		out = append(out, s.info())
	}
	out = append(out, degraded...)
	for i := range out {
		if out[i].Location == "" {
			out[i].Location = "local"
		}
	}
	out = append(out, remoteInfos(remote)...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// storesIndexWait bounds how long Stores waits for acknowledged writes to
// be indexed (a metrics scrape must not hang on a stalled indexer).
const storesIndexWait = 2 * time.Second

// SetRetention replaces the retention limits (SIGHUP) and applies them.
func (db *DB) SetRetention(r Retention) error {
	db.mu.Lock()
	db.opt.Retention = r
	db.mu.Unlock()
	return db.ApplyRetention()
}

// writable returns the store taking writes, creating or rotating it when
// needed. Called only by the committer (commitMu held); beforeRotate
// hands the group's chunks written so far to the indexer, so that the
// rotation, which waits for the indexer to drain, seals a fully indexed
// store.
func (db *DB) writable(beforeRotate func()) (*Store, error) {
	db.mu.RLock()
	cur, closed := db.current, db.closed
	db.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if cur != nil && !db.needsRotation(cur) {
		return cur, nil
	}
	beforeRotate()
	if err := db.rotate(); err != nil {
		return nil, err
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.current, nil
}

func (db *DB) needsRotation(s *Store) bool {
	s.mu.Lock()
	failed := s.syncFailed
	s.mu.Unlock()
	if failed || s.indexFailed.Load() || s.data.Size() >= db.opt.MaxStoreSize {
		return true
	}
	// A store keeps the chunk options it was created with; chunks are
	// encoded for the configured ones, so a changed setting (say
	// compression) starts a new store at the first write.
	if s.data.Options() != db.opt.Chunk {
		return true
	}
	if db.opt.MaxStoreAge > 0 {
		s.mu.Lock()
		created := s.props.Created
		s.mu.Unlock()
		if !created.IsZero() && db.opt.Now().Sub(created) >= db.opt.MaxStoreAge && s.data.Size() > chunk.HeaderSize {
			return true
		}
	}
	return false
}

// Rotate seals the current store (if any) and starts a new one, then
// applies retention. The committer rotates by itself; tests and tools may
// call Rotate too: it waits until the committer is between groups.
func (db *DB) Rotate() error {
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	return db.rotate()
}

// rotate is Rotate with commitMu held. Before sealing the old store it
// waits for the indexer to index every job queued (the committer hands
// off a group's chunks before it rotates), so the sealed store's indexes,
// counters and master checksum cover the same data file.
func (db *DB) rotate() error {
	if db.opt.QueryOnly {
		return ErrQueryOnly
	}
	if db.readOnly != "" {
		return db.errReadOnly()
	}
	db.retMu.Lock()
	defer db.retMu.Unlock()
	db.mu.RLock()
	cur := db.current
	db.mu.RUnlock()
	if err := db.checkSpace(0); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	// Create the new store before sealing the old one: a crash in between
	// leaves two open stores, and Open seals all but the newest.
	id := db.storeSeq
	dir := filepath.Join(db.dir, StoreName(id))
	s, err := createStore(dir, id, db.storeOptions())
	if err != nil {
		return err
	}
	db.mu.Lock()
	db.stores = append(db.stores, s)
	db.current = s
	db.storeSeq = id + 1
	db.mu.Unlock()
	if cur != nil {
		db.waitDrained()
		if err := cur.seal(); err != nil {
			// The new store takes writes already; the old one stays open
			// on disk and is sealed by the next Open.
			db.log.Error("sealing the previous store failed; it will be sealed at the next start", "store", StoreName(cur.id), "err", err)
		} else {
			db.log.Info("rotated store", "sealed", StoreName(cur.id), "new", StoreName(id))
			db.releaseMemTables(cur)
			if db.opt.OnSealed != nil {
				db.opt.OnSealed(cur.id)
			}
		}
	}
	return db.applyRetentionLocked()
}

// ApplyRetention deletes the oldest sealed stores beyond the limits.
func (db *DB) ApplyRetention() error {
	db.retMu.Lock()
	defer db.retMu.Unlock()
	return db.applyRetentionLocked()
}

func (db *DB) applyRetentionLocked() error {
	if db.readOnly != "" {
		return nil
	}
	db.mu.RLock()
	r := db.opt.Retention
	stores := append([]*Store(nil), db.stores...)
	db.mu.RUnlock()
	var sealed []*Store
	var total int64
	sizes := map[*Store]int64{}
	for _, s := range stores {
		sz := dirSize(s.dir)
		sizes[s] = sz
		total += sz
		if s.Sealed() {
			sealed = append(sealed, s)
		}
	}
	now := db.opt.Now()
	count := len(stores)
	for _, s := range sealed { // oldest first
		drop := false
		if r.MaxStores > 0 && count > r.MaxStores {
			drop = true
		}
		if r.MaxTotalSize > 0 && total > r.MaxTotalSize {
			drop = true
		}
		if r.MaxAge > 0 {
			s.mu.Lock()
			last := s.lastNS
			s.mu.Unlock()
			if last > 0 && now.Sub(time.Unix(0, last)) > r.MaxAge {
				drop = true
			}
		}
		if !drop {
			continue
		}
		if err := db.deleteStore(s); err != nil {
			return err
		}
		count--
		total -= sizes[s]
	}
	return nil
}

// deleteStore removes s crash-safely: out of the set, closed once its
// readers finish, renamed to .deleting-NNNNNN, then removed.
func (db *DB) deleteStore(s *Store) error {
	db.mu.Lock()
	for i, x := range db.stores {
		if x == s {
			db.stores = append(db.stores[:i:i], db.stores[i+1:]...)
			break
		}
	}
	db.mu.Unlock()
	if err := s.close(); err != nil {
		db.log.Warn("closing a store for deletion", "store", StoreName(s.id), "err", err)
	}
	db.cache.dropStore(s.key())
	db.layouts.dropStore(s.key())
	db.damage.forgetStore(s.key())
	tmp := filepath.Join(db.dir, ".deleting-"+StoreName(s.id))
	if err := os.Rename(s.dir, tmp); err != nil {
		return fmt.Errorf("retention: rename %s: %w", s.dir, err)
	}
	if err := syncDir(db.dir); err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("retention: remove %s: %w", tmp, err)
	}
	db.log.Info("retention deleted store", "store", StoreName(s.id))
	return nil
}

// Close stops taking writes, waits for the committer to finish what it
// holds and for the indexer to index what the committer queued, flushes
// and closes every store and releases the lock.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	close(db.stop)
	<-db.done
	<-db.idx.done
	db.bg.stop()
	err := errors.Join(db.closeStores(), db.closeRemote())
	db.indexCache.Unref()
	unlockDir(db.lock)
	return err
}

func (db *DB) closeStores() error {
	err := closeAll(db.stores, time.Now().Add(CloseTimeout))
	db.stores, db.current = nil, nil
	return err
}

// snapshot returns the open stores (newest first) with each one's reader
// reference taken; release must be called.
//
// Remote stores (remote.go) are in it too, their indexes not yet cached:
// a reader calls remoteReady (or remoteReadyFor*) before using a store's
// indexes.
func (db *DB) snapshot() (stores []*Store, release func()) {
	db.mu.RLock()
	if db.remote.empty() {
		for i := len(db.stores) - 1; i >= 0; i-- {
			s := db.stores[i]
			s.refs.RLock()
			stores = append(stores, s)
		}
	} else {
		stores = db.mergedLocked()
		for _, s := range stores {
			s.refs.RLock()
		}
	}
	db.mu.RUnlock()
	return stores, func() {
		for _, s := range stores {
			s.refs.RUnlock()
		}
		db.remote.evict() // the index cache over its bound: stores no reader holds
	}
}

// DataSize returns the end of the data in local store id's data file: the
// offset of its next append, which is less than the file's length while
// the store is open for writes (the zero tail preallocated past the data,
// chunk.PreallocStep). ok is false when no local store has that id.
func (db *DB) DataSize(id uint32) (size int64, ok bool) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	for _, s := range db.stores {
		if s.id == id && s.remote == nil && s.data != nil {
			return s.data.Size(), true
		}
	}
	return 0, false
}
