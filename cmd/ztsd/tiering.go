package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ztsd/ztsd/config"
	"github.com/ztsd/ztsd/discovery"
	"github.com/ztsd/ztsd/objstore"
	"github.com/ztsd/ztsd/storedir"
	"github.com/ztsd/ztsd/tiering"
)

// tieringOn says whether this daemon uploads sealed stores: a bucket is
// configured and it is not a query node.
func tieringOn(cfg config.Config) bool { return cfg.ObjectStore.Enabled() && !cfg.QueryOnly }

// nodeName is object_store.node, or the host name.
func nodeName(cfg config.Config) (string, error) {
	if cfg.ObjectStore.Node != "" {
		return cfg.ObjectStore.Node, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("object_store.node is empty and the host name is unknown (%v)", err)
	}
	return h, nil
}

func localLimits(cfg config.Config) tiering.Limits {
	o := cfg.ObjectStore
	return tiering.Limits{MaxStores: o.LocalMaxStores, MaxTotalSize: int64(o.LocalMaxTotalSize), MaxAge: time.Duration(o.LocalMaxAge)}
}

func retentionLimits(cfg config.Config) tiering.Limits {
	r := cfg.Retention
	return tiering.Limits{MaxStores: r.MaxStores, MaxTotalSize: int64(r.MaxTotalSize), MaxAge: time.Duration(r.MaxAge)}
}

// tieringState is the bucket of an ingesting daemon and what runs on it:
// the uploader, and the discovery of this node's uploaded stores (those
// whose local copy is gone are served from the bucket).
type tieringState struct {
	bucket objstore.Bucket
	node   string
	up     *tiering.Uploader
	cancel context.CancelFunc
	done   chan struct{}
}

// sealedHook returns the storedir OnSealed callback that wakes the
// uploader once it runs.
func sealedHook(p *atomic.Pointer[tiering.Uploader]) func(uint32) {
	return func(uint32) {
		if u := p.Load(); u != nil {
			u.Kick()
		}
	}
}

// openBucket opens [object_store]'s bucket for an ingesting daemon
// (credentials from the SDK's standard chain, never logged) and sets the
// store options that depend on it: remote reads of this node's uploads,
// [retention] handed to the uploader, and the seal hook.
func (d *daemonState) openBucket(ctx context.Context, opts *storedir.Options) error {
	o := d.cfg.ObjectStore
	node, err := nodeName(d.cfg)
	if err != nil {
		return err
	}
	bucket, err := objstore.NewS3(ctx, o)
	if err != nil {
		return err
	}
	d.tiering = &tieringState{bucket: bucket, node: node}
	opts.Remote = storedir.RemoteOptions{Bucket: bucket, Prefix: o.Prefix, Node: node, CacheDir: o.CacheDir, CacheMaxSize: int64(o.CacheMaxSize)}
	// [retention] applies to the node's stores local and in the bucket
	// together: the uploader applies it, not storedir.
	opts.Retention = storedir.Retention{}
	opts.OnSealed = sealedHook(&d.uploader)
	return nil
}

// startTiering serves this node's uploaded stores that have no local copy
// (one scan of the bucket before the daemon reports ready, then every
// discover_interval) and starts the uploader, both in the background.
func (d *daemonState) startTiering(reg prometheus.Registerer) error {
	t := d.tiering
	o := d.cfg.ObjectStore
	up, err := tiering.New(d.db, tiering.Options{Bucket: t.bucket, Prefix: o.Prefix, Node: t.node,
		Local: localLimits(d.cfg), Retention: retentionLimits(d.cfg),
		DropLocal:    d.db.DropLocalCopy,
		ForgetRemote: func(id uint32) error { return d.db.DropRemote(t.node, id) },
		Logger:       d.log, Registerer: reg})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	disc := discovery.New(d.db, discovery.Options{Bucket: t.bucket, Prefix: o.Prefix, Node: t.node,
		Interval: time.Duration(o.DiscoverInterval), Logger: d.log})
	if ch, err := disc.Scan(ctx); err != nil {
		// The bucket may be down: the local stores serve, uploads retry.
		d.log.Error("remote stores: first scan of the bucket failed; retrying every discover_interval", "err", err)
	} else if len(ch.Added) > 0 {
		d.log.Info("serving this node's uploaded stores without a local copy", "stores", len(ch.Added))
	}
	t.up, t.cancel, t.done = up, cancel, make(chan struct{})
	d.uploader.Store(up)
	go disc.Run(ctx)
	go func() {
		defer close(t.done)
		up.Run(ctx)
	}()
	d.log.Info("uploading sealed stores", "endpoint", o.Endpoint, "bucket", o.Bucket, "prefix", o.Prefix, "node", t.node,
		"local_max_stores", o.LocalMaxStores, "local_max_total_size", int64(o.LocalMaxTotalSize), "local_max_age", time.Duration(o.LocalMaxAge))
	return nil
}

// stopTiering cancels the uploader and waits for it (an upload in flight
// is abandoned; the next start uploads that store again).
func (d *daemonState) stopTiering() {
	if d.tiering == nil || d.tiering.cancel == nil {
		return
	}
	d.tiering.cancel()
	<-d.tiering.done
	d.tiering.cancel = nil
}
