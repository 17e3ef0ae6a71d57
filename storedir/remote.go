package storedir

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ztsd/ztsd/chunk"
	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/index"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/textindex"
	"github.com/ztsd/ztsd/trace"
)

// RemoteOptions configure the stores a DB reads from a bucket (see
// "Remote stores" in the package doc).
type RemoteOptions struct {
	// Bucket holds this node's uploads: DropLocalCopy reads the uploaded
	// copy of a local store from it. ServeRemote takes its bucket as an
	// argument.
	Bucket objstore.Bucket
	// Prefix is the key prefix of the bucket's stores ([object_store]
	// prefix): a store's objects are under <Prefix>/<node>/<store id>/.
	Prefix string
	// Node is the name this daemon uploads its own stores under. A remote
	// store of this node takes the place of the local store it was (by
	// id) in the newest-first order; ServeRemote of one whose local copy
	// still serves does nothing (the local copy answers; DropLocalCopy
	// switches to the upload, or discovery serves it once the local copy
	// is gone).
	Node string
	// CacheDir holds the downloaded index files of remote stores; "" is
	// <data dir>/remote-cache. Its "indexes" subdirectory is emptied at
	// Open (the cache is rebuilt on demand).
	CacheDir string
	// CacheMaxSize bounds the downloaded index bytes (LRU over stores);
	// 0 is DefaultRemoteCacheSize.
	CacheMaxSize int64
}

// DefaultRemoteCacheSize is RemoteOptions.CacheMaxSize when it is 0.
const DefaultRemoteCacheSize = 1 << 30

// ErrQueryOnly is what writes get from a query-only DB (Options.QueryOnly).
var ErrQueryOnly = errors.New("query-only node: no local writes")

const (
	// remoteReadAhead is how much a chunk read fetches when the store's
	// chunk bounds are not known (no tracefilter object, or a chunk past
	// a damaged region): one GET holds the header and, for most chunks,
	// the whole chunk; a larger chunk costs a second GET for the rest.
	remoteReadAhead = 64 << 10
	// remoteIndexCacheBytes is the Pebble block cache of each index of a
	// remote store (many may be open at once).
	remoteIndexCacheBytes = 4 << 20
	// remoteDownloads is how many index files of one store download at
	// once, remoteParallelStores how many stores a search readies at once.
	remoteDownloads      = 4
	remoteParallelStores = 8
	// maxDirBlocks bounds the trace-directory blocks kept in memory.
	maxDirBlocks = 2048
	// maxTraceFilterObject bounds the tracefilter object read from a bucket.
	maxTraceFilterObject = 512 << 20
)

// remoteID names a store in a bucket: node and store id (ids collide
// across nodes).
type remoteID struct {
	node string
	id   uint32
}

// remoteSet is a DB's remote stores and their index cache.
type remoteSet struct {
	opt RemoteOptions
	dir string // <cache dir>/indexes
	max int64
	log *slog.Logger
	seq atomic.Uint32 // Store.key of remote stores: 1<<32 | seq

	// Guarded by DB.mu.
	byID    map[remoteID]*Store
	own     []*Store // this node's, id descending
	foreign []*Store // other nodes', LastNS descending

	lruMu  sync.Mutex
	lru    *list.List // *remoteStore whose indexes are cached, most recently used first
	cached int64      // bytes of cached index files

	dirBlocks *blockCache // trace-directory blocks read

	gets, indexBytes, chunkBytes, hits, misses, evictions atomic.Int64
	staleN                                                atomic.Int32
}

// remoteStore is what a Store read from a bucket adds.
type remoteStore struct {
	set     *remoteSet
	bucket  objstore.Bucket
	m       *objstore.Manifest
	own     bool
	key     uint64
	dataKey string
	size    int64
	opt     chunk.Options
	ctx     context.Context // chunk reads; cancelled when the store closes
	cancel  context.CancelFunc

	mu      sync.Mutex // guards what follows: loading the aid and the indexes
	aidDone bool
	filter  *traceFilter  // nil: no tracefilter object
	bounds  []int64       // chunk bounds from the tracefilter object
	blocks  []dirBlock    // the tracedir object's blocks (set with the filter)
	loaded  bool          // meta and text are open from the cache
	bytes   int64         // cached index bytes
	elem    *list.Element // in set.lru while loaded; guarded by set.lruMu
	store   *Store
	stale   atomic.Bool // drop the cached indexes at the next eviction
}

func newRemoteSet(dataDir string, opt RemoteOptions, log *slog.Logger) (*remoteSet, error) {
	if opt.CacheDir == "" {
		opt.CacheDir = filepath.Join(dataDir, "remote-cache")
	}
	if opt.CacheMaxSize <= 0 {
		opt.CacheMaxSize = DefaultRemoteCacheSize
	}
	rs := &remoteSet{opt: opt, dir: filepath.Join(opt.CacheDir, "indexes"), max: opt.CacheMaxSize, log: log,
		byID: map[remoteID]*Store{}, lru: list.New(),
		dirBlocks: newBlockCache(maxDirBlocks)}
	// Index files left by an earlier run are not trusted (a crash may
	// have cut one): the cache starts empty.
	if err := os.RemoveAll(rs.dir); err != nil {
		return nil, fmt.Errorf("remote index cache %s: %w", rs.dir, err)
	}
	return rs, nil
}

