// Package tiering uploads sealed stores to an S3-compatible bucket and
// applies the retention limits that depend on it: [object_store]'s
// local_max_* (local copies of uploaded stores) and [retention] (which,
// with a bucket, applies to the node's stores wherever they are).
//
// # Upload
//
// The Uploader runs in the background (it never blocks ingest): woken when
// a store is sealed (storedir.Options.OnSealed, Kick) and every Interval,
// it uploads each sealed local store that has no upload marker, oldest
// first. One upload of store id is:
//
//  1. a consistent copy of the store (storedir.DB.CopySealed: the data file
//     and config.props hard-linked, Pebble checkpoints of meta/ and text/)
//     in <data_dir>/.tiering/, and each file's size and SHA-256;
//  2. if the bucket holds a manifest for the store already (an upload that
//     a crash interrupted after its manifest), it is verified against the
//     local data file (size, SHA-256, master checksum) and its files' sizes
//     (HEAD); if it holds, it is adopted: nothing is uploaded twice;
//  3. otherwise every file is PUT under a fresh generation
//     (<prefix>/<node>/<store>/<generation>/<file>) with its SHA-256, which
//     the server checks, and then HEADed for its size;
//  4. the manifest (objstore.Manifest) is PUT last, the same way: the store
//     is visible in the bucket from that moment, exactly once;
//  5. the marker file "uploaded.json" (the manifest and its key) is written
//     into the store directory and fsynced: the upload is verified;
//  6. objects under the store's prefix that the manifest does not name
//     (generations of interrupted attempts) are deleted.
//
// A failure at any step (kill -9, a network error, a 5xx the SDK's retries
// did not get past) leaves no marker: the store is tried again after a
// backoff (BackoffMin doubling to BackoffMax) and at every restart, under a
// new generation; the interrupted one is garbage that step 6 removes.
//
// # Local retention
//
// While the local stores exceed LocalMaxStores, LocalMaxTotalSize or
// LocalMaxAge, the oldest sealed stores whose upload is verified (the marker
// is present and the bucket's manifest still names its generation) lose
// their local copy (Options.DropLocal: storedir then reads the store from
// the bucket). A store without a verified upload is never dropped.
//
// # Retention with a bucket
//
// [retention] then counts the node's stores wherever they are: local
// stores and the stores whose manifest is in the bucket. The oldest beyond
// a limit are deleted: in the bucket the manifest first (the store stops
// being visible), then every object under its prefix; then the local copy
// (storedir.DB.DeleteSealed) or the remote store storedir serves
// (Options.ForgetRemote). storedir's own retention is off then (cmd/ztsd
// gives the limits to the Uploader instead).
package tiering

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
)

// MarkerFile is the upload marker's name inside a store directory.
const MarkerFile = "uploaded.json"

// stagingDir is where store copies are made, inside the data directory.
const stagingDir = ".tiering"

// DB is what the Uploader needs from storedir.DB.
type DB interface {
	Dir() string
	LocalStores() []storedir.Info
	SealedStores() []uint32
	CopySealed(id uint32, dest string) (*storedir.SealedCopy, error)
	DeleteSealed(id uint32) error
}

// Limits are retention limits; zero fields are unlimited.
type Limits struct {
	MaxStores    int
	MaxTotalSize int64
	MaxAge       time.Duration
}

func (l Limits) any() bool { return l.MaxStores > 0 || l.MaxTotalSize > 0 || l.MaxAge > 0 }

