package main

import (
	"context"
	"time"

	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
)

// A query node (ztsd --query, query_only = true) opens no local store: its
// data directory holds its LOCK and the remote index cache. It serves every
// node's stores in [object_store]'s bucket, found by listing their
// manifests (package discovery) once before it reports ready and then
// every discover_interval, and refuses every write (server.Options.QueryOnly).

// queryState is a query node's bucket and discovery.
type queryState struct {
	bucket objstore.Bucket
	disc   *discovery.Discoverer
	cancel context.CancelFunc
	done   chan struct{}
}

// openQueryBucket opens the bucket of a query node (credentials from the
// SDK's standard chain, never logged) and sets the store options: no
// local stores, remote stores of every node.
func (d *daemonState) openQueryBucket(ctx context.Context, opts *storedir.Options) error {
	o := d.cfg.ObjectStore
	bucket, err := objstore.NewS3(ctx, o)
	if err != nil {
		return err
	}
	d.query = &queryState{bucket: bucket}
	opts.QueryOnly = true
	opts.Remote = storedir.RemoteOptions{Prefix: o.Prefix, CacheDir: o.CacheDir, CacheMaxSize: int64(o.CacheMaxSize)}
	opts.Retention = storedir.Retention{} // the ingesting nodes apply [retention] to their stores
	return nil
}

// firstScanTimeout bounds the scan of the bucket made before a query node
// reports ready; past it, it starts with what it found and the periodic
// scans go on.
const firstScanTimeout = 2 * time.Minute

// startQuery scans the bucket once (so that the node serves what the
// bucket holds when it reports ready), then every discover_interval in
// the background.
func (d *daemonState) startQuery() {
	q := d.query
	o := d.cfg.ObjectStore
	q.disc = discovery.New(d.db, discovery.Options{Bucket: q.bucket, Prefix: o.Prefix,
		Interval: time.Duration(o.DiscoverInterval), Logger: d.log})
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel, q.done = cancel, make(chan struct{})
	t0 := time.Now()
	sctx, scancel := context.WithTimeout(ctx, firstScanTimeout)
	ch, err := q.disc.Scan(sctx)
	scancel()
	if err != nil {
		d.log.Error("query node: the first scan of the bucket failed; retrying every discover_interval", "err", err,
			"served", q.disc.Served(), "took", time.Since(t0).Round(time.Millisecond))
	} else {
		d.log.Info("query node: serving every node's stores in the bucket", "endpoint", o.Endpoint, "bucket", o.Bucket,
			"prefix", o.Prefix, "manifests", ch.Manifests, "served", q.disc.Served(), "failed", ch.Failed,
			"took", time.Since(t0).Round(time.Millisecond), "discover_interval", time.Duration(o.DiscoverInterval))
	}
	go func() {
		defer close(q.done)
		q.disc.Run(ctx)
	}()
}

// stopQuery stops the periodic scans and waits for them.
func (d *daemonState) stopQuery() {
	if d.query == nil || d.query.cancel == nil {
		return
	}
	d.query.cancel()
	<-d.query.done
	d.query.cancel = nil
}

// remoteStoreCount counts the stores served from a bucket, for /healthz;
// nil without a bucket.
func (d *daemonState) remoteStoreCount() func() int {
	if !d.cfg.ObjectStore.Enabled() {
		return nil
	}
	return func() int { return d.db.RemoteStats().Stores }
}