func (rs *remoteSet) empty() bool { return rs == nil || len(rs.byID) == 0 }

// key is the store's identity in the chunk cache and the damage log.
func (s *Store) key() uint64 {
	if s.remote != nil {
		return s.remote.key
	}
	return uint64(s.id)
}

// name is how answers and logs name the store: its six hex digits, with
// its node for a remote store ("web-1/00002a").
func (s *Store) name() string {
	if s.remote != nil {
		return s.remote.m.Node + "/" + StoreName(s.id)
	}
	return StoreName(s.id)
}

// readChunk reads the chunk at off: from the data file, or for a remote
// store by one ranged GET.
func (s *Store) readChunk(off int64) ([]byte, int64, error) {
	if s.remote != nil {
		return s.remote.readChunk(off)
	}
	return s.data.ReadChunk(off)
}

// noteLocalStoresIgnored logs store directories a query-only DB leaves
// alone.
func (db *DB) noteLocalStoresIgnored() {
	entries, _ := os.ReadDir(db.dir)
	n := 0
	for _, e := range entries {
		if _, ok := ParseStoreName(e.Name()); ok && e.IsDir() {
			n++
		}
	}
	if n > 0 {
		db.log.Warn("query-only: the data directory's local stores are not served", "stores", n)
	}
}

// ServeRemote adds the store that manifest m describes, read from bucket
// b, to the stores this DB serves. It is idempotent per (node, store id):
// the same generation again does nothing, another generation replaces the
// one served (unless m was uploaded before it). A store of this node
// (RemoteOptions.Node) whose local copy still serves is not served (the
// local copy answers; DropLocalCopy switches to the upload). It reads the
// data file's header (one ranged GET); the indexes are downloaded on
// first use.
func (db *DB) ServeRemote(ctx context.Context, b objstore.Bucket, m *objstore.Manifest) error {
	if b == nil || m == nil {
		return errors.New("serve remote store: no bucket or manifest")
	}
	rid := remoteID{m.Node, m.Store}
	own := db.opt.Remote.Node != "" && m.Node == db.opt.Remote.Node && !db.opt.QueryOnly
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	old := db.remote.byID[rid]
	if old != nil && (old.remote.m.Generation == m.Generation || m.Uploaded.Before(old.remote.m.Uploaded)) {
		db.mu.Unlock()
		return nil
	}
	if own && db.localStoreLocked(m.Store) != nil {
		db.mu.Unlock()
		return nil
	}
	db.mu.Unlock()
	s, err := db.newRemoteStore(ctx, b, m, own)
	if err != nil {
		return err
	}
	db.mu.Lock()
	if db.closed || (own && db.localStoreLocked(m.Store) != nil) {
		db.mu.Unlock()
		db.closeRemoteStore(s)
		if db.closed {
			return ErrClosed
		}
		return nil
	}
	old = db.remote.byID[rid]
	if old != nil && (old.remote.m.Generation == m.Generation || m.Uploaded.Before(old.remote.m.Uploaded)) {
		db.mu.Unlock()
		db.closeRemoteStore(s)
		return nil
	}
	db.installRemoteLocked(s, old)
	db.mu.Unlock()
	if old != nil {
		db.closeRemoteStore(old)
		db.log.Info("remote store replaced by a newer generation", "store", s.name(), "generation", m.Generation, "was", old.remote.m.Generation)
	} else {
		db.log.Debug("serving remote store", "store", s.name(), "generation", m.Generation)
	}
	return nil
}

// DropRemote stops serving the remote store node/id (its manifest is gone
// from the bucket); its cached indexes are deleted once its readers
// finish. Dropping a store not served is not an error.
func (db *DB) DropRemote(node string, id uint32) error {
	rid := remoteID{node, id}
	db.mu.Lock()
	s := db.remote.byID[rid]
	if s != nil {
		db.uninstallRemoteLocked(s)
	}
	db.mu.Unlock()
	if s != nil {
		db.closeRemoteStore(s)
		db.log.Info("remote store dropped", "store", s.name())
	}
	return nil
}