// Options configure an Uploader.
type Options struct {
	Bucket objstore.Bucket
	Prefix string
	Node   string
	// Local limits the local copies of uploaded stores (local_max_*).
	Local Limits
	// Retention is [retention], applied to the node's local and uploaded
	// stores together.
	Retention Limits
	// DropLocal switches store id to be read from the bucket (manifest m)
	// and deletes its local directory; nil never drops a local copy.
	DropLocal func(id uint32, m *objstore.Manifest) error
	// ForgetRemote stops serving a store read from the bucket that
	// retention deleted; nil when there are none.
	ForgetRemote func(id uint32) error
	// Interval is how often pending uploads and the limits are looked at
	// without a Kick (default 30s).
	Interval time.Duration
	// BackoffMin and BackoffMax bound the wait after a failed upload
	// (default 1s and 2m).
	BackoffMin, BackoffMax time.Duration
	Logger                 *slog.Logger
	// Registerer receives the ztsd_tiering_* metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// Uploader uploads sealed stores and applies the limits.
type Uploader struct {
	db   DB
	opt  Options
	log  *slog.Logger
	kick chan struct{}

	mu        sync.Mutex
	retention Limits
	local     Limits
	// remote caches the manifests of this node's stores in the bucket, by
	// store id (filled by listing, kept up to date by uploads/deletes).
	remote map[uint32]*objstore.Manifest
	listed bool
	// soon: a store was not ready to copy (ErrIndexBehind); the next
	// pass comes after BackoffMin, not Interval.
	soon atomic.Bool
	// dirty are uploaded stores whose garbage could not be deleted yet.
	dirty map[uint32]string // store id → the manifest's generation

	m metrics
}

type metrics struct {
	stores, bytes, failures, adopted, dropped, deleted prometheus.Counter
	pending                                            prometheus.Gauge
}

// New makes an Uploader for db; Run starts it.
func New(db DB, opt Options) (*Uploader, error) {
	if opt.Bucket == nil || opt.Node == "" {
		return nil, errors.New("tiering: no bucket or node")
	}
	if opt.Interval <= 0 {
		opt.Interval = 30 * time.Second
	}
	if opt.BackoffMin <= 0 {
		opt.BackoffMin = time.Second
	}
	if opt.BackoffMax < opt.BackoffMin {
		opt.BackoffMax = max(2*time.Minute, opt.BackoffMin)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	u := &Uploader{db: db, opt: opt, log: opt.Logger.With("component", "tiering", "node", opt.Node),
		kick: make(chan struct{}, 1), retention: opt.Retention, local: opt.Local, remote: map[uint32]*objstore.Manifest{},
		dirty: map[uint32]string{}}
	u.m = metrics{
		stores:   prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_uploaded_stores_total", Help: "Sealed stores uploaded to the bucket and verified."}),
		bytes:    prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_uploaded_bytes_total", Help: "Bytes of store files uploaded to the bucket."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_upload_failures_total", Help: "Store uploads that failed (retried with backoff)."}),
		adopted:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_adopted_stores_total", Help: "Stores whose manifest was found in the bucket already (an interrupted run) and verified instead of uploaded again."}),
		dropped:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_local_copies_dropped_total", Help: "Local copies of verified uploads removed by local_max_* limits."}),
		deleted:  prometheus.NewCounter(prometheus.CounterOpts{Name: "ztsd_tiering_retention_deleted_stores_total", Help: "Stores [retention] deleted from the bucket and the data directory."}),
		pending:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "ztsd_tiering_pending_stores", Help: "Sealed local stores not uploaded yet."}),
	}
	if opt.Registerer != nil {
		for _, c := range []prometheus.Collector{u.m.stores, u.m.bytes, u.m.failures, u.m.adopted, u.m.dropped, u.m.deleted, u.m.pending} {
			if err := opt.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("tiering metrics: %w", err)
			}
		}
	}
	return u, nil
}

