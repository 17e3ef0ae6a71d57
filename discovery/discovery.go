// Package discovery keeps a daemon's set of remote stores in step with the
// manifests in an S3-compatible bucket: it lists <prefix>/<node>/<store
// id>/manifest.json (every node's, or one node's), and tells its Target
// to serve each store found, to serve a newer generation in place of the
// one it serves, and to stop serving a store whose manifest is gone.
//
// A query node (ztsd --query) runs it over every node of the bucket; an
// ingesting daemon runs it over its own node, skipping the stores it holds
// locally, so that it also serves its uploaded stores whose local copy is
// gone (removed by local retention, or lost with the disk).
//
// Invariants:
//   - Only a manifest makes a store visible: objects without one (an upload
//     in progress or abandoned) are never served.
//   - A manifest is read again only when its ETag (or size) changed; one
//     that does not parse, or that names another node or store than its
//     key, is logged (once per version) and ignored, and the generation
//     served before, if any, stays served.
//   - A store is served at most once: a newer generation replaces the old
//     one in the Target, never beside it.
//   - A store whose Target.ServeRemote failed is retried at the next scan.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ztsd/ztsd/objstore"
)

// Target is what discovery keeps in step with the bucket (the daemon's
// storedir.DB).
type Target interface {
	// ServeRemote serves the store m describes, read from bucket; a store
	// of the same node and id already served (an older generation) is
	// replaced by it.
	ServeRemote(ctx context.Context, bucket objstore.Bucket, m *objstore.Manifest) error
	// DropRemote stops serving the remote store node/id: its manifest is
	// gone from the bucket.
	DropRemote(node string, id uint32) error
}

// StoreKey names one store in the bucket.
type StoreKey struct {
	Node string
	ID   uint32
}

func (k StoreKey) String() string { return fmt.Sprintf("%s/%06x", k.Node, k.ID) }

// Options configure a Discoverer.
type Options struct {
	Bucket objstore.Bucket
	// Prefix is [object_store] prefix ("" for none).
	Prefix string
	// Node limits discovery to one node's stores; "" is every node.
	Node string
	// Skip, when set, leaves out stores the target holds locally (an
	// ingesting daemon's own stores that still have their local copy).
	// It is asked at every scan: a store it stops skipping is served.
	Skip func(StoreKey) bool
	// Interval is how often Run scans (discover_interval).
	Interval time.Duration
	Logger   *slog.Logger
}

// served is what the Target was told about one store.
type served struct {
	etag       string
	size       int64
	generation string
}

// Discoverer scans the bucket and keeps the Target in step.
type Discoverer struct {
	opt    Options
	target Target

	mu     sync.Mutex
	served map[StoreKey]served // stores the Target serves
	bad    map[string]string   // manifest key -> etag already logged as bad
}

// New returns a Discoverer for target.
func New(target Target, opt Options) *Discoverer {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Interval <= 0 {
		opt.Interval = 30 * time.Second
	}
	return &Discoverer{opt: opt, target: target, served: map[StoreKey]served{}, bad: map[string]string{}}
}

// Changes is what one scan did.
type Changes struct {
	// Manifests is how many manifests the listing found.
	Manifests int
	// Added, Replaced and Dropped name the stores the Target was told to
	// serve (new), to serve in a newer generation, and to drop.
	Added, Replaced, Dropped []StoreKey
	// Failed counts manifests that could not be read or parsed, or whose
	// store the Target failed to serve (retried next scan).
	Failed int
}

// Served is how many remote stores the Target serves through this
// Discoverer.
func (d *Discoverer) Served() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.served)
}

// listPrefix is the key prefix listed.
func (d *Discoverer) listPrefix() string {
	if d.opt.Node != "" {
		return objstore.NodePrefix(d.opt.Prefix, d.opt.Node)
	}
	if d.opt.Prefix == "" {
		return ""
	}
	return strings.TrimSuffix(d.opt.Prefix, "/") + "/"
}