// DropLocalCopy switches the sealed local store id to its uploaded copy,
// which manifest m describes (read from RemoteOptions.Bucket), and then
// deletes the local directory (renamed to .deleting-<id> first, as
// retention does). The copy must match the local data file (size, and
// master checksum when m has one); the store taking writes is never
// dropped. Readers that hold the local store finish on it; new readers
// get the remote one.
func (db *DB) DropLocalCopy(id uint32, m *objstore.Manifest) error {
	b := db.opt.Remote.Bucket
	if b == nil {
		return fmt.Errorf("drop local copy of store %s: no bucket configured", StoreName(id))
	}
	if m == nil || m.Store != id {
		return fmt.Errorf("drop local copy of store %s: the manifest is for another store", StoreName(id))
	}
	if db.opt.Remote.Node != "" && m.Node != db.opt.Remote.Node {
		return fmt.Errorf("drop local copy of store %s: the manifest is node %q's, this node is %q", StoreName(id), m.Node, db.opt.Remote.Node)
	}
	// The bucket is read before retMu is taken: a slow bucket must not
	// hold up rotation (the committer).
	ctx, cancel := context.WithTimeout(db.bg.ctx, remoteOpTimeout)
	defer cancel()
	s, err := db.newRemoteStore(ctx, b, m, true)
	if err != nil {
		return fmt.Errorf("drop local copy of store %s: %w", StoreName(id), err)
	}
	installed := false
	defer func() {
		if !installed {
			db.closeRemoteStore(s)
		}
	}()
	db.retMu.Lock() // no rotation or retention meanwhile
	defer db.retMu.Unlock()
	db.mu.RLock()
	local := db.localStoreLocked(id)
	current := db.current
	db.mu.RUnlock()
	if local == nil {
		return fmt.Errorf("drop local copy of store %s: no such local store", StoreName(id))
	}
	if local == current || !local.Sealed() {
		return fmt.Errorf("drop local copy of store %s: the store is not sealed", StoreName(id))
	}
	f, ok := m.File(dataFile)
	if !ok || f.Size != local.data.Size() {
		return fmt.Errorf("drop local copy of store %s: the manifest's %s (%d bytes) does not match the local data file (%d bytes)",
			StoreName(id), dataFile, f.Size, local.data.Size())
	}
	local.mu.Lock()
	master := fmt.Sprintf("%08x", local.props.MasterChecksum)
	local.mu.Unlock()
	if m.MasterChecksum != "" && !strings.EqualFold(m.MasterChecksum, master) {
		return fmt.Errorf("drop local copy of store %s: the manifest's master checksum %s is not the local %s", StoreName(id), m.MasterChecksum, master)
	}
	if local.superseded.Load() {
		s.superseded.Store(true)
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	installed = true
	for i, x := range db.stores {
		if x == local {
			db.stores = append(db.stores[:i:i], db.stores[i+1:]...)
			break
		}
	}
	rid := remoteID{m.Node, id}
	old := db.remote.byID[rid]
	db.installRemoteLocked(s, old)
	db.mu.Unlock()
	if old != nil {
		db.closeRemoteStore(old)
	}
	if err := local.close(); err != nil {
		db.log.Warn("closing a store whose local copy is dropped", "store", StoreName(id), "err", err)
	}
	db.cache.dropStore(local.key())
	db.layouts.dropStore(local.key())
	db.damage.forgetStore(local.key())
	tmp := filepath.Join(db.dir, ".deleting-"+StoreName(id))
	if err := os.Rename(local.dir, tmp); err != nil {
		return fmt.Errorf("drop local copy: rename %s: %w", local.dir, err)
	}
	if err := syncDir(db.dir); err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("drop local copy: remove %s: %w", tmp, err)
	}
	db.log.Info("local copy dropped; the store is served from the bucket", "store", s.name(), "generation", m.Generation)
	return nil
}

// remoteOpTimeout bounds the bucket requests of a call that has no
// context of its own (DropLocalCopy, chunk reads).
const remoteOpTimeout = 60e9 // 60 s

// localStoreLocked returns the served local store id, or nil. db.mu held.
func (db *DB) localStoreLocked(id uint32) *Store {
	i := sort.Search(len(db.stores), func(i int) bool { return db.stores[i].id >= id })
	if i < len(db.stores) && db.stores[i].id == id {
		return db.stores[i]
	}
	return nil
}

// installRemoteLocked adds s to the served set in place of old (or nil).
// db.mu held.
func (db *DB) installRemoteLocked(s, old *Store) {
	rs := db.remote
	if old != nil {
		db.uninstallRemoteLocked(old)
	}
	rs.byID[remoteID{s.remote.m.Node, s.id}] = s
	if s.remote.own {
		rs.own = append(rs.own, s)
		sort.Slice(rs.own, func(i, j int) bool { return rs.own[i].id > rs.own[j].id })
	} else {
		rs.foreign = append(rs.foreign, s)
		sort.Slice(rs.foreign, func(i, j int) bool { return remoteNewer(rs.foreign[i], rs.foreign[j]) })
	}
}

// remoteNewer orders other nodes' stores newest first: by their newest
// span, then node and id (a fixed order for equal times).
func remoteNewer(a, b *Store) bool {
	if a.lastNS != b.lastNS {
		return a.lastNS > b.lastNS
	}
	if a.remote.m.Node != b.remote.m.Node {
		return a.remote.m.Node > b.remote.m.Node
	}
	return a.id > b.id
}

func (db *DB) uninstallRemoteLocked(s *Store) {
	rs := db.remote
	delete(rs.byID, remoteID{s.remote.m.Node, s.id})
	drop := func(list []*Store) []*Store {
		for i, x := range list {
			if x == s {
				return append(list[:i:i], list[i+1:]...)
			}
		}
		return list
	}
	rs.own = drop(rs.own)
	rs.foreign = drop(rs.foreign)
}