// Kick wakes the Uploader (a store was sealed); it never blocks.
func (u *Uploader) Kick() {
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// SetLimits replaces the limits (SIGHUP) and wakes the Uploader.
func (u *Uploader) SetLimits(local, retention Limits) {
	u.mu.Lock()
	u.local, u.retention = local, retention
	u.mu.Unlock()
	u.Kick()
}

// Run uploads and applies the limits until ctx is cancelled; it returns
// ctx's error.
func (u *Uploader) Run(ctx context.Context) error {
	if err := os.RemoveAll(filepath.Join(u.db.Dir(), stagingDir)); err != nil {
		u.log.Warn("removing the copies of an earlier run", "err", err)
	}
	backoff := time.Duration(0)
	swept := false
	for {
		err := u.Pass(ctx)
		if err == nil && !swept {
			// Once per run, before the next upload: objects no manifest
			// names, left by a run killed before it deleted them.
			if err = u.Sweep(ctx); err == nil {
				swept = true
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := u.opt.Interval
		if u.soon.Swap(false) {
			wait = u.opt.BackoffMin
		}
		if err != nil {
			backoff = min(max(2*backoff, u.opt.BackoffMin), u.opt.BackoffMax)
			wait = backoff
			u.log.Warn("tiering pass failed; retrying", "err", err, "in", backoff)
		} else {
			backoff = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-u.kick:
			t.Stop()
			if err != nil {
				// A kick does not cut a backoff short.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(backoff):
				}
			}
		case <-t.C:
		}
	}
}

// Pass uploads every sealed store without a verified upload, then applies
// the local limits and retention. It returns the first error after trying
// everything.
func (u *Uploader) Pass(ctx context.Context) error {
	var errs []error
	// Retention first: a store it deletes is not uploaded.
	if err := u.ApplyRetention(ctx); err != nil {
		errs = append(errs, err)
	}
	pending := u.Pending()
	u.m.pending.Set(float64(len(pending)))
	for _, id := range pending {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := u.Upload(ctx, id); err != nil {
			if errors.Is(err, storedir.ErrNoSealedStore) {
				continue // deleted meanwhile
			}
			if errors.Is(err, storedir.ErrIndexBehind) {
				// Sealed a moment ago: its last chunks are being indexed.
				u.soon.Store(true)
				continue
			}
			u.m.failures.Inc()
			u.log.Warn("upload failed; it will be retried", "store", storedir.StoreName(id), "err", err)
			errs = append(errs, err)
		}
	}
	u.m.pending.Set(float64(len(u.Pending())))
	u.mu.Lock()
	dirty := make(map[uint32]string, len(u.dirty))
	for id, gen := range u.dirty {
		dirty[id] = gen
	}
	u.mu.Unlock()
	for id, gen := range dirty {
		if err := u.deleteGarbage(ctx, id, objstore.ManifestKey(u.opt.Prefix, u.opt.Node, id), gen); err != nil {
			errs = append(errs, err)
			continue
		}
		u.mu.Lock()
		if u.dirty[id] == gen {
			delete(u.dirty, id)
		}
		u.mu.Unlock()
	}
	if err := u.ApplyLocalLimits(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Pending lists the sealed local stores without an upload marker, and
// those marked superseded since their upload (uploaded again, so that the
// bucket's copy carries the mark).
func (u *Uploader) Pending() []uint32 {
	var out []uint32
	for _, id := range u.db.SealedStores() {
		m, err := u.Marker(id)
		if err != nil {
			out = append(out, id)
			continue
		}
		if _, ok := m.File(supersededFile); !ok {
			if _, err := os.Stat(filepath.Join(u.db.Dir(), storedir.StoreName(id), supersededFile)); err == nil {
				out = append(out, id)
			}
		}
	}
	return out
}

// supersededFile is storedir's mark of a store holding superseded span
// versions.
const supersededFile = "superseded"

// Marker is the verified upload of local store id (its manifest), or an
// error wrapping fs.ErrNotExist when there is none.
func (u *Uploader) Marker(id uint32) (*objstore.Manifest, error) {
	path := filepath.Join(u.db.Dir(), storedir.StoreName(id), MarkerFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := objstore.ParseManifest(path, data)
	if err != nil {
		// A torn marker is no marker: the store is verified again.
		return nil, fmt.Errorf("%w: %v", fs.ErrNotExist, err)
	}
	if m.Store != id || m.Node != u.opt.Node {
		return nil, fmt.Errorf("%s: %w: it names store %s of node %q", path, fs.ErrNotExist, storedir.StoreName(m.Store), m.Node)
	}
	return m, nil
}

// Upload uploads store id (or adopts a verified manifest already in the
// bucket) and writes its marker; it returns the manifest.
func (u *Uploader) Upload(ctx context.Context, id uint32) (*objstore.Manifest, error) {
	start := u.opt.Now()
	gen := objstore.NewGeneration(start)
	staging := filepath.Join(u.db.Dir(), stagingDir)
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, fmt.Errorf("store %s: %w", storedir.StoreName(id), err)
	}
	dir := filepath.Join(staging, storedir.StoreName(id)+"-"+gen)
	c, err := u.db.CopySealed(id, dir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	copied := u.opt.Now()
	name := storedir.StoreName(id)
	m := &objstore.Manifest{Version: objstore.ManifestVersion, Node: u.opt.Node, Store: id, Generation: gen,
		FirstNS: c.FirstNS, LastNS: c.LastNS, Spans: c.Spans, Chunks: c.Chunks, MasterChecksum: c.MasterChecksum}
	for _, f := range c.Files {
		size, sum, err := hashFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", name, err)
		}
		m.Files = append(m.Files, objstore.ManifestFile{Path: f, Size: size, SHA256: hex.EncodeToString(sum)})
	}
	mkey := objstore.ManifestKey(u.opt.Prefix, u.opt.Node, id)
	hashed := u.opt.Now()

	// An earlier run may have written the manifest and died before the
	// marker: adopt that upload rather than making the store visible twice.
	if old, err := u.readManifest(ctx, mkey); err == nil {
		if verr := u.verifyAgainst(ctx, old, m); verr == nil {
			if err := u.finish(ctx, id, c.StoreDir, mkey, old); err != nil {
				return nil, err
			}
			u.m.adopted.Inc()
			u.log.Info("store found uploaded by an earlier run; verified", "store", name, "generation", old.Generation)
			return old, nil
		} else {
			u.log.Warn("the bucket's manifest for this store does not match it; uploading it again (the new manifest replaces it)",
				"store", name, "old_generation", old.Generation, "mismatch", verr)
		}
	} else if !errors.Is(err, objstore.ErrNotFound) {
		return nil, err
	}

	var total int64
	for _, f := range m.Files {
		key := objstore.FileKey(u.opt.Prefix, u.opt.Node, id, gen, f.Path)
		if err := u.putFile(ctx, key, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return nil, err
		}
		total += f.Size
		u.m.bytes.Add(float64(f.Size))
	}
	m.Uploaded = u.opt.Now().UTC()
	body, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	if err := u.opt.Bucket.Put(ctx, mkey, bytes.NewReader(body), int64(len(body)), sum[:]); err != nil {
		return nil, err
	}
	if obj, err := u.opt.Bucket.Head(ctx, mkey); err != nil {
		return nil, err
	} else if obj.Size != int64(len(body)) {
		return nil, fmt.Errorf("%s: the bucket holds %d bytes, %d were sent", mkey, obj.Size, len(body))
	}
	if err := u.finish(ctx, id, c.StoreDir, mkey, m); err != nil {
		return nil, err
	}
	u.m.stores.Inc()
	took := u.opt.Now().Sub(start)
	u.log.Info("store uploaded", "store", name, "generation", gen, "files", len(m.Files), "bytes", total,
		"took", took.Round(time.Millisecond), "mb_per_s", fmt.Sprintf("%.1f", float64(total)/1e6/max(took.Seconds(), 1e-6)),
		"copy", copied.Sub(start).Round(time.Millisecond), "sha256", hashed.Sub(copied).Round(time.Millisecond))
	return m, nil
}

// putFile PUTs one file with its SHA-256 and checks its size with HEAD.
func (u *Uploader) putFile(ctx context.Context, key, path string, f objstore.ManifestFile) error {
	sum, err := hex.DecodeString(f.SHA256)
	if err != nil {
		return err
	}
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := u.opt.Bucket.Put(ctx, key, fh, f.Size, sum); err != nil {
		return err
	}
	obj, err := u.opt.Bucket.Head(ctx, key)
	if err != nil {
		return err
	}
	if obj.Size != f.Size {
		return fmt.Errorf("%s: the bucket holds %d bytes, %d were sent", key, obj.Size, f.Size)
	}
	return nil
}

// verifyAgainst checks that manifest old, found in the bucket, is an
// upload of the store described by local (the same data file and master
// checksum) and that every file it names is in the bucket with its size.
func (u *Uploader) verifyAgainst(ctx context.Context, old, local *objstore.Manifest) error {
	if old.Node != local.Node || old.Store != local.Store {
		return fmt.Errorf("it names store %s of node %q", storedir.StoreName(old.Store), old.Node)
	}
	if old.MasterChecksum != local.MasterChecksum {
		return fmt.Errorf("master checksum %s, the local store's is %s", old.MasterChecksum, local.MasterChecksum)
	}
	for _, name := range []string{storedir.DataFile, storedir.PropsFile} {
		of, ok1 := old.File(name)
		lf, ok2 := local.File(name)
		if !ok1 || !ok2 || of.Size != lf.Size || (name == storedir.DataFile && of.SHA256 != lf.SHA256) {
			return fmt.Errorf("%s differs (bucket %d bytes %.12s, local %d bytes %.12s)", name, of.Size, of.SHA256, lf.Size, lf.SHA256)
		}
	}
	if _, sup := local.File(supersededFile); sup {
		if _, ok := old.File(supersededFile); !ok {
			return errors.New("the local store is marked superseded, the upload is not")
		}
	}
	for _, f := range old.Files {
		key := objstore.FileKey(u.opt.Prefix, old.Node, old.Store, old.Generation, f.Path)
		obj, err := u.opt.Bucket.Head(ctx, key)
		if err != nil {
			return err
		}
		if obj.Size != f.Size {
			return fmt.Errorf("%s: %d bytes, the manifest says %d", key, obj.Size, f.Size)
		}
	}
	return nil
}

// finish writes the marker and deletes the store's garbage generations.
func (u *Uploader) finish(ctx context.Context, id uint32, storeDir, mkey string, m *objstore.Manifest) error {
	if err := writeMarker(filepath.Join(storeDir, MarkerFile), m); err != nil {
		return fmt.Errorf("store %s: upload marker: %w", storedir.StoreName(id), err)
	}
	u.mu.Lock()
	u.remote[id] = m
	u.mu.Unlock()
	if err := u.deleteGarbage(ctx, id, mkey, m.Generation); err != nil {
		// The upload stands; the next pass deletes the garbage.
		u.log.Warn("deleting objects of earlier upload attempts", "store", storedir.StoreName(id), "err", err)
		u.mu.Lock()
		u.dirty[id] = m.Generation
		u.mu.Unlock()
	}
	return nil
}

// SweepMinAge is how old an object no manifest names must be before Sweep
// deletes it when its store is not in the data directory: `ztsctl recover
// --remote` may be uploading a new generation of such a store right now.
const SweepMinAge = time.Hour

// Sweep deletes every object under the node's prefix that no manifest
// names: generations of uploads a killed run left behind (their store is
// uploaded again under a new one), and objects of a store whose manifest
// retention deleted before a crash (those only once SweepMinAge old). It
// must not run while this node uploads (Run calls it between passes).
func (u *Uploader) Sweep(ctx context.Context) error {
	manifests, err := u.Manifests(ctx)
	if err != nil {
		return err
	}
	keep := map[uint32]string{}
	for id, m := range manifests {
		keep[id] = objstore.StorePrefix(u.opt.Prefix, u.opt.Node, id) + m.Generation + "/"
	}
	local := map[uint32]bool{}
	for _, s := range u.localStores() {
		local[s.id] = true
	}
	now := u.opt.Now()
	node := objstore.NodePrefix(u.opt.Prefix, u.opt.Node)
	n, err := u.deleteObjects(ctx, node, func(o objstore.Object) bool {
		name, rest, ok := strings.Cut(strings.TrimPrefix(o.Key, node), "/")
		id, isStore := storedir.ParseStoreName(name)
		if !ok || !isStore {
			return true // not a store's object: not ours to judge
		}
		if rest == objstore.ManifestName {
			return true
		}
		if gen, has := keep[id]; has && strings.HasPrefix(o.Key, gen) {
			return true
		}
		return !local[id] && now.Sub(o.ModTime) < SweepMinAge
	})
	if n > 0 {
		u.log.Info("deleted objects no manifest names", "objects", n)
	}
	return err
}

// deleteGarbage deletes the objects under store id's prefix that are
// neither its manifest nor in generation gen.
func (u *Uploader) deleteGarbage(ctx context.Context, id uint32, mkey, gen string) error {
	prefix := objstore.StorePrefix(u.opt.Prefix, u.opt.Node, id)
	keep := prefix + gen + "/"
	n, err := u.deleteObjects(ctx, prefix, func(o objstore.Object) bool { return o.Key == mkey || strings.HasPrefix(o.Key, keep) })
	if n > 0 {
		u.log.Info("deleted objects of earlier upload attempts", "store", storedir.StoreName(id), "objects", n)
	}
	return err
}

// deleteObjects deletes every object under prefix that keep does not
// keep, and returns how many it deleted.
func (u *Uploader) deleteObjects(ctx context.Context, prefix string, keep func(objstore.Object) bool) (int, error) {
	var doomed []string
	err := u.opt.Bucket.List(ctx, prefix, func(o objstore.Object) error {
		if !keep(o) {
			doomed = append(doomed, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, k := range doomed {
		if err := u.opt.Bucket.Delete(ctx, k); err != nil {
			return i, err
		}
	}
	return len(doomed), nil
}

func (u *Uploader) readManifest(ctx context.Context, key string) (*objstore.Manifest, error) {
	rc, _, err := u.opt.Bucket.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, objstore.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", key, err)
	}
	return objstore.ParseManifest(key, data)
}

// Manifests lists the manifests of this node's stores in the bucket, by
// store id.
func (u *Uploader) Manifests(ctx context.Context) (map[uint32]*objstore.Manifest, error) {
	u.mu.Lock()
	known := make(map[uint32]*objstore.Manifest, len(u.remote))
	for id, m := range u.remote {
		known[id] = m
	}
	listed := u.listed
	u.mu.Unlock()
	if listed {
		return known, nil
	}
	out := map[uint32]*objstore.Manifest{}
	var keys []string
	err := u.opt.Bucket.List(ctx, objstore.NodePrefix(u.opt.Prefix, u.opt.Node), func(o objstore.Object) error {
		if strings.HasSuffix(o.Key, "/"+objstore.ManifestName) {
			keys = append(keys, o.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		m, err := u.readManifest(ctx, k)
		if errors.Is(err, objstore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k != objstore.ManifestKey(u.opt.Prefix, u.opt.Node, m.Store) {
			u.log.Warn("a manifest under a key that does not match its store; ignored", "key", k, "store", storedir.StoreName(m.Store))
			continue
		}
		out[m.Store] = m
	}
	u.mu.Lock()
	for id, m := range u.remote { // uploaded while listing
		out[id] = m
	}
	u.remote, u.listed = out, true
	u.mu.Unlock()
	return out, nil
}

// storeView is one store of the node for the limits.
type storeView struct {
	id       uint32
	local    bool
	sealed   bool
	bytes    int64
	lastNS   int64
	manifest *objstore.Manifest // nil: not in the bucket
}

// ApplyLocalLimits drops the local copies of the oldest sealed stores
// with a verified upload while the local stores exceed the local limits.
func (u *Uploader) ApplyLocalLimits(ctx context.Context) error {
	u.mu.Lock()
	lim := u.local
	u.mu.Unlock()
	if !lim.any() || u.opt.DropLocal == nil {
		return nil
	}
	locals := u.localStores()
	count := len(locals)
	var total int64
	for _, s := range locals {
		total += s.bytes
	}
	now := u.opt.Now()
	for _, s := range locals { // oldest first
		if !exceeds(lim, count, total, s.lastNS, now) {
			continue
		}
		if !s.sealed {
			continue
		}
		m, err := u.Marker(s.id)
		if err != nil {
			continue // not verified: never dropped
		}
		// The bucket must still hold that upload.
		cur, err := u.readManifest(ctx, objstore.ManifestKey(u.opt.Prefix, u.opt.Node, s.id))
		if err != nil {
			return fmt.Errorf("store %s: checking its manifest before dropping the local copy: %w", storedir.StoreName(s.id), err)
		}
		if cur.Generation != m.Generation {
			u.log.Warn("the bucket's manifest names another generation than the upload marker; keeping the local copy and uploading again",
				"store", storedir.StoreName(s.id), "marker", m.Generation, "bucket", cur.Generation)
			os.Remove(filepath.Join(u.db.Dir(), storedir.StoreName(s.id), MarkerFile))
			continue
		}
		if err := u.opt.DropLocal(s.id, m); err != nil {
			return fmt.Errorf("store %s: dropping the local copy: %w", storedir.StoreName(s.id), err)
		}
		u.m.dropped.Inc()
		u.log.Info("local copy dropped; the store is read from the bucket", "store", storedir.StoreName(s.id), "generation", m.Generation)
		count--
		total -= s.bytes
	}
	return nil
}

func exceeds(l Limits, count int, total, lastNS int64, now time.Time) bool {
	return (l.MaxStores > 0 && count > l.MaxStores) || (l.MaxTotalSize > 0 && total > l.MaxTotalSize) ||
		(l.MaxAge > 0 && lastNS > 0 && now.Sub(time.Unix(0, lastNS)) > l.MaxAge)
}

// localStores are the stores served from the data directory, oldest first.
func (u *Uploader) localStores() []storeView {
	var out []storeView
	for _, info := range u.db.LocalStores() {
		id, ok := storedir.ParseStoreName(info.ID)
		if !ok {
			continue
		}
		out = append(out, storeView{id: id, local: true, sealed: info.State == "sealed" && info.Reason == "",
			bytes: info.Bytes, lastNS: info.LastNS})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// ApplyRetention applies [retention] to the node's stores, local and in the
// bucket together, oldest first: a store beyond a limit is deleted from the
// bucket (manifest first, then its objects) and then locally.
func (u *Uploader) ApplyRetention(ctx context.Context) error {
	u.mu.Lock()
	lim := u.retention
	u.mu.Unlock()
	if !lim.any() {
		return nil
	}
	remote, err := u.Manifests(ctx)
	if err != nil {
		return err
	}
	byID := map[uint32]*storeView{}
	for _, s := range u.localStores() {
		s := s
		byID[s.id] = &s
	}
	for id, m := range remote {
		s := byID[id]
		if s == nil {
			s = &storeView{id: id, sealed: true, lastNS: m.LastNS}
			for _, f := range m.Files {
				s.bytes += f.Size
			}
			byID[id] = s
		}
		s.manifest = m
	}
	all := make([]*storeView, 0, len(byID))
	var total int64
	for _, s := range byID {
		all = append(all, s)
		total += s.bytes
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	count := len(all)
	now := u.opt.Now()
	for _, s := range all {
		if !s.sealed || !exceeds(lim, count, total, s.lastNS, now) {
			continue
		}
		if err := u.deleteStore(ctx, s); err != nil {
			return err
		}
		u.m.deleted.Inc()
		count--
		total -= s.bytes
	}
	return nil
}

// deleteStore removes one store everywhere: its manifest (it stops being
// visible), its other objects, then its local copy or remote serving.
func (u *Uploader) deleteStore(ctx context.Context, s *storeView) error {
	name := storedir.StoreName(s.id)
	mkey := objstore.ManifestKey(u.opt.Prefix, u.opt.Node, s.id)
	if s.manifest != nil || s.local {
		// A local store may have been uploaded without the cache knowing
		// (an interrupted run): delete whatever is under its prefix.
		if err := u.opt.Bucket.Delete(ctx, mkey); err != nil {
			return fmt.Errorf("retention: store %s: %w", name, err)
		}
		u.mu.Lock()
		delete(u.remote, s.id)
		u.mu.Unlock()
		prefix := objstore.StorePrefix(u.opt.Prefix, u.opt.Node, s.id)
		if _, err := u.deleteObjects(ctx, prefix, func(objstore.Object) bool { return false }); err != nil {
			return fmt.Errorf("retention: store %s: %w", name, err)
		}
	}
	switch {
	case s.local:
		if err := u.db.DeleteSealed(s.id); err != nil && !errors.Is(err, storedir.ErrNoSealedStore) {
			return fmt.Errorf("retention: store %s: %w", name, err)
		}
	case u.opt.ForgetRemote != nil:
		if err := u.opt.ForgetRemote(s.id); err != nil {
			return fmt.Errorf("retention: store %s: %w", name, err)
		}
	}
	u.log.Info("retention deleted store", "store", name, "local", s.local, "uploaded", s.manifest != nil)
	return nil
}

func hashFile(path string) (int64, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", path, err)
	}
	return n, h.Sum(nil), nil
}

// writeMarker writes m to path atomically and durably.
func writeMarker(path string, m *objstore.Manifest) error {
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