// ParseManifestKey splits a manifest's key into its node and store id:
// <prefix>/<node>/<store id>/manifest.json, the store id six hex digits.
func ParseManifestKey(prefix, key string) (StoreKey, bool) {
	rest := key
	if prefix != "" {
		p := strings.TrimSuffix(prefix, "/") + "/"
		if !strings.HasPrefix(key, p) {
			return StoreKey{}, false
		}
		rest = key[len(p):]
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[2] != objstore.ManifestName || parts[0] == "" {
		return StoreKey{}, false
	}
	id, ok := parseStoreName(parts[1])
	if !ok {
		return StoreKey{}, false
	}
	return StoreKey{Node: parts[0], ID: id}, true
}

func parseStoreName(s string) (uint32, bool) {
	if len(s) != 6 {
		return 0, false
	}
	var id uint32
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			id = id<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			id = id<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return id, true
}

// ListManifests lists the manifests under prefix (optionally one node's),
// keyed by store, in key order.
func ListManifests(ctx context.Context, b objstore.Bucket, prefix, node string) (map[StoreKey]objstore.Object, error) {
	d := &Discoverer{opt: Options{Prefix: prefix, Node: node}}
	found := map[StoreKey]objstore.Object{}
	err := b.List(ctx, d.listPrefix(), func(o objstore.Object) error {
		if !strings.HasSuffix(o.Key, "/"+objstore.ManifestName) {
			return nil
		}
		if k, ok := ParseManifestKey(prefix, o.Key); ok && (node == "" || k.Node == node) {
			found[k] = o
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing manifests under %q: %w", d.listPrefix(), err)
	}
	return found, nil
}

// ReadManifest reads and parses the manifest at key, and checks that it
// names the node and store its key says.
func ReadManifest(ctx context.Context, b objstore.Bucket, key string, want StoreKey) (*objstore.Manifest, error) {
	r, _, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, objstore.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading manifest %s: %w", key, err)
	}
	m, err := objstore.ParseManifest(key, data)
	if err != nil {
		return nil, err
	}
	if m.Node != want.Node || m.Store != want.ID {
		return nil, fmt.Errorf("manifest %s names store %s/%06x, not the one its key says", key, m.Node, m.Store)
	}
	return m, nil
}

// Scan lists the manifests once and brings the Target in step. A listing
// that fails changes nothing (a store is never dropped because the bucket
// could not be listed).
func (d *Discoverer) Scan(ctx context.Context) (Changes, error) {
	var ch Changes
	found, err := ListManifests(ctx, d.opt.Bucket, d.opt.Prefix, d.opt.Node)
	if err != nil {
		return ch, err
	}
	ch.Manifests = len(found)
	keys := make([]StoreKey, 0, len(found))
	for k := range found {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Node != keys[j].Node {
			return keys[i].Node < keys[j].Node
		}
		return keys[i].ID < keys[j].ID
	})
	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return ch, err
		}
		o := found[k]
		if d.opt.Skip != nil && d.opt.Skip(k) {
			continue
		}
		d.mu.Lock()
		cur, isServed := d.served[k]
		badTag, wasBad := d.bad[o.Key]
		d.mu.Unlock()
		if isServed && cur.etag == o.ETag && cur.size == o.Size {
			continue // unchanged
		}
		if wasBad && badTag == o.ETag+fmt.Sprint(o.Size) {
			ch.Failed++
			continue // the same bad manifest, already logged
		}
		m, err := ReadManifest(ctx, d.opt.Bucket, o.Key, k)
		if err != nil {
			if ctx.Err() != nil {
				return ch, ctx.Err()
			}
			ch.Failed++
			if !errors.Is(err, objstore.ErrNotFound) { // gone since the listing: next scan drops it
				d.mu.Lock()
				d.bad[o.Key] = o.ETag + fmt.Sprint(o.Size)
				d.mu.Unlock()
				d.opt.Logger.Error("remote store: manifest ignored", "store", k.String(), "err", err)
			}
			continue
		}
		if isServed && cur.generation == m.Generation {
			d.mu.Lock()
			d.served[k] = served{etag: o.ETag, size: o.Size, generation: m.Generation}
			d.mu.Unlock()
			continue
		}
		if err := d.target.ServeRemote(ctx, d.opt.Bucket, m); err != nil {
			if ctx.Err() != nil {
				return ch, ctx.Err()
			}
			ch.Failed++
			errs = append(errs, fmt.Errorf("store %s generation %s: %w", k, m.Generation, err))
			d.opt.Logger.Error("remote store: not served (retried at the next scan)", "store", k.String(), "generation", m.Generation, "err", err)
			continue
		}
		d.mu.Lock()
		delete(d.bad, o.Key)
		d.served[k] = served{etag: o.ETag, size: o.Size, generation: m.Generation}
		d.mu.Unlock()
		if isServed {
			ch.Replaced = append(ch.Replaced, k)
			d.opt.Logger.Info("remote store: serving a newer generation", "store", k.String(), "generation", m.Generation, "was", cur.generation)
		} else {
			ch.Added = append(ch.Added, k)
			d.opt.Logger.Debug("remote store: serving", "store", k.String(), "generation", m.Generation)
		}
	}
	d.mu.Lock()
	var gone []StoreKey
	for k := range d.served {
		if _, ok := found[k]; !ok || (d.opt.Skip != nil && d.opt.Skip(k)) {
			gone = append(gone, k)
		}
	}
	d.mu.Unlock()
	for _, k := range gone {
		if _, ok := found[k]; ok {
			// The target holds it locally again: it is no longer ours to
			// serve or drop.
			d.mu.Lock()
			delete(d.served, k)
			d.mu.Unlock()
			continue
		}
		if err := d.target.DropRemote(k.Node, k.ID); err != nil {
			ch.Failed++
			errs = append(errs, fmt.Errorf("dropping store %s: %w", k, err))
			d.opt.Logger.Error("remote store: manifest gone, but the store could not be dropped", "store", k.String(), "err", err)
			continue
		}
		d.mu.Lock()
		delete(d.served, k)
		d.mu.Unlock()
		ch.Dropped = append(ch.Dropped, k)
		d.opt.Logger.Info("remote store: manifest gone from the bucket; no longer served", "store", k.String())
	}
	return ch, errors.Join(errs...)
}

// Run scans every Interval until ctx ends (the first scan one Interval
// from now: callers Scan once themselves at start, to serve what the
// bucket holds before they report ready). A failed scan is logged and
// retried at the next tick.
func (d *Discoverer) Run(ctx context.Context) {
	t := time.NewTicker(d.opt.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t0 := time.Now()
		ch, err := d.Scan(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d.opt.Logger.Error("remote stores: scan of the bucket failed", "err", err)
		}
		if len(ch.Added)+len(ch.Replaced)+len(ch.Dropped) > 0 {
			d.opt.Logger.Info("remote stores: scanned the bucket", "manifests", ch.Manifests, "added", len(ch.Added),
				"replaced", len(ch.Replaced), "dropped", len(ch.Dropped), "failed", ch.Failed, "took", time.Since(t0).Round(time.Millisecond))
		}
	}
}