// mergedLocked is the served stores newest first, remote ones included:
// the store taking writes first; local stores and this node's remote
// stores by id (descending), the order versions rely on; other nodes'
// stores merged in by their newest span. db.mu held.
func (db *DB) mergedLocked() []*Store {
	rs := db.remote
	out := make([]*Store, 0, len(db.stores)+len(rs.own)+len(rs.foreign))
	if db.current != nil {
		out = append(out, db.current)
	}
	// Local and own stores, id descending.
	a := make([]*Store, 0, len(db.stores)+len(rs.own))
	i, j := len(db.stores)-1, 0
	for i >= 0 || j < len(rs.own) {
		if i >= 0 && db.stores[i] == db.current {
			i--
			continue
		}
		if j >= len(rs.own) || (i >= 0 && db.stores[i].id > rs.own[j].id) {
			a = append(a, db.stores[i])
			i--
		} else {
			a = append(a, rs.own[j])
			j++
		}
	}
	lastOf := func(s *Store) int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lastNS
	}
	k := 0
	for _, s := range a {
		last := lastOf(s)
		for k < len(rs.foreign) && rs.foreign[k].lastNS > last {
			out = append(out, rs.foreign[k])
			k++
		}
		out = append(out, s)
	}
	return append(out, rs.foreign[k:]...)
}

// newRemoteStore makes the Store for manifest m: counters and time range
// from m, chunk options from the data file's header (one ranged GET).
func (db *DB) newRemoteStore(ctx context.Context, b objstore.Bucket, m *objstore.Manifest, own bool) (*Store, error) {
	rs := db.remote
	f, ok := m.File(dataFile)
	if !ok {
		return nil, fmt.Errorf("remote store %s/%s generation %s: the manifest lists no %s", m.Node, StoreName(m.Store), m.Generation, dataFile)
	}
	if f.Size < chunk.HeaderSize {
		return nil, fmt.Errorf("remote store %s/%s generation %s: %s of %d bytes", m.Node, StoreName(m.Store), m.Generation, dataFile, f.Size)
	}
	r := &remoteStore{set: rs, bucket: b, m: m, own: own, key: 1<<32 | uint64(rs.seq.Add(1)),
		dataKey: objstore.FileKey(rs.opt.Prefix, m.Node, m.Store, m.Generation, dataFile), size: f.Size}
	hb, err := r.getRange(ctx, r.dataKey, 0, chunk.HeaderSize)
	if err != nil {
		return nil, fmt.Errorf("remote store %s/%s: %w", m.Node, StoreName(m.Store), err)
	}
	h, err := chunk.ParseHeader(hb)
	if err != nil {
		return nil, fmt.Errorf("remote store %s/%s: %s: %w", m.Node, StoreName(m.Store), r.dataKey, err)
	}
	r.opt = h.Options
	r.ctx, r.cancel = context.WithCancel(context.Background())
	dir := filepath.Join(rs.dir, url.PathEscape(m.Node), StoreName(m.Store)+"."+url.PathEscape(m.Generation))
	s := &Store{id: m.Store, dir: dir, log: db.log.With("store", m.Node+"/"+StoreName(m.Store)), remote: r,
		props: config.StoreProps{FormatVersion: FormatVersion, Compression: h.Options.Compression.String(),
			Checksums: h.Options.Checksums, State: stateSealed, FirstTraceNS: m.FirstNS, LastTraceNS: m.LastNS,
			Chunks: m.Chunks, MasterChecksum: h.Master},
		firstNS: m.FirstNS, lastNS: m.LastNS, spans: m.Spans, chunks: m.Chunks}
	r.store = s
	if _, ok := m.File(supersededFile); ok {
		s.superseded.Store(true)
	}
	return s, nil
}

// closeRemoteStore closes a store taken out of the served set: waits for
// its readers, closes its indexes and deletes its cached files.
func (db *DB) closeRemoteStore(s *Store) error {
	if s.remote.cancel == nil {
		return nil
	}
	s.refs.Lock()
	defer s.refs.Unlock()
	db.remote.dropIndexes(s)
	s.remote.cancel()
	db.cache.dropStore(s.key())
	db.remote.dirBlocks.dropStore(s.key())
	db.damage.forgetStore(s.key())
	return nil
}

// closeRemote closes every remote store (DB.Close).
func (db *DB) closeRemote() error {
	db.mu.Lock()
	var stores []*Store
	for _, s := range db.remote.byID {
		stores = append(stores, s)
	}
	db.remote.byID = map[remoteID]*Store{}
	db.remote.own, db.remote.foreign = nil, nil
	db.mu.Unlock()
	var errs []error
	for _, s := range stores {
		errs = append(errs, db.closeRemoteStore(s))
	}
	return errors.Join(errs...)
}

// remoteReady makes a remote store's indexes usable: downloaded into the
// cache (each file checked against the manifest's size and SHA-256) and
// opened, unless cached already. The caller holds s.refs shared (a
// snapshot), which keeps them from being evicted until it is released. A
// local store is always ready.
func (db *DB) remoteReady(ctx context.Context, s *Store) error {
	r := s.remote
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded {
		r.set.hits.Add(1)
		r.set.touch(r)
		return nil
	}
	r.set.misses.Add(1)
	return r.fetchIndexes(ctx, s)
}

// storeTraceRefs returns the index entries of trace id in store s, as
// s.meta.TraceSpans does (refsOf). A remote store with a trace directory
// answers from it without its indexes: its trace filter (memory), one
// ranged GET of a directory block, and the chunks holding the trace (one
// ranged GET each, through the chunk cache), whose spans of the trace
// become the entries (the last one of each span chunk, as the index keeps);
// a damaged chunk is added to warns (when not nil) and skipped. Other
// remote stores have their indexes made usable first.
func (db *DB) storeTraceRefs(ctx context.Context, s *Store, id trace.TraceID, refsOf func(*Store) ([]index.SpanRef, error), warns *warnings) ([]index.SpanRef, error) {
	r := s.remote
	if r == nil {
		return refsOf(s)
	}
	f, err := r.aid(ctx)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", s.name(), err)
	}
	if f != nil && !f.mayContain(id) {
		return nil, nil
	}
	if len(r.blocks) == 0 {
		if err := db.remoteReady(ctx, s); err != nil {
			return nil, err
		}
		return refsOf(s)
	}
	i := sort.Search(len(r.blocks), func(i int) bool { return bytes.Compare(r.blocks[i].first[:], id[:]) > 0 }) - 1
	if i < 0 {
		return nil, nil
	}
	bl := r.blocks[i]
	key := r.fileKey(TraceDirFile)
	block, ok := r.set.dirBlocks.get(r.key, bl.off)
	if !ok {
		block, err = r.getRange(ctx, key, bl.off, bl.len)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.name(), err)
		}
	}
	offs, err := lookupDirBlock(block, id)
	if err != nil {
		return nil, fmt.Errorf("store %s: %s block at %d: %w", s.name(), key, bl.off, err)
	}
	if !ok {
		r.set.dirBlocks.put(r.key, bl.off, block) // checked: kept
	}
	type slot struct {
		span  uint64
		chunk uint32
	}
	at := map[slot]int{}
	var refs []index.SpanRef
	for _, off := range offs {
		view, err := db.remoteChunkView(s, off)
		if err != nil {
			var ce *CorruptChunkError
			if errors.As(err, &ce) {
				if warns != nil {
					warns.add(err)
				}
				continue
			}
			return nil, err
		}
		for j := 0; j < view.Len(); j++ {
			sp, err := view.Summary(j)
			if err != nil {
				if warns != nil {
					warns.add(db.damage.note(s.key(), s.name(), off, fmt.Errorf("payload: %w", err)))
				}
				break
			}
			if sp.TraceID != id {
				continue
			}
			ref := index.SpanRef{TraceID: id, SpanID: uint64(sp.SpanID), ParentID: uint64(sp.ParentID), ChunkNum: sp.ChunkNum,
				Loc: index.Location{ChunkOffset: off, Index: uint32(j)}, StartNS: sp.StartNS, DurationNS: sp.DurationNS, Error: sp.Error}
			k := slot{ref.SpanID, ref.ChunkNum}
			if n, ok := at[k]; ok {
				refs[n] = ref // a later entry of the same span chunk: the current one
				continue
			}
			at[k] = len(refs)
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// remoteChunkView is the decoded view of the chunk at off of remote store
// s, through the chunk cache and the damage log (as readSpanAs reads).
func (db *DB) remoteChunkView(s *Store, off int64) (*trace.ChunkView, error) {
	if ce, ok := db.damage.known(s.key(), off); ok {
		return nil, ce
	}
	if cv, ok := db.cache.get(s.key(), off); ok {
		// A remote chunk's view holds its payload whole (no pooled
		// buffers to give back): the hold only keeps the count right.
		cv.pinned.Store(true)
		cv.drop()
		return cv.view, nil
	}
	payload, _, err := s.readChunk(off)
	if err != nil {
		if isChunkDamage(err) {
			return nil, db.damage.note(s.key(), s.name(), off, err)
		}
		return nil, fmt.Errorf("store %s: %w", s.name(), err)
	}
	view, err := trace.NewChunkView(payload, db.opt.Limits)
	if err != nil {
		return nil, db.damage.note(s.key(), s.name(), off, fmt.Errorf("payload: %w", err))
	}
	cv := newCachedView(view)
	cv.pinned.Store(true)
	db.cache.put(s.key(), off, cv)
	cv.drop()
	return view, nil
}

// remoteReadyForTrace reports whether s may hold trace id and, if so,
// makes its indexes usable: a remote store whose trace filter rules id
// out is skipped without downloading its indexes.
func (db *DB) remoteReadyForTrace(ctx context.Context, s *Store, id trace.TraceID) (bool, error) {
	r := s.remote
	if r == nil {
		return true, nil
	}
	f, err := r.aid(ctx)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", s.name(), err)
	}
	if f != nil && !f.mayContain(id) {
		return false, nil
	}
	return true, db.remoteReady(ctx, s)
}

// remoteReadyForWrite is Append's duplicate check of a remote store: only
// a store whose trace filter may hold id is looked at (storeTraceRefs: a
// write must not download the indexes of every remote store), and a
// bucket failure leaves the store out rather than failing the write.
func (db *DB) remoteReadyForWrite(ctx context.Context, s *Store, id trace.TraceID) bool {
	r := s.remote
	if r == nil {
		return true
	}
	f, err := r.aid(ctx)
	if err != nil {
		db.log.Warn("duplicate check: remote store left out", "store", s.name(), "err", err)
		return false
	}
	return f != nil && f.mayContain(id)
}

// remoteReadyForRange returns the stores of a snapshot a search over
// [since, until) reads: every local store, and the remote stores whose
// time range (from their manifests) meets it, with their indexes made
// usable.
func (db *DB) remoteReadyForRange(ctx context.Context, stores []*Store, since, until int64) ([]*Store, error) {
	if db.remote.empty() {
		return stores, nil
	}
	out := make([]*Store, 0, len(stores))
	var load []*Store
	for _, s := range stores {
		if s.remote != nil {
			if s.lastNS != 0 && since != 0 && s.lastNS < since {
				continue
			}
			if s.firstNS != 0 && until != 0 && s.firstNS >= until {
				continue
			}
			load = append(load, s)
		}
		out = append(out, s)
	}
	// Several stores' indexes download at once: a cold search over many
	// stores costs about its slowest few, not their sum.
	errs := make([]error, len(load))
	sem := make(chan struct{}, remoteParallelStores)
	var wg sync.WaitGroup
	for i, s := range load {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = db.remoteReady(ctx, s)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// remoteIndexDamaged: a remote store's cached index fails a read. The
// files were checked against the manifest when downloaded, so the copy in
// the bucket is damaged (or the local disk is): the store is left out of
// this answer and its cache dropped, so the next read downloads it again.
func (db *DB) remoteIndexDamaged(s *Store, err error) Warning {
	w := Warning{Store: s.name(), Offset: 0, Error: fmt.Sprintf("remote store's index damaged, left out: %v", err)}
	db.log.Error("a remote store's cached index is damaged; its cache is dropped (run `ztsctl verify --remote`)", "store", s.name(), "err", err)
	db.remote.markStale(s) // the store stays served; eviction drops the cached copy
	return w
}

// aid returns the store's trace filter (nil when the upload has no
// tracefilter object), reading the object on first use.
func (r *remoteStore) aid(ctx context.Context) (*traceFilter, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aidLocked(ctx)
}

func (r *remoteStore) aidLocked(ctx context.Context) (*traceFilter, error) {
	if r.aidDone {
		return r.filter, nil
	}
	f, ok := r.m.File(TraceFilterFile)
	if !ok {
		r.aidDone = true
		return nil, nil
	}
	if f.Size > maxTraceFilterObject {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", r.fileKey(f.Path), f.Size, maxTraceFilterObject)
	}
	var buf strings.Builder
	if err := r.download(ctx, f, &buf); err != nil {
		return nil, err
	}
	filter, bounds, blocks, err := decodeTraceFilter([]byte(buf.String()))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.fileKey(f.Path), err)
	}
	if len(blocks) > 0 {
		d, ok := r.m.File(TraceDirFile)
		if last := blocks[len(blocks)-1]; !ok || last.off+last.len != d.Size {
			return nil, fmt.Errorf("%s: its directory blocks do not match %s in the manifest", r.fileKey(f.Path), TraceDirFile)
		}
		r.blocks = blocks
	}
	if len(bounds) > 0 && bounds[len(bounds)-1] > r.size {
		return nil, fmt.Errorf("%s: chunk bounds reach %d, past the data file's %d bytes", r.fileKey(f.Path), bounds[len(bounds)-1], r.size)
	}
	r.filter, r.bounds, r.aidDone = filter, bounds, true
	return filter, nil
}

func (r *remoteStore) fileKey(p string) string {
	return objstore.FileKey(r.set.opt.Prefix, r.m.Node, r.m.Store, r.m.Generation, p)
}

// fetchIndexes downloads meta/ and text/ into s.dir and opens them.
// r.mu held.
func (r *remoteStore) fetchIndexes(ctx context.Context, s *Store) error {
	if _, err := r.aidLocked(ctx); err != nil {
		return fmt.Errorf("store %s: %w", s.name(), err)
	}
	var files []objstore.ManifestFile
	var total int64
	hasMeta, hasText := false, false
	for _, f := range r.m.Files {
		switch {
		case strings.HasPrefix(f.Path, metaDir+"/"):
			hasMeta = true
		case strings.HasPrefix(f.Path, textDir+"/"):
			hasText = true
		default:
			continue
		}
		if clean := path.Clean(f.Path); clean != f.Path || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("store %s: manifest file %q is not a plain path", s.name(), f.Path)
		}
		files = append(files, f)
		total += f.Size
	}
	if !hasMeta || !hasText {
		return fmt.Errorf("store %s generation %s: the manifest lists no %s/ or %s/ index files", s.name(), r.m.Generation, metaDir, textDir)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("store %s: index cache: %w", s.name(), err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(s.dir)
		}
	}()
	work := make(chan objstore.ManifestFile)
	errs := make(chan error, remoteDownloads)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range min(remoteDownloads, len(files)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if err := r.downloadFile(dctx, f, filepath.Join(s.dir, filepath.FromSlash(f.Path))); err != nil {
					cancel()
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
feed:
	for _, f := range files {
		select {
		case work <- f:
		case <-dctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("store %s: %w", s.name(), err)
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	meta, err := index.OpenReadOnly(filepath.Join(s.dir, metaDir), index.Options{CacheBytes: remoteIndexCacheBytes})
	if err != nil {
		return fmt.Errorf("store %s: cached metadata index: %w", s.name(), err)
	}
	text, err := textindex.OpenReadOnly(filepath.Join(s.dir, textDir), textindex.Options{CacheBytes: remoteIndexCacheBytes})
	if err != nil {
		meta.Close()
		return fmt.Errorf("store %s: cached text index: %w", s.name(), err)
	}
	s.meta, s.text = meta, text
	r.loaded, r.bytes = true, total
	r.set.added(r)
	ok = true
	return nil
}

// downloadFile writes the object of f to dst, checking its size and
// SHA-256 against the manifest.
func (r *remoteStore) downloadFile(ctx context.Context, f objstore.ManifestFile, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return fmt.Errorf("index cache: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("index cache: %w", err)
	}
	err = r.download(ctx, f, out)
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("index cache: %w", cerr)
	}
	return err
}

// download copies the object of f to w (one GET), checking its size and
// SHA-256 against the manifest.
func (r *remoteStore) download(ctx context.Context, f objstore.ManifestFile, w io.Writer) error {
	key := r.fileKey(f.Path)
	r.set.gets.Add(1)
	body, _, err := r.bucket.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer body.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, f.Size+1))
	r.set.indexBytes.Add(n)
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	if n != f.Size {
		return fmt.Errorf("get %s: %d bytes, the manifest says %d", key, n, f.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("get %s: SHA-256 %s, the manifest says %s", key, got, f.SHA256)
	}
	return nil
}

// getRange is one ranged GET, counted.
func (r *remoteStore) getRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	r.set.gets.Add(1)
	b, err := r.bucket.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, fmt.Errorf("get %s bytes %d-%d: %w", key, off, off+n-1, err)
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("get %s bytes %d-%d: %d bytes returned", key, off, off+n-1, len(b))
	}
	r.set.chunkBytes.Add(n)
	return b, nil
}

// readChunk reads the chunk at off with one ranged GET: exactly the chunk
// when the tracefilter object gave the chunk bounds, else its header and
// remoteReadAhead bytes (a larger chunk costs a second GET for the rest).
func (r *remoteStore) readChunk(off int64) ([]byte, int64, error) {
	if off < chunk.HeaderSize || off >= r.size {
		return chunk.ReadChunkAt(emptyReader{}, r.size, r.opt, off) // the range error
	}
	end := min(off+remoteReadAhead, r.size)
	r.mu.Lock()
	if i := sort.Search(len(r.bounds), func(i int) bool { return r.bounds[i] >= off }); i+1 < len(r.bounds) && r.bounds[i] == off {
		end = r.bounds[i+1]
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, remoteOpTimeout)
	defer cancel()
	buf, err := r.getRange(ctx, r.dataKey, off, end-off)
	if err != nil {
		return nil, 0, err
	}
	return chunk.ReadChunkAt(&prefetched{r: r, ctx: ctx, base: off, buf: buf}, r.size, r.opt, off)
}

type emptyReader struct{}

func (emptyReader) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }

// prefetched serves reads of the data file from a fetched range, and the
// bytes past it with one more ranged GET.
type prefetched struct {
	r    *remoteStore
	ctx  context.Context
	base int64
	buf  []byte
}

func (p *prefetched) ReadAt(b []byte, off int64) (int, error) {
	end := p.base + int64(len(p.buf))
	n := 0
	if off >= p.base && off < end {
		n = copy(b, p.buf[off-p.base:])
	}
	if n == len(b) {
		return n, nil
	}
	rest, err := p.r.getRange(p.ctx, p.r.dataKey, off+int64(n), int64(len(b)-n))
	if err != nil {
		return n, err
	}
	return n + copy(b[n:], rest), nil
}

// touch moves a store with cached indexes to the front of the LRU.
func (rs *remoteSet) touch(r *remoteStore) {
	rs.lruMu.Lock()
	if r.elem != nil {
		rs.lru.MoveToFront(r.elem)
	}
	rs.lruMu.Unlock()
}

// added records a store whose indexes were just cached. r.mu held.
func (rs *remoteSet) added(r *remoteStore) {
	rs.lruMu.Lock()
	r.elem = rs.lru.PushFront(r)
	rs.cached += r.bytes
	rs.lruMu.Unlock()
}

// markStale has the next eviction drop the store's cached indexes.
func (rs *remoteSet) markStale(s *Store) {
	if !s.remote.stale.Swap(true) {
		rs.staleN.Add(1)
	}
}

// evict drops the cached indexes of the least recently used stores that
// no reader holds (s.refs taken exclusively, without waiting) until the
// cache is within its bound, and of stores marked stale. It runs when a
// reader releases its snapshot: a store is never evicted under a reader.
func (rs *remoteSet) evict() {
	if rs == nil {
		return
	}
	rs.lruMu.Lock()
	over := rs.cached - rs.max
	if over <= 0 && rs.staleN.Load() == 0 {
		rs.lruMu.Unlock()
		return
	}
	var cands []*remoteStore
	for e := rs.lru.Back(); e != nil; e = e.Prev() {
		cands = append(cands, e.Value.(*remoteStore))
	}
	rs.lruMu.Unlock()
	for _, r := range cands {
		if over <= 0 && !r.stale.Load() {
			continue
		}
		s := r.store
		if !s.refs.TryLock() {
			continue // a reader holds it
		}
		freed := rs.dropIndexes(s)
		s.refs.Unlock()
		if freed > 0 {
			over -= freed
			rs.evictions.Add(1)
		}
	}
}

// dropIndexes closes a remote store's cached indexes and deletes their
// files; it returns the bytes freed. s.refs held exclusively.
func (rs *remoteSet) dropIndexes(s *Store) int64 {
	r := s.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stale.Swap(false) {
		rs.staleN.Add(-1)
	}
	if !r.loaded {
		return 0
	}
	if err := errors.Join(s.meta.Close(), s.text.Close()); err != nil {
		s.log.Warn("closing a remote store's cached indexes", "err", err)
	}
	s.meta, s.text = nil, nil
	if err := os.RemoveAll(s.dir); err != nil {
		s.log.Warn("deleting a remote store's cached indexes", "dir", s.dir, "err", err)
	}
	r.loaded = false
	rs.lruMu.Lock()
	if r.elem != nil {
		rs.lru.Remove(r.elem)
		r.elem = nil
	}
	rs.cached -= r.bytes
	rs.lruMu.Unlock()
	freed := r.bytes
	r.bytes = 0
	return freed
}

// RemoteStats are the counters of the remote stores' reads since Open
// (the ztsd_remote_* metrics).
type RemoteStats struct {
	Stores int // remote stores served
	Cached int // of them, with their indexes in the cache
	// GETs counts requests to the bucket (whole objects and ranges).
	GETs int64
	// IndexBytes is what index and trace-filter downloads fetched;
	// ChunkBytes what ranged reads of data files fetched.
	IndexBytes, ChunkBytes int64
	// CacheHits and CacheMisses count uses of a remote store's indexes
	// that found them cached, or downloaded them; CacheEvictions counts
	// stores whose cached indexes were dropped.
	CacheHits, CacheMisses, CacheEvictions int64
	// CacheBytes is the size of the cached index files now;
	// CacheMaxBytes their bound.
	CacheBytes, CacheMaxBytes int64
}

// RemoteStats returns the remote read counters.
func (db *DB) RemoteStats() RemoteStats {
	rs := db.remote
	db.mu.RLock()
	n := len(rs.byID)
	db.mu.RUnlock()
	rs.lruMu.Lock()
	cached, bytes := rs.lru.Len(), rs.cached
	rs.lruMu.Unlock()
	return RemoteStats{Stores: n, Cached: cached, GETs: rs.gets.Load(), IndexBytes: rs.indexBytes.Load(),
		ChunkBytes: rs.chunkBytes.Load(), CacheHits: rs.hits.Load(), CacheMisses: rs.misses.Load(),
		CacheEvictions: rs.evictions.Load(), CacheBytes: bytes, CacheMaxBytes: rs.max}
}

// remoteInfos describes the remote stores remote, taken from db.remote
// under db.mu (DB.Stores).
func remoteInfos(remote []*Store) []Info {
	out := make([]Info, 0, len(remote))
	for _, s := range remote {
		out = append(out, s.remoteInfo())
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Node < out[j].Node
	})
	return out
}

func (s *Store) remoteInfo() Info {
	r := s.remote
	r.mu.Lock()
	cached := r.loaded
	r.mu.Unlock()
	var bytes int64
	for _, f := range r.m.Files {
		bytes += f.Size
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{ID: StoreName(s.id), State: s.props.State, FirstNS: s.firstNS, LastNS: s.lastNS, Spans: s.spans,
		Chunks: s.chunks, Bytes: bytes, Compression: s.props.Compression, Checksums: s.props.Checksums,
		Location: "remote", Node: r.m.Node, Generation: r.m.Generation, Cached: cached}
}
